//! tessera-mds: the metadata server library behind `tessera mds`.
//!
//! - [`db`]: the SQLite schema (WAL) and opening a store.
//! - [`store`]: namespace operations as atomic SQLite steps on one server's share of the
//!   namespace; no OSD and no network calls.
//! - [`namespace`]: reads on pooled reader connections, writes through [`commit`], the group
//!   commit that lets concurrent requests share one durable flush, and [`checkpoint`], which
//!   keeps checkpoints off the request path.
//! - [`pools`]: per-OSD pools of objects precreated in batches, so a create calls no OSD.
//! - [`health`]: which OSDs answer (every object operation watched, the quiet ones probed), so
//!   new files are placed on those that do.
//! - [`objects`]: the [`DataObjects`] seam to the storage nodes (create, remove, length,
//!   truncate, list), implemented over the typed OSD client by [`OsdObjects`].
//! - [`security`]: the security manager: OSD keys, their rotation, and the capabilities every
//!   layout comes with.
//! - [`journal`]: the pending-removal journal that keeps create and unlink from leaking objects;
//!   [`reaper`]: the thread that removes an unlinked file's objects after the unlink is answered.
//! - [`revocation`]: the retag journal that finishes a `chmod`'s revocation on an OSD that
//!   was unreachable when it ran; [`periodic`]: the background threads that retry it and
//!   probe the OSDs.
//! - [`access`]: POSIX's permission rules (owner, group, other; sticky; who may chmod and
//!   chown) against the user a request names; `server/authorize.rs` applies them per request.
//! - [`server`]: [`Mds`], one server: request dispatch, routing checks, OSD steps, peer calls.
//! - [`peer`]: the connection to a peer server (the shared `MdsConnection`, also for tests and tools).
//! - [`tcp`]: the TCP front, one event loop that reads every connection and runs creates,
//!   their group commit and their replies itself; [`conn`]: one connection's buffers;
//!   [`poller`]: its epoll set, polled before sleeping for as long as [`poll_window`] finds
//!   it pays; [`workers`]: threads for the requests that may block;
//!   [`loop_cpus`]: the loop kept on the CPUs its disk interrupts ([`disk_interrupts`]), as
//!   [`cpus`] sets, and kept from halting there through flushes ([`keep_awake`]).
//!
//! `docs/metadata.md` gives the schema, the split across servers and every decision.

pub mod access;
pub mod checkpoint;
pub mod commit;
pub mod conn;
pub mod cpus;
pub mod db;
pub mod disk_interrupts;
pub mod fence;
pub mod health;
pub mod journal;
pub mod keep_awake;
pub mod loop_cpus;
pub mod namespace;
pub mod objects;
pub mod peer;
pub mod periodic;
pub mod poll_window;
pub mod poller;
pub mod proven;
pub mod pools;
pub mod reaper;
pub mod rename_lock;
pub mod revocation;
pub mod security;
pub mod server;
pub mod store;
pub mod tcp;
pub mod truncation;
pub mod user_agent;
pub mod wal_vfs;
pub mod workers;

pub use objects::{DataObjects, ListedObject, ObjectData, ObjectsError, OsdObjects};
pub use peer::{MdsConnection, PeerError};
pub use pools::PrecreateConfig;
pub use security::{OsdSecret, SecurityConfig, SecurityManager};
pub use journal::Audit;
pub use server::{Answer, Mds, MdsConfig, OpenError};
pub use store::Store;
