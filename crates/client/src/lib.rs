//! tessera-client: the file-system client library that the CLI, FUSE, C and Python front ends
//! sit on. Namespace operations go to the metadata servers; file data goes straight to the
//! OSDs over iSCSI and never passes through a metadata server.
//!
//! - [`config`]: [`ClusterConfig`], the `cluster.toml` format below.
//! - [`client`]: [`Client`], path resolution and the namespace operations.
//! - [`dir`]: [`Dir`], an open directory for the `*at()` calls (one request each, no walk).
//! - [`mod@file`]: [`File`], an open file holding its layout: `pread`, `pwrite`, extent-list I/O,
//!   `read_to_end`, `set_len`, `fsync`, `stat`.
//! - [`list_io`]: PVFS list I/O on a [`File`]: `read_list` / `write_list` (memory regions and
//!   file extents, each non-contiguous, equal totals), `pread_vec` / `pwrite_vec` (a buffer per
//!   offset), `read_strided` / `write_strided`, `read_subarray` / `write_subarray`.
//! - [`patterns`]: [`StridedPattern`] and [`Subarray`] (N-D, row-major), which expand to extents.
//! - [`extent_list`]: the `OFFSET LENGTH` text format of `tessera get --pieces`, [`extent_list::parse`].
//! - [`striped_io`]: one command list per object, all OSDs in parallel, pipelined per OSD.
//! - [`command_plan`]: a slot's pieces -> commands under a [`Mode`] and a transfer cap; pure.
//! - [`memory`]: the caller's memory regions as one stream, sliced in place.
//! - [`objects`]: per-object FLUSH and logical-length reads over a whole file.
//! - [`pool`]: a few lazily logged-in iSCSI sessions per OSD; `suspects.rs`: whether a metadata
//!   server reports an OSD down, which shortens a login to it.
//! - [`credentials`]: the capabilities each open file holds, per OSD, and their refresh.
//! - [`path`]: path syntax (`.`/`..`, no working directory).
//! - [`mds_router`]: metadata requests routed by the home server in the inode id.
//! - [`error`]: the error type, [`ClientError`].
//!
//! # `cluster.toml`
//!
//! ```toml
//! # Optional client settings (defaults shown).
//! initiator_name = "iqn.2026-11.org.tessera:client"
//! sessions_per_osd = 2              # iSCSI sessions per OSD, 1..=16
//! max_transfer_bytes = 16777216     # largest READ/WRITE sent, 64 KiB..=256 MiB
//!
//! # Metadata servers; the n-th table is server n (the top 6 bits of inode ids).
//! [[mds]]
//! addr = "10.0.0.1:7000"
//!
//! # OSDs; the n-th table is OSD n (the `osd` of an object in a file layout).
//! [[osd]]
//! addr = "10.0.0.2:3260"            # iSCSI portal
//! target = "iqn.2026-11.org.tessera:osd-0a1b2c3d"
//! partition_id = 65536              # optional, default 0x10000: the file data partition
//! lun = 0                           # optional
//! ```
//!
//! The order of `[[mds]]` and `[[osd]]` tables must match the metadata servers' cluster map.
//!
//! # Striped I/O
//!
//! A request (one range, or a list of file extents over one buffer or many memory regions) is planned with
//! `tessera_layout::plan` into one piece list per data object; each object gets one command,
//! described by a contiguous, strided, nested or SGL descriptor as [`Mode`] allows, split only
//! past the transfer cap (the configured `max_transfer_bytes`, at most four negotiated
//! MaxBurstLengths). Every object's commands run on their own thread, up to four in flight per
//! object over the OSD's sessions. Write data leaves from the caller's buffer: in place as a gather list, or packed
//! into one copy when its runs are small (see `striped_io`).
//!
//! # Durability
//!
//! A write is acknowledged once the OSD has it in its page cache and journal (it survives an OSD
//! daemon crash, not a power loss). [`File::fsync`] sends FLUSH to every data object;
//! [`File::set_write_through`] sets FUA on every WRITE instead (O_DSYNC).
//!
//! # Errors
//!
//! [`ClientError::Fs`] carries the namespace refusal (errno) with the operation and path;
//! [`ClientError::Osd`] names the OSD by index and portal and the object id;
//! [`ClientError::Mds`] names the metadata server. [`ClientError::errno`] maps every error to
//! what a POSIX front end returns.

pub mod client;
pub mod command_plan;
pub mod config;
pub mod credentials;
pub mod dir;
pub mod error;
pub mod extent_list;
pub mod file;
pub mod list_io;
pub mod mds_router;
pub mod memory;
pub mod objects;
pub mod path;
pub mod patterns;
pub mod pool;
pub mod prover;
pub mod striped_io;
mod suspects;

pub use client::{Client, RepairReport, Stripe};
pub use command_plan::Mode;
pub use config::{ClusterConfig, ConfigError, MdsEntry, OsdEntry};
pub use dir::Dir;
pub use error::{ClientError, DataPlaces, MdsLinkError};
pub use extent_list::ExtentListError;
pub use file::File;
pub use patterns::{PatternError, StridedPattern, Subarray};
pub use tessera_layout::Extent;
pub use tessera_mds_proto::{Attr, Caller, DirEntry, FileLayout, FileType, FsError, InodeId, OsdUsage, SetAttrs, StatFs, StripeHint, Timespec};
