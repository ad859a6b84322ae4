//! Goal: `locate`, `file_offset` and `plan` agree with the plain definition of round-robin
//! striping at production sizes: stripe counts 1..8, stripe units 4 KiB..4 MiB (powers of two
//! and odd multiples of 1 KiB). Method: a model that deals the file out one stripe unit at a
//! time (unit u to slot u mod C, each slot stacking its units back to back) and answers where
//! any file byte lives; `plan`'s pieces are then expanded byte by byte and every buffer byte must
//! land exactly once, where the model puts the file byte it stands for.

use proptest::prelude::*;
use tessera_layout::{plan, Extent, StripeLayout, StripePos};

const KIB: u64 = 1024;
/// Rows the model deals out; offsets stay inside them.
const ROWS: u64 = 6;
/// Longest extent: long enough to cross several 4 KiB units, short enough to check byte by byte.
const LEN_MAX: u64 = 96 * KIB;

/// Where each stripe unit went, found by dealing the units out in file order.
struct DealtUnits {
    unit: u64,
    /// (slot, object offset of the unit's first byte), indexed by unit number.
    units: Vec<(u32, u64)>,
}

impl DealtUnits {
    fn new(l: &StripeLayout, rows: u64) -> DealtUnits {
        let mut next_free = vec![0u64; l.stripe_count() as usize];
        let mut units = Vec::new();
        let mut slot = 0u32;
        for _ in 0..rows * l.stripe_count() as u64 {
            units.push((slot, next_free[slot as usize]));
            next_free[slot as usize] += l.stripe_unit();
            slot = (slot + 1) % l.stripe_count();
        }
        DealtUnits { unit: l.stripe_unit(), units }
    }

    fn span(&self) -> u64 {
        self.units.len() as u64 * self.unit
    }

    fn locate(&self, f: u64) -> StripePos {
        let (slot, base) = self.units[(f / self.unit) as usize];
        StripePos { slot, object_offset: base + f % self.unit }
    }
}

fn layouts() -> impl Strategy<Value = StripeLayout> {
    let power_of_two = (12u32..=22).prop_map(|shift| 1u64 << shift);
    let odd_kib = (4u64..=4096).prop_map(|k| k * KIB);
    (prop_oneof![power_of_two, odd_kib], 1u32..=8).prop_map(|(unit, count)| StripeLayout::new(unit, count).unwrap())
}

/// Extents that start near a unit boundary (so they cross it), of any length up to LEN_MAX,
/// some of length 0, some overlapping, in any order.
fn extents_for(l: StripeLayout) -> impl Strategy<Value = (StripeLayout, Vec<Extent>)> {
    let units = ROWS * l.stripe_count() as u64;
    let unit = l.stripe_unit();
    let extent = (0..units, -2048i64..2048, prop_oneof![Just(0u64), 1u64..64, 1..=LEN_MAX]).prop_map(move |(u, delta, len)| {
        let offset = (u * unit).saturating_add_signed(delta).min(units * unit - 1);
        Extent { offset, len: len.min(units * unit - offset) }
    });
    (Just(l), prop::collection::vec(extent, 1..12))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// `locate` and `file_offset` are the model's mapping and its inverse.
    #[test]
    fn locate_matches_dealt_units(l in layouts(), picks in prop::collection::vec(any::<prop::sample::Index>(), 32)) {
        let model = DealtUnits::new(&l, ROWS);
        for pick in picks {
            let f = pick.index(model.span() as usize) as u64;
            let pos = l.locate(f);
            prop_assert_eq!(pos, model.locate(f), "file byte {}", f);
            prop_assert_eq!(l.file_offset(pos), Some(f));
            // run_len: the bytes left in f's unit, which the model keeps together on one object.
            let unit_end = (f / l.stripe_unit() + 1) * l.stripe_unit();
            prop_assert_eq!(l.run_len(f), unit_end - f);
            let last = model.locate(unit_end - 1);
            prop_assert_eq!((last.slot, last.object_offset - pos.object_offset), (pos.slot, unit_end - 1 - f));
        }
    }

    /// Every buffer byte of a planned list lands once, where the model says its file byte lives.
    #[test]
    fn plan_matches_dealt_units_byte_by_byte((l, extents) in layouts().prop_flat_map(extents_for)) {
        let model = DealtUnits::new(&l, ROWS);
        let mut expected: Vec<StripePos> = Vec::new();
        for e in &extents {
            expected.extend((e.offset..e.offset + e.len).map(|f| model.locate(f)));
        }
        let mut seen = vec![false; expected.len()];
        let plans = plan(&l, &extents).unwrap();
        prop_assert!(plans.windows(2).all(|w| w[0].slot < w[1].slot), "slots in increasing order");
        for p in &plans {
            prop_assert!(!p.pieces.is_empty());
            // A slot's pieces keep the list order: their buffer offsets only grow.
            prop_assert!(p.pieces.windows(2).all(|w| w[0].buffer_offset + w[0].len <= w[1].buffer_offset));
            for piece in &p.pieces {
                prop_assert!(piece.len > 0);
                for i in 0..piece.len {
                    let b = (piece.buffer_offset + i) as usize;
                    prop_assert!(!seen[b], "buffer byte {} planned twice", b);
                    seen[b] = true;
                    prop_assert_eq!(expected[b], StripePos { slot: p.slot, object_offset: piece.object_offset + i });
                }
            }
        }
        prop_assert!(seen.iter().all(|&s| s), "every buffer byte is planned");
    }
}
