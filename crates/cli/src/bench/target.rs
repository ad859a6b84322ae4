//! The OSD a bench talks to: a temporary `tessera osd` child process in a temp directory, or a
//! running target named with `--target`. Either way the bench gets a logged-in OSD client and
//! a freshly created partition and object to work on.

use anyhow::{Context, Result};
use tempfile::TempDir;
use tessera_initiator::iscsi::Session;
use tessera_initiator::osd_client::OsdClient;
use tessera_types::ObjectAddr;

use super::CommonArgs;
use crate::daemon::Daemon;
use crate::session::{connect, INITIATOR_NAME};

pub struct BenchTarget {
    pub addr: String,
    pub target_name: String,
    // Held for their Drop: the daemon stops, then the directory goes.
    _daemon: Option<Daemon>,
    _dir: Option<TempDir>,
}

impl BenchTarget {
    pub fn start(common: &CommonArgs) -> Result<BenchTarget> {
        if let Some(addr) = &common.target {
            let target_name = match &common.target_name {
                Some(n) => n.clone(),
                None => Session::discover(addr, INITIATOR_NAME)
                    .with_context(|| format!("discovering targets at {addr}"))?
                    .into_iter()
                    .next()
                    .map(|t| t.name)
                    .with_context(|| format!("{addr} reports no targets"))?,
            };
            return Ok(BenchTarget { addr: addr.clone(), target_name, _daemon: None, _dir: None });
        }
        let dir = crate::children::scratch_dir("tessera-bench-", None)?;
        let data = dir.path().join("osd0");
        let daemon = Daemon::spawn(&["osd", "--data", data.to_str().context("temp path")?, "--listen", "127.0.0.1:0"])?;
        Ok(BenchTarget {
            addr: daemon.field("addr")?.to_string(),
            target_name: daemon.field("target")?.to_string(),
            _daemon: Some(daemon),
            _dir: Some(dir),
        })
    }

    /// The daemon's process id when this bench started it (its CPU time can then be read).
    pub fn pid(&self) -> Option<u32> {
        self._daemon.as_ref().map(Daemon::pid)
    }

    pub fn client(&self) -> Result<OsdClient<Session>> {
        connect(&self.addr, &self.target_name)
    }

    /// A logged-in client plus a fresh partition and user object to measure on.
    pub fn client_with_object(&self) -> Result<(OsdClient<Session>, ObjectAddr)> {
        let client = self.client()?;
        let pid = client.create_partition(None).context("creating the bench partition")?;
        let oid = client.create_one(pid).context("creating the bench object")?;
        Ok((client, ObjectAddr::new(pid, oid)))
    }
}
