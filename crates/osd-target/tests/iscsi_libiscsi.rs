//! Interop with a third-party initiator: Debian's libiscsi-bin tools (`iscsi-ls`, `iscsi-inq`)
//! log in to a real `TargetServer` in this process, list it by discovery and read INQUIRY.
//! Skips loudly when the tools are absent, and fails instead when the CI variable is set.

use std::process::Command;
use std::sync::Arc;

use tessera_scsi::{Nexus, ScsiOutcome, ScsiTask, Sense};
use tessera_target::iscsi_server::{TargetConfig, TargetServer};
use tessera_target::spc::{CommandSet, DeviceIdentity, ScsiFront};

const TARGET: &str = "iqn.2026-11.org.tessera.test:interop";

struct Osd;

impl CommandSet for Osd {
    fn peripheral_device_type(&self) -> u8 {
        0x11
    }
    fn identity(&self) -> DeviceIdentity {
        DeviceIdentity::from_system_id(&[0x42; 20])
    }
    fn execute(&self, _: &Nexus, _: &ScsiTask) -> ScsiOutcome {
        ScsiOutcome::check_condition(Sense::invalid_opcode())
    }
    fn lun_reset(&self) {}
}

fn tool(name: &str) -> Option<String> {
    let found = Command::new("sh").arg("-c").arg(format!("command -v {name}")).output().ok()?;
    found.status.success().then(|| String::from_utf8_lossy(&found.stdout).trim().to_string())
}

fn run(tool: &str, args: &[&str]) -> String {
    let out = Command::new(tool).args(args).output().expect("running libiscsi tool");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{tool} {args:?} failed:\n{text}");
    text
}

#[test]
fn libiscsi_discovers_and_inquires() {
    let (Some(ls), Some(inq)) = (tool("iscsi-ls"), tool("iscsi-inq")) else {
        if std::env::var_os("CI").is_some() {
            panic!("libiscsi-bin (iscsi-ls, iscsi-inq) is required when CI is set");
        }
        eprintln!("SKIPPED: libiscsi-bin is not installed (apt-get install libiscsi-bin); interop NOT tested");
        return;
    };
    let server = TargetServer::bind(TargetConfig::new(TARGET, "127.0.0.1:0"), Arc::new(ScsiFront::new(Osd))).unwrap();
    let addr = server.local_addr().unwrap();
    let handle = server.spawn();
    let portal = format!("iscsi://{addr}");

    let listing = run(&ls, &["-i", "iqn.2026-11.org.tessera.test:libiscsi", "-s", &portal]);
    assert!(listing.contains(TARGET), "iscsi-ls does not name the target:\n{listing}");
    assert!(listing.contains("Lun:0"), "iscsi-ls -s shows no LUN 0:\n{listing}");

    let url = format!("{portal}/{TARGET}/0");
    let standard = run(&inq, &["-i", "iqn.2026-11.org.tessera.test:libiscsi", &url]);
    assert!(
        standard.contains("0x11") || standard.to_uppercase().contains("OSD"),
        "iscsi-inq does not report an OSD:\n{standard}"
    );
    assert!(standard.contains("TESSERA"), "iscsi-inq does not show the vendor:\n{standard}");
    let serial = run(&inq, &["-i", "iqn.2026-11.org.tessera.test:libiscsi", "-e", "1", "-c", "128", &url]);
    assert!(serial.contains(&"42".repeat(20)), "unit serial page wrong:\n{serial}");
    handle.shutdown();
}
