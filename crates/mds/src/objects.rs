//! The seam between the metadata server and the storage nodes: the few object operations the
//! MDS performs itself (it never touches file data). [`OsdObjects`] implements it over one
//! typed OSD client per node; tests may inject failures with their own implementation.

use std::sync::Arc;

use tessera_initiator::osd_client::{ListParams, OsdClient, OsdError};
use tessera_mds_proto::{FsError, FsSpace, ObjectRef, OsdUsage};
use tessera_osd_proto::pages::{
    ROOT_BACKING_FS_AVAILABLE, ROOT_BACKING_FS_ID, ROOT_BACKING_FS_SIZE, ROOT_TOTAL_CAPACITY, ROOT_USED_CAPACITY, USER_OBJECT_DATA_MODIFIED,
    USER_OBJECT_LOGICAL_LENGTH,
};
use tessera_osd_proto::attr_list::ENTRY_HEADER_LEN;
use tessera_osd_proto::list::LIST_HEADER_LEN;
use tessera_osd_proto::{AttrId, Attribute, Command, OsdRequestBuilder};
use tessera_security::policy::{policy_page, POLICY_ACCESS_TAG};
use tessera_scsi::{ScsiTransport, SenseKey};
use tessera_types::ObjectAddr;
use thiserror::Error;

/// Why an object operation failed.
#[derive(Debug, Error)]
pub enum ObjectsError {
    #[error("no OSD with index {0} in the cluster map")]
    UnknownOsd(u32),
    /// Boxed: the OSD's error (with its sense data) is large, and this travels by value.
    #[error(transparent)]
    Osd(Box<OsdError>),
    /// Not tried: the OSD stopped answering in time and has not answered a probe since
    /// (`health.rs`). Test implementations raise it too, for a node that is down.
    #[error("OSD {osd} is not answering (not tried again until it answers a probe)")]
    Unavailable { osd: u32 },
}

impl ObjectsError {
    /// The namespace error a length change refused by the OSD answers: a length past what the
    /// object may hold (QUOTA ERROR 55/07) is EFBIG, a full OSD (27/07) ENOSPC, the rest EIO.
    pub fn length_refusal(&self) -> FsError {
        let sense = match self {
            ObjectsError::Osd(e) => e.sense(),
            _ => None,
        };
        match sense.map(|s| (s.key, s.asc, s.ascq)) {
            Some((SenseKey::DataProtect, 0x55, 0x07)) => FsError::TooBig,
            Some((SenseKey::DataProtect, 0x27, 0x07)) => FsError::NoSpace,
            _ => FsError::Io,
        }
    }
}

impl From<OsdError> for ObjectsError {
    fn from(e: OsdError) -> Self {
        ObjectsError::Osd(Box::new(e))
    }
}

impl ObjectsError {
    /// Whether the OSD answered and refused (rather than being unreachable, when the command
    /// may or may not have run).
    pub fn refused(&self) -> bool {
        matches!(self, ObjectsError::Osd(e) if matches!(**e, OsdError::Sense { .. } | OsdError::Status { .. }))
    }
}

/// Object operations on the cluster's data partitions. Removal is idempotent so a journal
/// replay may repeat it: removing an absent object succeeds.
pub trait DataObjects: Send + Sync {
    /// Creates empty objects with exactly these ids.
    fn create(&self, objects: &[ObjectRef]) -> Result<(), ObjectsError>;
    /// Creates `count` empty objects with ids `first..first + count` on `osd`, durably (they
    /// survive the OSD's power loss once this returns), each holding `policy_tag`. One command
    /// where the node allows.
    fn create_range(&self, osd: u32, first: u64, count: u16, policy_tag: u32) -> Result<(), ObjectsError> {
        let list: Vec<ObjectRef> = (0..count as u64).map(|i| ObjectRef { osd, object_id: first + i }).collect();
        self.create(&list)?;
        list.iter().try_for_each(|o| self.set_policy_tag(*o, policy_tag))
    }
    /// Sets the object's policy/access tag (OSD-2 policy/security page): capabilities naming
    /// another tag stop working.
    fn set_policy_tag(&self, object: ObjectRef, tag: u32) -> Result<(), ObjectsError>;
    /// OSD `osd`'s capacity and use (root information page).
    fn usage(&self, osd: u32) -> Result<OsdUsage, ObjectsError>;
    /// [`DataObjects::usage`] for the liveness probe (`health.rs`), on a path that may give up
    /// on a silent OSD sooner than the operations' own.
    fn probe_usage(&self, osd: u32) -> Result<OsdUsage, ObjectsError> {
        self.usage(osd)
    }
    /// Removes one object; an object that does not exist counts as removed.
    fn remove(&self, object: ObjectRef) -> Result<(), ObjectsError>;
    /// [`DataObjects::remove`] of each of `objects`, outcomes in order; an implementation may
    /// have them all in flight at once.
    fn remove_all(&self, objects: &[ObjectRef]) -> Vec<Result<(), ObjectsError>> {
        objects.iter().map(|o| self.remove(*o)).collect()
    }
    /// The object's logical length (OSD-2 user object information page, attribute 0x82).
    fn logical_len(&self, object: ObjectRef) -> Result<u64, ObjectsError>;
    /// The logical length and when the data last changed (timestamps page, attribute 0x5), in
    /// one command.
    fn data_state(&self, object: ObjectRef) -> Result<ObjectData, ObjectsError>;
    /// [`DataObjects::data_state`] of each of `objects`, in order; an implementation may have
    /// them all in flight at once.
    fn data_states(&self, objects: &[ObjectRef]) -> Vec<Result<ObjectData, ObjectsError>> {
        objects.iter().map(|o| self.data_state(*o)).collect()
    }
    /// Sets the logical length (truncate or extend with a hole).
    fn set_logical_len(&self, object: ObjectRef, len: u64) -> Result<(), ObjectsError>;
    /// [`DataObjects::set_logical_len`] of each (object, length), outcomes in order; an
    /// implementation may have them all in flight at once.
    fn set_logical_lens(&self, lengths: &[(ObjectRef, u64)]) -> Vec<Result<(), ObjectsError>> {
        lengths.iter().map(|(o, len)| self.set_logical_len(*o, *len)).collect()
    }
    /// Every user object id in OSD `osd`'s data partition (for repair).
    fn list(&self, osd: u32) -> Result<Vec<u64>, ObjectsError>;
    /// The user objects on OSD `osd` whose ids fall in `ids`, in ascending order, each with
    /// its logical length (`None` where the OSD reported none).
    fn lengths_in(&self, osd: u32, ids: std::ops::Range<u64>) -> Result<Vec<ListedObject>, ObjectsError> {
        let mut found: Vec<u64> = self.list(osd)?.into_iter().filter(|id| ids.contains(id)).collect();
        found.sort_unstable();
        found
            .into_iter()
            .map(|id| Ok(ListedObject { id, logical_len: Some(self.logical_len(ObjectRef { osd, object_id: id })?) }))
            .collect()
    }
    /// The user objects on OSD `osd` whose ids fall in `ids`, in ascending order, each with
    /// what [`DataObjects::data_state`] gives (absent where the OSD reported no length or
    /// time). A listing asks this for objects close together (`server/listing.rs`).
    fn data_states_in(&self, osd: u32, ids: std::ops::Range<u64>) -> Result<Vec<(u64, Option<ObjectData>)>, ObjectsError> {
        let mut found: Vec<u64> = self.list(osd)?.into_iter().filter(|id| ids.contains(id)).collect();
        found.sort_unstable();
        found.into_iter().map(|id| Ok((id, Some(self.data_state(ObjectRef { osd, object_id: id })?)))).collect()
    }
}

/// One object found by [`DataObjects::lengths_in`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListedObject {
    pub id: u64,
    pub logical_len: Option<u64>,
}

/// What a data object says of its file's data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObjectData {
    pub logical_len: u64,
    /// Milliseconds since the epoch.
    pub data_modified_ms: u64,
}

/// One OSD client per storage node, indexed like the cluster map, each with its data partition;
/// optionally a second client per node for the liveness probe.
pub struct OsdObjects<T: ScsiTransport> {
    nodes: Vec<(Arc<OsdClient<T>>, u64)>,
    probes: Vec<Arc<OsdClient<T>>>,
}

impl<T: ScsiTransport> OsdObjects<T> {
    /// `nodes[i]` is OSD `i`: its client (owned, or shared with the key rotation) and the
    /// partition holding file data.
    pub fn new<C: Into<Arc<OsdClient<T>>>>(nodes: Vec<(C, u64)>) -> Self {
        OsdObjects { nodes: nodes.into_iter().map(|(c, p)| (c.into(), p)).collect(), probes: Vec::new() }
    }

    /// Probes go through `probes[i]` for OSD `i` (a session of their own, whose shorter
    /// liveness interval finds a frozen OSD sooner) instead of the operations' client.
    pub fn with_probes(mut self, probes: Vec<OsdClient<T>>) -> Self {
        self.probes = probes.into_iter().map(Arc::new).collect();
        self
    }

    fn node(&self, osd: u32) -> Result<&(Arc<OsdClient<T>>, u64), ObjectsError> {
        self.nodes.get(osd as usize).ok_or(ObjectsError::UnknownOsd(osd))
    }

    fn addr(&self, object: ObjectRef) -> Result<(&OsdClient<T>, ObjectAddr), ObjectsError> {
        let (client, partition) = self.node(object.osd)?;
        Ok((client, ObjectAddr::new(*partition, object.object_id)))
    }
}

/// The policy/access tag of a user object (OSD-2 user object policy/security page).
fn policy_tag_attr() -> AttrId {
    AttrId::new(policy_page(tessera_osd_proto::pages::USER_OBJECT_PAGE_BASE), POLICY_ACCESS_TAG)
}

/// For REMOVE, an object (or partition) that does not exist is already gone. Only that refusal:
/// the same code pointing at the request ICV (a key the OSD does not hold) removed nothing.
fn is_absent(e: &OsdError) -> bool {
    e.is_no_such_object()
}

impl<T: ScsiTransport> DataObjects for OsdObjects<T> {
    fn create(&self, objects: &[ObjectRef]) -> Result<(), ObjectsError> {
        for o in objects {
            let (client, partition) = self.node(o.osd)?;
            client.create(*partition, Some(o.object_id), 1)?;
        }
        Ok(())
    }

    /// One CREATE of `count` objects with FUA: the OSD commits them durably before answering.
    /// The policy tag rides in the same command (a set list applies to every created object).
    fn create_range(&self, osd: u32, first: u64, count: u16, policy_tag: u32) -> Result<(), ObjectsError> {
        let (client, partition) = self.node(osd)?;
        let create = Command::Create { partition_id: *partition, requested: Some(first), count };
        client.execute(&OsdRequestBuilder::new(create).fua(true).set_attr(policy_tag_attr(), policy_tag.to_be_bytes().to_vec()))?;
        Ok(())
    }

    fn set_policy_tag(&self, object: ObjectRef, tag: u32) -> Result<(), ObjectsError> {
        let (client, addr) = self.addr(object)?;
        Ok(client.set_attributes(addr, &[Attribute { id: policy_tag_attr(), value: tag.to_be_bytes().to_vec() }])?)
    }

    fn usage(&self, osd: u32) -> Result<OsdUsage, ObjectsError> {
        let (client, _) = self.node(osd)?;
        usage_of(client)
    }

    fn probe_usage(&self, osd: u32) -> Result<OsdUsage, ObjectsError> {
        match self.probes.get(osd as usize) {
            Some(probe) => usage_of(probe),
            None => self.usage(osd),
        }
    }

    fn remove(&self, object: ObjectRef) -> Result<(), ObjectsError> {
        self.remove_meanwhile(object, &mut || {})
    }

    /// The commands in flight together, from this thread ([`chained`]).
    fn remove_all(&self, objects: &[ObjectRef]) -> Vec<Result<(), ObjectsError>> {
        chained(objects, &|_, o, meanwhile| self.remove_meanwhile(o, meanwhile))
    }

    fn logical_len(&self, object: ObjectRef) -> Result<u64, ObjectsError> {
        let (client, addr) = self.addr(object)?;
        let attrs = client.get_attributes(addr, &[USER_OBJECT_LOGICAL_LENGTH])?;
        let value = attrs.iter().find(|a| a.id == USER_OBJECT_LOGICAL_LENGTH).and_then(|a| a.value.as_deref());
        value.and_then(tessera_osd_proto::pages::value_u64).ok_or_else(|| {
            ObjectsError::from(OsdError::Missing {
                peer: client.peer(),
                service_action: tessera_osd_proto::ServiceAction::GetAttributes,
                what: "the logical length",
            })
        })
    }

    fn data_state(&self, object: ObjectRef) -> Result<ObjectData, ObjectsError> {
        self.data_state_meanwhile(object, &mut || {})
    }

    /// The commands in flight together, from this thread ([`chained`]).
    fn data_states(&self, objects: &[ObjectRef]) -> Vec<Result<ObjectData, ObjectsError>> {
        chained(objects, &|_, o, meanwhile| self.data_state_meanwhile(o, meanwhile))
    }

    fn set_logical_len(&self, object: ObjectRef, len: u64) -> Result<(), ObjectsError> {
        self.set_logical_len_meanwhile(object, len, &mut || {})
    }

    /// The commands in flight together, from this thread ([`chained`]).
    fn set_logical_lens(&self, lengths: &[(ObjectRef, u64)]) -> Vec<Result<(), ObjectsError>> {
        let objects: Vec<ObjectRef> = lengths.iter().map(|(o, _)| *o).collect();
        chained(&objects, &|i, o, meanwhile| self.set_logical_len_meanwhile(o, lengths[i].1, meanwhile))
    }

    fn list(&self, osd: u32) -> Result<Vec<u64>, ObjectsError> {
        let (client, partition) = self.node(osd)?;
        Ok(client.list_all(*partition)?)
    }

    fn lengths_in(&self, osd: u32, ids: std::ops::Range<u64>) -> Result<Vec<ListedObject>, ObjectsError> {
        let listed = self.listed_with(osd, ids, &[USER_OBJECT_LOGICAL_LENGTH])?;
        Ok(listed.into_iter().map(|(id, values)| ListedObject { id, logical_len: values[0] }).collect())
    }

    fn data_states_in(&self, osd: u32, ids: std::ops::Range<u64>) -> Result<Vec<(u64, Option<ObjectData>)>, ObjectsError> {
        let listed = self.listed_with(osd, ids, &[USER_OBJECT_LOGICAL_LENGTH, USER_OBJECT_DATA_MODIFIED])?;
        Ok(listed
            .into_iter()
            .map(|(id, v)| (id, v[0].zip(v[1]).map(|(logical_len, data_modified_ms)| ObjectData { logical_len, data_modified_ms })))
            .collect())
    }
}

/// A command per object is a function of the object (and its index in the list) and of the
/// work to run while its command is in flight.
type PerObject<'a, R> = &'a dyn Fn(usize, ObjectRef, &mut dyn FnMut()) -> Result<R, ObjectsError>;

/// `one(i, object, meanwhile)` for each object, outcomes in order, the commands in flight
/// together from this thread (`tessera_initiator::chain`).
fn chained<R>(objects: &[ObjectRef], one: PerObject<'_, R>) -> Vec<Result<R, ObjectsError>> {
    tessera_initiator::chain::chained(objects.len(), &|i, meanwhile| one(i, objects[i], meanwhile))
}

/// One listed object's values of the attributes asked for, in the order asked.
type Values = Vec<Option<u64>>;

impl<T: ScsiTransport> OsdObjects<T> {
    /// The object's [`ObjectData`], running `meanwhile` while its command is in flight.
    fn data_state_meanwhile(&self, object: ObjectRef, meanwhile: &mut dyn FnMut()) -> Result<ObjectData, ObjectsError> {
        let (client, addr) = self.addr(object)?;
        let attrs = client.get_attributes_meanwhile(addr, &[USER_OBJECT_LOGICAL_LENGTH, USER_OBJECT_DATA_MODIFIED], meanwhile)?;
        let value = |id, what| {
            attrs.iter().find(|a| a.id == id).and_then(|a| a.value.as_deref()).and_then(tessera_osd_proto::pages::value_u64).ok_or_else(
                || {
                    ObjectsError::from(OsdError::Missing {
                        peer: client.peer(),
                        service_action: tessera_osd_proto::ServiceAction::GetAttributes,
                        what,
                    })
                },
            )
        };
        Ok(ObjectData {
            logical_len: value(USER_OBJECT_LOGICAL_LENGTH, "the logical length")?,
            data_modified_ms: value(USER_OBJECT_DATA_MODIFIED, "the data modified time")?,
        })
    }

    /// SET ATTRIBUTES of the logical length, running `meanwhile` while the command is in flight.
    fn set_logical_len_meanwhile(&self, object: ObjectRef, len: u64, meanwhile: &mut dyn FnMut()) -> Result<(), ObjectsError> {
        let (client, addr) = self.addr(object)?;
        let mut set = OsdRequestBuilder::new(Command::SetAttributes { addr });
        set.set_attrs = vec![Attribute { id: USER_OBJECT_LOGICAL_LENGTH, value: len.to_be_bytes().to_vec() }];
        Ok(client.execute_meanwhile(&set, meanwhile).map(drop)?)
    }

    /// REMOVE of `object`, running `meanwhile` while the command is in flight.
    fn remove_meanwhile(&self, object: ObjectRef, meanwhile: &mut dyn FnMut()) -> Result<(), ObjectsError> {
        let (client, addr) = self.addr(object)?;
        match client.execute_meanwhile(&OsdRequestBuilder::new(Command::Remove { addr }), meanwhile) {
            Err(e) if is_absent(&e) => Ok(()),
            other => Ok(other.map(drop)?),
        }
    }

    /// The user objects with ids in `ids`, ascending, each with the numeric values of `attrs`
    /// (in that order; `None` where the OSD reported none). One LIST with attributes per page,
    /// from `ids.start`, stopping at the first page that reaches `ids.end`.
    fn listed_with(&self, osd: u32, ids: std::ops::Range<u64>, attrs: &[AttrId]) -> Result<Vec<(u64, Values)>, ObjectsError> {
        let (client, partition) = self.node(osd)?;
        // Room for the range's entries and no more, up to the usual page: the target reads
        // every object it lists, also those past the range.
        let entry = 16 + attrs.len() as u64 * (ENTRY_HEADER_LEN as u64 + 8);
        let room = entry.saturating_mul(ids.end - ids.start).saturating_add(LIST_HEADER_LEN as u64);
        let allocation_len = room.min(ListParams::default().allocation_len);
        let mut params = ListParams { initial_oid: ids.start, attrs: Some(attrs.to_vec()), allocation_len, ..ListParams::default() };
        let mut found = Vec::new();
        loop {
            let page = client.list(*partition, &params)?;
            for e in page.entries.iter().filter(|e| ids.contains(&e.object_id)) {
                let value = |id: &AttrId| {
                    e.attrs.iter().find(|a| a.id == *id).and_then(|a| a.value.as_deref()).and_then(tessera_osd_proto::pages::value_u64)
                };
                found.push((e.object_id, attrs.iter().map(value).collect()));
            }
            let next = page.continuation_oid;
            if next == 0 || next >= ids.end {
                found.sort_unstable_by_key(|(id, _)| *id);
                return Ok(found);
            }
            if next <= params.initial_oid {
                // No progress (a faulty OSD points back): an error, not a loop or a short list.
                let what = "progress in the list";
                return Err(OsdError::Missing { peer: client.peer(), service_action: tessera_osd_proto::ServiceAction::List, what }.into());
            }
            params.initial_oid = next;
            params.list_id = page.list_id;
        }
    }
}

/// OSD capacity and use, from the root information page, and the file system under it, from
/// Tessera's root backing page (absent on an OSD that does not report one).
fn usage_of<T: ScsiTransport>(client: &OsdClient<T>) -> Result<OsdUsage, ObjectsError> {
    let got = client.get_attributes(
        tessera_types::ObjectAddr::ROOT,
        &[ROOT_TOTAL_CAPACITY, ROOT_USED_CAPACITY, ROOT_BACKING_FS_ID, ROOT_BACKING_FS_SIZE, ROOT_BACKING_FS_AVAILABLE],
    )?;
    let number = |id: AttrId| {
        got.iter().find(|a| a.id == id).and_then(|a| a.value.as_deref()).and_then(tessera_osd_proto::pages::value_u64)
    };
    let capacity = |id: AttrId| {
        number(id).ok_or_else(|| {
            ObjectsError::from(OsdError::Missing {
                peer: client.peer(),
                service_action: tessera_osd_proto::ServiceAction::GetAttributes,
                what: "the root capacity attributes",
            })
        })
    };
    let fs = match (number(ROOT_BACKING_FS_ID), number(ROOT_BACKING_FS_SIZE), number(ROOT_BACKING_FS_AVAILABLE)) {
        (Some(id), Some(size_bytes), Some(avail_bytes)) => Some(FsSpace { id, size_bytes, avail_bytes }),
        _ => None,
    };
    Ok(OsdUsage { total_bytes: capacity(ROOT_TOTAL_CAPACITY)?, used_bytes: capacity(ROOT_USED_CAPACITY)?, fs })
}
