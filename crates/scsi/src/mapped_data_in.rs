//! Data-In held by reference as pieces of memory that mirrors a file (a shared mapping of an
//! object): a transport sends the pieces with one vectored write per PDU, so a list READ's
//! bytes go from the page cache to the socket in one copy, as a contiguous READ's do with
//! `sendfile`, instead of being gathered into a buffer first.

use std::fmt;
use std::io;
use std::sync::Arc;

/// Memory mirroring a file. A transport hands the kernel pointers into it (the kernel's copy
/// fails with EFAULT where the file lost bytes, it does not raise a signal) and copies out of
/// it with [`MappedMemory::copy_out`], which must fail rather than fault, when it needs the
/// bytes itself (e.g. for a data digest). Memory handed out for a placed WRITE
/// ([`crate::PlacedPieces`]) is a writable shared mapping: the transport hands the kernel
/// pointers into it to receive into (again EFAULT, not a signal, where the file lost a page).
pub trait MappedMemory: Send + Sync {
    /// The first byte; [`MappedMemory::len`] bytes follow.
    fn as_ptr(&self) -> *const u8;
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Copies `[offset, offset + buf.len())` into `buf`.
    fn copy_out(&self, offset: usize, buf: &mut [u8]) -> io::Result<()>;
    /// True once some page of the memory may have been replaced (e.g. by zeros after a fault):
    /// bytes handed to the kernel since may not be the file's.
    fn is_damaged(&self) -> bool {
        false
    }
}

/// One stretch of mapped Data-In: `len` bytes of the memory from `offset`, or `len` zeros.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MappedSegment {
    Memory { offset: usize, len: usize },
    Zeros(usize),
}

impl MappedSegment {
    pub fn len(&self) -> usize {
        match *self {
            MappedSegment::Memory { len, .. } | MappedSegment::Zeros(len) => len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The part `[from, from + len)` of this segment.
    fn cut(&self, from: usize, len: usize) -> MappedSegment {
        match *self {
            MappedSegment::Memory { offset, .. } => MappedSegment::Memory { offset: offset + from, len },
            MappedSegment::Zeros(_) => MappedSegment::Zeros(len),
        }
    }
}

/// Data-In as segments of mapped memory, end to end.
#[derive(Clone)]
pub struct MappedDataIn {
    memory: Arc<dyn MappedMemory>,
    segments: Vec<MappedSegment>,
    /// Data-In offset of each segment, for finding a PDU's segments by binary search.
    starts: Vec<u64>,
    total: u64,
}

impl MappedDataIn {
    /// `None` if a segment lies outside the memory.
    pub fn new(memory: Arc<dyn MappedMemory>, segments: Vec<MappedSegment>) -> Option<MappedDataIn> {
        let fits = |s: &MappedSegment| match *s {
            MappedSegment::Memory { offset, len } => offset.checked_add(len).is_some_and(|end| end <= memory.len()),
            MappedSegment::Zeros(_) => true,
        };
        if !segments.iter().all(fits) {
            return None;
        }
        let mut starts = Vec::with_capacity(segments.len());
        let mut total = 0u64;
        for s in &segments {
            starts.push(total);
            total += s.len() as u64;
        }
        Some(MappedDataIn { memory, segments, starts, total })
    }

    pub fn total_len(&self) -> u64 {
        self.total
    }

    pub fn memory(&self) -> &dyn MappedMemory {
        &*self.memory
    }

    /// The segments covering Data-In `[at, at + len)`, cut to it (shorter if the Data-In ends
    /// first).
    pub fn slices(&self, at: u64, len: usize) -> Vec<MappedSegment> {
        let end = at.saturating_add(len as u64).min(self.total);
        let mut out = Vec::new();
        let first = self.starts.partition_point(|&s| s <= at).saturating_sub(1);
        for (s, &start) in self.segments[first..].iter().zip(&self.starts[first..]) {
            if start >= end {
                break;
            }
            let from = at.saturating_sub(start) as usize;
            let to = ((end - start) as usize).min(s.len());
            if to > from {
                out.push(s.cut(from, to - from));
            }
        }
        out
    }

    /// Fills `buf` with the Data-In bytes from offset `at` (zeros past the end).
    pub fn read_at(&self, at: u64, buf: &mut [u8]) -> io::Result<()> {
        let mut done = 0;
        for s in self.slices(at, buf.len()) {
            let part = &mut buf[done..done + s.len()];
            match s {
                MappedSegment::Memory { offset, .. } => self.memory.copy_out(offset, part)?,
                MappedSegment::Zeros(_) => part.fill(0),
            }
            done += s.len();
        }
        buf[done..].fill(0);
        Ok(())
    }
}

impl fmt::Debug for MappedDataIn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MappedDataIn").field("segments", &self.segments.len()).field("total", &self.total).finish()
    }
}

impl PartialEq for MappedDataIn {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.memory.as_ptr(), other.memory.as_ptr()) && self.segments == other.segments
    }
}

impl Eq for MappedDataIn {}

#[cfg(test)]
mod tests {
    use super::*;

    struct Bytes(Vec<u8>);

    impl MappedMemory for Bytes {
        fn as_ptr(&self) -> *const u8 {
            self.0.as_ptr()
        }
        fn len(&self) -> usize {
            self.0.len()
        }
        fn copy_out(&self, offset: usize, buf: &mut [u8]) -> io::Result<()> {
            buf.copy_from_slice(&self.0[offset..offset + buf.len()]);
            Ok(())
        }
    }

    /// Goal: any window of the Data-In reads as the segments laid end to end. Method: every
    /// (at, len) over a small mixed layout against the concatenation.
    #[test]
    fn every_window_reads_the_concatenation() {
        let memory = Arc::new(Bytes((0..100u8).collect()));
        let segments = vec![
            MappedSegment::Memory { offset: 10, len: 5 },
            MappedSegment::Zeros(3),
            MappedSegment::Memory { offset: 90, len: 10 },
            MappedSegment::Memory { offset: 0, len: 2 },
        ];
        let whole: Vec<u8> = [&memory.0[10..15], &[0, 0, 0][..], &memory.0[90..100], &memory.0[0..2]].concat();
        let d = MappedDataIn::new(memory, segments).unwrap();
        assert_eq!(d.total_len(), whole.len() as u64);
        for at in 0..=whole.len() {
            for len in 0..=whole.len() + 3 {
                let mut buf = vec![7u8; len];
                d.read_at(at as u64, &mut buf).unwrap();
                let mut expected: Vec<u8> = whole[at..(at + len).min(whole.len())].to_vec();
                expected.resize(len, 0);
                assert_eq!(buf, expected, "at {at} len {len}");
            }
        }
    }

    #[test]
    fn segments_outside_the_memory_are_refused() {
        let memory = Arc::new(Bytes(vec![0; 8]));
        assert!(MappedDataIn::new(memory.clone(), vec![MappedSegment::Memory { offset: 4, len: 5 }]).is_none());
        assert!(MappedDataIn::new(memory, vec![MappedSegment::Memory { offset: usize::MAX, len: 2 }]).is_none());
    }
}
