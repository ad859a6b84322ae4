//! `tessera bench security`: what capability security costs. READ and WRITE throughput and
//! per-command latency, contiguous and non-contiguous (a strided layout: blocks of 4 KiB every
//! 8 KiB, seed 000's vector pattern), under NOSEC, CAPKEY, CMDRSP and ALLDATA in one run. The
//! baseline is NOSEC: a `tessera osd` without security, started beside one `tessera osd
//! --security METHOD` per secured method, all temporary child processes on loopback, so every
//! daemon carries the same load (one object, the same commands) and only the method differs.
//! Goal (issue 5): CMDRSP costs at most 5% throughput at 1 MiB and at most 5 us per command
//! (measured at 4 KiB, where the command dominates).
//!
//! Method: per transfer size, interleaved rounds run every method back to back; the ratios are
//! the median over rounds of each round's paired ratio (method time / NOSEC time), as in `bench
//! io`, and the extra time per command the median over rounds of each round's paired difference
//! (so one round slowed by another tenant cannot move it), both of the rounds' mean command and
//! of their median command (which a few commands delayed by another tenant cannot move either).
//! The security manager's side (keys, partition, object, credentials) is played with `OsdKeys`
//! over the same initiator before measuring.
//!
//! A control: a second NOSEC daemon (`NOSEC control`) runs in every round beside the first, so
//! each run also shows how far two identical daemons differ on this machine, the spread any
//! method's figures must be read against (summary keys `nosec_control_*`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use serde_json::json;
use tessera_initiator::iscsi::Session;
use tessera_initiator::osd_client::OsdClient;
use tessera_osd_proto::pages::{value_u64, CURRENT_COMMAND_OBJECT_ID, CURRENT_COMMAND_PARTITION_ID};
use tessera_osd_proto::{Command, DataLayout, GetAttrs, OsdRequestBuilder};
use tessera_security::clock::now_ms;
use tessera_security::{Key, KeySlot, OsdKeys, Permissions, SecurityMethod};
use tessera_types::ObjectAddr;

use super::cpu::CpuClock;
use super::pinning::{self, PinArgs};
use super::report::{percentile, plot_lines, Axes, OutputPaths, Report, Series};
use super::CommonArgs;
use crate::daemon::Daemon;
use crate::session::connect;

const KIB: usize = 1024;
const MIB: usize = 1024 * 1024;
const ROUNDS: usize = 8;
const METHODS: [SecurityMethod; 4] = [SecurityMethod::NoSec, SecurityMethod::CapKey, SecurityMethod::CmdRsp, SecurityMethod::AllData];
/// Non-contiguous pattern: blocks of this size ...
const BLOCK: u64 = 4 * KIB as u64;
/// ... every this many bytes.
const STRIDE: u64 = 8 * KIB as u64;

#[derive(Args, Clone)]
pub struct SecurityArgs {
    /// Bytes moved per size, pattern, direction and method (at least 4 transfers each).
    #[arg(long, default_value_t = 64 * MIB, value_parser = crate::units::parse_positive)]
    bytes_per_point: usize,
    #[command(flatten)]
    pin: PinArgs,
}

/// One method's client and object.
struct Subject {
    method: SecurityMethod,
    /// The name in rows and plots: the method's, or `NOSEC control`.
    label: &'static str,
    client: OsdClient<Session>,
    addr: ObjectAddr,
}

/// The label of the second NOSEC daemon.
const CONTROL: &str = "NOSEC control";

fn random_key() -> Result<Key> {
    use std::io::Read;
    let mut k = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut k).context("reading /dev/urandom for a master key")?;
    Ok(Key(k))
}

/// Starts one daemon per method (NOSEC and each secured method requiring exactly its own), so
/// every daemon carries the same load and only the method differs; establishes keys and makes
/// one object on each.
fn subjects(dir: &std::path::Path) -> Result<(Vec<Subject>, Vec<Daemon>)> {
    let exe = std::env::current_exe().context("finding the tessera executable")?;
    let exe = exe.as_path();
    let mut subjects = Vec::new();
    let mut daemons = Vec::new();
    for (name, label) in [("nosec", SecurityMethod::NoSec.name()), ("nosec-control", CONTROL)] {
        let (subject, daemon) = plain_subject(exe, dir, name, label)?;
        subjects.push(subject);
        daemons.push(daemon);
    }
    for method in &METHODS[1..] {
        let (subject, daemon) = secured_subject(exe, dir, *method)?;
        subjects.push(subject);
        daemons.push(daemon);
    }
    Ok((subjects, daemons))
}

/// One `tessera osd` (the executable `exe`) run with `method` (NOSEC: no security), keyed as
/// the bench keys it, and a client holding a read-write credential for one object on it: for
/// measuring one method alone (`examples/read_alone.rs`), away from the others' rounds.
pub fn one_target(exe: &std::path::Path, dir: &std::path::Path, method: SecurityMethod) -> Result<(OsdClient<Session>, ObjectAddr, Daemon)> {
    let (subject, daemon) = match method {
        SecurityMethod::NoSec => plain_subject(exe, dir, "nosec", CONTROL)?,
        m => secured_subject(exe, dir, m)?,
    };
    Ok((subject.client, subject.addr, daemon))
}

/// A `tessera osd` without security, and a client with one object on it.
fn plain_subject(exe: &std::path::Path, dir: &std::path::Path, name: &str, label: &'static str) -> Result<(Subject, Daemon)> {
    let daemon = Daemon::spawn_exe(exe, &["osd", "--data", dir.join(name).to_str().context("temp path")?, "--listen", "127.0.0.1:0"])?;
    let client = connect(daemon.field("addr")?, daemon.field("target")?)?;
    let pid = client.create_partition(None)?;
    let oid = client.create_one(pid)?;
    Ok((Subject { method: SecurityMethod::NoSec, label, client, addr: ObjectAddr::new(pid, oid) }, daemon))
}

/// A `tessera osd --security METHOD`, its keys established the way the security manager does,
/// and a client holding an object credential of that method.
fn secured_subject(exe: &std::path::Path, dir: &std::path::Path, m: SecurityMethod) -> Result<(Subject, Daemon)> {
    let name = m.name().to_ascii_lowercase();
    let master = random_key()?;
    let key_file = dir.join(format!("{name}.key"));
    crate::cluster::write_private(&key_file, &master.to_hex())?;
    let data = dir.join(&name);
    let args = ["osd", "--data", data.to_str().context("temp path")?, "--listen", "127.0.0.1:0", "--security", &name, "--master-key-file", key_file.to_str().context("temp path")?];
    let daemon = Daemon::spawn_exe(exe, &args)?;
    let (addr, target) = (daemon.field("addr")?.to_string(), daemon.field("target")?.to_string());
    let manager = connect(&addr, &target)?;
    let mut keys = OsdKeys::new(manager.system_id()?, master);
    manager.establish_key(&mut keys, KeySlot::Root, m)?;
    let expires = now_ms() + 24 * 3_600_000;
    let root = keys.credential(keys.root_capability(m, Permissions::CREATE, expires))?;
    let get = |id| GetAttrs::List { ids: vec![id], allocation_len: 64 };
    let reply = manager.execute_as(&OsdRequestBuilder::new(Command::CreatePartition { requested: None }).get_attrs(get(CURRENT_COMMAND_PARTITION_ID)), &root)?;
    let pid = reply.attr(CURRENT_COMMAND_PARTITION_ID).and_then(value_u64).context("the new partition id")?;
    manager.establish_key(&mut keys, KeySlot::Partition(pid), m)?;
    manager.establish_key(&mut keys, KeySlot::Working(pid, 0), m)?;
    let all = keys.credential(keys.partition_capability(m, pid, Permissions::ALL, expires)?)?;
    let create = OsdRequestBuilder::new(Command::Create { partition_id: pid, requested: None, count: 1 }).get_attrs(get(CURRENT_COMMAND_OBJECT_ID));
    let oid = manager.execute_as(&create, &all)?.attr(CURRENT_COMMAND_OBJECT_ID).and_then(value_u64).context("the new object id")?;
    let rw = Permissions::READ | Permissions::WRITE;
    let credential = keys.credential(keys.object_capability(m, pid, oid, rw, expires, 0)?)?;
    let mut client = connect(&addr, &target)?;
    client.set_credentials(Some(Arc::new(credential)));
    Ok((Subject { method: m, label: m.name(), client, addr: ObjectAddr::new(pid, oid) }, daemon))
}

/// The CMDRSP contiguous figures the goal is judged by, at one size and direction.
#[derive(Clone, Copy)]
struct GoalRow {
    size: usize,
    write: bool,
    /// Throughput over NOSEC's, median of paired rounds.
    ratio: f64,
    /// Extra wall-clock us per command: of the rounds' means, and of their median commands.
    extra_us: f64,
    median_extra_us: f64,
    /// Extra CPU us per command over the whole point: the OSD's, and the client's.
    osd_extra: f64,
    client_extra: f64,
}

/// The layout of one transfer of `size` bytes: contiguous, or strided blocks.
fn layout(strided: bool) -> DataLayout {
    if strided {
        DataLayout::Strided { stride: STRIDE, block_len: BLOCK }
    } else {
        DataLayout::Contiguous
    }
}

/// One WRITE of `data`, or one READ of as many bytes into `into`: the same memory every time,
/// as an application streams, so no method's figures carry the allocator's page faults.
fn transfer(s: &Subject, write: bool, strided: bool, data: &[u8], into: &mut [u8]) -> Result<()> {
    if write {
        s.client.write_layout(s.addr, 0, data, layout(strided), false)?;
    } else {
        let got = s.client.read_into(s.addr, 0, data.len() as u64, layout(strided), &mut [into])?;
        anyhow::ensure!(got.received == data.len() as u64, "short read: {} of {} bytes", got.received, data.len());
    }
    Ok(())
}

pub fn run(args: SecurityArgs, common: &CommonArgs) -> Result<()> {
    if common.target.is_some() {
        bail!("bench security starts its own NOSEC and secured targets (one per method); it does not take --target");
    }
    let sizes: Vec<usize> = if common.quick { vec![4 * KIB, MIB] } else { vec![4 * KIB, 64 * KIB, MIB, 4 * MIB] };
    let budget = if common.quick { args.bytes_per_point.min(8 * MIB) } else { args.bytes_per_point };
    let pinned = pinning::apply(&args.pin)?;
    let dir = crate::children::scratch_dir("tessera-bench-security-", None)?;
    let (subjects, daemons) = subjects(dir.path())?;
    // CPU per command at each end, which other tenants of the machine do not change the way
    // they change wall-clock time: each method's daemon, and this process while that method's
    // client runs (the methods run one after another, so only that client is busy).
    let osd_clocks = daemons.iter().map(|d| CpuClock::of_process(d.pid())).collect::<Result<Vec<_>>>()?;
    let client_clock = CpuClock::this_process();

    let mut report = Report::new("security");
    report.param("bytes_per_point", budget);
    report.param("strided_block_bytes", BLOCK);
    report.param("strided_stride_bytes", STRIDE);
    report.param("baseline", "NOSEC target in the same run");
    report.param("pinned", pinned);
    report.param("client_cpus", pinning::cpus_of(0)?);
    report.param("daemon_cpus", daemons.iter().map(|d| pinning::cpus_of(d.pid())).collect::<Result<Vec<_>>>()?);
    let mut series: Vec<Series> = Vec::new();
    let mut goal_rows = Vec::new();
    let mut control_rows: Vec<GoalRow> = Vec::new();
    for strided in [false, true] {
        let pattern = if strided { "strided" } else { "contiguous" };
        for write in [true, false] {
            let direction = if write { "write" } else { "read" };
            let mut points: Vec<Vec<(f64, f64)>> = vec![Vec::new(); subjects.len()];
            for &size in &sizes {
                let data: Vec<u8> = (0..size).map(|i| (i * 131 + 7) as u8).collect();
                let mut into = vec![0u8; size];
                for s in &subjects {
                    transfer(s, true, strided, &data, &mut into)?; // full-size objects before reading
                }
                let reps = (budget / size).clamp(4, 20_000);
                let rounds = reps.min(ROUNDS);
                let per_round = reps / rounds;
                let mut totals = vec![Duration::ZERO; subjects.len()];
                let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); subjects.len()];
                // Per-command time over NOSEC's in the same round, in us: of the round's means,
                // and of its median command (which a command delayed by another tenant of the
                // machine cannot move).
                let mut extras: Vec<Vec<f64>> = vec![Vec::new(); subjects.len()];
                let mut median_extras: Vec<Vec<f64>> = vec![Vec::new(); subjects.len()];
                let mut osd_cpu = vec![Duration::ZERO; subjects.len()];
                let mut client_cpu = vec![Duration::ZERO; subjects.len()];
                let mut latencies = Vec::with_capacity(per_round);
                for _ in 0..rounds {
                    let mut this_round = Vec::new();
                    let mut medians = Vec::new();
                    for (i, s) in subjects.iter().enumerate() {
                        latencies.clear();
                        // Untimed: what the batch before left running (on a pinned machine, on
                        // the same core) and this daemon's wake-up fall on this transfer.
                        transfer(s, write, strided, &data, &mut into)?;
                        let (osd0, client0) = (osd_clocks[i].now()?, client_clock.now()?);
                        let t = Instant::now();
                        for _ in 0..per_round {
                            let one = Instant::now();
                            transfer(s, write, strided, &data, &mut into)?;
                            latencies.push(one.elapsed().as_secs_f64() * 1e6);
                        }
                        this_round.push(t.elapsed());
                        client_cpu[i] += client_clock.now()?.saturating_sub(client0);
                        osd_cpu[i] += osd_clocks[i].now()?.saturating_sub(osd0);
                        latencies.sort_by(f64::total_cmp);
                        medians.push(percentile(&latencies, 50.0));
                    }
                    for (i, d) in this_round.iter().enumerate() {
                        totals[i] += *d;
                        ratios[i].push(this_round[0].as_secs_f64() / d.as_secs_f64());
                        extras[i].push((d.as_secs_f64() - this_round[0].as_secs_f64()) * 1e6 / per_round as f64);
                        median_extras[i].push(medians[i] - medians[0]);
                    }
                }
                anyhow::ensure!(write || into == data, "{pattern} READs of {size} bytes returned other bytes than were written");
                let reps = per_round * rounds;
                for (i, s) in subjects.iter().enumerate() {
                    ratios[i].sort_by(f64::total_cmp);
                    let ratio = percentile(&ratios[i], 50.0);
                    extras[i].sort_by(f64::total_cmp);
                    let extra_us = percentile(&extras[i], 50.0);
                    median_extras[i].sort_by(f64::total_cmp);
                    let median_extra_us = percentile(&median_extras[i], 50.0);
                    let mib_s = (size * reps) as f64 / MIB as f64 / totals[i].as_secs_f64();
                    let us_per_cmd = totals[i].as_secs_f64() * 1e6 / reps as f64;
                    let per_cmd = |d: Duration| d.as_secs_f64() * 1e6 / reps as f64;
                    let (osd_us, client_us) = (per_cmd(osd_cpu[i]), per_cmd(client_cpu[i]));
                    let (osd_extra, client_extra) = (osd_us - per_cmd(osd_cpu[0]), client_us - per_cmd(client_cpu[0]));
                    points[i].push((size as f64, mib_s));
                    let row = json!({
                        "pattern": pattern,
                        "direction": direction,
                        "size_bytes": size,
                        "method": s.label,
                        "transfers": reps,
                        "mib_s": mib_s,
                        "us_per_command": us_per_cmd,
                        "extra_us_per_command": extra_us,
                        "extra_us_median_command": median_extra_us,
                        "throughput_over_nosec": ratio,
                        "osd_cpu_us_per_command": osd_us,
                        "client_cpu_us_per_command": client_us,
                        "osd_cpu_extra_us_per_command": osd_extra,
                        "client_cpu_extra_us_per_command": client_extra,
                    });
                    let figures = GoalRow { size, write, ratio, extra_us, median_extra_us, osd_extra, client_extra };
                    if s.method == SecurityMethod::CmdRsp && !strided {
                        goal_rows.push(figures);
                    }
                    if s.label == CONTROL && !strided {
                        control_rows.push(figures);
                    }
                    report.row(row);
                }
            }
            for (i, s) in subjects.iter().enumerate() {
                series.push(Series { name: format!("{pattern} {direction} {}", s.label), points: std::mem::take(&mut points[i]) });
            }
        }
    }
    report.print_table(
        "Capability security: throughput and per-command time by method (NOSEC = baseline, same run)",
        &[
            "pattern",
            "direction",
            "size_bytes",
            "method",
            "transfers",
            "mib_s",
            "us_per_command",
            "extra_us_per_command",
            "extra_us_median_command",
            "throughput_over_nosec",
            "osd_cpu_extra_us_per_command",
            "client_cpu_extra_us_per_command",
        ],
    );
    let at = |size: usize, write: bool| goal_rows.iter().find(|r| r.size == size && r.write == write).copied();
    let (w1m, r1m) = (at(MIB, true), at(MIB, false));
    let (w4k, r4k) = (at(4 * KIB, true), at(4 * KIB, false));
    let cost = |r: Option<GoalRow>| r.map_or(f64::NAN, |r| 1.0 - r.ratio);
    let extra = |r: Option<GoalRow>| r.map_or(f64::NAN, |r| r.extra_us);
    let median_extra = |r: Option<GoalRow>| r.map_or(f64::NAN, |r| r.median_extra_us);
    let osd_extra = |r: Option<GoalRow>| r.map_or(f64::NAN, |r| r.osd_extra);
    let client_extra = |r: Option<GoalRow>| r.map_or(f64::NAN, |r| r.client_extra);
    report.summary("cmdrsp_write_throughput_cost_1MiB", cost(w1m));
    report.summary("cmdrsp_read_throughput_cost_1MiB", cost(r1m));
    report.summary("cmdrsp_write_extra_us_per_command_4KiB", extra(w4k));
    report.summary("cmdrsp_read_extra_us_per_command_4KiB", extra(r4k));
    report.summary("cmdrsp_write_extra_us_median_command_4KiB", median_extra(w4k));
    report.summary("cmdrsp_read_extra_us_median_command_4KiB", median_extra(r4k));
    report.summary("cmdrsp_write_osd_cpu_us_per_cmd_extra_4KiB", osd_extra(w4k));
    report.summary("cmdrsp_read_osd_cpu_us_per_cmd_extra_4KiB", osd_extra(r4k));
    report.summary("cmdrsp_write_client_cpu_us_per_cmd_extra_4KiB", client_extra(w4k));
    report.summary("cmdrsp_read_client_cpu_us_per_cmd_extra_4KiB", client_extra(r4k));
    let control = |size: usize, write: bool| control_rows.iter().find(|r| r.size == size && r.write == write).copied();
    report.summary("nosec_control_write_throughput_cost_1MiB", cost(control(MIB, true)));
    report.summary("nosec_control_read_throughput_cost_1MiB", cost(control(MIB, false)));
    report.summary("nosec_control_write_extra_us_median_command_4KiB", median_extra(control(4 * KIB, true)));
    report.summary("nosec_control_read_extra_us_median_command_4KiB", median_extra(control(4 * KIB, false)));
    report.summary("goal_1MiB_cost_at_most_5pct", cost(w1m) <= 0.05 && cost(r1m) <= 0.05);
    report.summary("goal_at_most_5us_per_command", extra(w4k) <= 5.0 && extra(r4k) <= 5.0);
    report.print_summary();

    let paths = OutputPaths::resolve("security", common.json.as_deref(), &common.out);
    report.write_json(&paths.json)?;
    let contiguous: Vec<Series> = series.into_iter().filter(|s| s.name.starts_with("contiguous")).collect();
    plot_lines(
        &paths.png,
        &Axes { title: "Contiguous I/O by security method", x_label: "transfer size (bytes)", y_label: "MiB/s (log)", log_x: true, log_y: true },
        &contiguous,
    )?;
    println!("\nwrote {} and {}", paths.json.display(), paths.png.display());
    Ok(())
}
