//! The OSD object engine: executes typed OSD-2 r05 requests ([`tessera_osd_proto::Request`])
//! against object data (one file per user object, behind the [`ObjectData`] trait) and an
//! SQLite attribute store, and answers a [`tessera_osd_proto::Reply`] or a
//! [`CommandError`] that knows its sense data.
//!
//! The engine has no clock: every command carries the caller's time in milliseconds.
//! Design decisions are written down in `docs/engine.md`.

mod atomics;
mod attr_cache;
pub mod attrs;
pub mod config;
mod data;
pub mod db;
mod engine;
pub mod error;
mod flush;
mod lifecycle;
mod list;
mod locks;
pub mod object;
pub mod pages;
mod placed_write;
mod placements;
mod query;
pub mod quotas;
pub mod security_store;
mod security_facts;
pub mod store;
mod zero_copy;

pub use config::EngineConfig;
pub use engine::{Engine, DB_FILE, OBJECTS_DIR};
pub use error::{CommandError, IoOp, StorageError};
pub use object::ObjectKind;
pub use security_store::{ObjectSecurity, StoredKey};
pub use store::file::FileStore;
pub use store::mem::MemStore;
pub use store::{MapExtent, ObjectData, Piece};
pub use placed_write::{PlacedList, PlacedWrite, PLACED_LIST_PIECE_MIN};
pub use zero_copy::{FileRead, MappedRead};

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn engine_is_send_and_sync() {
        assert_send_sync::<Engine>();
    }
}
