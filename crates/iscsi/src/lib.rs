//! iSCSI (RFC 7143), sans-IO: PDU codecs ([`pdu`]), framing over `Read`/`Write` ([`stream`]),
//! CRC32C digests ([`digest`]), text keys ([`text`]) and login negotiation ([`login`]). The
//! target's socket loop lives in `tessera-target`, the initiator's in `tessera-initiator`.

pub mod ahs;
pub mod bhs;
mod bytes;
pub mod digest;
pub mod error;
pub mod fuzzing;
pub mod login;
pub mod lun;
pub mod pdu;
pub mod serial;
pub mod stream;
pub mod text;

pub use bhs::{Opcode, BHS_LEN, RESERVED_TAG};
pub use bytes::pad_len;
pub use error::{DecodeError, TextError};
pub use pdu::Pdu;
pub use stream::{Digests, Incoming, PduReader, PduWriter, PlaceData, ReadError};
