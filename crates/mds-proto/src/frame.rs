//! Framing. Every message travels in one frame:
//!
//! ```text
//! 0..4    frame length (u32, big-endian): bytes after this field, 9..=FRAME_LEN_MAX-4
//! 4..12   request id (u64): chosen by the sender of a request, echoed by its reply
//! 12      kind: 1 request, 2 reply
//! 13..    a request: its caller (caller.rs: uid, gid, groups), then the request (request.rs)
//!         a reply: the reply (reply.rs)
//! ```
//!
//! Why hand-written and not serde + postcard: the workspace's other codecs are hand-written
//! with byte tables (style.md), the message set is small, and decoding field by field lets each
//! length and count be checked against a named bound before anything is allocated, which a
//! generic deserializer only bounds by the frame size. The cost is ~600 lines, paid once.
//!
//! A reader takes the 4 length bytes, checks them with [`frame_body_len`] before reading on (so
//! a hostile length never allocates), reads the body, and decodes it with [`Frame::decode_body`].

use crate::caller::Caller;
use crate::error::{DecodeError, FsError};
use crate::limits::FRAME_LEN_MAX;
use crate::reply::{decode_result, encode_result, Reply};
use crate::request::Request;
use crate::wire::{Reader, Writer};

pub const FRAME_HEADER_LEN: usize = 4;
const ID: usize = 0; // offsets within the body
const KIND: usize = ID + 8;
const MESSAGE: usize = KIND + 1;
/// The shortest body: id and kind (a message is at least one more byte, checked by its decoder).
pub const BODY_LEN_MIN: usize = MESSAGE;
const _: () = assert!(MESSAGE == 9);

const KIND_REQUEST: u8 = 1;
const KIND_REPLY: u8 = 2;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// A request and the user it is sent for.
    Request(Caller, Request),
    Reply(Result<Reply, FsError>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    pub request_id: u64,
    pub message: Message,
}

/// The body length a frame header announces, or why it is refused.
pub fn frame_body_len(header: [u8; FRAME_HEADER_LEN]) -> Result<usize, DecodeError> {
    let len = u32::from_be_bytes(header) as usize;
    let max = FRAME_LEN_MAX - FRAME_HEADER_LEN;
    if !(BODY_LEN_MIN..=max).contains(&len) {
        return Err(DecodeError::FrameLength { len: len as u64, min: BODY_LEN_MIN, max });
    }
    Ok(len)
}

/// Encodes a whole frame, header included. Panics if the message breaks the frame bound: every
/// message's parts are bounded so that cannot happen (limits.rs asserts the sums).
pub fn encode_frame(frame: &Frame) -> Vec<u8> {
    match &frame.message {
        Message::Request(caller, r) => encode_request_frame(frame.request_id, caller, r),
        Message::Reply(r) => {
            let mut w = frame_start(frame.request_id, KIND_REPLY);
            encode_result(r, &mut w);
            frame_end(w)
        }
    }
}

/// [`encode_frame`] of a request the caller keeps (to send it again on another connection).
pub fn encode_request_frame(request_id: u64, caller: &Caller, request: &Request) -> Vec<u8> {
    let mut w = frame_start(request_id, KIND_REQUEST);
    caller.encode(&mut w);
    request.encode(&mut w);
    frame_end(w)
}

fn frame_start(request_id: u64, kind: u8) -> Writer {
    let mut w = Writer::default();
    w.u32(0); // patched by frame_end
    w.u64(request_id);
    w.u8(kind);
    w
}

fn frame_end(w: Writer) -> Vec<u8> {
    let mut buf = w.buf;
    assert!(buf.len() <= FRAME_LEN_MAX, "frame of {} bytes over FRAME_LEN_MAX", buf.len());
    let body_len = (buf.len() - FRAME_HEADER_LEN) as u32;
    buf[..FRAME_HEADER_LEN].copy_from_slice(&body_len.to_be_bytes());
    buf
}

/// Decodes one whole frame (header and body, nothing more).
pub fn decode_frame(bytes: &[u8]) -> Result<Frame, DecodeError> {
    let header: [u8; FRAME_HEADER_LEN] =
        bytes.get(..FRAME_HEADER_LEN).and_then(|h| h.try_into().ok()).ok_or(DecodeError::Truncated { at: bytes.len() })?;
    let len = frame_body_len(header)?;
    let body = &bytes[FRAME_HEADER_LEN..];
    if body.len() < len {
        return Err(DecodeError::Truncated { at: bytes.len() });
    }
    if body.len() > len {
        return Err(DecodeError::TrailingBytes { count: body.len() - len });
    }
    Frame::decode_body(body)
}

impl Frame {
    /// Decodes a frame body (everything after the length field).
    pub fn decode_body(body: &[u8]) -> Result<Frame, DecodeError> {
        let request_id = Self::request_id_of(body).ok_or(DecodeError::Truncated { at: body.len() })?;
        let message = &body[MESSAGE..];
        let message = match body[KIND] {
            KIND_REQUEST => {
                let mut r = Reader::new(message);
                let caller = Caller::decode(&mut r).map_err(|e| rebase(e, MESSAGE))?;
                let at = MESSAGE + r.position();
                Message::Request(caller, Request::decode(&message[r.position()..]).map_err(|e| rebase(e, at))?)
            }
            KIND_REPLY => Message::Reply(decode_result(message).map_err(|e| rebase(e, MESSAGE))?),
            kind => return Err(DecodeError::UnknownTag { what: "frame kind", value: kind as u32, at: KIND }),
        };
        Ok(Frame { request_id, message })
    }

    /// The request id of a body too broken to decode, so a server can still answer it.
    pub fn request_id_of(body: &[u8]) -> Option<u64> {
        if body.len() < BODY_LEN_MIN {
            return None;
        }
        Some(u64::from_be_bytes(body[ID..KIND].try_into().ok()?))
    }
}

/// Shifts a message-relative error position to a body-relative one.
fn rebase(e: DecodeError, by: usize) -> DecodeError {
    match e {
        DecodeError::Truncated { at } => DecodeError::Truncated { at: at + by },
        DecodeError::UnknownTag { what, value, at } => DecodeError::UnknownTag { what, value, at: at + by },
        DecodeError::TooLong { what, value, max, at } => DecodeError::TooLong { what, value, max, at: at + by },
        DecodeError::Invalid { what, at } => DecodeError::Invalid { what, at: at + by },
        other => other,
    }
}
