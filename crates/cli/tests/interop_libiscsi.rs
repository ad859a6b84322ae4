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

/// Runs a libiscsi tool; returns (success, stdout + stderr).
fn run_tool(tool: &std::path::Path, args: &[&str]) -> (bool, String) {
    let out = Command::new(tool).args(args).output().expect("run libiscsi tool");
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

/// Goal: Debian's libiscsi tools authenticate to `tessera osd --chap-secret-file` with CHAP
/// (URL form `iscsi://user%secret@host/...`), one-way and mutual (`target_user` and
/// `target_password`), in discovery (iscsi-ls) and normal sessions (iscsi-inq), and are refused
/// without the secret or with a wrong one.
#[test]
fn libiscsi_tools_log_in_with_chap() {
    let (Some(ls), Some(inq)) = (tool("iscsi-ls"), tool("iscsi-inq")) else { return };
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new().prefix("tessera-chap-interop-").tempdir().unwrap();
    let secrets = dir.path().join("chap.secrets");
    std::fs::write(&secrets, "alice initiator-secret\nosd0 target-secret!!\n").unwrap();
    std::fs::set_permissions(&secrets, std::fs::Permissions::from_mode(0o600)).unwrap();
    let data = dir.path().join("osd");
    let args = ["osd", "--data", data.to_str().unwrap(), "--listen", "127.0.0.1:0", "--chap-secret-file", secrets.to_str().unwrap()];
    let daemon = tessera_cli::daemon::Daemon::spawn_exe(tessera_exe(), &args).expect("start tessera osd with CHAP");
    let addr = daemon.field("addr").unwrap();
    let target = daemon.field("target").unwrap();

    let (ok, text) = run_tool(&ls, &["-s", &format!("iscsi://alice%initiator-secret@{addr}")]);
    assert!(ok && text.contains(target) && text.contains("Lun:0"), "iscsi-ls with CHAP:\n{text}");
    let (ok, text) = run_tool(&ls, &["-s", &format!("iscsi://{addr}")]);
    assert!(!ok && text.contains("Authentication failure"), "iscsi-ls without CHAP must be refused:\n{text}");

    let lun = format!("{addr}/{target}/0");
    let (ok, text) = run_tool(&inq, &[&format!("iscsi://alice%initiator-secret@{lun}")]);
    assert!(ok && text.contains("TESSERA"), "iscsi-inq with CHAP:\n{text}");
    let (ok, text) = run_tool(&inq, &[&format!("iscsi://alice%guessed-secret@{lun}")]);
    assert!(!ok && text.contains("Authentication failure"), "iscsi-inq with a wrong secret must be refused:\n{text}");

    let mutual = format!("iscsi://alice%initiator-secret@{lun}?target_user=osd0&target_password=target-secret!!");
    let (ok, text) = run_tool(&inq, &[&mutual]);
    assert!(ok && text.contains("TESSERA"), "iscsi-inq with mutual CHAP:\n{text}");
    let impostor = format!("iscsi://alice%initiator-secret@{lun}?target_user=osd0&target_password=other-secret!!");
    let (ok, text) = run_tool(&inq, &[&impostor]);
    assert!(!ok, "iscsi-inq must refuse a target that answers with another secret:\n{text}");
}
