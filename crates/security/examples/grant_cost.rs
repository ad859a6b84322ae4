//! What one object's credential costs the security manager: the capability key of a user
//! object's capability under a working key (`OsdKeys::capability_key`), the HMAC the metadata
//! server computes for every object of every file it creates or opens. Median of 20 batches of
//! 10,000, in ns.
//!
//! `cargo run --release -p tessera-security --example grant_cost`
use std::time::Instant;

use tessera_security::capability::{Capability, ObjectType, Permissions, Scope, SecurityMethod};
use tessera_security::keys::{KEY_ID_LEN, SEED_LEN};
use tessera_security::{Key, KeySlot, OsdKeys};

fn main() {
    let pid = 0x10000;
    let mut keys = OsdKeys::new([7; 20], Key([0x41; 32]));
    for slot in [KeySlot::Root, KeySlot::Partition(pid), KeySlot::Working(pid, 0)] {
        let (command, _) = keys.key_command(slot, [1; KEY_ID_LEN], [2; SEED_LEN], SecurityMethod::CmdRsp, 0).unwrap();
        keys.record(&command).unwrap();
    }
    let mut batches = Vec::new();
    let mut sink = 0u8;
    for batch in 0..20u64 {
        let t = Instant::now();
        for i in 0..10_000u64 {
            let mut cap = Capability::new(SecurityMethod::CmdRsp, ObjectType::User, Scope::Object, pid, batch * 10_000 + i, Permissions::READ);
            cap.expires_ms = 1_800_000_000_000;
            sink ^= keys.capability_key(&cap).unwrap().0[0];
        }
        batches.push(t.elapsed().as_nanos() as f64 / 10_000.0);
    }
    batches.sort_by(f64::total_cmp);
    println!("capability key per object: median {:.0} ns (checksum {sink})", batches[10]);
}
