//! Framing PDUs on a byte stream (RFC 7143 §11.1): BHS, AHS, optional header digest, data
//! segment padded to 4 bytes, optional data digest.
//!
//! This is the one place that touches `std::io`, through the `Read`/`Write` traits only (no
//! sockets), so the target and the initiator share it. The reader hands the header to the
//! caller before the data so the caller can read the data straight into its final buffer
//! (Data-Out into the task's assembly buffer, Data-In into the caller's result); the writer sends
//! the header and caller-owned data slices with one vectored write, so read data and write data
//! are copied by neither side.

use std::io::{self, BufRead, BufReader, IoSlice, IoSliceMut, Read, Write};

use thiserror::Error;

use crate::bhs::{Framing, BHS_LEN};
use crate::bytes::pad_len;
use crate::digest::{crc32c, crc32c_append, digest_bytes, digest_from_bytes, DIGEST_LEN};
use crate::error::DecodeError;
use crate::pdu::Pdu;

/// Buffer of the reader: large enough that small PDUs cost one `read` syscall for several
/// headers, while data segments of this size or more bypass it and land in place.
pub const READ_BUFFER_LEN: usize = 256 * 1024;

/// Which digests are in force on a connection (off during login until negotiated).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Digests {
    pub header: bool,
    pub data: bool,
}

#[derive(Debug, Error)]
pub enum ReadError {
    #[error("connection closed by peer")]
    Closed,
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),
    /// The framing can no longer be trusted: the connection must close (RFC 7143 §7.8).
    #[error("header digest mismatch")]
    HeaderDigest,
    #[error("data segment of {len} bytes exceeds MaxRecvDataSegmentLength {max}{}", text_hint(begins))]
    DataSegmentTooLong { len: u32, max: u32, begins: [u8; 4] },
    /// The data was consumed and the stream is still framed; the PDU must be rejected.
    #[error("data digest mismatch")]
    DataDigest,
    /// The socket's read timeout passed before a PDU began: nothing was consumed and the
    /// stream is still framed (a session uses this to notice a silent peer).
    #[error("no PDU arrived within the read timeout")]
    Idle,
}

/// When a header opens with four printable characters, the peer speaks some text protocol (an
/// HTTP server or proxy at a mistyped portal) and its "length" is a piece of its text: says so.
fn text_hint(begins: &[u8; 4]) -> String {
    if !begins.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
        return String::new();
    }
    format!(" (the header begins \"{}\": text, not iSCSI; is this address another service's?)", String::from_utf8_lossy(begins))
}

impl ReadError {
    /// True when the stream can no longer be framed and the connection must close.
    pub fn is_fatal(&self) -> bool {
        !matches!(self, ReadError::DataDigest | ReadError::Idle)
    }
}

/// One received header; its `data_segment_len` bytes are still unread.
#[derive(Debug)]
pub struct Incoming {
    pub bhs: [u8; BHS_LEN],
    pub framing: Framing,
    /// The decoded header, or why it could not be decoded (the stream is still framed; answer
    /// with a Reject and call [`PduReader::discard_data`]).
    pub pdu: Result<Pdu, DecodeError>,
}

impl Incoming {
    pub fn data_segment_len(&self) -> usize {
        self.framing.data_segment_len as usize
    }
}

/// Where [`PduReader::read_data_placed`] puts a data segment.
pub trait PlaceData<R> {
    /// Takes segment bytes `[at, at + bytes.len())` that the reader had already buffered.
    fn put(&mut self, at: usize, bytes: &[u8]);

    /// Moves segment bytes `[at, at + len)` straight from the stream. An error means the stream
    /// lost its framing (bytes were consumed but not all of them); a failure of the destination
    /// is not one: the implementation still consumes the `len` bytes and remembers it.
    fn transfer(&mut self, stream: &mut R, at: usize, len: usize) -> io::Result<()>;
}

pub struct PduReader<R: Read> {
    inner: BufReader<R>,
    pub digests: Digests,
    /// Our declared MaxRecvDataSegmentLength; longer segments close the connection.
    pub max_data_segment_len: u32,
}

impl<R: Read> PduReader<R> {
    pub fn new(inner: R, max_data_segment_len: u32) -> Self {
        Self::with_buffer_len(inner, max_data_segment_len, READ_BUFFER_LEN)
    }

    /// A reader whose buffer holds `buffer_len` bytes. Reading a header may fill the buffer with
    /// that much of the data behind it, which then costs one more copy: a reader that places
    /// large data segments elsewhere ([`PduReader::read_data_placed`]) keeps it small.
    pub fn with_buffer_len(inner: R, max_data_segment_len: u32, buffer_len: usize) -> Self {
        PduReader { inner: BufReader::with_capacity(buffer_len, inner), digests: Digests::default(), max_data_segment_len }
    }

    pub fn get_ref(&self) -> &R {
        self.inner.get_ref()
    }

    /// Reads a BHS, its AHS and header digest, and decodes it.
    pub fn read_header(&mut self) -> Result<Incoming, ReadError> {
        let mut bhs = [0u8; BHS_LEN];
        let first = match self.inner.read(&mut bhs) {
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => return Err(ReadError::Idle),
            other => other?,
        };
        if first == 0 {
            return Err(ReadError::Closed);
        }
        self.inner.read_exact(&mut bhs[first..]).map_err(eof_is_closed)?;
        let framing = Framing::parse(&bhs);
        // Checked before reading further so that garbage fails fast instead of waiting for
        // bytes that will never come.
        if framing.data_segment_len > self.max_data_segment_len {
            return Err(ReadError::DataSegmentTooLong {
                len: framing.data_segment_len,
                max: self.max_data_segment_len,
                begins: [bhs[0], bhs[1], bhs[2], bhs[3]],
            });
        }
        let mut ahs = vec![0u8; framing.total_ahs_len];
        self.inner.read_exact(&mut ahs).map_err(eof_is_closed)?;
        if self.digests.header {
            let mut d = [0u8; DIGEST_LEN];
            self.inner.read_exact(&mut d).map_err(eof_is_closed)?;
            if digest_from_bytes(d) != crc32c_append(crc32c(&bhs), &ahs) {
                return Err(ReadError::HeaderDigest);
            }
        }
        let pdu = Pdu::decode(&bhs, &ahs);
        Ok(Incoming { bhs, framing, pdu })
    }

    /// Reads exactly the data segment announced by the last header into `dst`, then its
    /// padding and digest.
    pub fn read_data(&mut self, dst: &mut [u8]) -> Result<(), ReadError> {
        self.inner.read_exact(dst).map_err(eof_is_closed)?;
        let mut pad = [0u8; 3];
        let pad = &mut pad[..pad_len(dst.len())];
        self.inner.read_exact(pad).map_err(eof_is_closed)?;
        if self.digests.data && !dst.is_empty() {
            let mut d = [0u8; DIGEST_LEN];
            self.inner.read_exact(&mut d).map_err(eof_is_closed)?;
            if digest_from_bytes(d) != crc32c_append(crc32c(dst), pad) {
                return Err(ReadError::DataDigest);
            }
        }
        Ok(())
    }

    /// Reads the data segment announced by the last header into `parts` end to end (their
    /// lengths must sum to the segment's), then its padding and digest: Data-In whose bytes
    /// belong in several places of the caller's memory lands there without a staging copy.
    /// Large runs go to the socket as one vectored read, small ones come out of the buffer.
    pub fn read_data_parts(&mut self, parts: &mut [&mut [u8]]) -> Result<(), ReadError> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        {
            let mut slices: Vec<IoSliceMut<'_>> = parts.iter_mut().map(|p| IoSliceMut::new(p)).collect();
            let mut rest = &mut slices[..];
            IoSliceMut::advance_slices(&mut rest, 0);
            while !rest.is_empty() {
                match self.inner.read_vectored(rest) {
                    Ok(0) => return Err(ReadError::Closed),
                    Ok(n) => IoSliceMut::advance_slices(&mut rest, n),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(eof_is_closed(e)),
                }
            }
        }
        let mut pad = [0u8; 3];
        let pad = &mut pad[..pad_len(len)];
        self.inner.read_exact(pad).map_err(eof_is_closed)?;
        if self.digests.data && len > 0 {
            let mut d = [0u8; DIGEST_LEN];
            self.inner.read_exact(&mut d).map_err(eof_is_closed)?;
            let crc = parts.iter().fold(0u32, |c, p| crc32c_append(c, p));
            if digest_from_bytes(d) != crc32c_append(crc, pad) {
                return Err(ReadError::DataDigest);
            }
        }
        Ok(())
    }

    /// Reads the data segment announced by the last header into `place` (the part this reader
    /// had buffered, then the rest straight from the stream), then its padding. Only without
    /// data digests: the digest needs the bytes in memory.
    pub fn read_data_placed(&mut self, len: usize, place: &mut impl PlaceData<R>) -> Result<(), ReadError> {
        assert!(!self.digests.data, "placed data segments cannot be checked against a data digest");
        let buffered = self.inner.buffer().len().min(len);
        if buffered > 0 {
            place.put(0, &self.inner.buffer()[..buffered]);
            self.inner.consume(buffered);
        }
        if buffered < len {
            place.transfer(self.inner.get_mut(), buffered, len - buffered).map_err(eof_is_closed)?;
        }
        let mut pad = [0u8; 3];
        self.inner.read_exact(&mut pad[..pad_len(len)]).map_err(eof_is_closed)?;
        Ok(())
    }

    /// Reads a (bounded, already checked against MaxRecvDataSegmentLength) data segment into a
    /// new vector: for small control payloads such as text, sense and NOP data.
    pub fn read_data_vec(&mut self, len: usize) -> Result<Vec<u8>, ReadError> {
        debug_assert!(len <= self.max_data_segment_len as usize);
        let mut v = vec![0u8; len];
        self.read_data(&mut v)?;
        Ok(v)
    }

    /// Skips a data segment (of a PDU being rejected), without allocating its length.
    pub fn discard_data(&mut self, len: usize) -> Result<(), ReadError> {
        let mut total = (len + pad_len(len)) as u64;
        if self.digests.data && len > 0 {
            total += DIGEST_LEN as u64;
        }
        let copied = io::copy(&mut (&mut self.inner).take(total), &mut io::sink())?;
        if copied != total {
            return Err(ReadError::Closed);
        }
        Ok(())
    }
}

fn eof_is_closed(e: io::Error) -> ReadError {
    if e.kind() == io::ErrorKind::UnexpectedEof {
        ReadError::Closed
    } else {
        ReadError::Io(e)
    }
}

pub struct PduWriter<W: Write> {
    inner: W,
    pub digests: Digests,
    header: Vec<u8>,
}

impl<W: Write> PduWriter<W> {
    pub fn new(inner: W) -> Self {
        PduWriter { inner, digests: Digests::default(), header: Vec::with_capacity(BHS_LEN + 64) }
    }

    pub fn get_ref(&self) -> &W {
        &self.inner
    }

    /// Sends one PDU whose data segment is the concatenation of `data` (sent in place).
    pub fn write_pdu(&mut self, pdu: &Pdu, data: &[&[u8]]) -> io::Result<()> {
        self.write_pdus(&[(pdu, data)])
    }

    /// Sends several PDUs with one `writev`, so that e.g. a Data-In and the SCSI Response that
    /// follows it leave in one TCP segment and the initiator wakes once, not twice.
    pub fn write_pdus(&mut self, pdus: &[(&Pdu, &[&[u8]])]) -> io::Result<()> {
        const PAD: [u8; 3] = [0u8; 3];
        self.header.clear();
        // Headers (and digests) first, into one buffer; remember where each PDU's pieces are.
        let mut layout = Vec::with_capacity(pdus.len());
        for (pdu, data) in pdus {
            let data_len: usize = data.iter().map(|d| d.len()).sum();
            let header_start = self.header.len();
            pdu.encode(data_len as u32, &mut self.header);
            if self.digests.header {
                let d = digest_bytes(crc32c(&self.header[header_start..]));
                self.header.extend_from_slice(&d);
            }
            let header_end = self.header.len();
            let with_digest = self.digests.data && data_len > 0;
            if with_digest {
                let crc = data.iter().fold(0u32, |c, d| crc32c_append(c, d));
                self.header.extend_from_slice(&digest_bytes(crc32c_append(crc, &PAD[..pad_len(data_len)])));
            }
            layout.push((header_start, header_end, data_len, with_digest));
        }
        let mut slices = Vec::with_capacity(pdus.len() * 4);
        for ((_, data), (header_start, header_end, data_len, with_digest)) in pdus.iter().zip(&layout) {
            slices.push(IoSlice::new(&self.header[*header_start..*header_end]));
            slices.extend(data.iter().filter(|d| !d.is_empty()).map(|d| IoSlice::new(d)));
            if pad_len(*data_len) > 0 {
                slices.push(IoSlice::new(&PAD[..pad_len(*data_len)]));
            }
            if *with_digest {
                slices.push(IoSlice::new(&self.header[*header_end..*header_end + DIGEST_LEN]));
            }
        }
        write_all_vectored(&mut self.inner, &mut slices)
    }

    /// Sends one PDU whose `data_len`-byte data segment is written by `send_data` straight to
    /// the underlying stream (e.g. with `sendfile` from a file), followed by the padding.
    /// Only without data digests: the digest would need the bytes in memory.
    pub fn write_pdu_streamed(&mut self, pdu: &Pdu, data_len: usize, send_data: impl FnOnce(&mut W) -> io::Result<()>) -> io::Result<()> {
        assert!(!self.digests.data, "streamed data segments cannot carry a data digest");
        self.header.clear();
        pdu.encode(data_len as u32, &mut self.header);
        if self.digests.header {
            let d = digest_bytes(crc32c(&self.header));
            self.header.extend_from_slice(&d);
        }
        self.inner.write_all(&self.header)?;
        send_data(&mut self.inner)?;
        let pad = [0u8; 3];
        self.inner.write_all(&pad[..pad_len(data_len)])
    }

    /// Sends bytes as they are: for tests that build malformed PDUs by hand.
    pub fn write_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.inner.write_all(bytes)?;
        self.inner.flush()
    }
}

/// `Write::write_all_vectored` is not stable; this is the same loop.
fn write_all_vectored<W: Write>(w: &mut W, mut slices: &mut [IoSlice<'_>]) -> io::Result<()> {
    while !slices.is_empty() {
        match w.write_vectored(slices) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut slices, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Helper for tests and tools: frames `pdu` + `data` into one byte vector.
pub fn encode_pdu(pdu: &Pdu, data: &[u8], digests: Digests) -> Vec<u8> {
    let mut w = PduWriter::new(Vec::new());
    w.digests = digests;
    // Writing to a Vec cannot fail.
    w.write_pdu(pdu, &[data]).expect("Vec write");
    w.inner
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pdu::NopOut;

    #[test]
    fn round_trip_with_digests_and_padding() {
        let digests = Digests { header: true, data: true };
        let pdu = Pdu::NopOut(NopOut { itt: 7, ttt: 0xFFFF_FFFF, ..Default::default() });
        let bytes = encode_pdu(&pdu, b"hello", digests);
        assert_eq!(bytes.len(), 48 + 4 + 8 + 4);
        let mut r = PduReader::new(&bytes[..], 1024);
        r.digests = digests;
        let inc = r.read_header().unwrap();
        assert_eq!(inc.pdu.as_ref().unwrap(), &pdu);
        assert_eq!(r.read_data_vec(inc.data_segment_len()).unwrap(), b"hello");
        assert!(matches!(r.read_header(), Err(ReadError::Closed)));
    }

    #[test]
    fn a_text_answer_is_told_apart_from_a_long_segment() {
        let http = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        let err = PduReader::new(&http[..], 1 << 20).read_header().unwrap_err();
        assert!(err.is_fatal());
        let said = err.to_string();
        assert!(said.contains("the header begins \"HTTP\": text, not iSCSI"), "{said}");
        let mut long = encode_pdu(&Pdu::NopOut(NopOut::default()), &[0u8; 2048], Digests::default());
        long.truncate(48);
        let said = PduReader::new(&long[..], 1024).read_header().unwrap_err().to_string();
        assert!(said.starts_with("data segment of 2048 bytes exceeds") && !said.contains("text"), "{said}");
    }

    #[test]
    fn digest_mismatches_detected() {
        let digests = Digests { header: true, data: true };
        let pdu = Pdu::NopOut(NopOut::default());
        let mut bytes = encode_pdu(&pdu, b"abcd", digests);
        bytes[53] ^= 1; // inside the data segment
        let mut r = PduReader::new(&bytes[..], 1024);
        r.digests = digests;
        let inc = r.read_header().unwrap();
        assert!(matches!(r.read_data_vec(inc.data_segment_len()), Err(ReadError::DataDigest)));
        bytes[3] ^= 1; // inside the BHS
        let mut r = PduReader::new(&bytes[..], 1024);
        r.digests = digests;
        assert!(matches!(r.read_header(), Err(ReadError::HeaderDigest)));
    }

    /// Goal: a segment read into several parts gives the same bytes as one buffer, checks the
    /// digest over all parts, and leaves the stream framed for the next PDU.
    #[test]
    fn data_lands_in_parts_with_digest() {
        let digests = Digests { header: true, data: true };
        let pdu = Pdu::NopOut(NopOut::default());
        let payload: Vec<u8> = (0..4099u32).map(|i| (i * 13) as u8).collect();
        let mut bytes = encode_pdu(&pdu, &payload, digests);
        bytes.extend(encode_pdu(&pdu, b"next", digests));
        let mut r = PduReader::new(&bytes[..], 8192);
        r.digests = digests;
        let inc = r.read_header().unwrap();
        let (mut a, mut b, mut c) = (vec![0u8; 1], vec![0u8; 0], vec![0u8; 4098]);
        r.read_data_parts(&mut [&mut a, &mut b, &mut c]).unwrap();
        assert_eq!([a, c].concat(), payload);
        let inc2 = r.read_header().unwrap();
        assert_eq!(r.read_data_vec(inc2.data_segment_len()).unwrap(), b"next");
        let _ = inc;

        let mut bad = encode_pdu(&pdu, &payload, digests);
        bad[48 + 4 + 4000] ^= 1;
        let mut r = PduReader::new(&bad[..], 8192);
        r.digests = digests;
        r.read_header().unwrap();
        let (mut a, mut b) = (vec![0u8; 2000], vec![0u8; 2099]);
        assert!(matches!(r.read_data_parts(&mut [&mut a, &mut b]), Err(ReadError::DataDigest)));
    }

    /// Collects placed bytes by position, and reads transferred ones itself from the stream.
    struct Collect(Vec<u8>);

    impl<R: Read> PlaceData<R> for Collect {
        fn put(&mut self, at: usize, bytes: &[u8]) {
            self.0[at..at + bytes.len()].copy_from_slice(bytes);
        }

        fn transfer(&mut self, stream: &mut R, at: usize, len: usize) -> io::Result<()> {
            stream.read_exact(&mut self.0[at..at + len])
        }
    }

    #[test]
    fn placed_segments_arrive_whole_whatever_was_buffered() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
        for buffer_len in [16, 64, 500, 4096] {
            let mut bytes = encode_pdu(&Pdu::NopOut(NopOut::default()), &data[..999], Digests::default());
            bytes.extend(encode_pdu(&Pdu::NopOut(NopOut { itt: 5, ..Default::default() }), b"next", Digests::default()));
            let mut r = PduReader::with_buffer_len(&bytes[..], 4096, buffer_len);
            let inc = r.read_header().unwrap();
            let mut got = Collect(vec![0; inc.data_segment_len()]);
            r.read_data_placed(inc.data_segment_len(), &mut got).unwrap();
            assert_eq!(got.0, &data[..999], "buffer of {buffer_len}");
            let next = r.read_header().unwrap();
            assert_eq!(next.pdu.unwrap(), Pdu::NopOut(NopOut { itt: 5, ..Default::default() }), "padding consumed");
        }
    }

    #[test]
    fn a_placed_segment_cut_short_is_a_closed_stream() {
        let bytes = encode_pdu(&Pdu::NopOut(NopOut::default()), &[1u8; 100], Digests::default());
        let mut r = PduReader::with_buffer_len(&bytes[..80], 4096, 16);
        let inc = r.read_header().unwrap();
        let mut got = Collect(vec![0; inc.data_segment_len()]);
        assert!(matches!(r.read_data_placed(inc.data_segment_len(), &mut got), Err(ReadError::Closed)));
    }

    #[test]
    fn oversized_segment_is_fatal() {
        let bytes = encode_pdu(&Pdu::NopOut(NopOut::default()), &[0u8; 100], Digests::default());
        let mut r = PduReader::new(&bytes[..], 64);
        let err = r.read_header().unwrap_err();
        assert!(err.is_fatal());
    }
}
