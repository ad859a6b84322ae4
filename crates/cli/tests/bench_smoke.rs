//! Goal: every bench runs end to end in its --quick form and writes the JSON summary keys and the
//! PNG the docs cite. Method: run the real binary; check the files (values are not judged here:
//! timing goals live in the benches themselves, not in tests).

mod common;

use std::process::Command;

use common::tessera_exe;
use serde_json::Value;
use tessera_mds::cpus::{format_list, CpuSet};
use tessera_mds::disk_interrupts::DiskInterrupts;
use tessera_mds::loop_cpus::LoopCpus;

fn run_bench(args: &[&str], summary_keys: &[&str]) -> Value {
    run_bench_with_plots(args, summary_keys, &[])
}

/// Runs a bench and checks its summary keys, its PNG and the extra PNGs (`<name>-<suffix>.png`).
fn run_bench_with_plots(args: &[&str], summary_keys: &[&str], extra_plots: &[&str]) -> Value {
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
    for suffix in extra_plots {
        let path = dir.path().join(format!("out-{suffix}.png"));
        let png = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(&png[1..4], b"PNG", "{}", path.display());
    }
    doc
}

#[test]
fn bench_tree_quick_writes_its_summary() {
    run_bench(&["tree"], &["put_files_per_sec_1", "put_speedup_8_over_1", "rm_speedup_8_over_1", "get_files_per_sec_8", "cp_speedup_8_over_1"]);
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
fn bench_noncontig_quick_writes_its_summary() {
    run_bench_with_plots(
        &["noncontig"],
        &[
            "native_over_iterative_64B",
            "list_over_contig_1024x64B_write",
            "list_over_contig_1024x64B_read",
            "list_over_contig_4KiB",
            "subarray_4osd_native_over_iterative_write",
            "subarray_4osd_native_over_iterative_read",
            "hybrid_over_best",
        ],
        &["read", "model", "small", "subarray", "memory", "store"],
    );
}

#[test]
fn bench_io_file_system_quick_writes_its_summary() {
    run_bench(
        &["io"],
        &["fs_write_over_raw_16MiB", "fs_read_over_raw_16MiB", "fs_write_fsync_mib_s_16MiB", "loopback_write_mib_s_at_4", "loopback_read_over_raw_at_4"],
    );
}

#[test]
fn bench_security_quick_writes_its_summary() {
    let doc = run_bench(
        &["security"],
        &[
            "cmdrsp_write_throughput_cost_1MiB",
            "cmdrsp_read_throughput_cost_1MiB",
            "cmdrsp_write_extra_us_per_command_4KiB",
            "cmdrsp_read_extra_us_per_command_4KiB",
            "cmdrsp_write_extra_us_median_command_4KiB",
            "cmdrsp_read_extra_us_median_command_4KiB",
        ],
    );
    // Each side ran on CPUs of its own, as read back from the kernel (docs/benchmarks.md,
    // "Each side on its own core").
    let cpus = |v: &Value| -> Vec<u64> { v.as_array().unwrap().iter().map(|c| c.as_u64().unwrap()).collect() };
    let client = cpus(&doc["params"]["client_cpus"]);
    let daemons: Vec<Vec<u64>> = doc["params"]["daemon_cpus"].as_array().unwrap().iter().map(cpus).collect();
    assert_eq!(daemons.len(), 5, "NOSEC, its control and three secured daemons");
    if std::thread::available_parallelism().unwrap().get() >= 2 {
        assert_eq!(client.len(), 1, "{doc}");
        for d in &daemons {
            assert!(!d.is_empty() && d.iter().all(|c| !client.contains(c)), "client on {client:?}, a daemon on {d:?}");
        }
    } else {
        assert_eq!(doc["params"]["pinned"], "no (fewer than two CPUs)");
    }
}

#[test]
fn bench_meta_quick_writes_its_summary() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("bench");
    let doc = run_bench(
        &["meta", "--osds", "2", "--dir", dir.to_str().unwrap()],
        &[
            "creates_per_sec_4_clients",
            "creates_per_sec_4_clients_ram_mounted",
            "sqlite_durable_tx_per_sec",
            "round_trips_per_sec_4_clients",
            "stat_median_us_stripes_2",
            "readdir_entries_over_stats_stripes_2",
            "mds_cpu_us_per_create_paced",
            "paced_over_back_to_back_mds_cpu",
        ],
    );
    // The paced creates and their baseline, each with the server's CPU per create.
    let paced: Vec<&Value> = doc["rows"].as_array().unwrap().iter().filter(|r| r["section"] == "paced").collect();
    assert_eq!(paced.len(), 2, "{doc}");
    assert!(paced.iter().all(|r| r["mds_cpu_us_per_op"].as_f64().is_some_and(|c| c > 0.0)), "{paced:?}");
    // The metadata server's event loop ran where the disk under its store takes its completion
    // interrupts, as read back from the kernel (`tessera mds --loop-cpus auto`).
    let allowed = CpuSet::of_thread(0).unwrap().cpus();
    let near = DiskInterrupts::of(scratch.path()).map_or(LoopCpus::Any, LoopCpus::NearDisk);
    let expected = near.choose(&allowed).unwrap_or(allowed);
    assert_eq!(doc["params"]["mds_loop_cpus"], format_list(&expected), "the disk's interrupts: {near:?}");
}

/// A bench refuses a bad argument before it starts anything, naming what it accepts, rather
/// than running nothing (an unknown `--only` name) or minutes of work.
#[test]
fn benches_refuse_bad_arguments_before_starting() {
    for (args, says) in [
        (&["noncontig", "--only", "nonsense"][..], "possible values: fig10, small, subarray, memory, store"),
        (&["meta", "--clients", "0"][..], "--clients needs one or more counts above zero"),
        (&["io", "--osds", "0"][..], "--osds needs counts of at least 1"),
        (&["tree", "--files", "0"][..], "must be above zero"),
        // Counts and sizes of nothing, which ran and wrote tables of nulls or, for 1-byte
        // calls, ran for hours.
        (&["meta", "--files-per-client", "0"][..], "must be at least 1"),
        (&["meta", "--stripe-files", "0"][..], "must be at least 1"),
        (&["meta", "--clients", "4,2000"][..], "--clients 2000: at most 1024"),
        (&["attr", "--iterations", "0"][..], "must be at least 1"),
        (&["security", "--bytes-per-point", "0"][..], "must be at least 1"),
        (&["tree", "--workers", "2,0"][..], "must be at least 1"),
        (&["io", "--bytes-per-point", "0"][..], "at least 1 B here"),
        (&["io", "--osd-call-bytes", "1"][..], "at least 64 KiB here"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new(tessera_exe()).arg("bench").args(args).arg("--out").arg(dir.path()).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(says), "{args:?}: {err}");
        assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none(), "{args:?} wrote a report");
    }
}
