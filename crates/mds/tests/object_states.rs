//! Goal: `DataObjects::data_states`, which has a file's GET ATTRIBUTES in flight at once,
//! answers each object in order exactly as `data_state` one at a time does: lengths where the
//! object exists, the refusal where it does not, `UnknownOsd` for an index past the cluster
//! map, and the others still answered after a failure, also past one chain's worth of
//! commands. `remove_all` likewise removes exactly the objects named, an absent one counting
//! as removed, and `set_logical_lens` gives each object its own length. Method: three real OSD targets on loopback, reached over iSCSI through the
//! sessions the metadata server uses (`ReconnectingSession`).

use std::sync::Arc;

use tessera_engine::{Engine, EngineConfig};
use tessera_initiator::iscsi::{ReconnectingSession, SessionConfig};
use tessera_initiator::osd_client::OsdClient;
use tessera_mds::{DataObjects, ObjectData, ObjectsError, OsdObjects};
use tessera_mds_proto::ObjectRef;
use tessera_target::iscsi_server::{TargetConfig, TargetServer};
use tessera_target::osd_lu::OsdCommandSet;
use tessera_target::spc::ScsiFront;

const PARTITION: u64 = 0x10000;

/// What a state or its failure shows, comparable.
fn shown(r: &Result<ObjectData, ObjectsError>) -> String {
    match r {
        Ok(d) => format!("length {}", d.logical_len),
        Err(ObjectsError::UnknownOsd(i)) => format!("unknown osd {i}"),
        Err(e) if e.refused() => "refused".into(),
        Err(e) => format!("failed: {e}"),
    }
}

#[test]
fn states_asked_together_match_states_asked_one_by_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut nodes = Vec::new();
    let mut servers = Vec::new();
    for i in 0..3 {
        let engine = Engine::open(&dir.path().join(format!("osd{i}")), EngineConfig::default()).unwrap();
        let device = Arc::new(ScsiFront::new(Arc::new(OsdCommandSet::new(engine))));
        let name = format!("iqn.2026-11.org.tessera.test:states{i}");
        let handle = TargetServer::bind(TargetConfig::new(&name, "127.0.0.1:0"), device).unwrap().spawn();
        let addr = handle.local_addr().unwrap().to_string();
        let client = OsdClient::new(ReconnectingSession::new(&addr, SessionConfig::new("iqn.2026-11.org.tessera.test:mds", &name)), 0);
        client.create_partition(Some(PARTITION)).unwrap();
        nodes.push((client, PARTITION));
        servers.push(handle);
    }
    let objects = OsdObjects::new(nodes);
    // 40 objects round the three OSDs, each with its own length.
    let made: Vec<ObjectRef> = (0..40u64).map(|i| ObjectRef { osd: (i % 3) as u32, object_id: 0x10100 + i }).collect();
    objects.create(&made).unwrap();
    for (i, o) in made.iter().enumerate() {
        objects.set_logical_len(*o, 1000 + i as u64 * 17).unwrap();
    }

    let mut asked = made.clone();
    asked.insert(3, ObjectRef { osd: 1, object_id: 0x19999 }); // never made
    asked.insert(0, ObjectRef { osd: 7, object_id: 0x10100 }); // no such OSD: fails before it is sent
    asked.insert(20, ObjectRef { osd: 5, object_id: 0x10101 });
    asked.push(made[0]);
    let together: Vec<String> = objects.data_states(&asked).iter().map(shown).collect();
    let one_by_one: Vec<String> = asked.iter().map(|o| shown(&objects.data_state(*o))).collect();
    assert_eq!(together, one_by_one);
    assert_eq!(together[0], "unknown osd 7");
    assert_eq!(together[1], "length 1000");
    assert_eq!(together[4], "refused", "the object never made");
    assert_eq!(together[20], "unknown osd 5");
    assert_eq!(together.last().unwrap(), "length 1000");
    assert_eq!(together.iter().filter(|s| s.starts_with("length")).count(), 41);
    assert!(objects.data_states(&[]).is_empty());

    // Removes in flight together: an absent object counts as removed, an unknown OSD fails,
    // and exactly the objects named are gone.
    let mut gone: Vec<ObjectRef> = made[..20].to_vec();
    gone.insert(5, ObjectRef { osd: 9, object_id: 0x10100 });
    gone.push(ObjectRef { osd: 1, object_id: 0x19999 });
    let outcomes: Vec<String> = objects
        .remove_all(&gone)
        .iter()
        .map(|r| match r {
            Ok(()) => "removed".to_string(),
            Err(e) => e.to_string(),
        })
        .collect();
    let mut expected = vec!["removed".to_string(); gone.len()];
    expected[5] = ObjectsError::UnknownOsd(9).to_string();
    assert_eq!(outcomes, expected);
    let after: Vec<String> = objects.data_states(&made).iter().map(shown).collect();
    assert!(after[..20].iter().all(|s| s == "refused"), "{after:?}");
    assert!(after[20..].iter().enumerate().all(|(i, s)| *s == format!("length {}", 1000 + (i as u64 + 20) * 17)), "{after:?}");

    // Lengths set together: each object its own, an unknown OSD failing alone.
    let mut lengths: Vec<(ObjectRef, u64)> = made[20..].iter().enumerate().map(|(i, o)| (*o, 5 + i as u64 * 3)).collect();
    lengths.insert(2, (ObjectRef { osd: 6, object_id: 0x10100 }, 1));
    let outcomes: Vec<bool> = objects.set_logical_lens(&lengths).iter().map(Result::is_ok).collect();
    assert_eq!(outcomes.iter().filter(|ok| !**ok).count(), 1);
    assert!(!outcomes[2]);
    let now: Vec<String> = objects.data_states(&made[20..]).iter().map(shown).collect();
    let expected: Vec<String> = (0..20u64).map(|i| format!("length {}", 5 + i * 3)).collect();
    assert_eq!(now, expected);
    for s in servers {
        s.shutdown();
    }
}
