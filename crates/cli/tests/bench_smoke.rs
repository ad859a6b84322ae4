//! Goal: every bench runs end to end in its --quick form and writes the JSON summary keys and the
//! PNG the docs cite. Method: run the real binary; check the files (values are not judged here:
//! timing goals live in the benches themselves, not in tests).

mod common;

use std::process::Command;

use common::tessera_exe;
use serde_json::Value;

fn run_bench(args: &[&str], summary_keys: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out.json");
    let out = Command::new(tessera_exe())
        .arg("bench")
        .args(args)
        .args(["--quick", "--json", json.to_str().unwrap()])
        .output()
        .expect("run tessera bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "bench {args:?} failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let doc: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    for key in summary_keys {
        let v = &doc["summary"][key];
        assert!(v.is_number() && v.as_f64().unwrap().is_finite(), "summary.{key} = {v} in {doc}");
    }
    assert!(!doc["rows"].as_array().unwrap().is_empty());
    let png = std::fs::read(json.with_extension("png")).unwrap();
    assert_eq!(&png[1..4], b"PNG");
}

#[test]
fn bench_attr_quick_writes_its_summary() {
    run_bench(&["attr"], &["getattr_median_us", "loopback_rtt_median_us", "getattr_p99_us"]);
}

#[test]
fn bench_io_target_only_quick_writes_its_summary() {
    run_bench(&["io", "--target-only"], &["write_over_raw_16MiB", "read_over_raw_16MiB"]);
}

#[test]
fn bench_security_quick_writes_its_summary() {
    run_bench(
        &["security"],
        &["cmdrsp_write_throughput_cost_1MiB", "cmdrsp_read_throughput_cost_1MiB", "cmdrsp_write_extra_us_per_command_4KiB", "cmdrsp_read_extra_us_per_command_4KiB"],
    );
}
