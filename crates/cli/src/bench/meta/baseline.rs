//! The two floors under a metadata operation, measured in the same run as `bench meta`:
//!
//! - a raw SQLite transaction that inserts one inode-sized row, on the same disk, with the
//!   metadata server's settings (WAL, `synchronous=FULL`): what one durable commit costs here,
//!   one after another. Creates per second above this rate mean commits are shared.
//! - an empty metadata-server round trip (`ClusterMap`, which touches no database) from the
//!   same number of clients: the protocol, the loopback network and the server's threads.

use std::path::Path;
use std::sync::Mutex;

use anyhow::{bail, Context, Result};
use rusqlite::{params, Connection};
use tessera_mds::MdsConnection;
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

/// `per_client` empty round trips from each of `clients` connections at once.
pub fn mds_round_trips(addr: &str, clients: usize, per_client: usize) -> Result<Phase> {
    let conns = (0..clients)
        .map(|_| MdsConnection::connect(addr).map(Mutex::new).with_context(|| format!("connecting to the metadata server at {addr}")))
        .collect::<Result<Vec<_>>>()?;
    phase::run(&conns, per_client, |conn, _| {
        let mut conn = conn.lock().unwrap_or_else(|p| p.into_inner());
        match conn.call(Request::ClusterMap)? {
            Ok(Reply::ClusterMap(_)) => Ok(()),
            other => bail!("ClusterMap answered {other:?}"),
        }
    })
}
