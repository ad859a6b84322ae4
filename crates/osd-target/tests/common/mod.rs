//! A real OSD target for these tests: an engine in a temporary directory behind the iSCSI
//! server on a loopback port, shut down when dropped.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tempfile::TempDir;
use tessera_engine::{Engine, EngineConfig};
use tessera_target::iscsi_server::{ServerHandle, TargetConfig, TargetServer};
use tessera_target::osd_lu::OsdCommandSet;
use tessera_target::spc::ScsiFront;
use tessera_types::ObjectAddr;

pub struct OsdTarget {
    handle: Option<ServerHandle>,
    pub addr: SocketAddr,
    pub dir: TempDir,
}

impl OsdTarget {
    /// Starts a target named `target` (an iSCSI qualified name) on a free loopback port.
    pub fn start(target: &str) -> OsdTarget {
        let dir = tempfile::tempdir().unwrap();
        let engine = Engine::open(dir.path(), EngineConfig::default()).unwrap();
        let device = Arc::new(ScsiFront::new(Arc::new(OsdCommandSet::new(engine))));
        let server = TargetServer::bind(TargetConfig::new(target, "127.0.0.1:0"), device).unwrap();
        let addr = server.local_addr().unwrap();
        OsdTarget { handle: Some(server.spawn()), addr, dir }
    }

    pub fn handle(&self) -> &ServerHandle {
        self.handle.as_ref().expect("the target runs until dropped")
    }

    /// The file that holds `obj`'s data.
    pub fn object_file(&self, obj: ObjectAddr) -> PathBuf {
        self.dir.path().join("objects").join(format!("{:x}", obj.partition_id.0)).join(format!("{:x}", obj.object_id.0))
    }
}

impl Drop for OsdTarget {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            h.shutdown();
        }
    }
}
