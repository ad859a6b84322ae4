//! Attributes: GET / SET ATTRIBUTES in list and page format, QUERY, the member-object commands
//! and Tessera's atomics on 8-byte attributes.

use tessera_osd_proto::atomics::decode_old_value;
use tessera_osd_proto::{
    AttrId, Attribute, Command, GetAttrs, MemberAttr, OsdRequestBuilder, QueryCriteria, QueryResult, RetrievedAttr,
    ServiceAction,
};
use tessera_scsi::ScsiTransport;
use tessera_types::limits::ATTR_LIST_LEN_MAX;
use tessera_types::ObjectAddr;

use super::{OsdClient, OsdError, OsdReply};

/// First allocation for retrieved attributes; a list the target reports longer is asked again
/// once with its full length.
const FIRST_ALLOCATION: u32 = 4096;

impl<T: ScsiTransport> OsdClient<T> {
    /// Runs a get twice at most: again with the full length when the first allocation cut the
    /// list. `meanwhile` runs while the first is in flight.
    fn get_with_retry(&self, mut make: impl FnMut(u32) -> OsdRequestBuilder<'static>, meanwhile: &mut dyn FnMut()) -> Result<OsdReply, OsdError> {
        let reply = self.execute_meanwhile(&make(FIRST_ALLOCATION), meanwhile)?;
        match &reply.retrieved {
            Some(list) if list.truncated && list.full_len <= ATTR_LIST_LEN_MAX as u64 => self.execute(&make(list.full_len as u32)),
            _ => Ok(reply),
        }
    }

    /// GET ATTRIBUTES (list format). An id with number 0xFFFFFFFF asks for every attribute of
    /// its page. Undefined attributes come back with `value: None`.
    pub fn get_attributes(&self, addr: ObjectAddr, ids: &[AttrId]) -> Result<Vec<RetrievedAttr>, OsdError> {
        self.get_attributes_meanwhile(addr, ids, &mut || {})
    }

    /// [`OsdClient::get_attributes`] running `meanwhile` while the command is in flight (as
    /// [`OsdClient::execute_meanwhile`]).
    pub fn get_attributes_meanwhile(&self, addr: ObjectAddr, ids: &[AttrId], meanwhile: &mut dyn FnMut()) -> Result<Vec<RetrievedAttr>, OsdError> {
        let reply = self.get_with_retry(
            |allocation_len| OsdRequestBuilder::new(Command::GetAttributes { addr }).get_attrs(GetAttrs::List { ids: ids.to_vec(), allocation_len }),
            meanwhile,
        )?;
        Ok(reply.attrs().to_vec())
    }

    /// GET ATTRIBUTES (page format): every attribute of `page`.
    pub fn get_attribute_page(&self, addr: ObjectAddr, page: u32) -> Result<Vec<RetrievedAttr>, OsdError> {
        self.get_attribute_page_meanwhile(addr, page, &mut || {})
    }

    /// [`OsdClient::get_attribute_page`] running `meanwhile` while the command is in flight.
    pub fn get_attribute_page_meanwhile(&self, addr: ObjectAddr, page: u32, meanwhile: &mut dyn FnMut()) -> Result<Vec<RetrievedAttr>, OsdError> {
        let reply = self.get_with_retry(
            |allocation_len| OsdRequestBuilder::new(Command::GetAttributes { addr }).get_attrs(GetAttrs::Page { page, allocation_len }),
            meanwhile,
        )?;
        Ok(reply.attrs().to_vec())
    }

    /// SET ATTRIBUTES (list format); an empty value deletes the attribute.
    pub fn set_attributes(&self, addr: ObjectAddr, attrs: &[Attribute]) -> Result<(), OsdError> {
        self.set_attributes_meanwhile(addr, attrs, &mut || {})
    }

    /// [`OsdClient::set_attributes`] running `meanwhile` while the command is in flight.
    pub fn set_attributes_meanwhile(&self, addr: ObjectAddr, attrs: &[Attribute], meanwhile: &mut dyn FnMut()) -> Result<(), OsdError> {
        let mut b = OsdRequestBuilder::new(Command::SetAttributes { addr });
        b.set_attrs = attrs.to_vec();
        self.execute_meanwhile(&b, meanwhile).map(drop)
    }

    /// QUERY: the members of collection `addr` matching `criteria` (at most what
    /// `allocation_len` holds).
    pub fn query(&self, addr: ObjectAddr, criteria: QueryCriteria, allocation_len: u64) -> Result<Vec<u64>, OsdError> {
        let reply = self.execute(&OsdRequestBuilder::new(Command::Query { addr, allocation_len, criteria }))?;
        QueryResult::decode(&reply.data).map(|r| r.object_ids).map_err(|e| self.reply_error(ServiceAction::Query, e))
    }

    /// GET MEMBER ATTRIBUTES: `ids` of every member of collection `addr`.
    pub fn get_member_attributes(&self, addr: ObjectAddr, ids: &[AttrId], allocation_len: u32) -> Result<Vec<MemberAttr>, OsdError> {
        let b = OsdRequestBuilder::new(Command::GetMemberAttributes { addr })
            .get_attrs(GetAttrs::List { ids: ids.to_vec(), allocation_len });
        let reply = self.execute(&b)?;
        Ok(reply.members.map(|(m, _)| m).unwrap_or_default())
    }

    /// SET MEMBER ATTRIBUTES: `attrs` on every member of collection `addr`.
    pub fn set_member_attributes(&self, addr: ObjectAddr, attrs: &[Attribute]) -> Result<(), OsdError> {
        let mut b = OsdRequestBuilder::new(Command::SetMemberAttributes { addr });
        b.set_attrs = attrs.to_vec();
        self.execute(&b).map(drop)
    }

    /// REMOVE MEMBER OBJECTS: every member of collection `addr`.
    pub fn remove_member_objects(&self, addr: ObjectAddr) -> Result<(), OsdError> {
        self.execute(&OsdRequestBuilder::new(Command::RemoveMemberObjects { addr })).map(drop)
    }

    fn old_value(&self, reply: &OsdReply, service_action: ServiceAction) -> Result<u64, OsdError> {
        decode_old_value(&reply.data).ok_or_else(|| OsdError::Missing { peer: self.peer(), service_action, what: "the old value" })
    }

    /// Tessera COMPARE AND SWAP on an 8-byte attribute: stores `new` when the value equals
    /// `expected`; returns the value before (equal to `expected` when the swap happened).
    pub fn compare_and_swap(&self, addr: ObjectAddr, attr: AttrId, expected: u64, new: u64) -> Result<u64, OsdError> {
        let reply = self.execute(&OsdRequestBuilder::new(Command::CompareAndSwap { addr, attr, expected, new }))?;
        self.old_value(&reply, ServiceAction::CompareAndSwap)
    }

    /// Tessera FETCH AND ADD on an 8-byte attribute (wrapping); returns the value before.
    pub fn fetch_and_add(&self, addr: ObjectAddr, attr: AttrId, addend: u64) -> Result<u64, OsdError> {
        let reply = self.execute(&OsdRequestBuilder::new(Command::FetchAndAdd { addr, attr, addend }))?;
        self.old_value(&reply, ServiceAction::FetchAndAdd)
    }

    /// Makes the user object `addr` a member of collection `collection_id` by setting attribute
    /// `slot` of its collections page (user object page 4, OSD-2 r05 §7.1.2.19); an object in
    /// several collections uses one slot per collection.
    pub fn add_to_collection(&self, addr: ObjectAddr, slot: u32, collection_id: u64) -> Result<(), OsdError> {
        let id = AttrId::new(USER_OBJECT_COLLECTIONS_PAGE, slot);
        self.set_attributes(addr, &[Attribute { id, value: collection_id.to_be_bytes().to_vec() }])
    }
}

/// The user object collections page (page 4): attribute n holds a collection id.
pub const USER_OBJECT_COLLECTIONS_PAGE: u32 = 0x4;
