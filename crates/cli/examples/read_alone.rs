//! READs of one size against one `tessera osd` alone, for each method asked: the cost of a
//! method with no other daemon's rounds before it. `tessera bench security` runs every method
//! in the same rounds, and what a daemon inherits from the one that ran before it shows in its
//! figures (docs/benchmarks.md, "CMDRSP at 1 MiB today: the bench, and one daemon alone").
//!
//! `cargo run --release -p tessera-cli --example read_alone -- TESSERA_EXE SECONDS SIZE METHOD...`
//! e.g. `target/release/tessera 3 1048576 nosec capkey nosec cmdrsp`: one line per method run.

use std::time::{Duration, Instant};

use tessera_cli::bench::cpu::CpuClock;
use tessera_osd_proto::DataLayout;
use tessera_security::SecurityMethod;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    anyhow::ensure!(args.len() >= 5, "usage: read_alone TESSERA_EXE SECONDS SIZE METHOD...");
    let exe = std::path::Path::new(&args[1]);
    let secs: f64 = args[2].parse()?;
    let size: usize = args[3].parse()?;
    for name in &args[4..] {
        let method = SecurityMethod::from_name(name).ok_or_else(|| anyhow::anyhow!("unknown method {name}"))?;
        let dir = tempfile::tempdir()?;
        let (client, addr, daemon) = tessera_cli::bench::security::one_target(exe, dir.path(), method)?;
        let (osd_clock, client_clock) = (CpuClock::of_process(daemon.pid())?, CpuClock::this_process());
        client.write(addr, 0, &vec![7u8; size], false)?;
        std::thread::sleep(Duration::from_secs(1));
        let (osd0, client0) = (osd_clock.now()?, client_clock.now()?);
        let start = Instant::now();
        let mut reads = 0u64;
        while start.elapsed().as_secs_f64() < secs {
            let got = client.read_layout(addr, 0, size as u64, DataLayout::Contiguous)?;
            anyhow::ensure!(got.data.len() == size, "short read");
            reads += 1;
        }
        let per_read = |d: Duration| d.as_secs_f64() * 1e6 / reads as f64;
        let (osd_us, client_us) = (per_read(osd_clock.now()? - osd0), per_read(client_clock.now()? - client0));
        println!("{name}: {reads} reads of {size} bytes, {:.1} us each, CPU per read {osd_us:.1} us in the OSD, {client_us:.1} us in the client", per_read(start.elapsed()));
    }
    Ok(())
}
