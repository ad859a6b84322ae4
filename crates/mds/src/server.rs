//! [`Mds`]: one metadata server. It checks that a request belongs here, runs the SQLite steps
//! in [`Store`] through its [`Namespace`] (reads on a snapshot, writes group-committed), the
//! OSD steps through [`DataObjects`], and the peer steps through [`MdsConnection`], in an order
//! that never leaks an object (see `journal.rs`). Files take their objects from precreated
//! pools ([`Pools`]), so a create makes no OSD call.
//!
//! Split across servers (docs/metadata.md): an inode's home is in its id. A directory's entries
//! live with the directory; files and symlinks live with their parent directory; a new
//! directory is homed on server `hash(parent, name) mod servers`, so a tree spreads over all
//! servers. The store lock is never held across an OSD or peer call, so a slow node or a peer
//! calling back cannot stall or deadlock this server.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tessera_mds_proto::request::NewInode;
use tessera_mds_proto::{Attr, Caller, ClusterMap, FileLayout, FileType, FsError, InodeId, ObjectRef, Reply, Request, SetAttrs, StripeHint, Timespec};
use tessera_security::clock::now_ms;
use thiserror::Error;

use crate::access;
use crate::commit::Pending;
use crate::db::DbError;
use crate::health::{OsdHealth, Prober, Watched};
use crate::journal::{self, Audit};
use crate::namespace::{Namespace, NamespaceError};
use crate::objects::{DataObjects, ObjectData};
use crate::peer::{MdsConnection, PEER_TIMEOUT};
use crate::pools::{Pools, PrecreateConfig};
use crate::reaper::Reaper;
use crate::rename_lock::{self, LockHolder, RenameLock};
use crate::revocation::{self, Retrier};
use crate::truncation;
use crate::security::{file_permissions, fresh_policy_tag, SecurityManager};
use crate::store::files::{self, CreateError, StripePolicy};
use crate::store::{InodeRow, Store};

mod authorize;
mod listing;
mod split_repair;

/// Directory levels a rename walks up looking for a loop; deeper trees get EIO rather than
/// an unbounded walk across servers.
pub const DEPTH_MAX: usize = 4096;

/// Times a rename gathers its target's ancestors again when renames elsewhere keep changing them.
const RENAME_ATTEMPTS: usize = 8;

/// Times a create refills an empty pool and tries again before it answers EIO. Every refill
/// adds a batch, so only creates racing for the same objects can make another attempt
/// necessary; the bound only stops a pathological loop.
const CREATE_ATTEMPTS: usize = 1000;

#[derive(Clone, Debug)]
pub struct MdsConfig {
    /// This server's index in `cluster.servers` (the high bits of the inode ids it owns).
    pub server_index: u32,
    pub cluster: ClusterMap,
    /// Striping for files in directories without a default of their own.
    pub default_stripe: StripeHint,
    /// Sizes of the precreated object pools.
    pub precreate: PrecreateConfig,
    /// The security manager, when the OSDs check capabilities; `None` hands out layouts
    /// without credentials (NOSEC clusters).
    pub security: Option<Arc<SecurityManager>>,
    /// The cluster's user key: with it, every connection proves its user (`proven.rs`);
    /// without it, callers are believed.
    pub user_key: Option<tessera_mds_proto::UserKey>,
    /// Objects awaiting removal past which an unlink removes its own before it answers
    /// (`reaper.rs`; [`crate::reaper::QUEUED_MAX`] unless a test needs a small one).
    pub removal_queue_max: usize,
}

#[derive(Debug, Error)]
pub enum OpenError {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error("server index {index} is not in a cluster of {servers} servers")]
    ServerIndex { index: u32, servers: usize },
    #[error("metadata store: {0}")]
    Store(FsError),
}

/// A request's answer: ready now, or to be sent only once a step is durable (EIO instead if
/// its group is lost).
pub enum Answer {
    Now(Result<Reply, FsError>),
    /// The reply, owed until the step is durable; then the objects the step journaled for
    /// removal are queued for removal ([`Mds::queue_removal`]).
    WhenDurable(Pending, Result<Reply, FsError>, Vec<ObjectRef>),
}

pub struct Mds {
    ns: Arc<Namespace>,
    pools: Pools,
    /// Finishes revocations an OSD could not be told of (revocation.rs).
    _revocations: Retrier,
    /// Removes unlinked files' objects after the unlink is answered (reaper.rs).
    reaper: Reaper,
    /// Every object operation goes through [`Watched`], which records here whether the OSD
    /// answered; the prober asks the OSDs nothing else asked lately.
    health: Arc<OsdHealth>,
    _prober: Prober,
    objects: Arc<dyn DataObjects>,
    config: MdsConfig,
    peers: Vec<Mutex<Option<MdsConnection>>>,
    /// The peers whose last call failed with `PeerDown`, for `Request::PeersDown`.
    peers_down: Mutex<BTreeSet<u32>>,
    /// The cluster's rename lock; used on server 0 only (`rename_lock.rs`).
    rename_lock: RenameLock,
    /// Tokens this server takes the rename lock under: its index high, then a count.
    lock_tokens: AtomicU64,
}

fn now() -> Timespec {
    let d = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    Timespec { secs: d.as_secs() as i64, nanos: d.subsec_nanos() }
}

/// What a regular file's objects say of it.
struct FileData {
    size: u64,
    /// The latest data modification among its objects, ms since the epoch.
    modified_ms: u64,
}

impl FileData {
    /// From the states of `layout`'s objects, in its order.
    fn of<'a>(layout: &FileLayout, states: impl Iterator<Item = &'a ObjectData>) -> Result<FileData, FsError> {
        let (mut lengths, mut modified_ms) = (Vec::with_capacity(layout.objects.len()), 0);
        for d in states {
            lengths.push(d.logical_len);
            modified_ms = modified_ms.max(d.data_modified_ms);
        }
        Ok(FileData { size: layout.stripe.file_size(&lengths).ok_or(FsError::Io)?, modified_ms })
    }
}

/// A regular file's attributes. Writes go from clients straight to the OSDs, never through
/// this server, so a file whose data changed after its last metadata change (its ctime: a
/// create, chmod, utimes, truncate) shows that change as its mtime and ctime; a utimes after
/// the last write stands, as utimes(2) sets it, and a chmod after it keeps the write's time
/// (`Store::setattr_after_writes`).
fn with_data(row: InodeRow, data: FileData) -> Attr {
    let mut attr = row.attr(data.size);
    let changed = data_time(data.modified_ms);
    if changed > attr.ctime {
        attr.mtime = changed;
        attr.ctime = changed;
    }
    attr
}

/// An OSD's data time (ms since the epoch) as an inode time.
fn data_time(ms: u64) -> Timespec {
    Timespec::from_nanos((ms as i64).saturating_mul(1_000_000))
}

/// The server a new directory is homed on: FNV-1a over the parent id and the name, stable
/// across builds and machines, unlike std's hasher, so a tree spreads the same way whoever
/// makes it. Only a mkdir asks; afterwards the directory's id says where it lives.
pub fn placement(parent: InodeId, name: &str, servers: u32) -> u32 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in parent.0.to_be_bytes().iter().chain(name.as_bytes()) {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (h % servers.max(1) as u64) as u32
}

impl Mds {
    /// Opens the store at `path`, drains whatever the removal journal still holds (a crash
    /// between an unlink and its REMOVEs, or an abandoned precreated range), and starts the
    /// precreated pools (filled in the background; a range a crash left unfinished is retried).
    pub fn open(path: &Path, config: MdsConfig, objects: Arc<dyn DataObjects>) -> Result<Mds, OpenError> {
        let servers = config.cluster.servers.len().max(1);
        if config.server_index as usize >= servers {
            return Err(OpenError::ServerIndex { index: config.server_index, servers });
        }
        let health = Arc::new(OsdHealth::new(config.cluster.osds.len() as u32));
        let watched = Arc::new(Watched::new(objects, health.clone()));
        let objects: Arc<dyn DataObjects> = watched.clone();
        let ns = Arc::new(Namespace::open(path, config.server_index, now()).map_err(|e| match e {
            NamespaceError::Db(e) => OpenError::Db(e),
            NamespaceError::Store(e) => OpenError::Store(e),
        })?);
        // Before anything gives out an object id (`fence.rs`).
        health.uncheck_all();
        crate::fence::fence_unchecked(&ns, objects.as_ref(), &health);
        match journal::resume(&ns, objects.as_ref()) {
            Ok(0) => {}
            Ok(left) => tracing::warn!(left, "objects still await removal"),
            Err(e) => tracing::warn!(%e, "removal journal not drained"),
        }
        match truncation::resume(&ns, objects.as_ref()) {
            Ok(0) => {}
            Ok(left) => tracing::warn!(left, "truncates still owed to unreachable OSDs; retried in the background"),
            Err(e) => tracing::warn!(%e, "truncate journal not read"),
        }
        match revocation::resume(&ns, objects.as_ref()) {
            Ok(0) => {}
            Ok(left) => tracing::warn!(left, "revocations still owed to unreachable OSDs; retried in the background"),
            Err(e) => tracing::warn!(%e, "revocation journal not read"),
        }
        let revocations = Retrier::start(ns.clone(), objects.clone(), health.clone()).map_err(|source| OpenError::Db(DbError::Thread { source }))?;
        let reaper = Reaper::start(ns.clone(), objects.clone(), config.removal_queue_max).map_err(|source| OpenError::Db(DbError::Thread { source }))?;
        let osd_count = config.cluster.osds.len() as u32;
        let pools = Pools::start(ns.clone(), objects.clone(), osd_count, config.precreate).map_err(OpenError::Store)?;
        let prober = Prober::start(watched, health.clone()).map_err(|source| OpenError::Db(DbError::Thread { source }))?;
        let peers = (0..servers).map(|_| Mutex::new(None)).collect();
        // A count that starts from the clock, so a restarted server takes no token its
        // previous life may still hold.
        let lock_tokens = AtomicU64::new((u64::from(config.server_index) << 56) | (now_ms() << 12) & ((1 << 56) - 1));
        Ok(Mds { ns, pools, _revocations: revocations, reaper, health, _prober: prober, objects, config, peers, peers_down: Mutex::default(), rename_lock: RenameLock::default(), lock_tokens })
    }

    pub fn server_index(&self) -> u32 {
        self.config.server_index
    }

    /// The cluster's user key, when this server proves users.
    pub fn user_key(&self) -> Option<&tessera_mds_proto::UserKey> {
        self.config.user_key.as_ref()
    }

    fn servers(&self) -> u32 {
        self.config.cluster.servers.len().max(1) as u32
    }

    fn osd_count(&self) -> u32 {
        self.config.cluster.osds.len() as u32
    }

    /// Retries every journaled revocation, truncate and removal; returns how many rows remain
    /// owed in the three journals.
    pub fn resume_journal(&self) -> Result<usize, FsError> {
        let retags = revocation::resume(&self.ns, self.objects.as_ref())?;
        let lengths = truncation::resume(&self.ns, self.objects.as_ref())?;
        Ok(retags + lengths + journal::resume(&self.ns, self.objects.as_ref())?)
    }

    /// Objects on the OSDs that this server allocated and nothing references, and objects its
    /// files name that the OSDs do not hold (`journal::audit`).
    pub fn repair(&self) -> Result<Audit, FsError> {
        journal::audit(&self.ns, self.objects.as_ref(), self.osd_count())
    }

    /// `Request::Repair`: what [`Mds::repair`] finds; with `remove`, the orphans are journaled
    /// and the journal drained, so those whose OSD answers are gone when this returns and the
    /// rest go when it does. Missing objects are only reported: their data is gone, and the
    /// files stay for their owners.
    ///
    /// It also checks what this server holds of directories split across servers
    /// (`split_repair.rs`), with `older_than_secs` keeping mkdirs still running out.
    fn repair_request(&self, remove: bool, older_than_secs: u64) -> Result<Reply, FsError> {
        let Audit { orphans, mut missing } = self.repair()?;
        if !orphans.is_empty() {
            tracing::warn!(found = orphans.len(), remove, "repair found objects that no file, precreated range or removal accounts for");
        }
        if !missing.is_empty() {
            tracing::error!(found = missing.len(), "repair found files whose data objects their OSDs do not hold");
        }
        if remove && !orphans.is_empty() {
            self.ns.write(|s| s.journal_orphans(&orphans))?;
            let left = journal::resume(&self.ns, self.objects.as_ref())?;
            if left > 0 {
                tracing::warn!(left, "objects await removal until their OSDs answer");
            }
        }
        let found = orphans.len() as u64;
        let orphans = orphans.into_iter().take(tessera_mds_proto::limits::ORPHANS_LISTED_MAX as usize).collect();
        let (mut unlinked, mut dangling) = self.split_faults(remove, older_than_secs)?;
        unlinked.truncate(tessera_mds_proto::limits::FAULTS_LISTED_MAX as usize);
        dangling.truncate(tessera_mds_proto::limits::FAULTS_LISTED_MAX as usize);
        missing.truncate(tessera_mds_proto::limits::FAULTS_LISTED_MAX as usize);
        Ok(Reply::Repair { orphans, found, unlinked, dangling, missing })
    }

    /// Whether the metadata store failed so that nothing can be answered until this server
    /// restarts (a flush failed: what is on disk is not known). The daemon then exits, so a
    /// restart recovers the store from what the disk holds (`cmd_mds.rs`).
    pub fn store_failed(&self) -> bool {
        self.ns.is_broken()
    }

    /// Precreated objects ready per OSD, as last known.
    pub fn pool_levels(&self) -> Vec<u64> {
        self.pools.levels()
    }

    /// Sends one request to server `server`, connecting on first use and again when the kept
    /// connection was closed meanwhile (the peer restarted). A connection lost during the call
    /// is dropped; the request is sent once more only when it changes nothing, as the client
    /// library does (docs/architecture.md, "Lost connections").
    fn peer(&self, server: u32, request: Request) -> Result<Reply, FsError> {
        let result = self.peer_call(server, request);
        let mut down = self.peers_down.lock().unwrap_or_else(|p| p.into_inner());
        match result {
            Err(FsError::PeerDown) => down.insert(server),
            // It answered, whatever it answered.
            _ => down.remove(&server),
        };
        result
    }

    fn peer_call(&self, server: u32, request: Request) -> Result<Reply, FsError> {
        let addr = self.config.cluster.servers.get(server as usize).ok_or(FsError::Stale)?;
        let mut slot = self.peers[server as usize].lock().unwrap_or_else(|p| p.into_inner());
        let connect = || {
            // Its own steps: each was authorized where it began, for the client that asked.
            let mut conn = MdsConnection::connect_with_timeout(addr.as_str(), PEER_TIMEOUT).map(|c| c.with_caller(Caller::ROOT)).map_err(|e| {
                tracing::warn!(server, %e, "cannot reach peer MDS");
                FsError::PeerDown
            })?;
            if let Some(key) = &self.config.user_key {
                let proved = conn.challenge().and_then(|challenge| match challenge {
                    Ok(c) => {
                        let (proof, session) = key.prove_sealed(&Caller::ROOT, &c);
                        conn.authenticate(proof, &session)
                    }
                    Err(e) => Ok(Err(e)),
                });
                match proved {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => {
                        tracing::error!(server, %e, "peer MDS refused this server's proof: do the servers hold the same user key?");
                        return Err(e);
                    }
                    Err(e) => {
                        tracing::warn!(server, %e, "lost peer MDS while proving this server");
                        return Err(FsError::PeerDown);
                    }
                }
            }
            Ok(conn)
        };
        let mut conn = match slot.take() {
            Some(conn) if conn.is_open() => conn,
            _ => connect()?,
        };
        let result = match conn.call(&request) {
            Ok(result) => result,
            Err(e) if e.is_lost() && request.is_read_only() => {
                tracing::debug!(server, %e, "peer MDS connection lost; asking again on a new one");
                conn = connect()?;
                conn.call(&request).map_err(|e| {
                    tracing::warn!(server, %e, "peer MDS connection dropped");
                    FsError::PeerDown
                })?
            }
            Err(e) => {
                tracing::warn!(server, %e, "peer MDS connection dropped");
                return Err(FsError::PeerDown);
            }
        };
        *slot = Some(conn);
        result
    }

    fn peer_attr(&self, ino: InodeId) -> Result<Attr, FsError> {
        match self.peer(ino.server(), Request::GetAttr { ino })? {
            Reply::Attr(a) => Ok(a),
            _ => Err(FsError::Io),
        }
    }

    /// Attributes of a local inode; a regular file's size comes from its objects.
    fn local_attr(&self, ino: InodeId) -> Result<Attr, FsError> {
        let (row, layout) = self.ns.read(|s| inode_and_layout(s, ino))?;
        self.attr_from(row, layout.as_ref())
    }

    /// An inode's attributes; a regular file's size and data times come from its objects.
    fn attr_from(&self, row: InodeRow, layout: Option<&FileLayout>) -> Result<Attr, FsError> {
        let Some(l) = layout else { return Ok(row.attr(0)) };
        match self.data_of(l) {
            Ok(data) => Ok(with_data(row, data)),
            // An unlink between reading the inode and asking its objects removes both: the
            // file is gone, not broken.
            Err(e) => match self.ns.read(|s| s.inode(row.ino)) {
                Err(FsError::Stale | FsError::NotFound) => Err(FsError::Stale),
                // An OSD that does not answer leaves the size unknown, not the file: a
                // listing, a walk through it, a chmod or an unlink need no size.
                Ok(row) if e == FsError::Io => Ok(row.attr(Attr::SIZE_UNKNOWN)),
                _ => Err(e),
            },
        }
    }

    fn attr(&self, ino: InodeId) -> Result<Attr, FsError> {
        if ino.server() == self.server_index() {
            self.local_attr(ino)
        } else {
            self.peer_attr(ino)
        }
    }

    /// A regular file's size, from every object's length, and the latest of its objects' data
    /// modification times: one GET ATTRIBUTES per object, all in flight at once from this
    /// thread (`DataObjects::data_states`). (Asking a file's OSDs from a thread each was
    /// measured slower at stripe counts 2 to 4 on the 2-core development machine: starting the
    /// threads cost more than the overlap won.)
    fn data_of(&self, layout: &FileLayout) -> Result<FileData, FsError> {
        let states = self.objects.data_states(&layout.objects).into_iter().zip(&layout.objects).map(|(state, o)| {
            state.map_err(|e| {
                tracing::warn!(?o, %e, "cannot read object length");
                FsError::Io
            })
        });
        FileData::of(layout, states.collect::<Result<Vec<_>, _>>()?.iter())
    }

    /// Removes objects a durable step journaled, in the background (`reaper.rs`) unless the
    /// reaper is far behind, when this waits for the OSDs; failures stay journaled for the
    /// next drain. Never before the step is durable: a crash would then keep the file and lose
    /// its data.
    fn remove_journaled(&self, list: &[ObjectRef]) {
        self.reaper.remove(list);
    }

    /// [`Mds::remove_journaled`] for the event loop: only queues, never waits on an OSD.
    pub fn queue_removal(&self, list: &[ObjectRef]) {
        self.reaper.queue(list);
    }

    /// Waits up to `limit` for the removals of unlinked files' objects to be tried; true when
    /// none is left to try. A server stopping calls it so that a clean stop leaves no work.
    pub fn settle_removals(&self, limit: Duration) -> bool {
        self.reaper.settle(limit)
    }

    /// Answers one request, waiting until what it changed is durable.
    pub fn handle(&self, request: Request) -> Result<Reply, FsError> {
        self.handle_as(&Caller::ROOT, request)
    }

    /// Answers `request` once `caller` is found to be allowed it (`server/authorize.rs`).
    pub fn handle_as(&self, caller: &Caller, request: Request) -> Result<Reply, FsError> {
        match self.answer(caller, request) {
            Answer::Now(reply) => reply,
            Answer::WhenDurable(pending, reply, removals) => {
                self.ns.wait(pending)?;
                self.remove_journaled(&removals);
                reply
            }
        }
    }

    /// Answers one request; a create's reply is returned with the durability it waits for,
    /// so that the caller can wait for it ([`Mds::wait_durable`]) together with others.
    pub fn answer(&self, caller: &Caller, request: Request) -> Answer {
        if let Err(e) = self.authorize(caller, &request) {
            return Answer::Now(Err(e));
        }
        match request {
            Request::Create { parent, name, new, stripe } => self.create(caller, parent, &name, &new, stripe),
            other => Answer::Now(self.handle_now(caller, other)),
        }
    }

    /// What a thread that must never block (the event loop, `tcp.rs`) may answer itself: a
    /// create whose objects the pools hold, which runs SQLite statements only, and the cluster
    /// map. Anything else,
    /// including a create that finds a pool empty (the refill calls the OSDs) or an OSD not yet
    /// checked against the store (`fence.rs`), comes back to be
    /// answered by [`Mds::handle`] on a thread that may block.
    pub fn answer_without_blocking(&self, caller: &Caller, request: Request) -> Result<Answer, Request> {
        let (parent, name, new, stripe) = match request {
            Request::Create { parent, name, new, stripe } => (parent, name, new, stripe),
            Request::ClusterMap => return Ok(Answer::Now(Ok(Reply::ClusterMap(self.config.cluster.clone())))),
            Request::Unlink { parent, name } => return self.unlink_without_blocking(caller, parent, &name).ok_or(Request::Unlink { parent, name }),
            other => return Err(other),
        };
        match self.create_once(caller, parent, &name, &new, stripe) {
            CreateTry::Answered(answer) => Ok(answer),
            CreateTry::PoolEmpty(..) | CreateTry::Unchecked(..) => Err(Request::Create { parent, name, new, stripe }),
        }
    }

    /// An unlink as one step with its permission checks inside, answered when durable, its
    /// objects removed after (`reaper.rs`): nothing in it waits, so the event loop runs it and
    /// gathers it into groups as it does creates. None when the checks need another server.
    fn unlink_without_blocking(&self, caller: &Caller, parent: InodeId, name: &str) -> Option<Answer> {
        // A worker's unlink removes its own objects when the reaper is this far behind.
        if self.reaper.backed_up() {
            return None;
        }
        let me = self.server_index();
        let started = self.ns.start_guarded(|s| match authorize::may_unlink_in_step(s, caller, parent, name, me)? {
            true => s.unlink(parent, name, now()).map(Some),
            false => Ok(None),
        });
        match started {
            Err(e) => Some(Answer::Now(Err(e))),
            Ok((_, Ok(None))) => None,
            Ok((pending, Ok(Some(objects)))) => Some(Answer::WhenDurable(pending, Ok(Reply::Done), objects)),
            Ok((pending, Err(e))) => Some(Answer::WhenDurable(pending, Err(e), Vec::new())),
        }
    }

    /// Returns once `pending` is durable; EIO if its group was lost. Runs the group commit
    /// round itself unless one is running (`commit.rs`).
    pub fn wait_durable(&self, pending: Pending) -> Result<(), FsError> {
        self.ns.wait(pending)
    }

    /// Every request but create, answered once durable.
    fn handle_now(&self, caller: &Caller, request: Request) -> Result<Reply, FsError> {
        use Request as R;
        match request {
            R::Lookup { parent, name } => self.lookup(parent, &name).map(Reply::Attr),
            R::GetAttr { ino } => self.local_attr(ino).map(Reply::Attr),
            R::SetAttr { ino, changes } => self.setattr(caller, ino, &changes).map(Reply::Attr),
            R::Mkdir { parent, name, new } => self.mkdir(parent, &name, &new).map(Reply::Attr),
            R::Rmdir { parent, name } => self.rmdir(parent, &name).map(|()| Reply::Done),
            // `answer` routes creates to `create`; this only keeps the match whole.
            R::Create { parent, name, new, stripe } => self.handle_as(caller, R::Create { parent, name, new, stripe }),
            R::Unlink { parent, name } => {
                let objects = self.ns.write(|s| s.unlink(parent, &name, now()))?;
                self.remove_journaled(&objects);
                Ok(Reply::Done)
            }
            R::Rename { src_parent, src_name, dst_parent, dst_name } => {
                self.rename(src_parent, &src_name, dst_parent, &dst_name).map(|()| Reply::Done)
            }
            R::Symlink { parent, name, target, new } => {
                self.ns.write(|s| s.symlink(parent, &name, &target, &new, now())).map(|r| Reply::Attr(r.attr(0)))
            }
            R::ReadLink { ino } => self.ns.read(|s| s.readlink(ino)).map(Reply::Link),
            R::ReadDir { dir, after, max_entries } => self.readdir(dir, after.as_deref(), max_entries),
            R::Truncate { ino, size } => self.truncate(caller, ino, size).map(Reply::Attr),
            R::GetLayout { ino } => self.layout_with_grant(caller, ino),
            R::SetDirStripe { dir, hint } => {
                if let Some(h) = &hint {
                    files::resolve(h, self.osd_count(), &[], 0)?;
                }
                self.ns.write(|s| s.set_dir_stripe(dir, hint)).map(|()| Reply::Done)
            }
            R::GetDirStripe { dir } => self.ns.read(|s| s.dir_stripe(dir)).map(Reply::DirStripe),
            R::StatFs => self.ns.read(|s| s.stat_fs()).map(Reply::StatFs),
            R::ClusterMap => Ok(Reply::ClusterMap(self.config.cluster.clone())),
            R::OsdUsage => self.osd_usage().map(Reply::OsdUsage),
            R::OsdsDown => Ok(Reply::OsdsDown(self.health.down())),
            // A challenge and its proof belong to a connection, and the TCP front answers them
            // before any request reaches here (`proven.rs`); an in-process caller has nothing to
            // prove, and no challenge made here would be kept to check a proof against.
            R::Authenticate { .. } => Ok(Reply::Done),
            R::Challenge => Err(FsError::Protocol),
            R::PeersDown => Ok(Reply::PeersDown(self.peers_down.lock().unwrap_or_else(|p| p.into_inner()).iter().copied().collect())),
            R::Repair { remove, older_than_secs } => self.repair_request(remove, older_than_secs),
            R::PeerHasEntry { dir, ino } => self.has_entry(dir, ino).map(|()| Reply::Done),
            R::PeerCreateDir { parent, new, stripe } => {
                self.ns.write(|s| s.create_dir_inode(parent, &new, stripe, now())).map(|r| Reply::Attr(r.attr(0)))
            }
            R::PeerRemoveDir { ino } => self.ns.write(|s| s.remove_dir_inode(ino)).map(|()| Reply::Done),
            R::PeerRenameLock { .. } if self.server_index() != 0 => Err(FsError::Misdirected),
            R::PeerRenameLock { token, take: true } => match self.rename_lock.try_take(token, Instant::now()) {
                true => Ok(Reply::Done),
                false => Err(FsError::Busy),
            },
            R::PeerRenameLock { token, take: false } => {
                self.rename_lock.release(token);
                Ok(Reply::Done)
            }
        }
    }

    /// The entry and, for a local inode, its row and layout, from one snapshot; the size then
    /// comes from the objects, a remote inode's attributes from its home server.
    ///
    /// The inode can go while its objects are asked for its size; the name is then read again,
    /// since a rename over it (a `put` replacing a file) gave it another inode and the name
    /// never stopped existing. If it keeps happening, to this lookup the name was not there.
    fn lookup(&self, parent: InodeId, name: &str) -> Result<Attr, FsError> {
        const ATTEMPTS: u32 = 5;
        let me = self.server_index();
        let mut attempt = 1;
        loop {
            let (entry, local) = self.ns.read(|s| {
                let entry = s.lookup(parent, name)?;
                let local = if entry.ino.server() == me { Some(inode_and_layout(s, entry.ino)?) } else { None };
                Ok((entry, local))
            })?;
            let attr = match local {
                Some((row, layout)) => self.attr_from(row, layout.as_ref()),
                None => self.peer_attr(entry.ino),
            };
            match attr {
                Err(FsError::Stale) if attempt < ATTEMPTS => attempt += 1,
                Err(FsError::Stale) => return Err(FsError::NotFound),
                other => return other,
            }
        }
    }

    fn mkdir(&self, parent: InodeId, name: &str, new: &NewInode) -> Result<Attr, FsError> {
        let home = placement(parent, name, self.servers());
        if home == self.server_index() {
            return self.ns.write(|s| s.mkdir(parent, name, new, now())).map(|r| r.attr(0));
        }
        let (new, stripe) = self.ns.read(|s| {
            let dir = s.check_can_add(parent, name)?;
            Ok((access::inherited(&dir, new, FileType::Directory), s.dir_stripe(parent)?))
        })?;
        let attr = match self.peer(home, Request::PeerCreateDir { parent, new, stripe }) {
            Ok(Reply::Attr(a)) => a,
            Ok(_) => return Err(FsError::Io),
            // Placement spreads directories; it is not where anyone looks for one (an id names
            // its home). With the chosen server down, the directory is made here beside its
            // entry, so a mkdir under a live parent works while another server is down.
            Err(FsError::PeerDown) => {
                tracing::info!(home, name, "placing a new directory here: its chosen server did not answer");
                return self.ns.write(|s| s.mkdir(parent, name, &new, now())).map(|r| r.attr(0));
            }
            Err(e) => return Err(e),
        };
        if let Err(e) = self.ns.write(|s| s.link_entry(parent, name, attr.ino, FileType::Directory, now())) {
            // Lost a race for the name: take back the inode we had made.
            if let Err(undo) = self.peer(home, Request::PeerRemoveDir { ino: attr.ino }) {
                tracing::warn!(ino = attr.ino.0, %undo, "orphaned remote directory inode");
            }
            return Err(e);
        }
        Ok(attr)
    }

    fn rmdir(&self, parent: InodeId, name: &str) -> Result<(), FsError> {
        let Some(remote) = self.ns.write(|s| s.rmdir(parent, name, now()))? else { return Ok(()) };
        // The home server checks emptiness and removes the inode atomically; only then does
        // the entry go, so a failure leaves the directory whole.
        match self.peer(remote.server(), Request::PeerRemoveDir { ino: remote }) {
            Ok(_) | Err(FsError::Stale) => {}
            Err(e) => return Err(e),
        }
        // A repair between the two steps may have dropped the entry already.
        match self.ns.write(|s| s.drop_entry(parent, name, remote, now())) {
            Err(FsError::NotFound) => Ok(()),
            other => other,
        }
    }

    /// Create: one step takes the objects from the precreated pools and writes the inode, its
    /// entry and its layout. An empty pool is refilled here (one batch CREATE) and the step
    /// tried again; after that the background filler keeps ahead. The answer, success or
    /// failure, waits for the step's group to be durable.
    fn create(&self, caller: &Caller, parent: InodeId, name: &str, new: &NewInode, stripe: Option<StripeHint>) -> Answer {
        for _ in 0..CREATE_ATTEMPTS {
            let (pending, osds) = match self.create_once(caller, parent, name, new, stripe) {
                CreateTry::Answered(answer) => return answer,
                CreateTry::PoolEmpty(pending, osds) => (pending, osds),
                CreateTry::Unchecked(pending, osds) => {
                    // An OSD down when this server started: check it now that a file needs
                    // it (a down one fails at once and the create is EIO, as on a down OSD).
                    if let Err(e) = self.ns.wait(pending) {
                        return Answer::Now(Err(e));
                    }
                    for osd in osds {
                        if let Err(e) = crate::fence::check(&self.ns, self.objects.as_ref(), &self.health, osd) {
                            tracing::warn!(osd, %e, "a new file needs an OSD not yet checked against this store, and it cannot be checked");
                            return Answer::Now(Err(FsError::Io));
                        }
                    }
                    continue;
                }
            };
            // The refill judges the pools by what is committed: the group holding the objects
            // creates took meanwhile must be committed first, or it sees them as still there
            // and makes nothing.
            if let Err(e) = self.ns.wait(pending) {
                return Answer::Now(Err(e));
            }
            for osd in osds {
                if let Err(e) = self.pools.refill(osd) {
                    return Answer::Now(Err(e));
                }
            }
        }
        tracing::warn!(%name, "precreated pools emptied faster than refilled");
        Answer::Now(Err(FsError::Io))
    }

    /// One attempt at a create's step, calling no OSD.
    fn create_once(&self, caller: &Caller, parent: InodeId, name: &str, new: &NewInode, stripe: Option<StripeHint>) -> CreateTry {
        let policy = StripePolicy { default: self.config.default_stripe, osd_count: self.osd_count(), avoid: self.health.avoid(), unusable: self.health.unchecked() };
        let (pending, result) = match self.ns.start_write(|s| s.create_file(caller, parent, name, new, stripe, &policy, now())) {
            Ok(started) => started,
            Err(e) => return CreateTry::Answered(Answer::Now(Err(e))),
        };
        match result {
            Ok(f) => {
                self.pools.took(f.layout.objects.iter().map(|o| o.osd));
                // As open(O_CREAT) hands the creator a read-write descriptor whatever the new
                // file's mode (install -m 444, git's objects): the creator's first credentials
                // allow writing; refreshed ones follow the mode.
                let reply = self.grant(&f.layout, &f.policy_tags, access::READ | access::WRITE).map(|grant| Reply::Created { attr: f.row.attr(0), layout: f.layout, grant });
                CreateTry::Answered(Answer::WhenDurable(pending, reply, Vec::new()))
            }
            Err(CreateError::PoolEmpty(osds)) => CreateTry::PoolEmpty(pending, osds),
            Err(CreateError::Unchecked(osds)) => CreateTry::Unchecked(pending, osds),
            Err(CreateError::Fs(e)) => CreateTry::Answered(Answer::WhenDurable(pending, Err(e), Vec::new())),
        }
    }

    /// Credentials for a layout's objects allowing what `bits` (r, w, x) allow; none without
    /// security.
    fn grant(&self, layout: &FileLayout, policy_tags: &[u32], bits: u32) -> Result<tessera_mds_proto::Grant, FsError> {
        match &self.config.security {
            Some(manager) => manager.grant(&layout.objects, policy_tags, file_permissions(bits), now_ms()),
            None => Ok(Vec::new()),
        }
    }

    /// GetLayout: the layout, and fresh credentials for what the file's mode allows `caller`,
    /// from one snapshot.
    fn layout_with_grant(&self, caller: &Caller, ino: InodeId) -> Result<Reply, FsError> {
        let (layout, tags, bits) = self.ns.read(|s| Ok((s.layout(ino)?, s.policy_tags(ino)?, access::file_bits(caller, &s.inode(ino)?))))?;
        let grant = self.grant(&layout, &tags, bits)?;
        Ok(Reply::Layout { layout, grant })
    }

    /// setattr; a mode change of a regular file under security also revokes every capability
    /// issued for its objects: one step records the new mode, the file's fresh policy tag and
    /// the revocation journal; then each OSD is told. If one cannot be reached the answer is
    /// EIO (the revocation is not complete yet) and the journal completes it once the OSD is
    /// back (revocation.rs).
    fn setattr(&self, caller: &Caller, ino: InodeId, changes: &tessera_mds_proto::SetAttrs) -> Result<Attr, FsError> {
        let revoke = changes.mode.is_some() && self.config.security.is_some();
        let tag = fresh_policy_tag();
        // A regular file's last write is on its OSDs: read before a change that keeps the mtime.
        // An OSD that cannot answer does not stop the change (a chmod must still revoke); the
        // write's time may then be hidden by the new ctime.
        let data_changed = match self.ns.read(|s| inode_and_layout(s, ino))? {
            (row, Some(layout)) if changes.mtime.is_none() && row.kind == FileType::Regular => {
                self.data_of(&layout).ok().map(|d| data_time(d.modified_ms))
            }
            _ => None,
        };
        let (row, owed) = self.ns.write(|s| {
            let row = s.setattr_after_writes(caller, ino, changes, now(), data_changed)?;
            if row.kind != FileType::Regular || !revoke {
                return Ok((row, Vec::new()));
            }
            s.set_policy_tag(ino, tag)?;
            Ok((row, s.journal_retag(ino, tag)?))
        })?;
        if row.kind != FileType::Regular {
            return Ok(row.attr(0));
        }
        let left = revocation::retag(&self.ns, self.objects.as_ref(), &owed);
        if left > 0 {
            tracing::warn!(ino = ino.0, left, "revocation incomplete: retried in the background until every OSD holds the new tag");
            return Err(FsError::Io);
        }
        Ok(with_data(row, self.data_of(&self.ns.read(|s| s.layout(ino))?)?))
    }

    /// Capacity and use of every OSD, read by this server (clients hold no root capability).
    /// One that does not answer is reported as such, so the others are still shown; it is
    /// asked on the health probe's session, so a frozen one holds `df` for the probe's short
    /// liveness interval, not the cluster's.
    fn osd_usage(&self) -> Result<Vec<tessera_mds_proto::OsdUsage>, FsError> {
        Ok((0..self.osd_count())
            .map(|osd| {
                self.objects.probe_usage(osd).unwrap_or_else(|e| {
                    tracing::warn!(osd, %e, "cannot read OSD usage");
                    tessera_mds_proto::OsdUsage::UNREACHABLE
                })
            })
            .collect())
    }

    fn rename(&self, src_parent: InodeId, src_name: &str, dst_parent: InodeId, dst_name: &str) -> Result<(), FsError> {
        if src_parent.server() != dst_parent.server() {
            return Err(FsError::CrossServer);
        }
        self.ns.read(|s| s.check_local(src_parent))?;
        // A directory moving to another parent changes the chains other servers check
        // against: one such move at a time in the cluster (`rename_lock.rs`).
        let moves_directory = src_parent != dst_parent
            && self.servers() > 1
            && self.ns.read(|s| s.lookup(src_parent, src_name)).is_ok_and(|e| e.kind == FileType::Directory);
        let _held = match moves_directory {
            true => Some(rename_lock::acquire(self, self.lock_tokens.fetch_add(1, Ordering::Relaxed))?),
            false => None,
        };
        for _ in 0..RENAME_ATTEMPTS {
            // Gathered before the transaction, without the lock, because it may ask peers;
            // the transaction checks this server's part again (`Store::rename`).
            let ancestors = self.ancestors(dst_parent)?;
            let replaced = match self.ns.write(|s| s.rename(src_parent, src_name, dst_parent, dst_name, &ancestors, now())) {
                // Another rename changed the chain since it was gathered.
                Err(FsError::Busy) => continue,
                // As Linux: a target that is an ancestor of the source is ENOTEMPTY (it holds the
                // source), which Linux finds before it compares the two entries' types.
                Err(FsError::IsDir) if self.is_ancestor(self.lookup(dst_parent, dst_name)?.ino, src_parent)? => Err(FsError::NotEmpty),
                other => other,
            }?;
            self.remove_journaled(&replaced);
            return Ok(());
        }
        Err(FsError::Busy)
    }

    /// The directories from `dir` up to the root, the root left out.
    fn ancestors(&self, dir: InodeId) -> Result<Vec<InodeId>, FsError> {
        let mut ancestors = Vec::new();
        let mut at = dir;
        while at != InodeId::ROOT {
            if ancestors.len() >= DEPTH_MAX {
                return Err(FsError::Io);
            }
            ancestors.push(at);
            let attr = self.attr(at)?;
            if attr.file_type != FileType::Directory {
                return Err(FsError::NotDir);
            }
            at = attr.parent;
        }
        Ok(ancestors)
    }

    /// Whether directory `dir` is `of` or one of its ancestors.
    fn is_ancestor(&self, dir: InodeId, of: InodeId) -> Result<bool, FsError> {
        let mut at = of;
        for _ in 0..=DEPTH_MAX {
            if at == dir {
                return Ok(true);
            }
            if at == InodeId::ROOT {
                return Ok(false);
            }
            at = self.attr(at)?.parent;
        }
        Err(FsError::Io)
    }

    /// Sets every object's length. A file its caller may not write cannot be truncated, the
    /// same rule its capabilities enforce for writes (`access::file_bits`: the caller's class,
    /// or for the superuser a write bit in any class).
    ///
    /// All or nothing, as far as an OSD failure goes: every object must answer first (an OSD
    /// already down fails the truncate with nothing changed), and the lengths are journaled
    /// before any is set, so an OSD that fails part-way gets its length when it returns
    /// (`truncation.rs`); the caller is told EIO meanwhile.
    ///
    /// By anyone but the superuser it also clears the setuid and setgid bits, as a write does.
    fn truncate(&self, caller: &Caller, ino: InodeId, size: u64) -> Result<Attr, FsError> {
        let (layout, bits) = self.ns.read(|s| Ok((s.layout(ino)?, access::file_bits(caller, &s.inode(ino)?))))?;
        if bits & access::WRITE == 0 {
            return Err(FsError::Access);
        }
        let truncated = self.data_of(&layout).and_then(|_| {
            let (row, owed) = self.ns.write(|s| {
                let owed = s.journal_truncate(ino, size)?;
                let row = s.touch_file(ino, now())?;
                // A truncate is a write: by anyone but the superuser it takes the privilege bits.
                match caller.write_drops_privileges(row.mode) {
                    true => Ok((s.setattr(caller, ino, &SetAttrs { drop_privileges: true, ..SetAttrs::default() }, row.ctime)?, owed)),
                    false => Ok((row, owed)),
                }
            })?;
            truncation::set_lengths(&self.ns, self.objects.as_ref(), &owed)?;
            Ok(row.attr(size))
        });
        truncated.map_err(|e| self.unless_gone(ino, e))
    }

    /// `e`, an OSD's failure on `ino`'s objects, or ESTALE when `ino` itself is gone: an unlink
    /// meanwhile removed its objects with it, so the file is gone, not broken.
    fn unless_gone(&self, ino: InodeId, e: FsError) -> FsError {
        match self.ns.read(|s| s.inode(ino)) {
            Err(FsError::Stale | FsError::NotFound) if e == FsError::Io => FsError::Stale,
            _ => e,
        }
    }
}

/// The outcome of one attempt at a create.
enum CreateTry {
    Answered(Answer),
    /// These OSDs' pools are empty (nothing was written; `Pending` is the open group).
    PoolEmpty(Pending, Vec<u32>),
    /// These OSDs are not yet checked against the store (nothing was written).
    Unchecked(Pending, Vec<u32>),
}

/// An inode's row and, for a regular file, its layout.
fn inode_and_layout(s: &Store, ino: InodeId) -> Result<(InodeRow, Option<FileLayout>), FsError> {
    let row = s.inode(ino)?;
    let layout = if row.kind == FileType::Regular { Some(s.layout(ino)?) } else { None };
    Ok((row, layout))
}

impl LockHolder for Mds {
    fn take(&self, token: u64) -> Result<bool, FsError> {
        if self.server_index() == 0 {
            return Ok(self.rename_lock.try_take(token, Instant::now()));
        }
        match self.peer(0, Request::PeerRenameLock { token, take: true }) {
            Ok(_) => Ok(true),
            Err(FsError::Busy) => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn give_back(&self, token: u64) {
        if self.server_index() == 0 {
            self.rename_lock.release(token);
        } else if let Err(e) = self.peer(0, Request::PeerRenameLock { token, take: false }) {
            tracing::warn!(%e, "cannot give the rename lock back to server 0; its lease runs out instead");
        }
    }
}
