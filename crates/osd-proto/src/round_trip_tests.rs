//! Codec-level tests of the two directions together.
//!
//! Goal: `decode_request(encode(r)) == r` for every valid request, with the placement the
//! encoder announced; byte-exact CDB field positions from osd2-wire.md §2; each validation
//! rule answering its sense. Method: proptest over generated valid requests (every command,
//! every layout, page and list attribute formats), plus hand-built CDBs.

use proptest::prelude::*;
use tessera_scsi::FieldPointer;
use tessera_types::limits::TRANSFER_LEN_MAX;
use tessera_types::ObjectAddr;

use crate::attr::{AttrId, Attribute, GetAttrs};
use crate::builder::OsdRequestBuilder;
use crate::command::*;
use crate::decode::{continuation_before_data, decode_before_data, decode_before_data_with_continuation, decode_request};
use crate::error::{CdbField, DecodeError, ParamField};

const FIRST: u64 = 0x10000;

fn assignable() -> impl Strategy<Value = u64> {
    prop_oneof![FIRST..FIRST + 100, FIRST..=u64::MAX]
}

fn requested() -> impl Strategy<Value = Option<u64>> {
    proptest::option::of(FIRST..u64::MAX - 0x10000)
}

fn member() -> impl Strategy<Value = ObjectAddr> {
    (assignable(), assignable()).prop_map(|(p, o)| ObjectAddr::new(p, o))
}

fn any_object() -> impl Strategy<Value = ObjectAddr> {
    prop_oneof![Just(ObjectAddr::ROOT), assignable().prop_map(ObjectAddr::partition), member()]
}

fn attr_id() -> impl Strategy<Value = AttrId> {
    (any::<u32>(), any::<u32>()).prop_map(|(p, n)| AttrId::new(p, n))
}

fn scope(everything: bool) -> impl Strategy<Value = FlushScope> {
    let n: usize = if everything { 3 } else { 2 };
    (0..n).prop_map(|c| [FlushScope::DataAndAttributes, FlushScope::AttributesOnly, FlushScope::Everything][c])
}

/// A data layout and a CDB length it is valid for.
fn layout_and_len(max: u64) -> impl Strategy<Value = (DataLayout, u64)> {
    prop_oneof![
        (0..=max).prop_map(|len| (DataLayout::Contiguous, len)),
        proptest::collection::vec((0u64..1 << 30, 1u64..=(max / 4).max(1)), 1..5).prop_map(|v| {
            let len = v.iter().map(|e| e.1).sum();
            (DataLayout::List(v.into_iter().map(|(offset, len)| Extent { offset, len }).collect()), len)
        }),
        (1u64..=16, 0u64..100, 0..=max).prop_map(|(block_len, gap, len)| (DataLayout::Strided { stride: block_len + gap, block_len }, len)),
        (1u64..=8, proptest::collection::vec((1u64..4, 0u64..50), 1..4), 0u64..8).prop_map(|(block_len, raw, short)| {
            let mut span = block_len;
            let mut levels = Vec::new();
            for (count, gap) in raw {
                let stride = span + gap;
                if count > 1 {
                    span += (count - 1) * stride;
                }
                levels.push((count, stride));
            }
            let blocks: u64 = levels.iter().map(|l| l.0).product();
            let len = blocks * block_len - short.min(block_len - 1);
            (DataLayout::Nested { block_len, levels }, len)
        }),
    ]
}

fn criteria() -> impl Strategy<Value = QueryCriteria> {
    (any::<bool>(), proptest::collection::vec((attr_id(), proptest::collection::vec(any::<u8>(), 0..8), proptest::collection::vec(any::<u8>(), 0..8)), 0..4))
        .prop_map(|(match_all, c)| QueryCriteria { match_all, conditions: c.into_iter().map(|(attr, min, max)| QueryCondition { attr, min, max }).collect() })
}

fn atomic_attr() -> impl Strategy<Value = AttrId> {
    (0u32..0xFFFF_FFFE, 0u32..0xFFFF_FFFF).prop_map(|(p, n)| AttrId::new(p, n))
}

const DATA_IN_MAX: u64 = 1 << 27;

/// A valid command and the write data length it needs.
fn command() -> impl Strategy<Value = (Command, u64)> {
    let offset = 0u64..1 << 40;
    prop_oneof![
        any::<u64>().prop_map(|c| (Command::FormatOsd { capacity_bytes: c }, 0)),
        (assignable(), requested(), 1u16..=u16::MAX).prop_map(|(partition_id, requested, count)| (Command::Create { partition_id, requested, count }, 0)),
        member().prop_map(|addr| (Command::Remove { addr }, 0)),
        requested().prop_map(|requested| (Command::CreatePartition { requested }, 0)),
        assignable().prop_map(|partition_id| (Command::RemovePartition { partition_id }, 0)),
        (assignable(), requested()).prop_map(|(partition_id, requested)| (Command::CreateCollection { partition_id, requested }, 0)),
        (member(), any::<bool>()).prop_map(|(addr, force)| (Command::RemoveCollection { addr, force }, 0)),
        (prop_oneof![Just(0u64), assignable()], any::<u32>(), any::<u64>(), 0..DATA_IN_MAX, any::<bool>()).prop_map(
            |(partition_id, list_id, initial_oid, allocation_len, with_attrs)| (Command::List { partition_id, list_id, initial_oid, allocation_len, with_attrs }, 0)
        ),
        (member(), any::<u32>(), any::<u64>(), 0..DATA_IN_MAX, any::<bool>()).prop_map(
            |(addr, list_id, initial_oid, allocation_len, with_attrs)| (Command::ListCollection { addr, list_id, initial_oid, allocation_len, with_attrs }, 0)
        ),
        (member(), offset.clone(), layout_and_len(DATA_IN_MAX)).prop_map(|(addr, offset, (layout, len))| (Command::Read { addr, offset, len, layout }, 0)),
        (member(), offset.clone(), layout_and_len(64)).prop_map(|(addr, offset, (layout, len))| (Command::Write { addr, offset, len, layout }, len)),
        (assignable(), requested(), offset.clone(), layout_and_len(64))
            .prop_map(|(partition_id, requested, offset, (layout, len))| (Command::CreateAndWrite { partition_id, requested, offset, len, layout }, len)),
        (member(), 0u64..64).prop_map(|(addr, len)| (Command::Append { addr, len }, len)),
        (member(), offset.clone(), any::<u32>()).prop_map(|(addr, offset, len)| (Command::Punch { addr, offset, len: len as u64 }, 0)),
        (member(), offset.clone(), any::<u32>()).prop_map(|(addr, offset, len)| (Command::Clear { addr, offset, len: len as u64 }, 0)),
        (member(), scope(false)).prop_map(|(addr, scope)| (Command::Flush { addr, scope }, 0)),
        (member(), scope(true)).prop_map(|(addr, scope)| (Command::FlushCollection { addr, scope }, 0)),
        (assignable(), scope(true)).prop_map(|(partition_id, scope)| (Command::FlushPartition { partition_id, scope }, 0)),
        scope(true).prop_map(|scope| (Command::FlushOsd { scope }, 0)),
        any_object().prop_map(|addr| (Command::GetAttributes { addr }, 0)),
        any_object().prop_map(|addr| (Command::SetAttributes { addr }, 0)),
        (member(), 0..DATA_IN_MAX, criteria()).prop_map(|(addr, allocation_len, criteria)| (Command::Query { addr, allocation_len, criteria }, 0)),
        member().prop_map(|addr| (Command::GetMemberAttributes { addr }, 0)),
        member().prop_map(|addr| (Command::SetMemberAttributes { addr }, 0)),
        member().prop_map(|addr| (Command::RemoveMemberObjects { addr }, 0)),
        (member(), offset.clone(), any::<u32>(), 0u8..3, 0..DATA_IN_MAX).prop_map(|(addr, offset, len, t, allocation_len)| (
            Command::ReadMap { addr, offset, len: len as u64, map_type: MapType::from_code(t).unwrap(), allocation_len },
            0
        )),
        (any_object(), atomic_attr(), any::<u64>(), any::<u64>()).prop_map(|(addr, attr, expected, new)| (Command::CompareAndSwap { addr, attr, expected, new }, 0)),
        (any_object(), atomic_attr(), any::<u64>()).prop_map(|(addr, attr, addend)| (Command::FetchAndAdd { addr, attr, addend }, 0)),
    ]
}

fn set_attrs(max: usize) -> impl Strategy<Value = Vec<Attribute>> {
    proptest::collection::vec((attr_id(), proptest::collection::vec(any::<u8>(), 0..24)), 0..=max)
        .prop_map(|v| v.into_iter().map(|(id, value)| Attribute { id, value }).collect())
}

fn attrs() -> impl Strategy<Value = (Vec<Attribute>, GetAttrs)> {
    prop_oneof![
        set_attrs(3).prop_map(|s| (s, GetAttrs::None)),
        (set_attrs(1), any::<u32>(), 0u32..1 << 20).prop_map(|(s, page, allocation_len)| (s, GetAttrs::Page { page, allocation_len })),
        (set_attrs(3), proptest::collection::vec(attr_id(), 0..5), 0u32..1 << 20)
            .prop_map(|(s, ids, allocation_len)| (s, GetAttrs::List { ids, allocation_len })),
    ]
}

#[derive(Debug, Clone)]
struct Spec {
    command: Command,
    data: Vec<u8>,
    options: Options,
    timestamps: TimestampsControl,
    set_attrs: Vec<Attribute>,
    get_attrs: GetAttrs,
}

fn spec() -> impl Strategy<Value = Spec> {
    (command(), any::<bool>(), any::<bool>(), any::<bool>(), attrs(), any::<u8>()).prop_map(|((command, len), fua, dpo, no_ts, (set_attrs, get_attrs), fill)| {
        let options = if command.is_flush() { Options::default() } else { Options { fua, dpo } };
        Spec {
            data: (0..len).map(|i| fill.wrapping_add(i as u8)).collect(),
            command,
            options,
            timestamps: if no_ts { TimestampsControl::DoNotUpdate } else { TimestampsControl::Update },
            set_attrs,
            get_attrs,
        }
    })
}

fn request(spec: &Spec) -> Request<'_> {
    Request {
        service_action: spec.command.service_action(),
        options: spec.options,
        timestamps: spec.timestamps,
        command: spec.command.clone(),
        set_attrs: spec.set_attrs.clone(),
        get_attrs: spec.get_attrs.clone(),
        data: &spec.data,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// decode(encode(r)) == r, and the target's placement equals the initiator's.
    #[test]
    fn decode_inverts_encode(spec in spec()) {
        let req = request(&spec);
        let encoded = OsdRequestBuilder::from_request(&req).encode().unwrap();
        let data_out = encoded.data_out_vec();
        let (decoded, placement) = decode_request(&encoded.cdb, &data_out).unwrap();
        prop_assert_eq!(&decoded, &req);
        prop_assert_eq!(placement, encoded.placement);
        prop_assert!(placement.data_in_len() <= TRANSFER_LEN_MAX);
        // Write data goes out as the caller's own slice.
        if !spec.data.is_empty() {
            prop_assert!(encoded.data_out().iter().any(|s| std::ptr::eq(s.as_ptr(), spec.data.as_ptr())));
        }
    }

    /// Write data given as a gather list encodes exactly as the same bytes in one buffer, each
    /// run sent in place; runs that do not add up to the command's length are refused.
    #[test]
    fn gathered_write_data_encodes_as_one_buffer(
        data in proptest::collection::vec(any::<u8>(), 1..5000),
        offset in 0u64..1 << 40,
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..5),
    ) {
        let command = Command::Write { addr: ObjectAddr::new(FIRST, FIRST), offset, len: data.len() as u64, layout: DataLayout::Contiguous };
        let whole = OsdRequestBuilder::new(command.clone()).data(&data).encode().unwrap();
        let mut at: Vec<usize> = cuts.iter().map(|c| c.index(data.len())).collect();
        at.extend([0, data.len()]);
        at.sort_unstable();
        at.dedup();
        let runs: Vec<&[u8]> = at.windows(2).map(|w| &data[w[0]..w[1]]).collect();
        let gathered = OsdRequestBuilder::new(command.clone()).data_pieces(&runs).encode().unwrap();
        prop_assert_eq!(gathered.cdb, whole.cdb);
        prop_assert_eq!(gathered.data_out_vec(), whole.data_out_vec());
        for run in &runs {
            prop_assert!(gathered.data_out().iter().any(|s| std::ptr::eq(s.as_ptr(), run.as_ptr())));
        }
        let tail = runs[1..].to_vec();
        let short = OsdRequestBuilder::new(command).data_pieces(&tail).encode();
        prop_assert!(runs.len() == 1 || short.is_err());
    }

    /// Before its Data-Out arrives, a command decodes exactly as it will with it, minus the data,
    /// when its Data-Out is nothing but data; every other command waits for its Data-Out.
    #[test]
    fn decode_before_data_agrees_with_decode(spec in spec()) {
        let req = request(&spec);
        let encoded = OsdRequestBuilder::from_request(&req).encode().unwrap();
        let data_out = encoded.data_out_vec();
        let early = decode_before_data(&encoded.cdb, data_out.len() as u64);
        let data_only = spec.command.write_len() == Some(data_out.len() as u64)
            && matches!(spec.command, Command::Write { layout: DataLayout::Contiguous, .. }
                | Command::CreateAndWrite { layout: DataLayout::Contiguous, .. } | Command::Append { .. })
            && spec.set_attrs.is_empty()
            && spec.get_attrs == GetAttrs::None;
        prop_assert_eq!(early.is_some(), data_only, "{:?}", spec.command);
        if let Some((early, placement)) = early {
            prop_assert_eq!(early, Request { data: &[], ..req });
            prop_assert_eq!(placement, encoded.placement);
        }
    }

    /// A list WRITE decodes from its CDB and continuation segment exactly as it will with its
    /// data, when its Data-Out is nothing but the segment and the data; every other command
    /// waits for its Data-Out.
    #[test]
    fn decode_with_continuation_agrees_with_decode(spec in spec()) {
        let req = request(&spec);
        let encoded = OsdRequestBuilder::from_request(&req).encode().unwrap();
        let data_out = encoded.data_out_vec();
        let segment_len = continuation_before_data(&encoded.cdb, data_out.len() as u64);
        let early = segment_len.and_then(|n| decode_before_data_with_continuation(&encoded.cdb, &data_out[..n as usize], data_out.len() as u64));
        let list_data_only = matches!(&spec.command, Command::Write { layout, len, .. } if *layout != DataLayout::Contiguous && *len > 0)
            && spec.set_attrs.is_empty()
            && spec.get_attrs == GetAttrs::None;
        prop_assert_eq!(early.is_some(), list_data_only, "{:?}", spec.command);
        if let Some((early, placement)) = early {
            prop_assert_eq!(early, Request { data: &[], ..req });
            prop_assert_eq!(placement, encoded.placement);
        }
    }

    /// Cutting Data-Out anywhere short of what the CDB describes is refused, never a panic.
    #[test]
    fn short_data_out_is_refused(spec in spec(), cut in any::<prop::sample::Index>()) {
        let req = request(&spec);
        let encoded = OsdRequestBuilder::from_request(&req).encode().unwrap();
        let data_out = encoded.data_out_vec();
        if data_out.is_empty() {
            return Ok(());
        }
        let short = &data_out[..cut.index(data_out.len())];
        prop_assert!(decode_request(&encoded.cdb, short).is_err());
    }
}

fn cdb_of(builder: OsdRequestBuilder<'_>) -> ([u8; 236], Vec<u8>) {
    let e = builder.encode().unwrap();
    (e.cdb, e.data_out_vec())
}

fn err(cdb: &[u8], data_out: &[u8]) -> DecodeError {
    decode_request(cdb, data_out).unwrap_err()
}

/// Goal: every field lands at the byte osd2-wire.md §2 gives it.
#[test]
fn write_cdb_field_positions() {
    let data = [0xAB; 16];
    let b = OsdRequestBuilder::new(Command::Write { addr: ObjectAddr::new(0x1_0001, 0x1_0002), offset: 0x1234, len: 16, layout: DataLayout::Contiguous })
        .data(&data)
        .fua(true)
        .dpo(true)
        .timestamps(TimestampsControl::DoNotUpdate)
        .set_attr(AttrId::new(0x1_0000, 1), vec![1, 2, 3])
        .get_attrs(GetAttrs::List { ids: vec![AttrId::new(1, 0x82)], allocation_len: 64 });
    let (cdb, data_out) = cdb_of(b);
    assert_eq!(cdb[0], 0x7F);
    assert_eq!(cdb[7], 0xE4);
    assert_eq!(&cdb[8..10], &[0x88, 0x86]);
    assert_eq!(cdb[10], 0x18);
    assert_eq!(cdb[11], 0x30);
    assert_eq!(cdb[12], 0x7F);
    assert_eq!(&cdb[16..24], &0x1_0001u64.to_be_bytes());
    assert_eq!(&cdb[24..32], &0x1_0002u64.to_be_bytes());
    assert_eq!(&cdb[32..40], &16u64.to_be_bytes());
    assert_eq!(&cdb[40..48], &0x1234u64.to_be_bytes());
    assert_eq!(&cdb[48..52], &[0; 4]);
    // List format: get list length 16 at 52; the get list follows data (16) and the set list
    // (8 + 24 = 32), so its offset is 48, encoded with e = -8, at 56.
    assert_eq!(&cdb[52..56], &16u32.to_be_bytes());
    assert_eq!(&cdb[56..60], &0x8000_0030u32.to_be_bytes());
    assert_eq!(&cdb[60..64], &64u32.to_be_bytes());
    // No data in: retrieved at Data-In offset 0.
    assert_eq!(&cdb[64..68], &0x8000_0000u32.to_be_bytes());
    assert_eq!(&cdb[68..72], &32u32.to_be_bytes());
    assert_eq!(&cdb[72..76], &0x8000_0010u32.to_be_bytes());
    assert!(cdb[80..184].iter().all(|&b| b == 0), "capability zero = NOSEC");
    assert_eq!(&cdb[228..236], &[0xFF; 8]);
    assert_eq!(data_out.len(), 16 + 32 + 16);
    assert_eq!(&data_out[..16], &data);
    assert_eq!(data_out[16], 0x09);
    assert_eq!(data_out[48], 0x01);
}

/// Goal: page-format positions (osd2-wire.md §4).
#[test]
fn page_format_field_positions() {
    let b = OsdRequestBuilder::new(Command::Read { addr: ObjectAddr::new(FIRST, FIRST), offset: 0, len: 100, layout: DataLayout::Contiguous })
        .set_attr(AttrId::new(0x1_0000, 9), vec![7; 5])
        .get_attrs(GetAttrs::Page { page: 3, allocation_len: 200 });
    let (cdb, data_out) = cdb_of(b);
    assert_eq!(cdb[11], 0x20);
    assert_eq!(&cdb[52..56], &3u32.to_be_bytes());
    assert_eq!(&cdb[56..60], &200u32.to_be_bytes());
    assert_eq!(&cdb[60..64], &0x8000_0068u32.to_be_bytes()); // 104: read length 100 aligned to 8
    assert_eq!(&cdb[64..68], &0x1_0000u32.to_be_bytes());
    assert_eq!(&cdb[68..72], &9u32.to_be_bytes());
    assert_eq!(&cdb[72..76], &5u32.to_be_bytes());
    assert_eq!(&cdb[76..80], &0x8000_0000u32.to_be_bytes());
    assert_eq!(data_out, vec![7; 5]);
}

/// Goal: CREATE count at 32..33, LIST fields at 32 / 40 / 48 with the attributes bit.
#[test]
fn create_and_list_positions() {
    let (cdb, _) = cdb_of(OsdRequestBuilder::new(Command::Create { partition_id: FIRST, requested: None, count: 3 }));
    assert_eq!(&cdb[8..10], &[0x88, 0x82]);
    assert_eq!(&cdb[32..34], &[0, 3]);
    let (cdb, _) = cdb_of(OsdRequestBuilder::new(Command::List { partition_id: 0, list_id: 9, initial_oid: 0x2_0000, allocation_len: 4096, with_attrs: true }));
    assert_eq!(cdb[11], 0x40);
    assert_eq!(&cdb[32..40], &4096u64.to_be_bytes());
    assert_eq!(&cdb[40..48], &0x2_0000u64.to_be_bytes());
    assert_eq!(&cdb[48..52], &9u32.to_be_bytes());
    let (req, placement) = decode_request(&cdb, &[]).unwrap();
    assert!(matches!(req.command, Command::List { partition_id: 0, .. }));
    assert_eq!(placement.data_len_max, 4096);
}

/// Goal: the addressing rules answer 24/00 with the documented pointers.
#[test]
fn addressing_errors() {
    let read = |pid, oid| cdb_of(OsdRequestBuilder::new(Command::GetAttributes { addr: ObjectAddr::new(pid, oid) })).0;
    let mut cdb = read(FIRST, FIRST);
    cdb[8..10].copy_from_slice(&0x8885u16.to_be_bytes()); // READ of (FIRST, 5)
    cdb[24..32].copy_from_slice(&5u64.to_be_bytes());
    let s = err(&cdb, &[]).sense();
    assert_eq!((s.asc_ascq(), s.field_pointer), (0x2400, Some(FieldPointer::cdb(24))));
    cdb[16..24].copy_from_slice(&0u64.to_be_bytes());
    assert_eq!(err(&cdb, &[]), DecodeError::cdb(CdbField::PartitionId));
    // GET ATTRIBUTES of the root is fine; of (0, x) is not.
    assert!(decode_request(&read(0, 0), &[]).is_ok());
    let mut bad = read(0, 0);
    bad[24..32].copy_from_slice(&FIRST.to_be_bytes());
    assert_eq!(err(&bad, &[]), DecodeError::cdb(CdbField::ObjectId));
    // Unknown service action.
    let mut unknown = read(0, 0);
    unknown[8..10].copy_from_slice(&0x8FFFu16.to_be_bytes());
    assert_eq!(err(&unknown, &[]).sense().field_pointer, Some(FieldPointer::cdb(8)));
    // Wrong opcode, wrong length, wrong additional length.
    assert_eq!(err(&[0x28; 10], &[]), DecodeError::Opcode(0x28));
    assert_eq!(err(&[0x7F; 10], &[]), DecodeError::CdbLength { len: 10 });
    let mut short_add = read(0, 0);
    short_add[7] = 0x18;
    assert_eq!(err(&short_add, &[]), DecodeError::cdb(CdbField::AdditionalCdbLength));
    // Format 01b is refused at byte 11.
    let mut one_value = read(0, 0);
    one_value[11] = 0x10;
    assert_eq!(err(&one_value, &[]).sense().field_pointer, Some(FieldPointer::cdb(11)));
}

/// Goal: Data-Out length rules: 1A00 when data is missing; 26/00 at the exact list byte.
#[test]
fn data_out_errors() {
    let data = [1u8; 32];
    let (cdb, data_out) = cdb_of(
        OsdRequestBuilder::new(Command::Write { addr: ObjectAddr::new(FIRST, FIRST), offset: 0, len: 32, layout: DataLayout::Contiguous })
            .data(&data)
            .set_attr(AttrId::new(1, 2), vec![3]),
    );
    assert_eq!(err(&cdb, &data_out[..20]).sense().asc_ascq(), 0x1A00);
    let mut bad = data_out.clone();
    bad[32] = 0x01; // set list header type: get list instead of 0x9
    let e = err(&cdb, &bad);
    assert_eq!(e, DecodeError::param(ParamField::ListType, 32));
    assert_eq!(e.sense().field_pointer, Some(FieldPointer::data(32)));
    // A set list placed inside the write data.
    let mut overlap = cdb;
    overlap[72..76].copy_from_slice(&0x8000_0008u32.to_be_bytes());
    assert_eq!(err(&overlap, &data_out), DecodeError::cdb(CdbField::SetListOffset));
}

/// Goal: a READ's retrieved attributes may not overlap the read data.
#[test]
fn retrieved_offset_inside_read_data() {
    let (mut cdb, _) = cdb_of(
        OsdRequestBuilder::new(Command::Read { addr: ObjectAddr::new(FIRST, FIRST), offset: 0, len: 4096, layout: DataLayout::Contiguous })
            .get_attrs(GetAttrs::Page { page: 1, allocation_len: 64 }),
    );
    cdb[60..64].copy_from_slice(&0x8000_0100u32.to_be_bytes());
    assert_eq!(err(&cdb, &[]), DecodeError::cdb(CdbField::PageRetrievedOffset));
}

/// Goal: a QUERY without criteria and a READ with two layouts are refused.
#[test]
fn continuation_use_errors() {
    let (mut cdb, _) = cdb_of(OsdRequestBuilder::new(Command::Query {
        addr: ObjectAddr::new(FIRST, FIRST),
        allocation_len: 100,
        criteria: QueryCriteria { match_all: true, conditions: vec![] },
    }));
    cdb[48..52].copy_from_slice(&[0; 4]);
    assert_eq!(err(&cdb, &[]), DecodeError::cdb(CdbField::ContinuationLength));
    let seg = crate::continuation::encode_continuation(
        0x8885,
        &[0; 32],
        &[
            crate::continuation::Descriptor::Layout(DataLayout::Strided { stride: 8, block_len: 4 }),
            crate::continuation::Descriptor::Layout(DataLayout::Strided { stride: 8, block_len: 4 }),
        ],
    );
    let (mut cdb, _) = cdb_of(OsdRequestBuilder::new(Command::Read { addr: ObjectAddr::new(FIRST, FIRST), offset: 0, len: 8, layout: DataLayout::Contiguous }));
    cdb[48..52].copy_from_slice(&(seg.len() as u32).to_be_bytes());
    assert_eq!(err(&cdb, &seg), DecodeError::param(ParamField::DescriptorType, 64));
}

/// Goal: write data given as a gather list goes out as those slices, unchanged and in order,
/// and decodes exactly like the same bytes given as one slice; a wrong total is refused.
#[test]
fn gathered_write_data_equals_one_slice() {
    let (a, b, c) = (vec![1u8; 3], vec![2u8; 0], vec![3u8; 5]);
    let pieces: [&[u8]; 3] = [&a, &b, &c];
    let whole = [a.clone(), c.clone()].concat();
    let layout = DataLayout::Strided { stride: 10, block_len: 4 };
    let command = Command::Write { addr: ObjectAddr::new(FIRST, FIRST), offset: 0, len: 8, layout };
    let gathered = OsdRequestBuilder::new(command.clone()).data_pieces(&pieces).encode().unwrap();
    let single = OsdRequestBuilder::new(command.clone()).data(&whole).encode().unwrap();
    assert_eq!(gathered.cdb, single.cdb);
    assert_eq!(gathered.data_out_vec(), single.data_out_vec());
    // The caller's slices are sent in place, not copied.
    let out = gathered.data_out();
    assert!(out.iter().any(|s| s.as_ptr() == a.as_ptr()) && out.iter().any(|s| s.as_ptr() == c.as_ptr()));
    let short: [&[u8]; 1] = [&a];
    assert_eq!(
        OsdRequestBuilder::new(command).data_pieces(&short).encode().err(),
        Some(crate::builder::BuildError::DataLength { expected: 8, got: 3 })
    );
}
