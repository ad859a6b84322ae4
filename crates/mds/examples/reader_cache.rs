//! What a reader connection's page cache size costs a lookup that follows a commit by another
//! connection (docs/metadata.md, "Reader caches"). In WAL mode SQLite drops a connection's
//! whole page cache at the first read after another connection committed, and the drop walks
//! every slot of the cache's hash table, which has grown to what the reader once held. The
//! store here has the shape of a namespace (an entry and an inode row per file, 1 KiB pages);
//! each reader first looks up 20,000 names (its cache fills), then alternates one commit by the
//! writer and one lookup, and last does lookups alone.
//!
//! `cargo run --release -p tessera-mds --example reader_cache -- FILES`

use std::time::{Duration, Instant};

use rusqlite::{params, Connection};

fn main() -> rusqlite::Result<()> {
    let files: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(240_000);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("ns.db");
    let w = Connection::open(&path)?;
    w.pragma_update(None, "page_size", 1024)?;
    w.pragma_update(None, "journal_mode", "WAL")?;
    w.pragma_update(None, "synchronous", "OFF")?;
    w.execute_batch(
        "CREATE TABLE d (dir INTEGER, name TEXT, ino INTEGER, PRIMARY KEY (dir, name)) WITHOUT ROWID;
         CREATE TABLE i (ino INTEGER PRIMARY KEY, mode INTEGER, uid INTEGER, size INTEGER, times TEXT);",
    )?;
    w.execute_batch("BEGIN")?;
    for k in 0..files {
        w.execute("INSERT INTO d VALUES (1, ?1, ?2)", params![format!("f{}-{k}", k % 4), k + 10])?;
        w.execute("INSERT INTO i VALUES (?1, 420, 1000, 0, 'xxxxxxxxxxxxxxxx')", [k + 10])?;
    }
    w.execute_batch("COMMIT")?;
    w.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
    let name = |k: u64| format!("f{}-{k}", k % 4);
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % files
    };
    let mut new = files;
    for cache_kib in [16 * 1024, 1024, 256, 64, 16 * 1024, 1024, 256, 64] {
        let r = Connection::open(&path)?;
        r.pragma_update(None, "cache_size", -cache_kib)?;
        let lookup = |k: u64| -> rusqlite::Result<i64> {
            r.prepare_cached("SELECT i.mode FROM d JOIN i ON i.ino = d.ino WHERE d.dir = 1 AND d.name = ?1")?.query_row([name(k)], |row| row.get(0))
        };
        for _ in 0..20_000 {
            lookup(next())?;
        }
        const N: u32 = 5_000;
        let (mut after, mut alone) = (Duration::ZERO, Duration::ZERO);
        for _ in 0..N {
            w.execute_batch("BEGIN")?;
            w.execute("INSERT INTO d VALUES (2, ?1, ?2)", params![format!("n{new}"), new + 10])?;
            w.execute_batch("COMMIT")?;
            new += 1;
            let k = next();
            let t = Instant::now();
            lookup(k)?;
            after += t.elapsed();
        }
        for _ in 0..N {
            let k = next();
            let t = Instant::now();
            lookup(k)?;
            alone += t.elapsed();
        }
        let us = |d: Duration| d.as_secs_f64() * 1e6 / N as f64;
        println!("reader cache {cache_kib} KiB: lookup after a commit {:.1} us, without one {:.1} us", us(after), us(alone));
    }
    Ok(())
}
