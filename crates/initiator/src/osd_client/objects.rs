//! Creating, removing and listing partitions, collections and user objects.

use tessera_osd_proto::pages::{CURRENT_COMMAND_OBJECT_ID, CURRENT_COMMAND_PARTITION_ID};
use tessera_osd_proto::{AttrId, Command, GetAttrs, ListResult, OsdRequestBuilder, ServiceAction};
use tessera_scsi::ScsiTransport;
use tessera_types::ObjectAddr;

use super::{OsdClient, OsdError};

/// Room for the Current Command attributes a creating command asks for.
const CURRENT_COMMAND_ALLOCATION: u32 = 256;

/// One LIST / LIST COLLECTION request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListParams {
    /// Resume from here (a previous result's `continuation_oid`), 0 to start.
    pub initial_oid: u64,
    /// A previous result's list identifier, 0 to start.
    pub list_id: u32,
    pub allocation_len: u64,
    /// With `Some`, each entry carries these attributes (the "with attributes" format).
    pub attrs: Option<Vec<AttrId>>,
}

impl Default for ListParams {
    fn default() -> Self {
        ListParams { initial_oid: 0, list_id: 0, allocation_len: 64 * 1024, attrs: None }
    }
}

fn current_command(id: AttrId) -> GetAttrs {
    GetAttrs::List { ids: vec![id], allocation_len: CURRENT_COMMAND_ALLOCATION }
}

impl<T: ScsiTransport> OsdClient<T> {
    /// FORMAT OSD: erase everything; `capacity_bytes` is the formatted capacity.
    pub fn format_osd(&self, capacity_bytes: u64) -> Result<(), OsdError> {
        self.execute(&OsdRequestBuilder::new(Command::FormatOsd { capacity_bytes })).map(drop)
    }

    /// CREATE PARTITION; returns the new partition id.
    pub fn create_partition(&self, requested: Option<u64>) -> Result<u64, OsdError> {
        let b = OsdRequestBuilder::new(Command::CreatePartition { requested }).get_attrs(current_command(CURRENT_COMMAND_PARTITION_ID));
        let reply = self.execute(&b)?;
        match requested {
            Some(pid) => Ok(pid),
            None => self.attr_u64(&reply, CURRENT_COMMAND_PARTITION_ID, ServiceAction::CreatePartition, "the new partition id"),
        }
    }

    /// REMOVE PARTITION (refused with 2C0A while it holds objects).
    pub fn remove_partition(&self, partition_id: u64) -> Result<(), OsdError> {
        self.execute(&OsdRequestBuilder::new(Command::RemovePartition { partition_id })).map(drop)
    }

    /// CREATE of `count` user objects with consecutive ids, starting at `requested` or where the
    /// target chooses; returns the ids.
    pub fn create(&self, partition_id: u64, requested: Option<u64>, count: u16) -> Result<Vec<u64>, OsdError> {
        let count = count.max(1);
        let b = OsdRequestBuilder::new(Command::Create { partition_id, requested, count }).get_attrs(current_command(CURRENT_COMMAND_OBJECT_ID));
        let reply = self.execute(&b)?;
        let first = match requested {
            Some(oid) => oid,
            None => self.attr_u64(&reply, CURRENT_COMMAND_OBJECT_ID, ServiceAction::Create, "the new object id")?,
        };
        Ok((0..count as u64).map(|i| first + i).collect())
    }

    /// CREATE of one user object with a target-chosen id.
    pub fn create_one(&self, partition_id: u64) -> Result<u64, OsdError> {
        Ok(self.create(partition_id, None, 1)?[0])
    }

    /// REMOVE a user object.
    pub fn remove(&self, addr: ObjectAddr) -> Result<(), OsdError> {
        self.execute(&OsdRequestBuilder::new(Command::Remove { addr })).map(drop)
    }

    /// CREATE COLLECTION; returns the collection id.
    pub fn create_collection(&self, partition_id: u64, requested: Option<u64>) -> Result<u64, OsdError> {
        let b = OsdRequestBuilder::new(Command::CreateCollection { partition_id, requested })
            .get_attrs(current_command(CURRENT_COMMAND_OBJECT_ID));
        let reply = self.execute(&b)?;
        match requested {
            Some(cid) => Ok(cid),
            None => self.attr_u64(&reply, CURRENT_COMMAND_OBJECT_ID, ServiceAction::CreateCollection, "the new collection id"),
        }
    }

    /// REMOVE COLLECTION; `force` removes it even while it has members.
    pub fn remove_collection(&self, addr: ObjectAddr, force: bool) -> Result<(), OsdError> {
        self.execute(&OsdRequestBuilder::new(Command::RemoveCollection { addr, force })).map(drop)
    }

    fn list_builder(command: Command, params: &ListParams) -> OsdRequestBuilder<'static> {
        let b = OsdRequestBuilder::new(command);
        match &params.attrs {
            // The get list names the attributes each entry carries; nothing comes back at the
            // retrieved offset beyond an empty list.
            Some(ids) => b.get_attrs(GetAttrs::List { ids: ids.clone(), allocation_len: 0 }),
            None => b,
        }
    }

    /// LIST: one page of partition ids (`partition_id` 0) or of a partition's objects and
    /// collections. Continue with the result's `continuation_oid` and `list_id`.
    pub fn list(&self, partition_id: u64, params: &ListParams) -> Result<ListResult, OsdError> {
        let command = Command::List {
            partition_id,
            list_id: params.list_id,
            initial_oid: params.initial_oid,
            allocation_len: params.allocation_len,
            with_attrs: params.attrs.is_some(),
        };
        let reply = self.execute(&Self::list_builder(command, params))?;
        ListResult::decode(&reply.data).map_err(|e| self.reply_error(ServiceAction::List, e))
    }

    /// LIST COLLECTION: one page of a collection's members.
    pub fn list_collection(&self, addr: ObjectAddr, params: &ListParams) -> Result<ListResult, OsdError> {
        let command = Command::ListCollection {
            addr,
            list_id: params.list_id,
            initial_oid: params.initial_oid,
            allocation_len: params.allocation_len,
            with_attrs: params.attrs.is_some(),
        };
        let reply = self.execute(&Self::list_builder(command, params))?;
        ListResult::decode(&reply.data).map_err(|e| self.reply_error(ServiceAction::ListCollection, e))
    }

    /// Every id LIST returns, following continuations (one LIST command per page).
    pub fn list_all(&self, partition_id: u64) -> Result<Vec<u64>, OsdError> {
        self.list_all_from(partition_id, 0)
    }

    /// Every id from `first` on (LIST's initial object id), following continuations.
    pub fn list_all_from(&self, partition_id: u64, first: u64) -> Result<Vec<u64>, OsdError> {
        let mut params = ListParams { initial_oid: first, ..ListParams::default() };
        let mut ids = Vec::new();
        loop {
            let page = self.list(partition_id, &params)?;
            ids.extend(page.entries.iter().map(|e| e.object_id));
            if page.continuation_oid == 0 {
                return Ok(ids);
            }
            if page.continuation_oid <= params.initial_oid {
                // No progress (the allocation cannot hold a single entry, or a faulty target
                // points back): stop rather than loop forever.
                return Err(OsdError::Missing { peer: self.peer(), service_action: ServiceAction::List, what: "progress in the list" });
            }
            params.initial_oid = page.continuation_oid;
            params.list_id = page.list_id;
        }
    }
}
