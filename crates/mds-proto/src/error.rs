//! Errors: [`FsError`], what a namespace operation answers when it fails (each kind knows its
//! errno, the way an HTTP error knows its status), and [`DecodeError`], why bytes off the wire
//! are not a valid frame.

use thiserror::Error;

/// The outcome of a failed namespace operation. Kinds only, no free text: the client turns one
/// into an errno and the operation it asked for says the rest.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq, Hash)]
pub enum FsError {
    #[error("no such file or directory")]
    NotFound,
    #[error("file exists")]
    Exists,
    #[error("directory not empty")]
    NotEmpty,
    #[error("not a directory")]
    NotDir,
    #[error("is a directory")]
    IsDir,
    #[error("invalid argument")]
    Invalid,
    #[error("file name too long")]
    NameTooLong,
    #[error("input/output error (an OSD or the metadata store failed; `tessera status` shows which daemon is down)")]
    Io,
    #[error("stale inode")]
    Stale,
    /// The operation spans metadata servers in a way Tessera does not support (rename between
    /// directories on different servers); like EXDEV, the caller copies and deletes instead.
    #[error("crosses metadata servers")]
    CrossServer,
    /// The request names an inode this server is not the home of; ask the server in its id.
    #[error("inode lives on another metadata server")]
    Misdirected,
    #[error("no space left on device (a disk under the metadata server or the OSDs is full, or object or inode ids are exhausted)")]
    NoSpace,
    #[error("resource busy")]
    Busy,
    #[error("malformed request")]
    Protocol,
    /// The mode of the file, or of a directory the operation reads or changes, does not allow
    /// it for the caller (truncating a file without write permission, creating in a directory
    /// without write and search permission).
    #[error("permission denied")]
    Access,
    /// Only the inode's owner or the superuser may do this (chmod, utimes, chown), or only the
    /// superuser (giving a file away, repair, the servers' own requests).
    #[error("operation not permitted")]
    NotPermitted,
    /// A walk met more symbolic links than it follows (40, as Linux): a loop of links.
    #[error("too many levels of symbolic links (a loop of links?)")]
    Loop,
    /// A size or offset past what a file can hold.
    #[error("file too large")]
    TooBig,
    /// Another metadata server that this one had to ask (for the attributes of an inode homed
    /// there, say) did not answer.
    #[error("a metadata server did not answer (`tessera status` shows which daemon is down)")]
    PeerDown,
}

impl FsError {
    pub const ALL: [FsError; 19] = [
        FsError::NotFound,
        FsError::Exists,
        FsError::NotEmpty,
        FsError::NotDir,
        FsError::IsDir,
        FsError::Invalid,
        FsError::NameTooLong,
        FsError::Io,
        FsError::Stale,
        FsError::CrossServer,
        FsError::Misdirected,
        FsError::NoSpace,
        FsError::Busy,
        FsError::Protocol,
        FsError::Access,
        FsError::NotPermitted,
        FsError::Loop,
        FsError::TooBig,
        FsError::PeerDown,
    ];

    /// The Linux errno. It is also the wire code, so a capture reads naturally.
    pub fn errno(self) -> i32 {
        match self {
            FsError::NotPermitted => 1, // EPERM
            FsError::NotFound => 2,     // ENOENT
            FsError::Io => 5,           // EIO
            FsError::Access => 13,      // EACCES
            FsError::Busy => 16,        // EBUSY
            FsError::TooBig => 27,      // EFBIG
            FsError::Exists => 17,      // EEXIST
            FsError::CrossServer => 18, // EXDEV
            FsError::NotDir => 20,      // ENOTDIR
            FsError::IsDir => 21,       // EISDIR
            FsError::Invalid => 22,     // EINVAL
            FsError::NoSpace => 28,     // ENOSPC
            FsError::NameTooLong => 36, // ENAMETOOLONG
            FsError::NotEmpty => 39,    // ENOTEMPTY
            FsError::Loop => 40,        // ELOOP
            FsError::Misdirected => 66, // EREMOTE
            FsError::Protocol => 71,    // EPROTO
            FsError::PeerDown => 112,   // EHOSTDOWN
            FsError::Stale => 116,      // ESTALE
        }
    }

    pub fn from_errno(errno: i32) -> Option<FsError> {
        FsError::ALL.into_iter().find(|e| e.errno() == errno)
    }
}

/// Why bytes are not a valid frame or message. `at` is the byte offset in the frame body.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum DecodeError {
    #[error("frame length {len} outside {min}..={max}{}", text_hint(*len))]
    FrameLength { len: u64, min: usize, max: usize },
    #[error("message ends early at byte {at}")]
    Truncated { at: usize },
    #[error("{count} bytes left over after the message")]
    TrailingBytes { count: usize },
    #[error("unknown {what} {value} at byte {at}")]
    UnknownTag { what: &'static str, value: u32, at: usize },
    #[error("{what} {value} at byte {at} exceeds {max}")]
    TooLong { what: &'static str, value: u64, max: u64, at: usize },
    #[error("invalid {what} at byte {at}")]
    Invalid { what: &'static str, at: usize },
    /// A frame on a sealed connection (`seal.rs`) that does not open under its session key.
    #[error("a sealed frame failed its integrity check: altered, replayed, out of order, or not sealed under this connection's key")]
    Unsealed,
}

/// When a frame's length field is four printable characters, the peer is speaking some text
/// protocol (an HTTP server or proxy at a mistyped address, a person typing at the port): says
/// so, since the number alone reads as a Tessera bug.
fn text_hint(len: u64) -> String {
    let Ok(word) = u32::try_from(len) else { return String::new() };
    let bytes = word.to_be_bytes();
    if !bytes.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
        return String::new();
    }
    format!(" (it begins \"{}\": text, not a Tessera frame; is this address another service's?)", String::from_utf8_lossy(&bytes))
}

impl DecodeError {
    /// The answer a server sends for a request it could not decode: an over-long name keeps its
    /// meaning, everything else is a protocol error.
    pub fn fs_error(&self) -> FsError {
        match self {
            DecodeError::TooLong { what: "name", .. } | DecodeError::TooLong { what: "symlink target", .. } => FsError::NameTooLong,
            _ => FsError::Protocol,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_round_trips_and_is_unique() {
        for e in FsError::ALL {
            assert_eq!(FsError::from_errno(e.errno()), Some(e));
        }
        assert_eq!(FsError::from_errno(0), None);
    }

    #[test]
    fn a_text_answer_is_told_apart_from_a_bad_length() {
        let http = crate::frame::frame_body_len(*b"HTTP").unwrap_err().to_string();
        assert!(http.contains("it begins \"HTTP\": text, not a Tessera frame"), "{http}");
        let huge = crate::frame::frame_body_len(0x0100_0000u32.to_be_bytes()).unwrap_err().to_string();
        assert!(huge.starts_with("frame length 16777216 outside") && !huge.contains("text"), "{huge}");
    }
}
