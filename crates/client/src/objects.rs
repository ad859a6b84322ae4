//! Per-object commands over a whole file, all objects at once: FLUSH (fsync), GET ATTRIBUTES
//! of the logical length (the file size, without a metadata round trip), and the attribute
//! commands of `tessera attr`.

use tessera_initiator::osd_client::OsdError;
use tessera_mds_proto::{FileLayout, ObjectRef};
use tessera_osd_proto::pages::{value_u64, USER_OBJECT_LOGICAL_LENGTH};
use tessera_osd_proto::{AttrId, Attribute, FlushScope, RetrievedAttr, ServiceAction};
use tessera_types::ObjectAddr;

use crate::error::ClientError;
use crate::pool::{Lease, OsdPool};

/// Runs `op` on every object of `layout` at once, given the object's slot; results are in
/// slot order. A thread per object but the last, which the caller's thread serves (a thread
/// costs more than a small command).
fn each_object<R: Send>(
    pool: &OsdPool,
    layout: &FileLayout,
    path: &str,
    op: impl Fn(usize, &Lease, ObjectAddr) -> Result<R, OsdError> + Sync,
) -> Result<Vec<R>, ClientError> {
    let addrs = layout.objects.iter().map(|o| pool.object_addr(o.osd, o.object_id, path)).collect::<Result<Vec<_>, _>>()?;
    let one = |slot: usize| {
        let (object, addr) = (&layout.objects[slot], addrs[slot]);
        let lease = pool.lease(object.osd, object.object_id, path)?;
        op(slot, &lease, addr).map_err(|e| pool.fail(&lease, object.object_id, e))
    };
    let Some(last) = layout.objects.len().checked_sub(1) else { return Ok(Vec::new()) };
    let (others, mine) = std::thread::scope(|scope| {
        let others: Vec<_> = (0..last).map(|slot| scope.spawn(move || one(slot))).collect();
        let mine = one(last);
        (others.into_iter().map(|t| t.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect::<Vec<_>>(), mine)
    });
    others.into_iter().chain([mine]).collect()
}

/// FLUSH (data and attributes) on every object: afterwards every acknowledged WRITE is durable.
pub fn flush_all(pool: &OsdPool, layout: &FileLayout, path: &str) -> Result<(), ClientError> {
    each_object(pool, layout, path, |_, lease, addr| lease.conn.flush(addr, FlushScope::DataAndAttributes)).map(drop)
}

/// Every object's logical length, in slot order.
pub fn lengths(pool: &OsdPool, layout: &FileLayout, path: &str) -> Result<Vec<u64>, ClientError> {
    each_object(pool, layout, path, |_, lease, addr| {
        let attrs = lease.conn.get_attributes(addr, &[USER_OBJECT_LOGICAL_LENGTH])?;
        attrs.iter().find(|a| a.id == USER_OBJECT_LOGICAL_LENGTH).and_then(|a| a.value.as_deref()).and_then(value_u64).ok_or_else(|| {
            OsdError::Missing { peer: lease.conn.peer(), service_action: ServiceAction::GetAttributes, what: "the logical length" }
        })
    })
}

/// The objects of `layout` whose OSDs answer that they do not hold them (none when any OSD
/// fails otherwise: then nothing is known).
pub fn absent(pool: &OsdPool, layout: &FileLayout, path: &str) -> Vec<ObjectRef> {
    let found = each_object(pool, layout, path, |_, lease, addr| match lease.conn.get_attributes(addr, &[USER_OBJECT_LOGICAL_LENGTH]) {
        Ok(_) => Ok(false),
        Err(e) if e.is_no_such_object() => Ok(true),
        Err(e) => Err(e),
    });
    match found {
        Ok(absent) => layout.objects.iter().zip(absent).filter(|(_, absent)| *absent).map(|(o, _)| *o).collect(),
        Err(_) => Vec::new(),
    }
}

/// The file size the objects' lengths imply.
pub fn file_size(pool: &OsdPool, layout: &FileLayout, path: &str) -> Result<u64, ClientError> {
    let lengths = lengths(pool, layout, path)?;
    layout.stripe.file_size(&lengths).ok_or_else(|| ClientError::SizeOverflow { path: path.to_string() })
}

/// GET ATTRIBUTES of `ids` on every object, in slot order.
pub fn get_attributes(pool: &OsdPool, layout: &FileLayout, path: &str, ids: &[AttrId]) -> Result<Vec<Vec<RetrievedAttr>>, ClientError> {
    each_object(pool, layout, path, |_, lease, addr| lease.conn.get_attributes(addr, ids))
}

/// Every attribute of `page` on every object, in slot order.
pub fn get_attribute_page(pool: &OsdPool, layout: &FileLayout, path: &str, page: u32) -> Result<Vec<Vec<RetrievedAttr>>, ClientError> {
    each_object(pool, layout, path, |_, lease, addr| lease.conn.get_attribute_page(addr, page))
}

/// SET ATTRIBUTES of `attrs` on every object.
pub fn set_attributes(pool: &OsdPool, layout: &FileLayout, path: &str, attrs: &[Attribute]) -> Result<(), ClientError> {
    each_object(pool, layout, path, |_, lease, addr| lease.conn.set_attributes(addr, attrs)).map(drop)
}

/// SET ATTRIBUTES of `attrs[slot]` on the object in each slot (one list per object); a slot
/// with an empty list is left alone.
pub fn set_attributes_each(pool: &OsdPool, layout: &FileLayout, path: &str, attrs: &[Vec<Attribute>]) -> Result<(), ClientError> {
    each_object(pool, layout, path, |slot, lease, addr| match attrs.get(slot) {
        Some(list) if !list.is_empty() => lease.conn.set_attributes(addr, list),
        _ => Ok(()),
    })
    .map(drop)
}
