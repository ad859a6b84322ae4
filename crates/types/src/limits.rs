//! Every bound Tessera enforces on input from the network lives here, so that each parser
//! checks against one named constant and the relations between bounds are checked when
//! compiling.

/// Largest iSCSI data segment either side will accept in one PDU (RFC 7143 §13.12 allows up to
/// 2^24 - 1; we offer 1 MiB, enough to keep per-PDU overhead under 0.01%).
pub const DATA_SEGMENT_LEN_MAX: u32 = 1 << 20;

/// Largest burst (MaxBurstLength / FirstBurstLength) we offer or accept (RFC 7143 max 2^24 - 1).
pub const BURST_LEN_MAX: u32 = (1 << 24) - 1;

/// Largest total Data-Out or Data-In of one SCSI command. Bounds memory per command: the target
/// assembles Data-Out in one buffer before executing. 256 MiB keeps the bench's 64 MiB transfers
/// well inside while refusing a 4 GiB Expected Data Transfer Length from a hostile initiator.
pub const TRANSFER_LEN_MAX: u64 = 256 << 20;

/// Largest total AHS length in a PDU (the field is one byte of 4-byte words).
pub const AHS_LEN_MAX: usize = 255 * 4;

/// Longest CDB we accept (OSD-2 r05 uses 236 bytes; SPC allows up to 260 in a variable CDB).
pub const CDB_LEN_MAX: usize = 260;

/// Text key=value data accepted during login or a Text exchange, over all PDUs of one exchange.
pub const TEXT_LEN_MAX: usize = 64 * 1024;

/// Commands one session may have in flight (the CmdSN window the target advertises).
pub const CMD_WINDOW: u32 = 128;

/// Sessions one target serves at most; further logins are refused with "out of resources".
/// A parallel file system's OSD serves every client process that touches a file striped over
/// it, a few sessions each, so this is thousands; `tessera osd` lowers it to what its
/// descriptor limit allows (`TargetConfig::sessions_max`).
pub const SESSIONS_MAX: usize = 4096;

/// Bytes of attribute lists (get or set) in one command.
pub const ATTR_LIST_LEN_MAX: u32 = 1 << 20;

/// Attribute entries in one get or set list.
pub const ATTR_ENTRIES_MAX: u32 = 16 * 1024;

/// Largest single attribute value (the wire field is 2 bytes; 0xFFFF means "undefined").
pub const ATTR_VALUE_LEN_MAX: usize = 0xFFFE;

/// Largest CDB continuation segment (root information page attribute 0xA reports it).
pub const CONTINUATION_LEN_MAX: u32 = 1 << 20;

/// Extents in one scatter/gather list: (1 MiB - header) / 16 bytes each.
pub const SGL_ENTRIES_MAX: u64 = ((CONTINUATION_LEN_MAX as u64) - 64) / 16;

/// Objects one CREATE may make.
pub const CREATE_COUNT_MAX: u16 = u16::MAX;

const _: () = assert!(DATA_SEGMENT_LEN_MAX <= BURST_LEN_MAX);
const _: () = assert!((BURST_LEN_MAX as u64) <= TRANSFER_LEN_MAX);
const _: () = assert!(ATTR_VALUE_LEN_MAX < 0xFFFF);
const _: () = assert!(SGL_ENTRIES_MAX > 0);

/// Levels of one Tessera nested strided descriptor (3 covers a 3-D subarray; 8 leaves room
/// for higher-dimensional MPI subarray types while keeping the odometer walk cheap).
pub const NESTED_LEVELS_MAX: u32 = 8;

/// Descriptors in one CDB continuation segment (a command uses at most one data layout and one
/// query; the rest of the bound is slack for future descriptor types).
pub const CONTINUATION_DESCRIPTORS_MAX: usize = 16;

const _: () = assert!(NESTED_LEVELS_MAX >= 3);
