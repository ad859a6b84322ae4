//! What a command needs from its capability: the object it addresses, the permission bits, and
//! the bytes it touches. Tessera's reading of r05 §4.11.2.2 (table 21, permissions by command):
//!
//! | command | permissions |
//! |---|---|
//! | READ, READ MAP | READ |
//! | WRITE, PUNCH, CLEAR | WRITE |
//! | APPEND | APPEND or WRITE |
//! | CREATE, CREATE PARTITION, CREATE COLLECTION | CREATE |
//! | CREATE AND WRITE | CREATE + WRITE |
//! | REMOVE, REMOVE PARTITION, REMOVE COLLECTION | REMOVE |
//! | GET ATTRIBUTES / SET ATTRIBUTES | GET_ATTR / SET_ATTR |
//! | LIST, LIST COLLECTION, the FLUSH family | OBJ_MGMT |
//! | QUERY | QUERY |
//! | GET / SET MEMBER ATTRIBUTES, REMOVE MEMBER OBJECTS | M_OBJECT + GET_ATTR / SET_ATTR / REMOVE |
//! | COMPARE AND SWAP, FETCH AND ADD (Tessera) | GET_ATTR + SET_ATTR |
//! | FORMAT OSD | DEV_MGMT |
//! | SET KEY / SET MASTER KEY | POL_SEC / POL_SEC + DEV_MGMT |
//!
//! Plus, for piggy-backed attributes: a set list needs SET_ATTR (and POL_SEC when it sets a
//! policy/security page attribute such as the policy/access tag); a get list needs GET_ATTR
//! unless it asks only for the Current Command page, which reports on the command itself.

use tessera_osd_proto::{Command, DataLayout, GetAttrs, Request};
use tessera_types::ObjectAddr;

use crate::capability::Permissions;

/// Relative page of the policy/security attributes (r05 §7.1.2, table 10: page 5 of each
/// object type's range).
pub const POLICY_PAGE_REL: u32 = 5;
/// The policy/access tag on that page, 4 bytes (Tessera's number; check against r05 §7.1.3).
pub const POLICY_ACCESS_TAG: u32 = 0x1;
/// Size of one object type's page range.
const PAGE_RANGE: u32 = 0x3000_0000;
/// The Current Command page.
const CURRENT_COMMAND_PAGE: u32 = 0xFFFF_FFFE;

/// The policy/security page for an object whose type's pages start at `page_base`.
pub fn policy_page(page_base: u32) -> u32 {
    page_base + POLICY_PAGE_REL
}

/// True for a page that is some object type's policy/security page.
pub fn is_policy_page(page: u32) -> bool {
    page < 4 * PAGE_RANGE && page % PAGE_RANGE == POLICY_PAGE_REL
}

/// What a command addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Addressed {
    Root,
    /// The partition itself, or a new object in it (CREATE ...).
    Partition(u64),
    /// An existing collection or user object.
    Object(ObjectAddr),
}

impl Addressed {
    pub fn of(addr: ObjectAddr) -> Addressed {
        match (addr.partition_id.0, addr.object_id.0) {
            (0, _) => Addressed::Root,
            (pid, 0) => Addressed::Partition(pid),
            _ => Addressed::Object(addr),
        }
    }

    pub fn partition_id(self) -> u64 {
        match self {
            Addressed::Root => 0,
            Addressed::Partition(pid) => pid,
            Addressed::Object(a) => a.partition_id.0,
        }
    }
}

/// The bytes a command touches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bytes {
    None,
    /// [start, end)
    Range(u64, u64),
    /// Not known before execution (APPEND): only an unrestricted capability allows it.
    Unbounded,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Requirement {
    pub addressed: Addressed,
    /// Every one of these bits is needed.
    pub all_of: Permissions,
    /// At least one of these bits is needed (empty: no such condition).
    pub any_of: Permissions,
    pub bytes: Bytes,
}

impl Requirement {
    /// The bits `held` lacks for this command (empty when allowed).
    pub fn missing(&self, held: Permissions) -> Permissions {
        let mut missing = held.missing(self.all_of);
        if !self.any_of.is_empty() && (held.0 & self.any_of.0) == 0 {
            missing = missing | self.any_of;
        }
        missing
    }
}

/// The requirement of a decoded OSD command (SET KEY and SET MASTER KEY are not OSD
/// commands here; see [`crate::key_commands`]).
pub fn requirement(request: &Request<'_>) -> Requirement {
    use Command as C;
    use Permissions as P;
    let none = P::NONE;
    let (addressed, mut all_of, any_of, bytes) = match &request.command {
        C::FormatOsd { .. } => (Addressed::Root, P::DEV_MGMT, none, Bytes::None),
        C::FlushOsd { .. } => (Addressed::Root, P::OBJ_MGMT, none, Bytes::None),
        C::CreatePartition { .. } => (Addressed::Root, P::CREATE, none, Bytes::None),
        C::RemovePartition { partition_id } => (Addressed::Partition(*partition_id), P::REMOVE, none, Bytes::None),
        C::FlushPartition { partition_id, .. } => (Addressed::Partition(*partition_id), P::OBJ_MGMT, none, Bytes::None),
        C::List { partition_id, .. } => (partition_or_root(*partition_id), P::OBJ_MGMT, none, Bytes::None),
        C::Create { partition_id, .. } | C::CreateCollection { partition_id, .. } => {
            (Addressed::Partition(*partition_id), P::CREATE, none, Bytes::None)
        }
        C::CreateAndWrite { partition_id, offset, len, layout, .. } => {
            (Addressed::Partition(*partition_id), P::CREATE | P::WRITE, none, layout_bytes(*offset, *len, layout))
        }
        C::Remove { addr } | C::RemoveCollection { addr, .. } => (Addressed::of(*addr), P::REMOVE, none, Bytes::None),
        C::ListCollection { addr, .. } | C::Flush { addr, .. } | C::FlushCollection { addr, .. } => {
            (Addressed::of(*addr), P::OBJ_MGMT, none, Bytes::None)
        }
        C::Read { addr, offset, len, layout } => (Addressed::of(*addr), P::READ, none, layout_bytes(*offset, *len, layout)),
        C::Write { addr, offset, len, layout } => (Addressed::of(*addr), P::WRITE, none, layout_bytes(*offset, *len, layout)),
        C::Append { addr, .. } => (Addressed::of(*addr), none, P::APPEND | P::WRITE, Bytes::Unbounded),
        C::Punch { addr, offset, len } | C::Clear { addr, offset, len } => {
            (Addressed::of(*addr), P::WRITE, none, range(*offset, *len))
        }
        C::ReadMap { addr, offset, len, .. } => (Addressed::of(*addr), P::READ, none, range(*offset, *len)),
        C::GetAttributes { addr } => (Addressed::of(*addr), P::GET_ATTR, none, Bytes::None),
        C::SetAttributes { addr } => (Addressed::of(*addr), P::SET_ATTR, none, Bytes::None),
        C::Query { addr, .. } => (Addressed::of(*addr), P::QUERY, none, Bytes::None),
        C::GetMemberAttributes { addr } => (Addressed::of(*addr), P::M_OBJECT | P::GET_ATTR, none, Bytes::None),
        C::SetMemberAttributes { addr } => (Addressed::of(*addr), P::M_OBJECT | P::SET_ATTR, none, Bytes::None),
        C::RemoveMemberObjects { addr } => (Addressed::of(*addr), P::M_OBJECT | P::REMOVE, none, Bytes::None),
        C::CompareAndSwap { addr, .. } | C::FetchAndAdd { addr, .. } => {
            (Addressed::of(*addr), P::GET_ATTR | P::SET_ATTR, none, Bytes::None)
        }
    };
    if !request.set_attrs.is_empty() {
        all_of = all_of | P::SET_ATTR;
        if request.set_attrs.iter().any(|a| is_policy_page(a.id.page)) {
            all_of = all_of | P::POL_SEC;
        }
    }
    if gets_object_attributes(&request.get_attrs) {
        all_of = all_of | P::GET_ATTR;
    }
    if let C::CompareAndSwap { attr, .. } | C::FetchAndAdd { attr, .. } = &request.command {
        if is_policy_page(attr.page) {
            all_of = all_of | P::POL_SEC;
        }
    }
    Requirement { addressed, all_of, any_of, bytes }
}

fn partition_or_root(partition_id: u64) -> Addressed {
    if partition_id == 0 {
        Addressed::Root
    } else {
        Addressed::Partition(partition_id)
    }
}

fn gets_object_attributes(get: &GetAttrs) -> bool {
    match get {
        GetAttrs::None => false,
        GetAttrs::Page { page, .. } => *page != CURRENT_COMMAND_PAGE,
        GetAttrs::List { ids, .. } => ids.iter().any(|id| id.page != CURRENT_COMMAND_PAGE),
    }
}

fn range(offset: u64, len: u64) -> Bytes {
    if len == 0 {
        Bytes::None
    } else {
        Bytes::Range(offset, offset.saturating_add(len))
    }
}

/// The smallest range holding every byte of a layout (the decoder validated it: no zero
/// lengths, no overflow, totals equal to `len`).
pub fn layout_bytes(offset: u64, len: u64, layout: &DataLayout) -> Bytes {
    if len == 0 {
        return Bytes::None;
    }
    let at = |rel: u128| u64::try_from(offset as u128 + rel).unwrap_or(u64::MAX);
    match layout {
        DataLayout::Contiguous => range(offset, len),
        DataLayout::List(extents) => {
            let lo = extents.iter().map(|e| e.offset as u128).min().unwrap_or(0);
            let hi = extents.iter().map(|e| e.offset as u128 + e.len as u128).max().unwrap_or(0);
            Bytes::Range(at(lo), at(hi))
        }
        DataLayout::Strided { stride, block_len } => {
            let blocks = len.div_ceil((*block_len).max(1)) as u128;
            let last_len = len as u128 - (blocks - 1) * *block_len as u128;
            Bytes::Range(offset, at((blocks - 1) * *stride as u128 + last_len))
        }
        DataLayout::Nested { block_len, levels } => {
            let blocks = len.div_ceil((*block_len).max(1)) as u128;
            let last_len = len as u128 - (blocks - 1) * *block_len as u128;
            // Position of the last block: its index written in the mixed radix of the counts.
            let (mut index, mut position) = (blocks - 1, 0u128);
            for (count, stride) in levels {
                let count = (*count).max(1) as u128;
                position += (index % count) * *stride as u128;
                index /= count;
            }
            Bytes::Range(offset, at(position + last_len))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_osd_proto::{AttrId, Attribute, Extent, Options, ServiceAction, TimestampsControl};

    fn request(command: Command) -> Request<'static> {
        Request {
            service_action: command.service_action(),
            options: Options::default(),
            timestamps: TimestampsControl::Update,
            command,
            set_attrs: Vec::new(),
            get_attrs: GetAttrs::None,
            data: &[],
        }
    }

    const OBJ: ObjectAddr = ObjectAddr { partition_id: tessera_types::PartitionId(0x10000), object_id: tessera_types::ObjectId(0x10001) };

    #[test]
    fn data_commands() {
        let r = requirement(&request(Command::Read { addr: OBJ, offset: 100, len: 50, layout: DataLayout::Contiguous }));
        assert_eq!(r, Requirement { addressed: Addressed::Object(OBJ), all_of: Permissions::READ, any_of: Permissions::NONE, bytes: Bytes::Range(100, 150) });
        let r = requirement(&request(Command::Append { addr: OBJ, len: 5 }));
        assert_eq!((r.any_of, r.bytes), (Permissions::APPEND | Permissions::WRITE, Bytes::Unbounded));
        assert_eq!(r.missing(Permissions::APPEND), Permissions::NONE);
        assert_eq!(r.missing(Permissions::READ), Permissions::APPEND | Permissions::WRITE);
        let r = requirement(&request(Command::CreateAndWrite { partition_id: 0x10000, requested: None, offset: 0, len: 8, layout: DataLayout::Contiguous }));
        assert_eq!((r.addressed, r.all_of), (Addressed::Partition(0x10000), Permissions::CREATE | Permissions::WRITE));
        assert_eq!(requirement(&request(Command::CreatePartition { requested: None })).addressed, Addressed::Root);
        assert_eq!(requirement(&request(Command::List { partition_id: 0, list_id: 0, initial_oid: 0, allocation_len: 8, with_attrs: false })).addressed, Addressed::Root);
        let _ = ServiceAction::Read;
    }

    /// Goal: piggy-backed attributes add GET_ATTR / SET_ATTR (and POL_SEC for the policy tag),
    /// but a get of the Current Command page alone adds nothing.
    #[test]
    fn piggy_backed_attributes() {
        let mut req = request(Command::Write { addr: OBJ, offset: 0, len: 0, layout: DataLayout::Contiguous });
        req.get_attrs = GetAttrs::List { ids: vec![AttrId::new(CURRENT_COMMAND_PAGE, 5)], allocation_len: 64 };
        assert_eq!(requirement(&req).all_of, Permissions::WRITE);
        req.get_attrs = GetAttrs::List { ids: vec![AttrId::new(1, 0x82)], allocation_len: 64 };
        assert_eq!(requirement(&req).all_of, Permissions::WRITE | Permissions::GET_ATTR);
        req.set_attrs = vec![Attribute { id: AttrId::new(policy_page(0), POLICY_ACCESS_TAG), value: vec![0, 0, 0, 1] }];
        assert_eq!(requirement(&req).all_of, Permissions::WRITE | Permissions::GET_ATTR | Permissions::SET_ATTR | Permissions::POL_SEC);
        assert!(is_policy_page(0x3000_0005) && is_policy_page(0x9000_0005) && !is_policy_page(0xF000_0005) && !is_policy_page(6));
    }

    /// Goal: the span of each layout is exact. Method: hand-computed layouts.
    #[test]
    fn layout_spans() {
        let list = DataLayout::List(vec![Extent { offset: 300, len: 10 }, Extent { offset: 20, len: 5 }]);
        assert_eq!(layout_bytes(1000, 15, &list), Bytes::Range(1020, 1310));
        // 3 blocks of 4 every 10 bytes, the last one 2 bytes long: 0..4, 10..14, 20..22.
        assert_eq!(layout_bytes(0, 10, &DataLayout::Strided { stride: 10, block_len: 4 }), Bytes::Range(0, 22));
        // 2 x 3 blocks of 2 bytes: inner stride 4 (3 blocks), outer stride 100 (2 rows).
        let nested = DataLayout::Nested { block_len: 2, levels: vec![(3, 4), (2, 100)] };
        assert_eq!(layout_bytes(50, 12, &nested), Bytes::Range(50, 50 + 100 + 8 + 2));
        assert_eq!(layout_bytes(50, 0, &DataLayout::Contiguous), Bytes::None);
    }
}
