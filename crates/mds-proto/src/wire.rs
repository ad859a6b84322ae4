//! The primitives every message codec uses: big-endian fixed-width integers, and length-prefixed
//! byte strings and lists whose lengths are checked against a named bound and against the bytes
//! actually left before anything is allocated.

use crate::error::DecodeError;

/// Appends fields to a message under construction.
#[derive(Default)]
pub struct Writer {
    pub buf: Vec<u8>,
}

impl Writer {
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    pub fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }
    pub fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }
    pub fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }
    pub fn i64(&mut self, v: i64) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }
    pub fn bool(&mut self, v: bool) {
        self.u8(v as u8);
    }
    /// A string with a 2-byte length. Callers keep strings within their bound (asserted: an
    /// over-long string here is a programmer error, the peer would refuse it anyway).
    pub fn str(&mut self, s: &str, max: usize) {
        assert!(s.len() <= max && max <= u16::MAX as usize, "string of {} bytes over its bound {max}", s.len());
        self.u16(s.len() as u16);
        self.buf.extend_from_slice(s.as_bytes());
    }
    /// Fixed-length bytes, as they are.
    pub fn bytes(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }
    /// A list count (4 bytes); the caller then writes each element.
    pub fn count(&mut self, n: usize, max: u32) {
        assert!(n <= max as usize, "list of {n} over its bound {max}");
        self.u32(n as u32);
    }
    /// `Some` as 1 + value, `None` as 0.
    pub fn option<T>(&mut self, v: &Option<T>, f: impl FnOnce(&mut Self, &T)) {
        match v {
            Some(x) => {
                self.u8(1);
                f(self, x)
            }
            None => self.u8(0),
        }
    }
}

/// Reads fields of one message; every read checks the bytes left.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    pub fn position(&self) -> usize {
        self.pos
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.remaining() < n {
            return Err(DecodeError::Truncated { at: self.buf.len() });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }
    pub fn u16(&mut self) -> Result<u16, DecodeError> {
        self.array().map(u16::from_be_bytes)
    }
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        self.array().map(u32::from_be_bytes)
    }
    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        self.array().map(u64::from_be_bytes)
    }
    pub fn i64(&mut self) -> Result<i64, DecodeError> {
        self.array().map(i64::from_be_bytes)
    }

    pub fn bool(&mut self) -> Result<bool, DecodeError> {
        let at = self.pos;
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(DecodeError::Invalid { what: "boolean", at }),
        }
    }

    /// A 2-byte-length UTF-8 string of at most `max` bytes.
    pub fn str(&mut self, what: &'static str, max: usize) -> Result<String, DecodeError> {
        let at = self.pos;
        let len = self.u16()? as usize;
        if len > max {
            return Err(DecodeError::TooLong { what, value: len as u64, max: max as u64, at });
        }
        let bytes = self.take(len)?;
        std::str::from_utf8(bytes).map(str::to_owned).map_err(|_| DecodeError::Invalid { what, at })
    }

    /// A list count of at most `max`, and at most what the bytes left can hold given that each
    /// element takes at least `min_elem_len` bytes; only then may the caller allocate.
    pub fn count(&mut self, what: &'static str, max: u32, min_elem_len: usize) -> Result<usize, DecodeError> {
        let at = self.pos;
        let n = self.u32()?;
        if n > max {
            return Err(DecodeError::TooLong { what, value: n as u64, max: max as u64, at });
        }
        if (n as usize).saturating_mul(min_elem_len.max(1)) > self.remaining() {
            return Err(DecodeError::Truncated { at: self.buf.len() });
        }
        Ok(n as usize)
    }

    pub fn option<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T, DecodeError>) -> Result<Option<T>, DecodeError> {
        if self.bool()? {
            f(self).map(Some)
        } else {
            Ok(None)
        }
    }

    /// Succeeds only when every byte was consumed.
    pub fn finish(self) -> Result<(), DecodeError> {
        match self.remaining() {
            0 => Ok(()),
            count => Err(DecodeError::TrailingBytes { count }),
        }
    }
}
