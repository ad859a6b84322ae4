//! 1 MiB READs against several `tessera osd` daemons in turn, as `tessera bench security` runs
//! its methods: rounds of a few READs per daemon, each daemon's wall time and CPU summed over
//! the rounds. Two identical NOSEC daemons show what the order alone and the scheduler's
//! placement do to a figure; with `pin`, this process runs on the first CPU it may use and the
//! daemons on the others (`bench::pinning`), as the benches do by default.
//!
//! `cargo run --release -p tessera-cli --example read_rounds -- TESSERA_EXE ROUNDS PER_ROUND SIZE pin|free METHOD...`
//! e.g. `target/release/tessera 64 8 1048576 free nosec nosec capkey cmdrsp`.

use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use tessera_cli::bench::cpu::CpuClock;
use tessera_cli::bench::pinning::{self, PinArgs};
use tessera_osd_proto::DataLayout;
use tessera_security::SecurityMethod;

/// One daemon, its client and what it took.
struct Subject {
    name: String,
    client: tessera_initiator::osd_client::OsdClient<tessera_initiator::iscsi::Session>,
    addr: tessera_types::ObjectAddr,
    _daemon: tessera_cli::daemon::Daemon,
    clock: CpuClock,
    wall: Duration,
    osd_cpu: Duration,
    client_cpu: Duration,
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    ensure!(args.len() >= 7, "usage: read_rounds TESSERA_EXE ROUNDS PER_ROUND SIZE pin|free METHOD...");
    let exe = std::path::Path::new(&args[1]);
    let rounds: usize = args[2].parse().context("ROUNDS")?;
    let per_round: usize = args[3].parse().context("PER_ROUND")?;
    let size: usize = args[4].parse().context("SIZE")?;
    println!("pinned: {}", pinning::apply(&PinArgs { no_pin: args[5] != "pin" })?);
    let dir = tempfile::tempdir()?;
    let mut subjects = Vec::new();
    for (i, name) in args[6..].iter().enumerate() {
        let method = SecurityMethod::from_name(name).with_context(|| format!("unknown method {name}"))?;
        let home = dir.path().join(i.to_string());
        std::fs::create_dir_all(&home)?;
        let (client, addr, daemon) = tessera_cli::bench::security::one_target(exe, &home, method)?;
        client.write(addr, 0, &vec![7u8; size], false)?;
        let clock = CpuClock::of_process(daemon.pid())?;
        subjects.push(Subject { name: name.clone(), client, addr, _daemon: daemon, clock, wall: Duration::ZERO, osd_cpu: Duration::ZERO, client_cpu: Duration::ZERO });
    }
    let me = CpuClock::this_process();
    let mut into = vec![0u8; size];
    for _ in 0..rounds {
        for s in subjects.iter_mut() {
            let (osd0, client0, t) = (s.clock.now()?, me.now()?, Instant::now());
            for _ in 0..per_round {
                let got = s.client.read_into(s.addr, 0, size as u64, DataLayout::Contiguous, &mut [&mut into])?;
                ensure!(got.received == size as u64, "short read");
            }
            s.wall += t.elapsed();
            s.osd_cpu += s.clock.now()? - osd0;
            s.client_cpu += me.now()? - client0;
        }
    }
    let per_read = |d: Duration| d.as_secs_f64() * 1e6 / (rounds * per_round) as f64;
    for s in &subjects {
        println!("{}: {:.1} us per READ, CPU per READ {:.1} us in the OSD, {:.1} us in the client", s.name, per_read(s.wall), per_read(s.osd_cpu), per_read(s.client_cpu));
    }
    Ok(())
}
