//! The CPU each capability security method adds to a 4 KiB command, without the network: the
//! real OSD client signing and checking, over `DirectTransport`, into the real OSD logical unit
//! (engine on a temporary SQLite store, security gate), one store per method and NOSEC as the
//! baseline in the same run. Rounds interleave the methods; printed: NOSEC's time per command
//! and each method's extra, medians over rounds (docs/benchmarks.md, capability security).
//!
//! `cargo run --release -p tessera-cli --example security_in_process -- [write|read] [per round] [rounds] [methods]`
//! (`methods`: comma-separated names, e.g. `capkey,cmdrsp`, to profile fewer; NOSEC always runs)
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use tessera_engine::{Engine, EngineConfig};
use tessera_initiator::osd_client::OsdClient;
use tessera_osd_proto::pages::{value_u64, CURRENT_COMMAND_OBJECT_ID, CURRENT_COMMAND_PARTITION_ID};
use tessera_osd_proto::{Command, DataLayout, GetAttrs, OsdRequestBuilder};
use tessera_scsi::DirectTransport;
use tessera_security::{Key, KeySlot, OsdKeys, Permissions, SecurityMethod};
use tessera_target::osd_lu::OsdCommandSet;
use tessera_target::security_gate::TargetSecurity;
use tessera_target::spc::ScsiFront;
use tessera_types::ObjectAddr;

type Direct = DirectTransport<ScsiFront<Arc<OsdCommandSet>>>;
const MASTER: Key = Key([0x5A; 32]);

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

fn subject(m: SecurityMethod, dir: &std::path::Path) -> (OsdClient<Direct>, ObjectAddr) {
    let engine = Engine::open(dir, EngineConfig::default()).unwrap();
    let system_id = engine.system_id();
    let set = if m == SecurityMethod::NoSec { OsdCommandSet::new(engine) } else { OsdCommandSet::with_security(engine, TargetSecurity::new(m, Some(MASTER))).unwrap() };
    let device = Arc::new(ScsiFront::new(Arc::new(set)));
    let mut client = OsdClient::new(DirectTransport::new(device, "iqn.2026-11.org.tessera:test,i,0x1", 1), 0);
    if m == SecurityMethod::NoSec {
        let pid = client.create_partition(None).unwrap();
        let oid = client.create_one(pid).unwrap();
        return (client, ObjectAddr::new(pid, oid));
    }
    let mut keys = OsdKeys::new(system_id, MASTER);
    client.establish_key(&mut keys, KeySlot::Root, m).unwrap();
    let exp = now_ms() + 3_600_000;
    let root = keys.credential(keys.root_capability(m, Permissions::CREATE, exp)).unwrap();
    let get = |id| GetAttrs::List { ids: vec![id], allocation_len: 64 };
    let pid = value_u64(client.execute_as(&OsdRequestBuilder::new(Command::CreatePartition { requested: None }).get_attrs(get(CURRENT_COMMAND_PARTITION_ID)), &root).unwrap().attr(CURRENT_COMMAND_PARTITION_ID).unwrap()).unwrap();
    client.establish_key(&mut keys, KeySlot::Partition(pid), m).unwrap();
    client.establish_key(&mut keys, KeySlot::Working(pid, 0), m).unwrap();
    let all = keys.credential(keys.partition_capability(m, pid, Permissions::ALL, exp).unwrap()).unwrap();
    let create = OsdRequestBuilder::new(Command::Create { partition_id: pid, requested: None, count: 1 }).get_attrs(get(CURRENT_COMMAND_OBJECT_ID));
    let oid = value_u64(client.execute_as(&create, &all).unwrap().attr(CURRENT_COMMAND_OBJECT_ID).unwrap()).unwrap();
    let cred = keys.credential(keys.object_capability(m, pid, oid, Permissions::READ | Permissions::WRITE, exp, 0).unwrap()).unwrap();
    client.set_credentials(Some(Arc::new(cred)));
    (client, ObjectAddr::new(pid, oid))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let write = args.get(1).is_none_or(|a| a == "write");
    let per = args.get(2).map_or(2000, |a| a.parse().unwrap());
    let rounds = args.get(3).map_or(9, |a| a.parse().unwrap());
    let all = [SecurityMethod::NoSec, SecurityMethod::CapKey, SecurityMethod::CmdRsp, SecurityMethod::AllData];
    let wanted = args.get(4).map(|a| a.to_ascii_uppercase());
    let methods: Vec<SecurityMethod> = all.into_iter().filter(|m| *m == SecurityMethod::NoSec || wanted.as_ref().is_none_or(|w| w.split(',').any(|n| n == m.name()))).collect();
    let dirs: Vec<_> = methods.iter().map(|_| tempfile::tempdir().unwrap()).collect();
    let subjects: Vec<_> = methods.iter().zip(&dirs).map(|(m, d)| subject(*m, d.path())).collect();
    let data = vec![7u8; 4096];
    for (c, a) in &subjects {
        c.write_layout(*a, 0, &data, DataLayout::Contiguous, false).unwrap();
    }
    let mut extras: Vec<Vec<f64>> = vec![Vec::new(); methods.len()];
    let mut base: Vec<f64> = Vec::new();
    for _ in 0..rounds {
        let mut t = Vec::new();
        for (c, a) in &subjects {
            let s = Instant::now();
            for _ in 0..per {
                if write {
                    c.write_layout(*a, 0, &data, DataLayout::Contiguous, false).unwrap();
                } else {
                    c.read_layout(*a, 0, 4096, DataLayout::Contiguous).unwrap();
                }
            }
            t.push(s.elapsed().as_secs_f64() * 1e6 / per as f64);
        }
        base.push(t[0]);
        for i in 0..methods.len() {
            extras[i].push(t[i] - t[0]);
        }
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    print!("{} nosec {:.2} us;", if write { "write" } else { "read" }, med(&mut base));
    for (i, m) in methods.iter().enumerate().skip(1) {
        print!(" {} +{:.2}", m.name(), med(&mut extras[i]));
    }
    println!();
}
