//! The memory side of list I/O: the caller's regions (one buffer, or many slices anywhere in
//! memory) seen as one stream, their concatenation in order. A file extent list is planned
//! against offsets in that stream (tessera-layout's `Piece::buffer_offset`); these helpers turn a
//! range of the stream back into the regions' own slices, so nothing is copied to make the
//! regions contiguous first.

/// Total bytes of regions with these lengths; `None` past 2^64.
pub fn total_len(lens: impl IntoIterator<Item = usize>) -> Option<u64> {
    lens.into_iter().try_fold(0u64, |total, n| total.checked_add(n as u64))
}

/// Regions to write from.
pub struct Source<'a> {
    /// The non-empty regions in order, and where each starts in the stream.
    regions: Vec<&'a [u8]>,
    starts: Vec<u64>,
}

impl<'a> Source<'a> {
    pub fn new(regions: &[&'a [u8]]) -> Source<'a> {
        let regions: Vec<&'a [u8]> = regions.iter().copied().filter(|r| !r.is_empty()).collect();
        let mut at = 0u64;
        let starts = regions
            .iter()
            .map(|r| {
                let s = at;
                at += r.len() as u64;
                s
            })
            .collect();
        Source { regions, starts }
    }

    /// The slices holding stream bytes [at, at + len), in order. The range must lie inside
    /// the stream (the caller checked the regions against the extents).
    pub fn slices(&self, at: u64, len: u64) -> impl Iterator<Item = &'a [u8]> + '_ {
        let first = self.starts.partition_point(|&s| s <= at).saturating_sub(1);
        let end = at + len;
        self.regions[first..].iter().zip(&self.starts[first..]).map_while(move |(r, &s)| {
            if s >= end {
                return None;
            }
            let from = at.saturating_sub(s) as usize;
            let to = (end - s).min(r.len() as u64) as usize;
            Some(&r[from..to])
        })
    }

    /// The slices holding the bytes of `runs` ((stream offset, length), in order), borrowed from
    /// the regions: the OSD client sends them as a gather list or packs them, by size
    /// (`OsdClient::write_scattered`).
    pub fn runs(&self, runs: &[(u64, u64)]) -> Vec<&'a [u8]> {
        runs.iter().flat_map(|&(at, len)| self.slices(at, len)).collect()
    }
}

/// Regions to read into, handed out front to back as disjoint slices.
pub struct Carver<'b> {
    rest: std::vec::IntoIter<&'b mut [u8]>,
    current: &'b mut [u8],
}

impl<'b> Carver<'b> {
    pub fn new(regions: Vec<&'b mut [u8]>) -> Carver<'b> {
        Carver { rest: regions.into_iter(), current: &mut [] }
    }

    /// Appends the next `len` bytes of the stream to `out`, as one slice per region they touch.
    /// Panics if the regions end first: callers check the lengths before carving.
    pub fn take(&mut self, mut len: u64, out: &mut Vec<&'b mut [u8]>) {
        while len > 0 {
            if self.current.is_empty() {
                self.current = self.rest.next().expect("memory regions shorter than the extents");
                continue;
            }
            let n = len.min(self.current.len() as u64) as usize;
            let (head, tail) = std::mem::take(&mut self.current).split_at_mut(n);
            out.push(head);
            self.current = tail;
            len -= n as u64;
        }
    }

    /// Whether every byte of every region was handed out.
    pub fn is_done(&mut self) -> bool {
        self.current.is_empty() && self.rest.all(|r| r.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_cross_regions_and_skip_empty_ones() {
        let (a, b, c) = ([1u8, 2, 3], [4u8, 5], [6u8, 7, 8, 9]);
        let src = Source::new(&[&a[..], &[], &b[..], &c[..]]);
        let got: Vec<&[u8]> = src.slices(2, 5).collect();
        assert_eq!(got, vec![&[3u8][..], &[4, 5], &[6, 7]]);
        assert_eq!(src.slices(5, 4).collect::<Vec<_>>(), vec![&[6u8, 7, 8, 9][..]]);
        assert_eq!(src.runs(&[(5, 2)]), vec![&[6u8, 7][..]]);
        assert_eq!(src.runs(&[(7, 2), (0, 4)]).concat(), vec![8, 9, 1, 2, 3, 4]);
        assert_eq!(src.runs(&[(1, 3)]), vec![&[2u8, 3][..], &[4]]);
        // Borrowed from the regions, never copied.
        assert_eq!(src.runs(&[(5, 2)])[0].as_ptr(), c.as_ptr());
    }

    #[test]
    fn carver_hands_out_the_regions_in_order() {
        let (mut a, mut empty, mut b) = ([0u8; 3], [0u8; 0], [0u8; 4]);
        let mut carver = Carver::new(vec![&mut a[..], &mut empty[..], &mut b[..]]);
        let (mut first, mut second) = (Vec::new(), Vec::new());
        carver.take(2, &mut first);
        carver.take(4, &mut second);
        assert!(!carver.is_done());
        assert_eq!(second.iter().map(|s| s.len()).collect::<Vec<_>>(), vec![1, 3]);
        second[0][0] = 7;
        second[1][2] = 9;
        let mut last = Vec::new();
        carver.take(1, &mut last);
        assert!(carver.is_done());
        assert_eq!((a, b), ([0, 0, 7], [0, 0, 9, 0]));
        assert_eq!(total_len([3, 0, 4]), Some(7));
    }
}
