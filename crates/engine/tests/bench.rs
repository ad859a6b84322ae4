//! Micro-benchmark: engine-internal GET ATTRIBUTES latency (no codec, no network). Small by
//! default so it always runs; `TESSERA_BENCH=1` runs longer. Reports with eprintln!, asserts
//! nothing about time.

mod common;

use std::time::Instant;

use common::*;
use tessera_engine::{Engine, EngineConfig};
use tessera_osd_proto::{AttrId, Command};
use tessera_types::ObjectAddr;

fn percentile(sorted: &[u64], p: f64) -> u64 {
    sorted[((sorted.len() as f64 - 1.0) * p) as usize]
}

#[test]
fn get_attributes_latency() {
    let iterations = if std::env::var_os("TESSERA_BENCH").is_some() { 200_000 } else { 5_000 };
    let dir = tempfile::tempdir().unwrap();
    // Default config: accessed timestamps are rewritten at most once a second.
    let engine = Engine::open(dir.path(), EngineConfig { capacity_bytes: Some(1 << 40), ..Default::default() }).unwrap();
    let now = 1_700_000_000_000u64;
    engine.execute(&req(Command::CreatePartition { requested: Some(PID) }), now).unwrap();
    let create = with_get(req(Command::Create { partition_id: PID, requested: None, count: 1 }), &[AttrId::new(CURRENT, 4)]);
    let oid = be(&engine.execute(&create, now).unwrap().retrieved[0]);
    let addr = ObjectAddr::new(PID, oid);
    let get = with_get(req(Command::GetAttributes { addr }), &[AttrId::new(1, 0x82), AttrId::new(3, 5)]);
    for _ in 0..1000 {
        engine.execute(&get, now).unwrap();
    }
    let mut samples = Vec::with_capacity(iterations);
    for i in 0..iterations {
        let t = Instant::now();
        let r = engine.execute(&get, now + i as u64 / 1000).unwrap();
        samples.push(t.elapsed().as_nanos() as u64);
        assert_eq!(r.retrieved.len(), 2);
    }
    samples.sort_unstable();
    eprintln!(
        "engine GET ATTRIBUTES (2 attrs, user object): n={} p50={:.2}us p99={:.2}us max={:.2}us",
        iterations,
        percentile(&samples, 0.5) as f64 / 1000.0,
        percentile(&samples, 0.99) as f64 / 1000.0,
        *samples.last().unwrap() as f64 / 1000.0
    );
}
