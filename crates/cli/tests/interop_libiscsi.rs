//! Goal: a real third-party initiator (Debian's libiscsi tools) discovers the daemon and sees an
//! OSD. Method: run `iscsi-ls` and `iscsi-inq` against `tessera osd` on loopback. The tools are
//! installed by scripts/setup.sh; under CI their absence is a failure, not a skip.

mod common;

use std::process::Command;

use common::*;

fn tool(name: &str) -> Option<std::path::PathBuf> {
    let found = ["/usr/bin", "/usr/local/bin"].iter().map(|d| std::path::Path::new(d).join(name)).find(|p| p.exists());
    if found.is_none() {
        assert!(std::env::var_os("CI").is_none(), "{name} missing under CI: scripts/setup.sh installs libiscsi-bin");
        eprintln!("SKIPPED: {name} not installed (run scripts/setup.sh)");
    }
    found
}

#[test]
fn iscsi_ls_discovers_the_target() {
    let Some(ls) = tool("iscsi-ls") else { return };
    let osd = TestOsd::start();
    let out = Command::new(ls).args(["-s", &format!("iscsi://{}", osd.addr)]).output().expect("run iscsi-ls");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "iscsi-ls failed: {stdout}{stderr}");
    assert!(stdout.contains(&osd.target_name), "target name in: {stdout}");
    assert!(stdout.contains("Lun:0"), "LUN 0 in: {stdout}");
    assert!(stdout.to_ascii_uppercase().contains("OSD") || stdout.contains("0x11") || stdout.contains("17"), "OSD device type in: {stdout}");
}

#[test]
fn iscsi_inq_reports_an_osd_device() {
    let Some(inq) = tool("iscsi-inq") else { return };
    let osd = TestOsd::start();
    let url = format!("iscsi://{}/{}/0", osd.addr, osd.target_name);
    let out = Command::new(inq).arg(&url).output().expect("run iscsi-inq");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "iscsi-inq failed: {stdout}{stderr}");
    assert!(stdout.to_ascii_uppercase().contains("OSD") || stdout.contains("0x11"), "device type in: {stdout}");
    assert!(stdout.contains("TESSERA"), "vendor in: {stdout}");

    let out = Command::new(inq_path()).args(["-e", "1", "-c", "0x80", &url]).output().expect("run iscsi-inq VPD 0x80");
    assert!(out.status.success(), "VPD 0x80: {}", String::from_utf8_lossy(&out.stderr));
}

fn inq_path() -> std::path::PathBuf {
    tool("iscsi-inq").expect("checked above")
}
