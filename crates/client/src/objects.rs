//! Per-object commands over a whole file, all objects at once: FLUSH (fsync), GET ATTRIBUTES
//! of the logical length (the file size, without a metadata round trip), and the attribute
//! commands of `tessera attr`.

use tessera_initiator::chain::chained;
use tessera_initiator::osd_client::OsdError;
use tessera_mds_proto::{FileLayout, ObjectRef};
use tessera_osd_proto::pages::{value_u64, USER_OBJECT_LOGICAL_LENGTH};
use tessera_osd_proto::{AttrId, Attribute, FlushScope, RetrievedAttr, ServiceAction};
use tessera_types::ObjectAddr;

use crate::error::ClientError;
use crate::pool::{Lease, OsdPool};

/// Runs `op` on every object of `layout` at once, given the object's slot and the work to run
/// while its command is in flight; results are in slot order. The commands are in flight
/// together from the caller's thread (`tessera_initiator::chain`): no thread is started.
fn each_object<R>(
    pool: &OsdPool,
    layout: &FileLayout,
    path: &str,
    op: impl Fn(usize, &Lease, ObjectAddr, &mut dyn FnMut()) -> Result<R, OsdError>,
) -> Result<Vec<R>, ClientError> {
    let addrs = layout.objects.iter().map(|o| pool.object_addr(o.osd, o.object_id, path)).collect::<Result<Vec<_>, _>>()?;
    let one = |slot: usize, meanwhile: &mut dyn FnMut()| {
        let (object, addr) = (&layout.objects[slot], addrs[slot]);
        let lease = pool.lease(object.osd, object.object_id, path)?;
        op(slot, &lease, addr, meanwhile).map_err(|e| pool.fail(&lease, object.object_id, e))
    };
    chained(layout.objects.len(), &one).into_iter().collect()
}

/// FLUSH (data and attributes) on every object: afterwards every acknowledged WRITE is durable.
pub fn flush_all(pool: &OsdPool, layout: &FileLayout, path: &str) -> Result<(), ClientError> {
    each_object(pool, layout, path, |_, lease, addr, meanwhile| lease.conn.flush_meanwhile(addr, FlushScope::DataAndAttributes, meanwhile)).map(drop)
}

/// Every object's logical length, in slot order.
pub fn lengths(pool: &OsdPool, layout: &FileLayout, path: &str) -> Result<Vec<u64>, ClientError> {
    each_object(pool, layout, path, |_, lease, addr, meanwhile| {
        let attrs = lease.conn.get_attributes_meanwhile(addr, &[USER_OBJECT_LOGICAL_LENGTH], meanwhile)?;
        attrs.iter().find(|a| a.id == USER_OBJECT_LOGICAL_LENGTH).and_then(|a| a.value.as_deref()).and_then(value_u64).ok_or_else(|| {
            OsdError::Missing { peer: lease.conn.peer(), service_action: ServiceAction::GetAttributes, what: "the logical length" }
        })
    })
}

/// The objects of `layout` whose OSDs answer that they do not hold them (none when any OSD
/// fails otherwise: then nothing is known).
pub fn absent(pool: &OsdPool, layout: &FileLayout, path: &str) -> Vec<ObjectRef> {
    let found = each_object(pool, layout, path, |_, lease, addr, meanwhile| match lease.conn.get_attributes_meanwhile(addr, &[USER_OBJECT_LOGICAL_LENGTH], meanwhile) {
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
    each_object(pool, layout, path, |_, lease, addr, meanwhile| lease.conn.get_attributes_meanwhile(addr, ids, meanwhile))
}

/// Every attribute of `page` on every object, in slot order.
pub fn get_attribute_page(pool: &OsdPool, layout: &FileLayout, path: &str, page: u32) -> Result<Vec<Vec<RetrievedAttr>>, ClientError> {
    each_object(pool, layout, path, |_, lease, addr, meanwhile| lease.conn.get_attribute_page_meanwhile(addr, page, meanwhile))
}

/// SET ATTRIBUTES of `attrs` on every object.
pub fn set_attributes(pool: &OsdPool, layout: &FileLayout, path: &str, attrs: &[Attribute]) -> Result<(), ClientError> {
    each_object(pool, layout, path, |_, lease, addr, meanwhile| lease.conn.set_attributes_meanwhile(addr, attrs, meanwhile)).map(drop)
}

/// SET ATTRIBUTES of `attrs[slot]` on the object in each slot (one list per object); a slot
/// with an empty list is left alone.
pub fn set_attributes_each(pool: &OsdPool, layout: &FileLayout, path: &str, attrs: &[Vec<Attribute>]) -> Result<(), ClientError> {
    each_object(pool, layout, path, |slot, lease, addr, meanwhile| match attrs.get(slot) {
        Some(list) if !list.is_empty() => lease.conn.set_attributes_meanwhile(addr, list, meanwhile),
        _ => {
            meanwhile();
            Ok(())
        }
    })
    .map(drop)
}
