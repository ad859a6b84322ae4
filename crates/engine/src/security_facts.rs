//! A cache of each object's security facts (type, created time, policy/access tag), which the
//! target's security gate reads for every command. Without it every secured command paid two
//! SQLite lookups; the general attribute cache cannot serve them because every WRITE bumps its
//! generation.
//!
//! The facts change only when an object is removed (its id may come back as a new object) or a
//! policy/security page attribute is set, so an epoch bumped after any command that might do
//! either (and after FORMAT OSD) invalidates every entry. A reader takes the epoch before it
//! reads SQLite and files the answer under it: a change committed meanwhile is followed by a
//! bump, so a stale answer is never served after the changing command has returned. Absent
//! objects are not cached (a CREATE needs no bump).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use tessera_osd_proto::{Command, Request};
use tessera_types::ObjectAddr;

use crate::security_store::{ObjectSecurity, POLICY_PAGE_REL};

/// Entries kept before the cache starts over (each is a few dozen bytes).
const ENTRIES_MAX: usize = 65_536;
/// Size of one object type's attribute page range (OSD-2 r05 §7.1.2).
const PAGE_RANGE: u32 = 0x3000_0000;

#[derive(Default)]
pub(crate) struct SecurityFacts {
    epoch: AtomicU64,
    entries: Mutex<HashMap<ObjectAddr, (u64, ObjectSecurity)>>,
}

impl SecurityFacts {
    /// The epoch to file a lookup under; take it before reading the store.
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    pub fn get(&self, addr: ObjectAddr) -> Option<ObjectSecurity> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.get(&addr).filter(|(e, _)| *e == self.epoch()).map(|(_, f)| *f)
    }

    pub fn put(&self, addr: ObjectAddr, epoch: u64, facts: ObjectSecurity) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if entries.len() >= ENTRIES_MAX {
            entries.clear();
        }
        entries.insert(addr, (epoch, facts));
    }

    /// Called after `request` ran (whether or not it succeeded).
    pub fn after(&self, request: &Request<'_>) {
        if may_change_facts(request) {
            self.invalidate();
        }
    }

    pub fn invalidate(&self) {
        self.epoch.fetch_add(1, Ordering::AcqRel);
    }
}

/// Whether a command may remove an object or set a policy/security attribute: anything but the
/// commands that only move data or read, unless its set list touches a policy page.
fn may_change_facts(request: &Request<'_>) -> bool {
    use Command as C;
    let sets_policy = request.set_attrs.iter().any(|a| a.id.page < 4 * PAGE_RANGE && a.id.page % PAGE_RANGE == POLICY_PAGE_REL);
    let data_or_read = matches!(
        request.command,
        C::Read { .. }
            | C::Write { .. }
            | C::Append { .. }
            | C::Punch { .. }
            | C::Clear { .. }
            | C::Flush { .. }
            | C::FlushCollection { .. }
            | C::FlushPartition { .. }
            | C::FlushOsd { .. }
            | C::GetAttributes { .. }
            | C::SetAttributes { .. }
            | C::List { .. }
            | C::ListCollection { .. }
            | C::Query { .. }
            | C::ReadMap { .. }
            | C::GetMemberAttributes { .. }
            | C::Create { .. }
            | C::CreateAndWrite { .. }
            | C::CreateCollection { .. }
            | C::CreatePartition { .. }
    );
    sets_policy || !data_or_read
}
