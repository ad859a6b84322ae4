//! Tessera's vendor atomics: COMPARE AND SWAP and FETCH AND ADD on an 8-byte big-endian
//! attribute of an application-defined (or any-type) page. An undefined attribute reads as
//! 0. Each runs as one IMMEDIATE transaction on the single writer connection, so it is atomic
//! against every other command. Data-In is the old value (8 bytes, big-endian).

use rusqlite::Connection;
use tessera_osd_proto::{AttrId, Reply};
use tessera_types::ObjectAddr;

use crate::db::attrs as stored;
use crate::db::objects::Touch;
use crate::engine::{Cx, Engine};
use crate::error::CommandError;
use crate::object::ObjectKind;
use crate::pages::{self, PageClass};

const ALL_KINDS: [ObjectKind; 4] = [ObjectKind::Root, ObjectKind::Partition, ObjectKind::Collection, ObjectKind::User];

impl Engine {
    /// Runs `update(old) -> Option<new>` on the attribute atomically; returns the old value.
    fn atomic(&self, cx: &mut Cx<'_, '_>, addr: ObjectAddr, attr: AttrId, update: impl Fn(u64) -> Option<u64>) -> Result<Reply, CommandError> {
        let not_atomic = CommandError::NotAtomic { page: attr.page, number: attr.number };
        let (old, retrieved) = self.db.write(cx.durable, |c: &Connection| {
            let row = self.require(c, addr, &ALL_KINDS)?;
            if pages::classify(row.kind, attr.page) != PageClass::Stored || attr.is_all_in_page() {
                return Err(not_atomic);
            }
            crate::attrs::validate_set(row.kind, &cx.req.set_attrs)?;
            let old = match stored::get(c, addr, attr.page, attr.number)? {
                None => 0,
                Some(v) => u64::from_be_bytes(v.as_slice().try_into().map_err(|_| CommandError::NotAtomic { page: attr.page, number: attr.number })?),
            };
            let mut touches = Vec::new();
            if let Some(new) = update(old) {
                stored::set(c, addr, attr.page, attr.number, &new.to_be_bytes())?;
                touches.push(Touch::AttrModified);
            }
            cx.current.object = Some((row.kind, addr));
            let retrieved = self.finish_in(c, cx, addr, &touches)?;
            Ok((old, retrieved))
        })?;
        Ok(Reply { data_in: old.to_be_bytes().to_vec(), retrieved, recovered: None, member_retrieved: Vec::new() })
    }

    pub(crate) fn compare_and_swap(&self, cx: &mut Cx<'_, '_>, addr: ObjectAddr, attr: AttrId, expected: u64, new: u64) -> Result<Reply, CommandError> {
        self.atomic(cx, addr, attr, |old| (old == expected).then_some(new))
    }

    /// The sum wraps modulo 2^64 (an addend of 2^64 - 1 subtracts one).
    pub(crate) fn fetch_and_add(&self, cx: &mut Cx<'_, '_>, addr: ObjectAddr, attr: AttrId, addend: u64) -> Result<Reply, CommandError> {
        self.atomic(cx, addr, attr, |old| Some(old.wrapping_add(addend)))
    }
}
