//! READs of one size against one `tessera osd` alone, for each method asked: the cost of a
//! method with no other daemon's rounds before it. `tessera bench security` runs every method
//! in the same rounds, and what a daemon inherits from the one that ran before it shows in its
//! figures (docs/benchmarks.md, "CMDRSP at 1 MiB today: the bench, and one daemon alone").
//!
//! `cargo run --release -p tessera-cli --example read_alone -- TESSERA_EXE SECONDS SIZE METHOD...`
//! e.g. `target/release/tessera 3 1048576 nosec capkey nosec cmdrsp`: one line per method run.

use std::time::{Duration, Instant};

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
        let (client, addr, _daemon) = tessera_cli::bench::security::one_target(exe, dir.path(), method)?;
        client.write(addr, 0, &vec![7u8; size], false)?;
        std::thread::sleep(Duration::from_secs(1));
        let start = Instant::now();
        let mut reads = 0u64;
        while start.elapsed().as_secs_f64() < secs {
            let got = client.read_layout(addr, 0, size as u64, DataLayout::Contiguous)?;
            anyhow::ensure!(got.data.len() == size, "short read");
            reads += 1;
        }
        println!("{name}: {reads} reads of {size} bytes, {:.1} us each", start.elapsed().as_secs_f64() * 1e6 / reads as f64);
    }
    Ok(())
}
