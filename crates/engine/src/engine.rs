//! The [`Engine`]: opening a store, dispatching each typed request to its command, and the
//! steps every command shares (existence checks, set-then-get, timestamps).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use rusqlite::Connection;
use tessera_osd_proto::{AttrId, Command, GetAttrs, Reply, Request, RetrievedAttr, TimestampsControl};
use tessera_types::ObjectAddr;

use crate::attrs::{self, CurrentCommand, DeviceFacts, Reader};
use crate::config::EngineConfig;
use crate::db::objects::{self as rows, Touch};
use crate::db::{self, Db};
use crate::error::{CommandError, IoOp, StorageError, CDB_OBJECT_ID, CDB_PARTITION_ID};
use crate::list::ListIds;
use crate::attr_cache::AttrCache;
use crate::locks::ObjectLocks;
use crate::object::{ObjectKind, ObjectRow};
use crate::pages::current;
use crate::placements::Placements;
use crate::store::file::FileStore;
use crate::store::ObjectData;

/// File name of the attribute store inside the engine directory.
pub const DB_FILE: &str = "attrs.sqlite";
/// Directory of object data files inside the engine directory.
pub const OBJECTS_DIR: &str = "objects";

/// The OSD object engine. `Send + Sync`: connection threads call [`Engine::execute`]
/// concurrently.
pub struct Engine {
    pub(crate) db: Db,
    pub(crate) data: Arc<dyn ObjectData>,
    pub(crate) locks: ObjectLocks,
    /// FORMAT OSD holds this exclusively; every other command shares it.
    pub(crate) epoch: RwLock<()>,
    pub(crate) attr_cache: AttrCache,
    pub(crate) security_facts: crate::security_facts::SecurityFacts,
    pub(crate) system_id: [u8; 20],
    pub(crate) capacity_bytes: AtomicU64,
    pub(crate) config: EngineConfig,
    pub(crate) lists: ListIds,
    /// WRITEs whose data is arriving straight into object files (placed_write.rs).
    pub(crate) placements: Arc<Placements>,
    dir: PathBuf,
}

/// Per-command state: the request, the time, and the Current Command page being filled in.
pub(crate) struct Cx<'r, 'd> {
    pub req: &'r Request<'d>,
    pub now_ms: u64,
    pub update_ts: bool,
    /// FUA: data and attributes durable before status.
    pub durable: bool,
    pub current: CurrentCommand,
}

impl<'r, 'd> Cx<'r, 'd> {
    pub(crate) fn new(req: &'r Request<'d>, now_ms: u64) -> Self {
        Cx {
            req,
            now_ms,
            update_ts: req.timestamps == TimestampsControl::Update,
            durable: req.options.fua,
            current: CurrentCommand::default(),
        }
    }
}

fn random_system_id() -> Result<[u8; 20], StorageError> {
    let mut id = [0u8; 20];
    let mut filled = 0;
    while filled < id.len() {
        // SAFETY: the pointer and length describe the unfilled tail of `id`.
        let n = unsafe { libc::getrandom(id[filled..].as_mut_ptr() as *mut libc::c_void, id.len() - filled, 0) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(StorageError::Io { op: IoOp::Open, source: e });
            }
        } else {
            filled += n as usize;
        }
    }
    Ok(id)
}

/// Size of the file system holding `dir` (the default formatted capacity).
pub(crate) fn filesystem_bytes(dir: &Path) -> Result<u64, StorageError> {
    Ok(crate::store::space::of_dir(dir)?.size_bytes)
}

impl Engine {
    /// Creates or reopens the store in `dir` (`attrs.sqlite` and `objects/`). A new store is
    /// usable at once: the root exists with the configured capacity, no FORMAT OSD needed.
    pub fn open(dir: &Path, config: EngineConfig) -> Result<Engine, StorageError> {
        std::fs::create_dir_all(dir).map_err(StorageError::io(IoOp::Open))?;
        let data = FileStore::open(&dir.join(OBJECTS_DIR), config.open_files_max, config.read_gap_max_bytes)?;
        Self::open_with_data(dir, config, Arc::new(data))
    }

    /// Like [`Engine::open`] with another data store (a simulator's, or [`crate::MemStore`]).
    pub fn open_with_data(dir: &Path, config: EngineConfig, data: Arc<dyn ObjectData>) -> Result<Engine, StorageError> {
        std::fs::create_dir_all(dir).map_err(StorageError::io(IoOp::Open))?;
        let db = Db::open(&dir.join(DB_FILE), config.readers_max)?;
        let (system_id, capacity) = db.write(false, |c| Self::init_meta(c, dir, &config))?;
        Ok(Engine {
            db,
            data,
            locks: ObjectLocks::default(),
            epoch: RwLock::new(()),
            attr_cache: AttrCache::default(),
            security_facts: Default::default(),
            system_id,
            capacity_bytes: AtomicU64::new(capacity),
            config,
            lists: ListIds::default(),
            placements: Arc::default(),
            dir: dir.to_path_buf(),
        })
    }

    fn init_meta(c: &Connection, dir: &Path, config: &EngineConfig) -> Result<([u8; 20], u64), StorageError> {
        let system_id = match db::meta_get(c, "system_id")? {
            Some(v) => <[u8; 20]>::try_from(v.as_slice()).map_err(|_| StorageError::Corrupt { table: "meta", reason: "system id is not 20 bytes" })?,
            None => {
                let id = match config.system_id {
                    Some(id) => id,
                    None => random_system_id()?,
                };
                db::meta_set(c, "system_id", &id)?;
                id
            }
        };
        let capacity = match db::meta_get(c, "capacity_bytes")? {
            Some(v) => u64::from_be_bytes(<[u8; 8]>::try_from(v.as_slice()).map_err(|_| StorageError::Corrupt { table: "meta", reason: "capacity is not 8 bytes" })?),
            None => {
                let cap = match config.capacity_bytes {
                    Some(c) => c,
                    None => filesystem_bytes(dir)?,
                };
                db::meta_set(c, "capacity_bytes", &cap.to_be_bytes())?;
                cap
            }
        };
        if rows::load(c, ObjectAddr::ROOT)?.is_none() {
            // The engine has no clock: the root's timestamps start at 0 and FORMAT OSD sets them.
            rows::insert(c, ObjectAddr::ROOT, ObjectKind::Root, 0)?;
        }
        Ok((system_id, capacity))
    }

    pub fn system_id(&self) -> [u8; 20] {
        self.system_id
    }

    /// The directory the store lives in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Executes one command. Safe to call from many threads at once.
    pub fn execute(&self, request: &Request<'_>, now_ms: u64) -> Result<Reply, CommandError> {
        let result = self.execute_command(request, now_ms);
        self.security_facts.after(request);
        result
    }

    fn execute_command(&self, request: &Request<'_>, now_ms: u64) -> Result<Reply, CommandError> {
        let mut cx = Cx::new(request, now_ms);
        if let Command::FormatOsd { capacity_bytes } = request.command {
            return self.format(&mut cx, capacity_bytes);
        }
        let _epoch = self.epoch.read().unwrap_or_else(|p| p.into_inner());
        match &request.command {
            Command::FormatOsd { .. } => unreachable!("handled above"),
            Command::Create { partition_id, requested, count } => self.create(&mut cx, *partition_id, *requested, *count),
            Command::Remove { addr } => self.remove(&mut cx, *addr),
            Command::CreatePartition { requested } => self.create_partition(&mut cx, *requested),
            Command::RemovePartition { partition_id } => self.remove_partition(&mut cx, *partition_id),
            Command::CreateCollection { partition_id, requested } => self.create_collection(&mut cx, *partition_id, *requested),
            Command::RemoveCollection { addr, force } => self.remove_collection(&mut cx, *addr, *force),
            Command::List { partition_id, list_id, initial_oid, allocation_len, with_attrs } => {
                self.list(&mut cx, *partition_id, *list_id, *initial_oid, *allocation_len, *with_attrs)
            }
            Command::ListCollection { addr, list_id, initial_oid, allocation_len, with_attrs } => {
                self.list_collection(&mut cx, *addr, *list_id, *initial_oid, *allocation_len, *with_attrs)
            }
            Command::Read { addr, offset, len, layout } => self.read(&mut cx, *addr, *offset, *len, layout),
            Command::Write { addr, offset, len, layout } => self.write(&mut cx, *addr, *offset, *len, layout),
            Command::CreateAndWrite { partition_id, requested, offset, len, layout } => {
                self.create_and_write(&mut cx, *partition_id, *requested, *offset, *len, layout)
            }
            Command::Append { addr, len } => self.append(&mut cx, *addr, *len),
            Command::Punch { addr, offset, len } => self.punch(&mut cx, *addr, *offset, *len, false),
            Command::Clear { addr, offset, len } => self.punch(&mut cx, *addr, *offset, *len, true),
            Command::Flush { addr, scope } => self.flush(&mut cx, *addr, *scope),
            Command::FlushCollection { addr, scope } => self.flush_collection(&mut cx, *addr, *scope),
            Command::FlushPartition { partition_id, scope } => self.flush_partition(&mut cx, *partition_id, *scope),
            Command::FlushOsd { scope } => self.flush_osd(&mut cx, *scope),
            Command::GetAttributes { addr } | Command::SetAttributes { addr } => self.attributes(&mut cx, *addr),
            Command::Query { addr, allocation_len, criteria } => self.query(&mut cx, *addr, *allocation_len, criteria),
            Command::GetMemberAttributes { addr } => self.get_member_attributes(&mut cx, *addr),
            Command::SetMemberAttributes { addr } => self.set_member_attributes(&mut cx, *addr),
            Command::RemoveMemberObjects { addr } => self.remove_member_objects(&mut cx, *addr),
            Command::ReadMap { addr, offset, len, map_type, allocation_len } => {
                self.read_map(&mut cx, *addr, *offset, *len, *map_type, *allocation_len)
            }
            Command::CompareAndSwap { addr, attr, expected, new } => self.compare_and_swap(&mut cx, *addr, *attr, *expected, *new),
            Command::FetchAndAdd { addr, attr, addend } => self.fetch_and_add(&mut cx, *addr, *attr, *addend),
        }
    }

    pub(crate) fn facts(&self, now_ms: u64) -> DeviceFacts {
        DeviceFacts { system_id: self.system_id, capacity_bytes: self.capacity_bytes.load(Ordering::Relaxed), now_ms }
    }

    /// The row of `addr`, which must exist and be one of `kinds`. A missing partition points
    /// at the partition id (CDB byte 16), anything else at the object id (byte 24).
    pub(crate) fn require(&self, c: &Connection, addr: ObjectAddr, kinds: &[ObjectKind]) -> Result<ObjectRow, CommandError> {
        let pid_field = CommandError::NoSuchObject { addr: ObjectAddr::partition(addr.partition_id.0), field: CDB_PARTITION_ID };
        crate::object::sql_id(addr.partition_id.0, CDB_PARTITION_ID)?;
        crate::object::sql_id(addr.object_id.0, CDB_OBJECT_ID)?;
        match rows::load(c, addr)? {
            Some(row) if kinds.contains(&row.kind) => Ok(row),
            Some(_) => Err(CommandError::NoSuchObject { addr, field: if addr.object_id.0 == 0 { CDB_PARTITION_ID } else { CDB_OBJECT_ID } }),
            None if addr.object_id.0 == 0 => Err(pid_field),
            None => {
                if rows::load(c, ObjectAddr::partition(addr.partition_id.0))?.is_none() {
                    Err(pid_field)
                } else {
                    Err(CommandError::NoSuchObject { addr, field: CDB_OBJECT_ID })
                }
            }
        }
    }

    fn access_is_stale(&self, stored_ms: u64, now_ms: u64) -> bool {
        now_ms.saturating_sub(stored_ms) >= self.config.access_time_granularity_ms || now_ms < stored_ms
    }

    /// Inside a write transaction, after the command's function: the set list, timestamps
    /// (`touches` plus what the set list implies), then the get list.
    pub(crate) fn finish_in(&self, c: &Connection, cx: &mut Cx<'_, '_>, addr: ObjectAddr, touches: &[Touch]) -> Result<Vec<RetrievedAttr>, CommandError> {
        let mut row = rows::load(c, addr)?.ok_or(CommandError::NoSuchObject { addr, field: CDB_OBJECT_ID })?;
        if !cx.req.set_attrs.is_empty() {
            if attrs::sets_logical_length(row.kind, &cx.req.set_attrs) {
                // It may cut bytes a WRITE in flight has placed; that WRITE must not commit them.
                self.placements.disturb(addr);
            }
            let outcome = attrs::apply_set(c, &*self.data, &row, &cx.req.set_attrs)?;
            if outcome.length_changed {
                cx.current.used_change = Some(cx.current.used_change.unwrap_or(0) + outcome.used_change);
            }
            if cx.update_ts && outcome.changed {
                let t = if outcome.length_changed { Touch::DataAndAttrModified } else { Touch::AttrModified };
                rows::touch(c, addr, t, cx.now_ms)?;
            }
        }
        if cx.update_ts {
            for t in touches {
                rows::touch(c, addr, *t, cx.now_ms)?;
            }
        }
        if !attrs::gets_anything(&cx.req.get_attrs) {
            return Ok(Vec::new());
        }
        if !cx.req.set_attrs.is_empty() || !touches.is_empty() {
            row = rows::load(c, addr)?.ok_or(CommandError::NoSuchObject { addr, field: CDB_OBJECT_ID })?;
        }
        let facts = self.facts(cx.now_ms);
        let retrieved = Reader { conn: c, data: &*self.data, facts: &facts, current: &cx.current }.retrieve(&row, &cx.req.get_attrs)?;
        if cx.update_ts && self.access_is_stale(row.times.attr_accessed_ms, cx.now_ms) {
            rows::touch(c, addr, Touch::AttrAccessed, cx.now_ms)?;
        }
        Ok(retrieved)
    }

    /// After a command whose function needed no write transaction (READ, LIST, GET
    /// ATTRIBUTES ...): reads the get list on a reader connection and writes accessed
    /// timestamps only when stale. With a set list it becomes a write transaction.
    pub(crate) fn finish_read(&self, cx: &mut Cx<'_, '_>, addr: ObjectAddr, data_accessed: bool) -> Result<Vec<RetrievedAttr>, CommandError> {
        if !cx.req.set_attrs.is_empty() {
            let touches: &[Touch] = if data_accessed { &[Touch::DataAccessed] } else { &[] };
            return self.db.write(cx.durable, |c| self.finish_in(c, cx, addr, touches));
        }
        let gets = attrs::gets_anything(&cx.req.get_attrs);
        if !(gets || data_accessed && cx.update_ts) {
            return Ok(Vec::new());
        }
        let (row, retrieved) = self.retrieve(cx, addr, |c| rows::load(c, addr)?.ok_or(CommandError::NoSuchObject { addr, field: CDB_OBJECT_ID }))?;
        if cx.update_ts {
            if gets {
                self.touch_accessed(cx, &row, false)?;
            }
            if data_accessed {
                self.touch_accessed(cx, &row, true)?;
            }
        }
        Ok(retrieved)
    }

    /// Answers the command's get list for `addr` (whose row `load` finds), through the
    /// attribute cache when the request allows it ([`AttrCache::cacheable`]).
    pub(crate) fn retrieve(
        &self,
        cx: &mut Cx<'_, '_>,
        addr: ObjectAddr,
        load: impl FnOnce(&Connection) -> Result<ObjectRow, CommandError>,
    ) -> Result<(ObjectRow, Vec<RetrievedAttr>), CommandError> {
        let req = cx.req;
        let get = &req.get_attrs;
        let cacheable = AttrCache::cacheable(addr, get);
        let generation = self.db.generation();
        if let Some((row, retrieved)) = cacheable.then(|| self.attr_cache.get(addr, get, generation)).flatten() {
            cx.current.object.get_or_insert((row.kind, addr));
            return Ok((row, retrieved));
        }
        let facts = self.facts(cx.now_ms);
        let current = &mut cx.current;
        let (row, retrieved) = self.db.read(|c| {
            let row = load(c)?;
            current.object.get_or_insert((row.kind, addr));
            let retrieved = Reader { conn: c, data: &*self.data, facts: &facts, current: &*current }.retrieve(&row, get)?;
            Ok::<_, CommandError>((row, retrieved))
        })?;
        if cacheable {
            self.attr_cache.put(addr, get, generation, row, &retrieved);
        }
        Ok((row, retrieved))
    }

    /// Rewrites the attributes (or data) accessed time when the stored one is stale (see
    /// `EngineConfig::access_time_granularity_ms`).
    pub(crate) fn touch_accessed(&self, cx: &Cx<'_, '_>, row: &ObjectRow, data: bool) -> Result<(), CommandError> {
        let (stored, touch) =
            if data { (row.times.data_accessed_ms, Touch::DataAccessed) } else { (row.times.attr_accessed_ms, Touch::AttrAccessed) };
        if !self.access_is_stale(stored, cx.now_ms) {
            return Ok(());
        }
        match self.db.write(false, |c| rows::touch(c, row.addr, touch, cx.now_ms).map_err(CommandError::from)) {
            // An accessed time is bookkeeping: on a full disk the read still answers, as
            // relatime would let it.
            Err(e) if e.is_disk_full() => {
                tracing::debug!(addr = %row.addr, "accessed time not recorded: the disk is full");
                Ok(())
            }
            other => other,
        }
    }

    /// The get list of a command whose object no longer exists (REMOVE ...): only the
    /// Current Command page is defined.
    pub(crate) fn retrieve_current_only(&self, cx: &Cx<'_, '_>) -> Vec<RetrievedAttr> {
        let ids = match &cx.req.get_attrs {
            GetAttrs::None => return Vec::new(),
            GetAttrs::Page { page, .. } => vec![AttrId::new(*page, AttrId::ALL_IN_PAGE)],
            GetAttrs::List { ids, .. } => ids.clone(),
        };
        let mut out = Vec::new();
        for id in ids {
            if id.page != current::PAGE {
                out.push(RetrievedAttr { id, value: None });
            } else if id.is_all_in_page() {
                for n in current::NUMBERS {
                    if let Some(value) = cx.current.value(*n) {
                        out.push(RetrievedAttr { id: AttrId::new(id.page, *n), value: Some(value) });
                    }
                }
            } else {
                out.push(RetrievedAttr { id, value: cx.current.value(id.number) });
            }
        }
        out
    }

    /// Validates a set list for an object type before anything changes.
    pub(crate) fn validate_set(&self, cx: &Cx<'_, '_>, kind: ObjectKind) -> Result<(), CommandError> {
        attrs::validate_set(kind, &cx.req.set_attrs)
    }
}

/// A reply with no data.
pub(crate) fn reply(retrieved: Vec<RetrievedAttr>) -> Reply {
    Reply { data_in: Vec::new(), retrieved, recovered: None, member_retrieved: Vec::new() }
}
