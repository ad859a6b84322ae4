//! Goal: every message survives encode -> decode unchanged, and bounds are enforced before
//! allocation. Method: proptest strategies covering every request and reply variant, plus
//! hand-built hostile frames.

use proptest::prelude::*;
use tessera_layout::StripeLayout;
use tessera_mds_proto::limits::{FRAME_LEN_MAX, GROUPS_MAX, NAME_LEN_MAX};
use tessera_mds_proto::request::NewInode;
use tessera_mds_proto::*;

fn name() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9._é-]{1,40}"
}

fn ino() -> impl Strategy<Value = InodeId> {
    any::<u64>().prop_map(InodeId)
}

fn ts() -> impl Strategy<Value = Timespec> {
    (any::<i64>(), 0u32..1_000_000_000).prop_map(|(secs, nanos)| Timespec { secs, nanos })
}

fn new_inode() -> impl Strategy<Value = NewInode> {
    (any::<u32>(), any::<u32>(), any::<u32>()).prop_map(|(mode, uid, gid)| NewInode { mode, uid, gid })
}

fn hint() -> impl Strategy<Value = StripeHint> {
    (any::<u64>(), any::<u32>(), any::<Option<u32>>()).prop_map(|(stripe_unit, stripe_count, start_osd)| StripeHint { stripe_unit, stripe_count, start_osd })
}

fn attr() -> impl Strategy<Value = Attr> {
    (ino(), 1u8..=3, any::<[u32; 4]>(), any::<u64>(), [ts(), ts(), ts()], ino()).prop_map(|(ino, t, m, size, times, parent)| Attr {
        ino,
        file_type: FileType::from_code(t).unwrap(),
        mode: m[0],
        uid: m[1],
        gid: m[2],
        nlink: m[3],
        size,
        atime: times[0],
        mtime: times[1],
        ctime: times[2],
        parent,
    })
}

fn layout() -> impl Strategy<Value = FileLayout> {
    (1u64..1 << 20, prop::collection::vec((any::<u32>(), any::<u64>()), 1..9)).prop_map(|(unit, objs)| FileLayout {
        stripe: StripeLayout::new(unit, objs.len() as u32).unwrap(),
        objects: objs.into_iter().map(|(osd, object_id)| ObjectRef { osd, object_id }).collect(),
    })
}

/// A layout and a grant for it: none, or one credential per object.
fn layout_and_grant() -> impl Strategy<Value = (FileLayout, Grant)> {
    (layout(), any::<bool>(), any::<u8>()).prop_map(|(layout, secure, fill)| {
        let grant = if secure {
            (0..layout.objects.len())
                .map(|i| ObjectCredential { capability: [fill.wrapping_add(i as u8); 104], key: [fill ^ 0x5a; 32] })
                .collect()
        } else {
            Vec::new()
        };
        (layout, grant)
    })
}

fn request() -> impl Strategy<Value = Request> {
    let times = prop_oneof![
        (prop::option::of(ts()), prop::option::of(ts())).prop_map(|(atime, mtime)| (atime, mtime, false)),
        Just((None, None, true)),
    ];
    let set = (any::<[Option<u32>; 3]>(), times, any::<bool>()).prop_map(|(v, (atime, mtime, times_to_now), drop_privileges)| SetAttrs {
        mode: v[0],
        uid: v[1],
        gid: v[2],
        atime,
        mtime,
        times_to_now,
        drop_privileges,
    });
    prop_oneof![
        (ino(), name()).prop_map(|(parent, name)| Request::Lookup { parent, name }),
        ino().prop_map(|ino| Request::GetAttr { ino }),
        (ino(), set).prop_map(|(ino, changes)| Request::SetAttr { ino, changes }),
        (ino(), name(), new_inode()).prop_map(|(parent, name, new)| Request::Mkdir { parent, name, new }),
        (ino(), name()).prop_map(|(parent, name)| Request::Rmdir { parent, name }),
        (ino(), name(), new_inode(), prop::option::of(hint())).prop_map(|(parent, name, new, stripe)| Request::Create { parent, name, new, stripe }),
        (ino(), name()).prop_map(|(parent, name)| Request::Unlink { parent, name }),
        (ino(), name(), ino(), name()).prop_map(|(a, b, c, d)| Request::Rename { src_parent: a, src_name: b, dst_parent: c, dst_name: d }),
        (ino(), name(), "[ -~]{0,200}", new_inode()).prop_map(|(parent, name, target, new)| Request::Symlink { parent, name, target, new }),
        ino().prop_map(|ino| Request::ReadLink { ino }),
        (ino(), prop::option::of(name()), 0u32..=1024).prop_map(|(dir, after, max_entries)| Request::ReadDir { dir, after, max_entries }),
        (ino(), any::<u64>()).prop_map(|(ino, size)| Request::Truncate { ino, size }),
        ino().prop_map(|ino| Request::GetLayout { ino }),
        (ino(), prop::option::of(hint())).prop_map(|(dir, hint)| Request::SetDirStripe { dir, hint }),
        ino().prop_map(|dir| Request::GetDirStripe { dir }),
        Just(Request::StatFs),
        Just(Request::ClusterMap),
        Just(Request::OsdUsage),
        (any::<bool>(), any::<u64>()).prop_map(|(remove, older_than_secs)| Request::Repair { remove, older_than_secs }),
        (any::<u64>(), any::<u64>()).prop_map(|(d, i)| Request::PeerHasEntry { dir: InodeId(d), ino: InodeId(i) }),
        Just(Request::OsdsDown),
        Just(Request::PeersDown),
        Just(Request::Challenge),
        (caller(), any::<[u8; 16]>(), any::<[u8; 32]>()).prop_map(|(caller, challenge, mac)| Request::Authenticate { proof: Proof { caller, challenge, mac } }),
        (ino(), new_inode(), prop::option::of(hint())).prop_map(|(parent, new, stripe)| Request::PeerCreateDir { parent, new, stripe }),
        (any::<u64>(), any::<bool>()).prop_map(|(token, take)| Request::PeerRenameLock { token, take }),
        ino().prop_map(|ino| Request::PeerRemoveDir { ino }),
    ]
}

fn reply() -> impl Strategy<Value = Result<Reply, FsError>> {
    let ok = prop_oneof![
        Just(Reply::Done),
        attr().prop_map(Reply::Attr),
        (attr(), layout_and_grant()).prop_map(|(attr, (layout, grant))| Reply::Created { attr, layout, grant }),
        "[ -~]{0,100}".prop_map(Reply::Link),
        (prop::collection::vec((name(), attr()).prop_map(|(name, attr)| DirEntry { name, attr }), 0..20), any::<bool>())
            .prop_map(|(entries, more)| Reply::DirPage { entries, more }),
        layout_and_grant().prop_map(|(layout, grant)| Reply::Layout { layout, grant }),
        prop::collection::vec((any::<(u64, u64)>(), prop::option::of(any::<(u64, u64, u64)>())), 0..8).prop_map(|v| Reply::OsdUsage(
            v.into_iter()
                .map(|((total_bytes, used_bytes), fs)| OsdUsage {
                    total_bytes,
                    used_bytes,
                    fs: fs.map(|(id, size_bytes, avail_bytes)| FsSpace { id, size_bytes, avail_bytes }),
                })
                .collect()
        )),
        prop::option::of(hint()).prop_map(Reply::DirStripe),
        (
            prop::collection::vec(any::<(u32, u64)>(), 0..20),
            0u64..1000,
            prop::collection::vec(any::<u64>(), 0..8),
            prop::collection::vec((any::<u64>(), name(), any::<u64>()), 0..8),
            prop::collection::vec(any::<(u64, u32, u64)>(), 0..8)
        )
            .prop_map(|(v, extra, unlinked, dangling, missing)| Reply::Repair {
                found: v.len() as u64 + extra,
                orphans: v.into_iter().map(|(osd, object_id)| ObjectRef { osd, object_id }).collect(),
                unlinked: unlinked.into_iter().map(InodeId).collect(),
                dangling: dangling.into_iter().map(|(dir, name, ino)| DanglingEntry { dir: InodeId(dir), name, ino: InodeId(ino) }).collect(),
                missing: missing.into_iter().map(|(ino, osd, object_id)| MissingObject { ino: InodeId(ino), object: ObjectRef { osd, object_id } }).collect(),
            }),
        prop::collection::btree_set(0u32..1024, 0..10).prop_map(|set| Reply::OsdsDown(set.into_iter().collect())),
        prop::collection::btree_set(0u32..64, 0..10).prop_map(|set| Reply::PeersDown(set.into_iter().collect())),
        any::<[u8; 16]>().prop_map(Reply::Challenge),
        Just(Reply::Sealed),
        any::<[u64; 4]>().prop_map(|v| Reply::StatFs(StatFs { files: v[0], directories: v[1], symlinks: v[2], pending_removals: v[3] })),
        (prop::collection::vec("[a-z0-9.:]{1,30}", 0..5), prop::collection::vec(("[a-z0-9.:]{1,30}", any::<u64>()), 0..5)).prop_map(
            |(servers, osds)| Reply::ClusterMap(ClusterMap {
                servers,
                osds: osds.into_iter().map(|(addr, partition_id)| OsdInfo { addr, partition_id }).collect()
            })
        ),
    ];
    prop_oneof![ok.prop_map(Ok), prop::sample::select(FsError::ALL.to_vec()).prop_map(Err)]
}

fn caller() -> impl Strategy<Value = Caller> {
    (any::<u32>(), any::<u32>(), prop::collection::vec(any::<u32>(), 0..=GROUPS_MAX)).prop_map(|(uid, gid, groups)| Caller { uid, gid, groups })
}

proptest! {
    #[test]
    fn requests_round_trip(request_id in any::<u64>(), c in caller(), r in request()) {
        let frame = Frame { request_id, message: Message::Request(c, r) };
        let bytes = encode_frame(&frame);
        prop_assert_eq!(decode_frame(&bytes), Ok(frame));
        prop_assert!(tessera_mds_proto::fuzzing::decode_frame(&bytes));
    }

    #[test]
    fn replies_round_trip(request_id in any::<u64>(), r in reply()) {
        let frame = Frame { request_id, message: Message::Reply(r) };
        let bytes = encode_frame(&frame);
        prop_assert_eq!(decode_frame(&bytes), Ok(frame));
    }

    /// Goal: a truncated frame is an error, never a panic or a different message.
    #[test]
    fn every_prefix_is_refused(c in caller(), r in request()) {
        let bytes = encode_frame(&Frame { request_id: 1, message: Message::Request(c, r) });
        for cut in 0..bytes.len() {
            prop_assert!(decode_frame(&bytes[..cut]).is_err());
        }
    }
}

#[test]
fn hostile_lengths_are_refused_before_allocation() {
    // Frame length over the cap.
    let header = ((FRAME_LEN_MAX as u32) + 1).to_be_bytes();
    assert!(matches!(frame_body_len(header), Err(DecodeError::FrameLength { .. })));
    assert!(matches!(frame_body_len([0, 0, 0, 3]), Err(DecodeError::FrameLength { .. })));

    // A readdir reply announcing 1000 entries in 12 bytes: refused by the count check.
    let mut body = vec![0u8; 8];
    body.push(2); // reply
    body.extend_from_slice(&[0, 4]); // ok, DIR_PAGE
    body.extend_from_slice(&1000u32.to_be_bytes());
    assert!(matches!(Frame::decode_body(&body), Err(DecodeError::Truncated { .. })));

    // A name one byte over NAME_LEN_MAX answers NameTooLong.
    let mut body = vec![0u8; 8];
    body.push(1);
    body.extend_from_slice(&[0; 9]); // the caller: uid 0, gid 0, no other group
    body.push(1); // LOOKUP
    body.extend_from_slice(&1u64.to_be_bytes());
    body.extend_from_slice(&((NAME_LEN_MAX + 1) as u16).to_be_bytes());
    body.extend(std::iter::repeat_n(b'a', NAME_LEN_MAX + 1));
    let err = Frame::decode_body(&body).unwrap_err();
    assert_eq!(err.fs_error(), FsError::NameTooLong);
    assert_eq!(Frame::request_id_of(&body), Some(0));

    // A caller announcing more groups than GROUPS_MAX is refused before they are read.
    let mut body = vec![0u8; 8];
    body.push(1);
    body.extend_from_slice(&[0; 8]);
    body.push(GROUPS_MAX as u8 + 1);
    body.extend(std::iter::repeat_n(0u8, 4 * (GROUPS_MAX + 1) + 1));
    assert!(matches!(Frame::decode_body(&body), Err(DecodeError::TooLong { what: "group count", at: 17, .. })));
}

/// Goal: a setattr's flags byte holds only known flags, and never asks for given times and the
/// server's clock at once.
#[test]
fn setattr_flags_are_known_and_consistent() {
    let encoded = |changes: SetAttrs| {
        let mut w = wire::Writer::default();
        changes.encode(&mut w);
        w.buf
    };
    let now = SetAttrs { times_to_now: true, ..SetAttrs::default() };
    let mut bytes = encoded(now);
    assert_eq!(SetAttrs::decode(&mut wire::Reader::new(&bytes)), Ok(now));
    *bytes.last_mut().unwrap() = 4;
    assert!(matches!(SetAttrs::decode(&mut wire::Reader::new(&bytes)), Err(DecodeError::UnknownTag { what: "setattr flag", value: 4, .. })));
    let mut both = encoded(SetAttrs { mtime: Some(Timespec { secs: 1, nanos: 0 }), ..SetAttrs::default() });
    *both.last_mut().unwrap() = 1;
    assert!(matches!(SetAttrs::decode(&mut wire::Reader::new(&both)), Err(DecodeError::Invalid { .. })));
}

#[test]
fn inode_ids_carry_their_server() {
    let i = InodeId::new(5, 42);
    assert_eq!((i.server(), i.local()), (5, 42));
    assert_eq!(InodeId::ROOT.server(), 0);
}

/// Goal: a grant that is neither empty nor one credential per object is refused, as is one
/// announcing more credentials than bytes follow.
#[test]
fn grants_must_match_their_layout() {
    let layout = FileLayout { stripe: StripeLayout::new(1 << 16, 2).unwrap(), objects: vec![ObjectRef { osd: 0, object_id: 1 }, ObjectRef { osd: 1, object_id: 2 }] };
    let one = [ObjectCredential { capability: [1; 104], key: [2; 32] }];
    let mut w = wire::Writer::default();
    Reply::Layout { layout: layout.clone(), grant: Vec::new() }.encode(&mut w);
    // Swap the empty grant's count for 1 and append one entry: a count mismatch.
    let mut bytes = w.buf.clone();
    let n = bytes.len();
    bytes[n - 4..].copy_from_slice(&1u32.to_be_bytes());
    bytes.extend_from_slice(&one[0].capability);
    bytes.extend_from_slice(&one[0].key);
    let mut framed = vec![0u8; 8];
    framed.push(2);
    framed.push(0);
    framed.extend_from_slice(&bytes);
    assert!(matches!(Frame::decode_body(&framed), Err(DecodeError::Invalid { .. })));
    // Two announced, one present: truncated, before any allocation.
    let cut = framed.len();
    framed[cut - 136 - 4..cut - 136].copy_from_slice(&2u32.to_be_bytes());
    assert!(matches!(Frame::decode_body(&framed), Err(DecodeError::Truncated { .. })));
}

/// Goal: a list of down OSDs is ascending, without repeats, and below the OSD limit; anything
/// else is refused rather than shown to a user as if it were the server's record.
#[test]
fn down_osd_lists_must_be_ascending_and_in_range() {
    let reply = |osds: &[u32]| {
        let mut body = vec![0u8; 8];
        body.push(2); // reply
        body.extend_from_slice(&[0, 11]); // ok, OSDS_DOWN
        body.extend_from_slice(&(osds.len() as u32).to_be_bytes());
        for osd in osds {
            body.extend_from_slice(&osd.to_be_bytes());
        }
        Frame::decode_body(&body)
    };
    assert!(matches!(reply(&[1, 4]), Ok(Frame { message: Message::Reply(Ok(Reply::OsdsDown(ref v))), .. }) if v == &[1, 4]));
    for bad in [&[4, 1][..], &[2, 2], &[tessera_mds_proto::limits::OSDS_MAX]] {
        assert!(matches!(reply(bad), Err(DecodeError::Invalid { .. })), "{bad:?} was accepted");
    }
}
