//! Goal: the engine behaves like a plain in-memory OSD. Method: proptest generates random
//! command sequences (create, write and read with random layouts including overlapping
//! lists, punch, clear, set/get attribute, truncate/extend through the logical length,
//! remove) and runs them against the Engine (real SQLite, real files) and a BTreeMap model,
//! comparing every read, and every object's length and attributes after every step.

mod common;

use std::collections::BTreeMap;

use common::*;
use proptest::prelude::*;
use tessera_osd_proto::{AttrId, Command, DataLayout, Extent, Request};
use tessera_types::ObjectAddr;

#[derive(Default, Clone, Debug)]
struct ModelObject {
    data: Vec<u8>,
    attrs: BTreeMap<u32, Vec<u8>>,
}

#[derive(Clone, Debug)]
enum Op {
    Create,
    Write { obj: usize, offset: u64, layout: DataLayout, len: u64, seed: u8 },
    Read { obj: usize, offset: u64, layout: DataLayout, len: u64 },
    Punch { obj: usize, offset: u64, len: u64, clear: bool },
    SetAttr { obj: usize, number: u32, value: Vec<u8> },
    Truncate { obj: usize, len: u64 },
    Remove { obj: usize },
}

fn layout() -> impl Strategy<Value = (DataLayout, u64)> {
    prop_oneof![
        (1u64..300).prop_map(|len| (DataLayout::Contiguous, len)),
        proptest::collection::vec((0u64..600, 1u64..64), 1..8).prop_map(|v| {
            let len = v.iter().map(|(_, l)| l).sum();
            (DataLayout::List(v.into_iter().map(|(offset, len)| Extent { offset, len }).collect()), len)
        }),
        (1u64..16, 0u64..16, 1u64..100).prop_map(|(block_len, gap, len)| (DataLayout::Strided { stride: block_len + gap, block_len }, len)),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => Just(Op::Create),
        4 => (0usize..4, 0u64..2000, layout(), any::<u8>()).prop_map(|(obj, offset, (layout, len), seed)| Op::Write { obj, offset, layout, len, seed }),
        4 => (0usize..4, 0u64..2500, layout()).prop_map(|(obj, offset, (layout, len))| Op::Read { obj, offset, layout, len }),
        1 => (0usize..4, 0u64..2500, 1u64..800, any::<bool>()).prop_map(|(obj, offset, len, clear)| Op::Punch { obj, offset, len, clear }),
        2 => (0usize..4, 1u32..4, proptest::collection::vec(any::<u8>(), 0..12)).prop_map(|(obj, number, value)| Op::SetAttr { obj, number, value }),
        1 => (0usize..4, 0u64..3000).prop_map(|(obj, len)| Op::Truncate { obj, len }),
        1 => (0usize..4).prop_map(|obj| Op::Remove { obj }),
    ]
}

fn apply_model_write(obj: &mut ModelObject, layout: &DataLayout, offset: u64, data: &[u8]) {
    let mut at = 0usize;
    layout.for_each_extent(offset, data.len() as u64, |o, l| {
        let end = (o + l) as usize;
        if obj.data.len() < end {
            obj.data.resize(end, 0);
        }
        obj.data[o as usize..end].copy_from_slice(&data[at..at + l as usize]);
        at += l as usize;
    });
}

fn model_read(obj: &ModelObject, layout: &DataLayout, offset: u64, len: u64) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    let mut past = false;
    layout.for_each_extent(offset, len, |o, l| {
        for i in o..o + l {
            match obj.data.get(i as usize) {
                Some(b) => out.push(*b),
                None => {
                    out.push(0);
                    past = true;
                }
            }
        }
    });
    (out, past)
}

fn run(ops: Vec<Op>) {
    let osd = Osd::new();
    let pid = osd.partition();
    let mut model: BTreeMap<u64, ModelObject> = BTreeMap::new();
    let mut ids: Vec<u64> = Vec::new();
    for op in ops {
        let pick = |i: usize| if ids.is_empty() { None } else { Some(ids[i % ids.len()]) };
        match op {
            Op::Create => {
                let oid = osd.create(pid);
                model.insert(oid, ModelObject::default());
                ids.push(oid);
            }
            Op::Write { obj, offset, layout, len, seed } => {
                let Some(oid) = pick(obj) else { continue };
                let data: Vec<u8> = (0..len).map(|i| seed.wrapping_add(i as u8) | 1).collect();
                let r = Request { data: &data, ..req(Command::Write { addr: ObjectAddr::new(pid, oid), offset, len, layout: layout.clone() }) };
                osd.ok(&r);
                apply_model_write(model.get_mut(&oid).unwrap(), &layout, offset, &data);
            }
            Op::Read { obj, offset, layout, len } => {
                let Some(oid) = pick(obj) else { continue };
                let r = osd.ok(&req(Command::Read { addr: ObjectAddr::new(pid, oid), offset, len, layout: layout.clone() }));
                let (expected, past) = model_read(&model[&oid], &layout, offset, len);
                assert_eq!(r.data_in, expected, "read {layout:?} at {offset}");
                assert_eq!(r.recovered.is_some(), past, "3B17 iff the read ran past the end");
            }
            Op::Punch { obj, offset, len, clear } => {
                let Some(oid) = pick(obj) else { continue };
                let addr = ObjectAddr::new(pid, oid);
                osd.ok(&req(if clear { Command::Clear { addr, offset, len } } else { Command::Punch { addr, offset, len } }));
                let m = model.get_mut(&oid).unwrap();
                let end = ((offset + len) as usize).min(m.data.len());
                let start = (offset as usize).min(end);
                m.data[start..end].fill(0);
            }
            Op::SetAttr { obj, number, value } => {
                let Some(oid) = pick(obj) else { continue };
                osd.set(ObjectAddr::new(pid, oid), APP_PAGE, number, &value).unwrap();
                let m = model.get_mut(&oid).unwrap();
                if value.is_empty() {
                    m.attrs.remove(&number);
                } else {
                    m.attrs.insert(number, value);
                }
            }
            Op::Truncate { obj, len } => {
                let Some(oid) = pick(obj) else { continue };
                osd.set(ObjectAddr::new(pid, oid), 1, 0x82, &len.to_be_bytes()).unwrap();
                model.get_mut(&oid).unwrap().data.resize(len as usize, 0);
            }
            Op::Remove { obj } => {
                let Some(oid) = pick(obj) else { continue };
                osd.ok(&req(Command::Remove { addr: ObjectAddr::new(pid, oid) }));
                model.remove(&oid);
                ids.retain(|i| *i != oid);
            }
        }
        for (oid, m) in &model {
            let addr = ObjectAddr::new(pid, *oid);
            assert_eq!(osd.get1(addr, 1, 0x82).map(|v| be_bytes(&v)), Some(m.data.len() as u64), "logical length of {oid:#x}");
            let attrs = osd.get(addr, &[AttrId::new(APP_PAGE, AttrId::ALL_IN_PAGE)]);
            let got: BTreeMap<u32, Vec<u8>> = attrs.into_iter().map(|a| (a.id.number, a.value.unwrap())).collect();
            assert_eq!(&got, &m.attrs, "attributes of {oid:#x}");
            let whole = osd.read(addr, 0, m.data.len() as u64);
            assert_eq!(whole.data_in, m.data, "data of {oid:#x}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn engine_matches_model(ops in proptest::collection::vec(op(), 1..40)) {
        run(ops);
    }
}
