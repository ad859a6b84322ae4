//! QUERY and the member commands of a collection: GET / SET MEMBER ATTRIBUTES and REMOVE
//! MEMBER OBJECTS.
//!
//! QUERY compares attribute values byte-wise (an empty bound is unbounded; an undefined
//! attribute matches nothing) and works on computed attributes too (e.g. logical length).
//! With no conditions every member matches. Results are cut at the allocation length; QUERY
//! has no continuation.

use rusqlite::Connection;
use tessera_osd_proto::command::{QueryCondition, QueryCriteria};
use tessera_osd_proto::list::QUERY_HEADER_LEN;
use tessera_osd_proto::{MemberAttr, QueryResult, Reply};
use tessera_types::{limits, ObjectAddr};

use crate::attrs::{self, Reader};
use crate::db::{attrs as stored, objects as rows};
use crate::engine::{reply, Cx, Engine};
use crate::error::CommandError;
use crate::object::{ObjectKind, ObjectRow};

fn matches(reader: &Reader<'_>, row: &ObjectRow, cond: &QueryCondition) -> Result<bool, CommandError> {
    let Some(value) = reader.value(row, cond.attr.page, cond.attr.number)? else { return Ok(false) };
    let above_min = cond.min.is_empty() || value.as_slice() >= cond.min.as_slice();
    let below_max = cond.max.is_empty() || value.as_slice() <= cond.max.as_slice();
    Ok(above_min && below_max)
}

fn selected(reader: &Reader<'_>, row: &ObjectRow, criteria: &QueryCriteria) -> Result<bool, CommandError> {
    if criteria.conditions.is_empty() {
        return Ok(true);
    }
    for cond in &criteria.conditions {
        let m = matches(reader, row, cond)?;
        if criteria.match_all && !m {
            return Ok(false);
        }
        if !criteria.match_all && m {
            return Ok(true);
        }
    }
    Ok(criteria.match_all)
}

/// Every member of collection `addr`, ascending.
fn all_members(c: &Connection, addr: ObjectAddr) -> Result<Vec<u64>, CommandError> {
    Ok(stored::members(c, addr.partition_id.0, addr.object_id.0, 0, u64::MAX)?)
}

impl Engine {
    pub(crate) fn query(&self, cx: &mut Cx<'_, '_>, addr: ObjectAddr, allocation_len: u64, criteria: &QueryCriteria) -> Result<Reply, CommandError> {
        let room = (allocation_len.min(limits::TRANSFER_LEN_MAX) as usize).saturating_sub(QUERY_HEADER_LEN) / 8;
        let facts = self.facts(cx.now_ms);
        let current = cx.current;
        let found = self.db.read(|c| {
            self.require(c, addr, &[ObjectKind::Collection])?;
            let reader = Reader { conn: c, data: &*self.data, facts: &facts, current: &current };
            let mut found = Vec::new();
            for oid in all_members(c, addr)? {
                if found.len() >= room {
                    break;
                }
                let Some(row) = rows::load(c, ObjectAddr::new(addr.partition_id.0, oid))? else { continue };
                if selected(&reader, &row, criteria)? {
                    found.push(oid);
                }
            }
            Ok::<_, CommandError>(found)
        })?;
        let data_in = QueryResult { object_ids: found }.encode_within(allocation_len);
        cx.current.object = Some((ObjectKind::Collection, addr));
        let retrieved = self.finish_read(cx, addr, false)?;
        Ok(Reply { data_in, retrieved, recovered: None, member_retrieved: Vec::new() })
    }

    /// GET MEMBER ATTRIBUTES: the get list applied to every member, returned in
    /// `Reply::member_retrieved` (the codec sends it as a multi-object 0xE list).
    pub(crate) fn get_member_attributes(&self, cx: &mut Cx<'_, '_>, addr: ObjectAddr) -> Result<Reply, CommandError> {
        if !cx.req.set_attrs.is_empty() {
            return self.set_member_attributes(cx, addr);
        }
        let facts = self.facts(cx.now_ms);
        let current = cx.current;
        let per_object = self.db.read(|c| {
            self.require(c, addr, &[ObjectKind::Collection])?;
            let reader = Reader { conn: c, data: &*self.data, facts: &facts, current: &current };
            let mut out: Vec<MemberAttr> = Vec::new();
            for oid in all_members(c, addr)? {
                if let Some(row) = rows::load(c, ObjectAddr::new(addr.partition_id.0, oid))? {
                    let attrs = reader.retrieve(&row, &cx.req.get_attrs)?;
                    out.extend(attrs.into_iter().map(|attr| MemberAttr { object_id: oid, attr }));
                }
            }
            Ok::<_, CommandError>(out)
        })?;
        cx.current.object = Some((ObjectKind::Collection, addr));
        Ok(Reply { data_in: Vec::new(), retrieved: Vec::new(), recovered: None, member_retrieved: per_object })
    }

    /// SET MEMBER ATTRIBUTES: the set list applied to every member in one transaction (all
    /// or none), then the get list per member as in GET MEMBER ATTRIBUTES.
    pub(crate) fn set_member_attributes(&self, cx: &mut Cx<'_, '_>, addr: ObjectAddr) -> Result<Reply, CommandError> {
        attrs::validate_set(ObjectKind::User, &cx.req.set_attrs)?;
        let pid = addr.partition_id.0;
        let members = self.db.read(|c| {
            self.require(c, addr, &[ObjectKind::Collection])?;
            all_members(c, addr)
        })?;
        let member_addrs: Vec<ObjectAddr> = members.iter().map(|oid| ObjectAddr::new(pid, *oid)).collect();
        let _locks = self.locks.write_many(&member_addrs);
        let facts = self.facts(cx.now_ms);
        let per_object = self.db.write(cx.durable, |c| {
            let mut out = Vec::new();
            for member in &member_addrs {
                // Membership may have changed between the read and the locks: skip leavers.
                let Some(row) = rows::load(c, *member)? else { continue };
                if !stored::is_member(c, *member, addr.object_id.0)? {
                    continue;
                }
                let outcome = attrs::apply_set(c, &*self.data, &row, &cx.req.set_attrs)?;
                if cx.update_ts && outcome.changed {
                    let t = if outcome.length_changed { rows::Touch::DataAndAttrModified } else { rows::Touch::AttrModified };
                    rows::touch(c, *member, t, cx.now_ms)?;
                }
                if attrs::gets_anything(&cx.req.get_attrs) {
                    let row = rows::load(c, *member)?.unwrap_or(row);
                    let reader = Reader { conn: c, data: &*self.data, facts: &facts, current: &cx.current };
                    let attrs = reader.retrieve(&row, &cx.req.get_attrs)?;
                    out.extend(attrs.into_iter().map(|attr| MemberAttr { object_id: member.object_id.0, attr }));
                }
            }
            Ok::<_, CommandError>(out)
        })?;
        cx.current.object = Some((ObjectKind::Collection, addr));
        Ok(Reply { data_in: Vec::new(), retrieved: Vec::new(), recovered: None, member_retrieved: per_object })
    }

    /// REMOVE MEMBER OBJECTS: removes every user object in the collection (the collection
    /// stays, empty).
    pub(crate) fn remove_member_objects(&self, cx: &mut Cx<'_, '_>, addr: ObjectAddr) -> Result<Reply, CommandError> {
        let pid = addr.partition_id.0;
        let members = self.db.read(|c| {
            self.require(c, addr, &[ObjectKind::Collection])?;
            all_members(c, addr)
        })?;
        let member_addrs: Vec<ObjectAddr> = members.iter().map(|oid| ObjectAddr::new(pid, *oid)).collect();
        let _locks = self.locks.write_many(&member_addrs);
        let removed = self.db.write(cx.durable, |c| {
            let mut removed = Vec::new();
            for member in &member_addrs {
                let Some(row) = rows::load(c, *member)? else { continue };
                if row.kind != ObjectKind::User || !stored::is_member(c, *member, addr.object_id.0)? {
                    continue;
                }
                self.remove_row(c, cx, &row)?;
                removed.push(*member);
            }
            Ok::<_, CommandError>(removed)
        })?;
        for member in removed {
            self.data.remove(member)?;
        }
        self.lists.changed();
        cx.current.object = Some((ObjectKind::Collection, addr));
        Ok(reply(self.retrieve_current_only(cx)))
    }
}
