//! Bounds on everything an MDS message can carry. Decoders check each length and count against
//! these before allocating, so a hostile peer can make us allocate at most one frame.

use tessera_layout::STRIPE_COUNT_MAX;

/// Largest frame, header included. One READDIR page or a full cluster map fits with room;
/// nothing in the namespace protocol needs more, and bulk data never passes through the MDS.
pub const FRAME_LEN_MAX: usize = 1 << 20;

/// Longest name in a directory (POSIX NAME_MAX on Linux).
pub const NAME_LEN_MAX: usize = 255;

/// Longest symbolic link target (PATH_MAX minus the terminating NUL).
pub const SYMLINK_LEN_MAX: usize = 4095;

/// Entries in one READDIR reply.
pub const READDIR_ENTRIES_MAX: u32 = 1024;

/// Storage nodes in a cluster map; a file may stripe over all of them.
pub const OSDS_MAX: u32 = STRIPE_COUNT_MAX;

/// Metadata servers in one namespace: the inode id keeps the home server in 6 bits.
pub const SERVERS_MAX: u32 = 64;

/// Longest network address ("host:port" or an iSCSI portal) in a cluster map.
pub const ADDR_LEN_MAX: usize = 256;

/// Orphans one REPAIR reply lists (it also gives how many were found in all).
pub const ORPHANS_LISTED_MAX: u32 = 4096;

/// Namespace faults of each kind one REPAIR reply lists (directory inodes without a name,
/// entries naming a gone directory); more are found by running it again after a removal.
pub const FAULTS_LISTED_MAX: u32 = 1024;

/// Supplementary groups a request's caller names (AUTH_SYS allows 16; Linux users in a few
/// dozen groups are common on shared clusters). Fits the one-byte count.
pub const GROUPS_MAX: usize = 32;

/// Encoded size of an [`crate::Attr`] (see `types.rs`), used for the page bound below.
pub const ATTR_WIRE_LEN: usize = 8 + 1 + 4 * 4 + 8 + 3 * 12 + 8;

// One full READDIR page (length-prefixed name + attributes per entry) fits in a frame.
const _: () = assert!((READDIR_ENTRIES_MAX as usize) * (2 + NAME_LEN_MAX + ATTR_WIRE_LEN) + 64 < FRAME_LEN_MAX);
// A full cluster map fits in a frame.
const _: () = assert!((OSDS_MAX as usize + SERVERS_MAX as usize) * (2 + ADDR_LEN_MAX + 8) + 64 < FRAME_LEN_MAX);
// A file layout naming every OSD fits in a frame.
const _: () = assert!((STRIPE_COUNT_MAX as usize) * 12 + 64 < FRAME_LEN_MAX);
const _: () = assert!(SERVERS_MAX <= 64);
// A REPAIR reply listing the most orphans and faults fits in a frame.
const _: () = assert!((ORPHANS_LISTED_MAX as usize) * 12 + (FAULTS_LISTED_MAX as usize) * (8 + 8 + 2 + NAME_LEN_MAX + 8) + 64 < FRAME_LEN_MAX);
const _: () = assert!(GROUPS_MAX <= u8::MAX as usize);
