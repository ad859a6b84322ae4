//! Experiment 3's list READ alone, with each process's CPU: 1024 pieces of p bytes at a 16 p
//! stride against one contiguous READ of the same 1024 p bytes, from a real `tessera osd`
//! over loopback. Rounds alternate the two; printed are the medians over rounds of the wall
//! time per READ, the target's CPU per READ and this process's (the initiator's) CPU per READ,
//! and the median paired wall ratio. `bench noncontig` gives the ratio; this says which
//! process pays for it (docs/noncontiguous.md, "What is left").
//!
//! `cargo run --release -p tessera-cli --example list_read_probe -- <tessera exe> [rounds] [reads per round] [piece bytes] [both|contig|list] [read|write]`
//! (`contig` or `list` runs one side only, for a profile of it.)
use std::time::Instant;

use anyhow::{ensure, Context, Result};
use tessera_cli::bench::cpu::CpuClock;
use tessera_cli::bench::noncontig::pattern;
use tessera_cli::daemon::Daemon;
use tessera_cli::session::connect;
use tessera_client::Mode;
use tessera_layout::Extent;
use tessera_types::ObjectAddr;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn arg<T: std::str::FromStr>(args: &[String], i: usize, default: T) -> Result<T> {
    match args.get(i) {
        Some(s) => s.parse().ok().with_context(|| format!("argument {i}: cannot parse {s:?}")),
        None => Ok(default),
    }
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let exe = std::path::PathBuf::from(args.get(1).context("usage: list_read_probe <tessera exe> [rounds] [reads per round] [piece bytes] [both|contig|list] [read|write]")?);
    let rounds: usize = arg(&args, 2, 15)?;
    let per: usize = arg(&args, 3, 20)?;
    let piece: u64 = arg(&args, 4, 4096)?;
    let sides: String = arg(&args, 5, "both".to_string())?;
    let run = [sides != "list", sides != "contig"];
    let write = arg(&args, 6, "read".to_string())? == "write";

    let dir = tempfile::tempdir()?;
    let data = dir.path().join("osd0");
    let daemon = Daemon::spawn_exe(&exe, &["osd", "--data", data.to_str().context("temp path")?, "--listen", "127.0.0.1:0"])?;
    let client = connect(daemon.field("addr")?, daemon.field("target")?)?;
    let clocks = [CpuClock::of_process(daemon.pid())?, CpuClock::this_process()];

    let pid = client.create_partition(None)?;
    let addr = ObjectAddr::new(pid, client.create_one(pid)?);
    let extents = pattern::strided(1024, piece, piece * 16);
    let len = 1024 * piece;
    client.write(addr, 0, &vec![1u8; pattern::span(&extents) as usize], false)?;
    let want: Vec<u8> = (0..len).map(|i| (i * 7 + piece) as u8).collect();
    let list = pattern::commands(&extents, Mode::Auto)?;
    let contig = pattern::commands(&[Extent { offset: 0, len }], Mode::Auto)?;
    pattern::write(&client, addr, &list, &want)?;

    let mut buf = vec![0u8; len as usize];
    // [side][round] = [wall, target CPU, initiator CPU], seconds per READ.
    let mut res: [Vec<[f64; 3]>; 2] = [Vec::new(), Vec::new()];
    for _ in 0..rounds {
        for (side, cmds) in [&contig, &list].into_iter().enumerate() {
            if !run[side] {
                continue;
            }
            let (cpu0, t) = ([clocks[0].now()?, clocks[1].now()?], Instant::now());
            for _ in 0..per {
                if write {
                    pattern::write(&client, addr, cmds, &want)?;
                } else {
                    pattern::read(&client, addr, cmds, &mut buf)?;
                }
            }
            let wall = t.elapsed().as_secs_f64();
            let target = (clocks[0].now()? - cpu0[0]).as_secs_f64();
            let initiator = (clocks[1].now()? - cpu0[1]).as_secs_f64();
            res[side].push([wall, target, initiator].map(|x| x / per as f64));
        }
        ensure!(write || !run[1] || buf == want, "the list READ returned other bytes than were written");
    }
    let us = |side: usize, k: usize| if run[side] { format!("{:.0}", median(res[side].iter().map(|r| r[k]).collect()) * 1e6) } else { "-".into() };
    let ratio = if run[0] && run[1] { format!("{:.3}", median(res[1].iter().zip(&res[0]).map(|(l, c)| l[0] / c[0]).collect())) } else { "-".into() };
    println!(
        "piece {piece}: wall us contig {} list {} ratio {ratio} | target cpu us contig {} list {} | initiator cpu us contig {} list {}",
        us(0, 0), us(1, 0), us(0, 1), us(1, 1), us(0, 2), us(1, 2)
    );
    drop(client);
    daemon.stop()?;
    Ok(())
}
