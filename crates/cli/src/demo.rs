//! `tessera demo`: the README's one-command tour. Starts a real `tessera osd` in a temporary
//! directory, discovers and logs in to it over iSCSI, exercises objects and attributes, restarts
//! the daemon to show that flushed data survives, and finishes with a short latency bench.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{ensure, Context, Result};
use clap::Args;
use tessera_initiator::iscsi::Session;
use tessera_osd_proto::{AttrId, Attribute, FlushScope};
use tessera_types::ObjectAddr;

use crate::bench::{self, BenchCommand, CommonArgs};
use crate::daemon::Daemon;
use crate::session::{connect, INITIATOR_NAME};

#[derive(Args)]
pub struct DemoArgs {
    /// Keep the demo's data here instead of a temporary directory.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Skip the closing benchmark.
    #[arg(long)]
    no_bench: bool,
}

/// User-defined attribute page where the demo stores a label (application range of page
/// numbers, OSD-2 §7.1.2).
const LABEL: AttrId = AttrId::new(0x0001_0000, 1);
/// User object information page, logical length.
const LOGICAL_LENGTH: AttrId = AttrId::new(0x1, 0x82);

pub fn run(args: DemoArgs) -> Result<()> {
    let temp = tempfile::Builder::new().prefix("tessera-demo-").tempdir()?;
    let root = args.dir.clone().unwrap_or_else(|| temp.path().to_path_buf());
    let data = root.join("osd0");
    let data_arg = data.to_str().context("data path is not UTF-8")?;
    step(&format!("starting `tessera osd --data {data_arg} --listen 127.0.0.1:0`"));
    let daemon = Daemon::spawn(&["osd", "--data", data_arg, "--listen", "127.0.0.1:0"])?;
    let addr = daemon.field("addr")?.to_string();

    let found = Session::discover(&addr, INITIATOR_NAME).context("iSCSI discovery")?;
    ensure!(!found.is_empty(), "discovery found no targets at {addr}");
    let target_name = found[0].name.clone();
    done(&format!("discovered {target_name} at {addr}"));

    let client = connect(&addr, &target_name)?;
    let pid = client.create_partition(None)?;
    let oid = client.create_one(pid)?;
    let object = ObjectAddr::new(pid, oid);
    done(&format!("created partition {pid:#x} and user object {oid:#x}"));

    let payload: Vec<u8> = (0..4u32 << 20).map(|i| (i.wrapping_mul(2654435761) >> 24) as u8).collect();
    let t = Instant::now();
    client.write(object, 0, &payload, false)?;
    let back = client.read(object, 0, payload.len() as u64)?.data;
    ensure!(back == payload, "read back differs from what was written");
    done(&format!("wrote and read back 4 MiB, byte for byte equal ({:.1} ms)", t.elapsed().as_secs_f64() * 1e3));

    client.set_attributes(object, &[Attribute { id: LABEL, value: b"tessera demo object".to_vec() }])?;
    let got = client.get_attributes(object, &[LABEL, LOGICAL_LENGTH])?;
    let label = got[0].value.clone().unwrap_or_default();
    let length = got[1].value.as_deref().and_then(|v| v.try_into().ok()).map(u64::from_be_bytes).unwrap_or(0);
    done(&format!("attributes: label {:?}, logical length {length} bytes", String::from_utf8_lossy(&label)));

    let listed = client.list_all(pid)?;
    done(&format!("LIST of partition {pid:#x}: {} object(s)", listed.len()));

    client.flush_osd(FlushScope::Everything)?;
    drop(client);
    daemon.stop()?;
    step("stopped the target; restarting it on the same directory");
    let daemon = Daemon::spawn(&["osd", "--data", data_arg, "--listen", "127.0.0.1:0"])?;
    let client = connect(daemon.field("addr")?, daemon.field("target")?)?;
    let back = client.read(object, 0, payload.len() as u64)?.data;
    ensure!(back == payload, "data changed across restart");
    let got = client.get_attributes(object, &[LABEL])?;
    ensure!(got[0].value.as_deref() == Some(&b"tessera demo object"[..]), "attribute lost across restart");
    done("after restart: data and attributes intact");
    drop(client);
    drop(daemon);

    if !args.no_bench {
        step("short GET ATTRIBUTES latency bench (`tessera bench attr --quick`)");
        let common = CommonArgs { json: None, out: root.join("bench-out"), quick: true, target: None, target_name: None };
        bench::run(BenchCommand::Attr(bench::attr_args_default()), common)?;
    }
    println!("\ndemo finished; data was in {}", root.display());
    Ok(())
}

fn step(msg: &str) {
    println!("-> {msg}");
}

fn done(msg: &str) {
    println!("   ok: {msg}");
}
