//! What each stage of a CMDRSP 4 KiB WRITE costs, sans-IO, hot and then with cold caches (an
//! 8 MiB sweep before each command, as the network stack and other processes leave them between
//! commands): the client's encode and sign, the OSD's decode and checks (with its replay list
//! filled first) and seal, and the client's check of a prepared GOOD answer. Medians and 90th
//! percentiles in ns (docs/benchmarks.md, capability security).
//!
//! `cargo run --release -p tessera-security --example stage_costs -- [nonces already in the list]`
use std::time::Instant;
use tessera_osd_proto::{continuation_segment, decode_request, Command, DataLayout, OsdRequestBuilder, ReplyPlacement};
use tessera_security::check::{Arrived, Checker, CheckerConfig, ObjectFacts};
use tessera_security::icv::capability_key;
use tessera_security::keys::derive;
use tessera_security::nonce::{Nonce, NonceWindow};
use tessera_security::policy::requirement;
use tessera_security::*;
use tessera_types::ObjectAddr;

const NOW: u64 = 1_800_000_000_000;
const SID: [u8; 20] = [0x11; 20];
const PID: u64 = 0x10000;
const OID: u64 = 0x10010;

fn main() {
    let wk = derive(&Key([1; 32]), KeySlot::Working(PID, 0), &[0; 7], &[4; 20]);
    let method = SecurityMethod::CmdRsp;
    let checker = Checker::new(CheckerConfig { required: method, nonce_window: NonceWindow::default() }, SID, [(KeySlot::Working(PID, 0), wk.clone())], NOW - 100_000);
    let mut c = Capability::new(method, ObjectType::User, Scope::Object, PID, OID, Permissions::READ | Permissions::WRITE);
    c.expires_ms = NOW + 600_000;
    let cred = Credential::new(c.clone(), &capability_key(&wk, &c.encode(), &SID));
    let facts = |_: ObjectAddr| Ok(Some(ObjectFacts { object_type: ObjectType::User, created_ms: 5, policy_tag: 0 }));
    let data = vec![7u8; 4096];
    let fill: u64 = std::env::args().nth(1).map_or(200_000, |a| a.parse().unwrap());
    let mut junk = vec![0u8; 8 << 20];
    let mut n = 0u64;
    for mode in ["hot", "cold"] {
        let mut t = [Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new()];
        for i in 0..(fill + 3000) {
            let now = NOW + i / 16; // 16 commands a ms
            n += 1;
            let timed = i >= fill;
            if timed && mode == "cold" {
                for j in (0..junk.len()).step_by(64) { junk[j] = junk[j].wrapping_add(1); }
            }
            let t0 = Instant::now();
            let b = OsdRequestBuilder::new(Command::Write { addr: ObjectAddr::new(PID, OID), offset: 0, len: 4096, layout: DataLayout::Contiguous }).data(&data);
            let mut enc = b.encode().unwrap();
            let t1 = Instant::now();
            let mut signed = cred.sign(&mut enc, Nonce::new(now, n)).unwrap();
            let t2 = Instant::now();
            let dout = &data[..];
            let (request, placement) = decode_request(&enc.cdb, dout).unwrap();
            let arrived = Arrived { cdb: &enc.cdb, data_out: dout, continuation: continuation_segment(request.service_action, &enc.cdb, dout), data_in_len: enc.data_in_len };
            let auth = checker.authorize(&arrived, &requirement(&request), now, &facts).unwrap();
            let t3 = Instant::now();
            let mut din = Vec::new();
            let sense = checker.seal(&auth, 0, None, &placement, &mut din);
            let t4 = Instant::now();
            signed.prepare_good_answer(&enc.placement);
            let t5 = Instant::now();
            signed.verify(0, sense.as_ref(), &ReplyPlacement { data_len_max: 0, retrieved: None }, &mut din).unwrap();
            let t6 = Instant::now();
            if timed {
                let ns = |a: Instant, b: Instant| (b - a).as_nanos() as f64;
                t[0].push(ns(t0, t1)); t[1].push(ns(t1, t2)); t[2].push(ns(t2, t3)); t[3].push(ns(t3, t4)); t[4].push(ns(t5, t6));
            }
        }
        let names = ["encode", "sign", "osd decode+authorize", "osd seal", "client verify (prepared)"];
        for (k, v) in t.iter_mut().enumerate() {
            v.sort_by(f64::total_cmp);
            println!("{mode} {:28} median {:6.0} ns  p90 {:6.0}", names[k], v[v.len() / 2], v[v.len() * 9 / 10]);
        }
    }
}
