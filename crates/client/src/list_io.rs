//! List I/O on a [`File`], with PVFS semantics (seed 000 §2.1 and Fig. 2): a list of memory
//! regions and a list of file regions, each non-contiguous, of equal total length. Byte n of
//! the memory stream (the regions end to end) is byte n of the file stream (the file extents
//! end to end, in list order). File extents may come in any order and may overlap: a read
//! returns each extent's bytes in list order (overlapping bytes twice), and on a write the later
//! extent wins, as on a plain file.
//!
//! Every form plans the file extents through the stripe layout into one object-local list per
//! data object and sends each object one command, described as [`Mode`] allows (a strided or
//! nested descriptor when the object's pieces are regular), split only past the transfer cap,
//! all objects in parallel ([`crate::striped_io`]). Memory regions are read into and written
//! from in place ([`crate::memory`]).
//!
//! | call | memory | file |
//! |---|---|---|
//! | [`File::read_list`] / [`File::write_list`] | a list of regions | a list of extents |
//! | [`File::read_extents`] / [`File::write_extents`] | one buffer | a list of extents |
//! | [`File::pread_vec`] / [`File::pwrite_vec`] | one region per extent | (offset, region) pairs |
//! | [`File::read_strided`] / [`File::write_strided`] | one buffer | a [`StridedPattern`] |
//! | [`File::read_subarray`] / [`File::write_subarray`] | one buffer | a [`Subarray`] |
//!
//! A memory list that does not hold exactly the file extents' bytes is refused with
//! [`ClientError::BufferLength`] before any command is sent. Bytes past end of file read as
//! zeros.

use tessera_layout::Extent;

use crate::command_plan::Mode;
use crate::error::ClientError;
use crate::file::File;
use crate::patterns::{StridedPattern, Subarray};

impl File {
    /// Reads the file extents into the memory regions (see the module docs).
    pub fn read_list(&self, mem: &mut [&mut [u8]], file: &[Extent], mode: Mode) -> Result<(), ClientError> {
        self.authorized("read", || {
            let regions: Vec<&mut [u8]> = mem.iter_mut().map(|r| &mut **r).collect();
            self.striped().read_regions(file, regions, mode)
        })
        .map(drop)
    }

    /// Writes the memory regions to the file extents (see the module docs).
    pub fn write_list(&self, mem: &[&[u8]], file: &[Extent], mode: Mode) -> Result<(), ClientError> {
        self.writing(|| self.striped().write_regions(file, mem, mode, self.write_through()))
    }

    /// `preadv` at many offsets: each buffer is filled from the file at its own offset, in one
    /// list I/O.
    pub fn pread_vec(&self, reads: &mut [(u64, &mut [u8])], mode: Mode) -> Result<(), ClientError> {
        let file: Vec<Extent> = reads.iter().map(|(offset, buf)| Extent { offset: *offset, len: buf.len() as u64 }).collect();
        self.authorized("read", || {
            let regions: Vec<&mut [u8]> = reads.iter_mut().map(|(_, buf)| &mut **buf).collect();
            self.striped().read_regions(&file, regions, mode)
        })
        .map(drop)
    }

    /// `pwritev` at many offsets: each buffer is written at its own offset, later ones winning
    /// where they overlap, in one list I/O.
    pub fn pwrite_vec(&self, writes: &[(u64, &[u8])], mode: Mode) -> Result<(), ClientError> {
        let file: Vec<Extent> = writes.iter().map(|(offset, buf)| Extent { offset: *offset, len: buf.len() as u64 }).collect();
        let regions: Vec<&[u8]> = writes.iter().map(|(_, buf)| *buf).collect();
        self.writing(|| self.striped().write_regions(&file, &regions, mode, self.write_through()))
    }

    /// Reads a strided pattern's blocks into `buf`, end to end.
    pub fn read_strided(&self, pattern: &StridedPattern, buf: &mut [u8], mode: Mode) -> Result<(), ClientError> {
        self.check_pattern_len(pattern.total_len(), buf.len())?;
        self.read_extents(&pattern.extents().collect::<Vec<_>>(), buf, mode)
    }

    /// Writes `buf` to a strided pattern's blocks, in order.
    pub fn write_strided(&self, pattern: &StridedPattern, buf: &[u8], mode: Mode) -> Result<(), ClientError> {
        self.check_pattern_len(pattern.total_len(), buf.len())?;
        self.write_extents(&pattern.extents().collect::<Vec<_>>(), buf, mode)
    }

    /// Reads a subarray into `buf`, packed in row-major order.
    pub fn read_subarray(&self, sub: &Subarray, buf: &mut [u8], mode: Mode) -> Result<(), ClientError> {
        self.check_pattern_len(sub.total_len(), buf.len())?;
        self.read_extents(&sub.extents().collect::<Vec<_>>(), buf, mode)
    }

    /// Writes `buf` (the subarray packed in row-major order) into the array in the file.
    pub fn write_subarray(&self, sub: &Subarray, buf: &[u8], mode: Mode) -> Result<(), ClientError> {
        self.check_pattern_len(sub.total_len(), buf.len())?;
        self.write_extents(&sub.extents().collect::<Vec<_>>(), buf, mode)
    }

    /// Refuses a mismatched buffer before a pattern is expanded into extents.
    fn check_pattern_len(&self, pattern_len: u64, buffer_len: usize) -> Result<(), ClientError> {
        if pattern_len == buffer_len as u64 {
            return Ok(());
        }
        Err(ClientError::BufferLength { path: self.path().to_string(), extents_len: pattern_len, buffer_len: buffer_len as u64 })
    }
}

#[cfg(test)]
mod tests {
    use tessera_layout::{plan, StripeLayout};
    use tessera_osd_proto::DataLayout;

    use super::*;
    use crate::command_plan::slot_commands;

    /// Each object's commands for `extents` under `mode` (no transfer cap in the way).
    fn commands(layout: &StripeLayout, extents: &[Extent], mode: Mode) -> Vec<Vec<DataLayout>> {
        let plans = plan(layout, extents).unwrap();
        plans.iter().map(|p| slot_commands(p, mode, 16 << 20).unwrap().into_iter().map(|c| c.layout).collect()).collect()
    }

    #[test]
    fn a_strided_pattern_is_one_strided_command_per_object() {
        // 1024 blocks of 64 B at a 1 KiB stride over 4 objects of 64 KiB units: 256 per object,
        // back to back on the object at the same stride.
        let layout = StripeLayout::new(64 << 10, 4).unwrap();
        let p = StridedPattern::new(0, 64, 1024, 1024).unwrap();
        let extents: Vec<Extent> = p.extents().collect();
        for mode in [Mode::Auto, Mode::Strided] {
            assert_eq!(commands(&layout, &extents, mode), vec![vec![DataLayout::Strided { stride: 1024, block_len: 64 }]; 4]);
        }
        assert!(commands(&layout, &extents, Mode::Sgl).iter().all(|c| matches!(&c[..], [DataLayout::List(l)] if l.len() == 256)));
        assert!(commands(&layout, &extents, Mode::Iterative).iter().all(|c| c.len() == 256));
    }

    #[test]
    fn a_subarray_is_one_nested_command_per_object() {
        // 8 planes of 16 rows of 64 elements of 8 B (row 512 B, plane 8 KiB = one unit), over
        // 4 objects: each holds 2 planes back to back; the subarray takes 8 rows of 32 elements
        // from every plane.
        let layout = StripeLayout::new(8 << 10, 4).unwrap();
        let s = Subarray::new(0, 8, &[8, 16, 64], &[0, 4, 16], &[8, 8, 32]).unwrap();
        let extents: Vec<Extent> = s.extents().collect();
        let nested = DataLayout::Nested { block_len: 256, levels: vec![(8, 512), (2, 8 << 10)] };
        for mode in [Mode::Auto, Mode::Strided] {
            assert_eq!(commands(&layout, &extents, mode), vec![vec![nested.clone()]; 4]);
        }
        assert!(commands(&layout, &extents, Mode::Iterative).iter().all(|c| c.len() == 16));
    }

    #[test]
    fn blocks_straddling_units_fall_back_to_a_list() {
        // A 3 KiB stride over 4 KiB units puts a block across a unit boundary every fourth
        // block: the objects' pieces are irregular, so Auto sends one SGL per object.
        let layout = StripeLayout::new(4 << 10, 2).unwrap();
        let extents: Vec<Extent> = StridedPattern::new(0, 2048, 3072, 16).unwrap().extents().collect();
        let auto = commands(&layout, &extents, Mode::Auto);
        assert_eq!(auto.len(), 2);
        assert!(auto.iter().all(|c| matches!(&c[..], [DataLayout::List(_)])), "{auto:?}");
    }
}
