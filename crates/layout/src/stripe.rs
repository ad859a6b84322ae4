//! Round-robin striping: a file of stripe unit S and stripe count C keeps file byte f on slot
//! (f / S) mod C at object offset (f / (S*C)) * S + f mod S (seed 002, "PVFS integration").
//! Each slot's object therefore holds all of its stripe units back to back, so the part of any
//! file range that lands on one object is a short, regular object-local list.
//!
//! A "slot" is the index into the file's ordered object list (0..C); which OSD and object id a
//! slot maps to is the metadata server's business, not this crate's.

use thiserror::Error;

/// Largest stripe unit (64 MiB). Keeps a single unit well below the per-command transfer cap,
/// so reading one whole unit never needs two commands, and one row (S*C) far inside u64.
pub const STRIPE_UNIT_MAX: u64 = 64 << 20;

/// Most data objects one file may stripe over. A plan allocates one entry per slot, and the
/// layout travels in every create / getstripe reply, so this bounds both.
pub const STRIPE_COUNT_MAX: u32 = 1024;

const _: () = assert!(STRIPE_UNIT_MAX <= tessera_types::limits::TRANSFER_LEN_MAX);
// One full row must fit in u64 with room to spare for the offset arithmetic.
const _: () = assert!((STRIPE_UNIT_MAX as u128) * (STRIPE_COUNT_MAX as u128) < (u64::MAX as u128) / 4);

/// Why a stripe layout was refused.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum LayoutError {
    #[error("stripe unit {0} is outside 1..={STRIPE_UNIT_MAX}")]
    StripeUnit(u64),
    #[error("stripe count {0} is outside 1..={STRIPE_COUNT_MAX}")]
    StripeCount(u32),
}

/// Stripe unit and count of one file. Always valid: the fields are private and only
/// [`StripeLayout::new`] builds one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StripeLayout {
    stripe_unit: u64,
    stripe_count: u32,
}

/// Where one file byte lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StripePos {
    /// Index into the file's object list (0..stripe_count).
    pub slot: u32,
    pub object_offset: u64,
}

impl StripeLayout {
    pub fn new(stripe_unit: u64, stripe_count: u32) -> Result<Self, LayoutError> {
        if stripe_unit == 0 || stripe_unit > STRIPE_UNIT_MAX {
            return Err(LayoutError::StripeUnit(stripe_unit));
        }
        if stripe_count == 0 || stripe_count > STRIPE_COUNT_MAX {
            return Err(LayoutError::StripeCount(stripe_count));
        }
        Ok(StripeLayout { stripe_unit, stripe_count })
    }

    pub fn stripe_unit(&self) -> u64 {
        self.stripe_unit
    }

    pub fn stripe_count(&self) -> u32 {
        self.stripe_count
    }

    /// Bytes in one full row of stripe units (S * C); cannot overflow by the bounds above.
    pub fn row_bytes(&self) -> u64 {
        self.stripe_unit * self.stripe_count as u64
    }

    /// File offset -> (slot, object offset).
    pub fn locate(&self, file_offset: u64) -> StripePos {
        let unit_index = file_offset / self.stripe_unit;
        let slot = (unit_index % self.stripe_count as u64) as u32;
        let row = file_offset / self.row_bytes();
        StripePos { slot, object_offset: row * self.stripe_unit + file_offset % self.stripe_unit }
    }

    /// (slot, object offset) -> file offset; `None` when the file offset would not fit in u64.
    pub fn file_offset(&self, pos: StripePos) -> Option<u64> {
        assert!(pos.slot < self.stripe_count, "slot {} out of range for {self:?}", pos.slot);
        let row = pos.object_offset / self.stripe_unit;
        row.checked_mul(self.row_bytes())?
            .checked_add(pos.slot as u64 * self.stripe_unit)?
            .checked_add(pos.object_offset % self.stripe_unit)
    }

    /// Bytes of the unit containing `file_offset` that lie at or after it: the longest run that
    /// stays on one object without a jump.
    pub fn run_len(&self, file_offset: u64) -> u64 {
        self.stripe_unit - file_offset % self.stripe_unit
    }

    /// The file size implied by each slot's object logical length (`lengths[slot]`): one past
    /// the highest file byte any object holds. `None` if it would not fit in u64.
    pub fn file_size(&self, lengths: &[u64]) -> Option<u64> {
        assert_eq!(lengths.len(), self.stripe_count as usize, "one length per slot");
        let mut size = 0u64;
        for (slot, &len) in lengths.iter().enumerate() {
            if len > 0 {
                let last = self.file_offset(StripePos { slot: slot as u32, object_offset: len - 1 })?;
                size = size.max(last + 1);
            }
        }
        Some(size)
    }

    /// The logical length slot `slot`'s object has when the file is exactly `file_size` bytes
    /// (what truncate sets on each object).
    pub fn object_len(&self, file_size: u64, slot: u32) -> u64 {
        assert!(slot < self.stripe_count);
        let full_rows = file_size / self.row_bytes();
        let rest = file_size % self.row_bytes();
        let slot_start = slot as u64 * self.stripe_unit;
        let in_last_row = rest.saturating_sub(slot_start).min(self.stripe_unit);
        full_rows * self.stripe_unit + in_last_row
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn bounds_are_enforced() {
        assert_eq!(StripeLayout::new(0, 1), Err(LayoutError::StripeUnit(0)));
        assert_eq!(StripeLayout::new(STRIPE_UNIT_MAX + 1, 1), Err(LayoutError::StripeUnit(STRIPE_UNIT_MAX + 1)));
        assert_eq!(StripeLayout::new(4096, 0), Err(LayoutError::StripeCount(0)));
        assert_eq!(StripeLayout::new(4096, STRIPE_COUNT_MAX + 1), Err(LayoutError::StripeCount(STRIPE_COUNT_MAX + 1)));
        assert!(StripeLayout::new(STRIPE_UNIT_MAX, STRIPE_COUNT_MAX).is_ok());
    }

    #[test]
    fn seed_formula_by_hand() {
        // S = 4, C = 3: file bytes 0..4 -> slot 0, 4..8 -> slot 1, 8..12 -> slot 2, 12..16 -> slot 0 at 4.
        let l = StripeLayout::new(4, 3).unwrap();
        assert_eq!(l.locate(0), StripePos { slot: 0, object_offset: 0 });
        assert_eq!(l.locate(5), StripePos { slot: 1, object_offset: 1 });
        assert_eq!(l.locate(13), StripePos { slot: 0, object_offset: 5 });
        // Slot 0 holds object byte 5 = file byte 13, the highest of the three.
        assert_eq!(l.file_size(&[6, 4, 1]), Some(14));
        assert_eq!(l.file_size(&[0, 0, 0]), Some(0));
    }

    fn layouts() -> impl Strategy<Value = StripeLayout> {
        (12u32..=22, 1u32..=8).prop_map(|(shift, count)| StripeLayout::new(1 << shift, count).unwrap())
    }

    proptest! {
        /// Goal: the math is a bijection. Method: random offsets, units 4 KiB..4 MiB, counts 1..8.
        #[test]
        fn locate_round_trips(l in layouts(), f in 0u64..(1 << 50)) {
            let pos = l.locate(f);
            prop_assert!(pos.slot < l.stripe_count());
            prop_assert_eq!(l.file_offset(pos), Some(f));
            prop_assert_eq!(l.locate(f).object_offset, (f / l.row_bytes()) * l.stripe_unit() + f % l.stripe_unit());
        }

        /// Goal: object lengths after truncate give back the file size. Method: compute per-slot
        /// lengths for a size, then the size from those lengths.
        #[test]
        fn object_len_and_file_size_agree(l in layouts(), size in 0u64..(1 << 40)) {
            let lengths: Vec<u64> = (0..l.stripe_count()).map(|s| l.object_len(size, s)).collect();
            prop_assert_eq!(l.file_size(&lengths), Some(size));
            prop_assert_eq!(lengths.iter().sum::<u64>(), size);
        }
    }
}
