//! The floors under a metadata operation, measured in the same run as `bench meta`:
//!
//! - a raw SQLite transaction that inserts one inode-sized row, on the same disk, durably the
//!   way SQLite does it alone (WAL, `synchronous=FULL`: an fsync per COMMIT): what a server
//!   committing each request by itself would pay, one after another. Creates per second above
//!   this rate mean commits are shared.
//! - the disk's flush: a 4 KiB overwrite and fdatasync of one file, what the server's WAL
//!   flush costs at least; no durable create can answer faster.
//! - an empty metadata-server round trip (`ClusterMap`, which touches no database) from the
//!   same number of clients: the protocol, the loopback network and the server's threads.

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Mutex;

use anyhow::{bail, Context, Result};
use rusqlite::{params, Connection};
use tessera_client::prover::open_mds;
use tessera_client::ClusterConfig;
use tessera_mds_proto::{Reply, Request};

use super::phase::{self, Phase};

/// `count` durable single-row insert transactions into a fresh database in `dir`.
pub fn sqlite_durable_inserts(dir: &Path, count: usize) -> Result<Phase> {
    let path = dir.join("baseline.db");
    let conn = Connection::open(&path).with_context(|| format!("opening {}", path.display()))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS rows (id INTEGER PRIMARY KEY, kind INTEGER, mode INTEGER, uid INTEGER, gid INTEGER,
         atime INTEGER, mtime INTEGER, ctime INTEGER, name TEXT)",
    )?;
    let conn = Mutex::new(conn);
    phase::run(&[()], count, |_, i| {
        let conn = conn.lock().unwrap_or_else(|p| p.into_inner());
        let tx = conn.unchecked_transaction()?;
        tx.prepare_cached("INSERT INTO rows VALUES (?1, 1, 420, 1000, 100, ?2, ?2, ?2, ?3)")?
            .execute(params![i as i64, 1_700_000_000_000_000_000i64 + i as i64, format!("f{i}")])?;
        tx.commit()?;
        Ok(())
    })
}

/// `count` overwrites of a 4 KiB block of a 64 KiB file in `dir`, each followed by fdatasync.
pub fn disk_flushes(dir: &Path, count: usize) -> Result<Phase> {
    let path = dir.join("baseline.flush");
    let file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path)?;
    file.write_all_at(&[0u8; 65536], 0)?;
    file.sync_all()?;
    let block = [0xA5u8; 4096];
    phase::run(&[()], count, |_, i| {
        file.write_all_at(&block, (i % 16) as u64 * 4096)?;
        file.sync_data()?;
        Ok(())
    })
}

/// `per_client` empty round trips from each of `clients` connections at once.
pub fn mds_round_trips(config: &ClusterConfig, clients: usize, per_client: usize) -> Result<Phase> {
    let conns = (0..clients)
        .map(|_| open_mds(config, 0, None).map(Mutex::new).context("connecting to metadata server 0"))
        .collect::<Result<Vec<_>>>()?;
    phase::run(&conns, per_client, |conn, _| {
        let mut conn = conn.lock().unwrap_or_else(|p| p.into_inner());
        match conn.call(&Request::ClusterMap)? {
            Ok(Reply::ClusterMap(_)) => Ok(()),
            other => bail!("ClusterMap answered {other:?}"),
        }
    })
}
