//! The TCP front of an [`Mds`]: one event loop thread (epoll, `poller.rs`) reads every
//! connection, runs the creates and unlinks itself, commits and flushes their group, and sends
//! their replies; neither crosses a thread. A request that may block (on an OSD, a peer server or
//! a flush) takes its connection to one of the [`Workers`], which answers it, sends the reply
//! and hands the connection back, watched for its next request, without waking the loop.
//!
//! - A create or an unlink runs its step at once (`Mds::answer_without_blocking`); its reply is
//!   owed until its group is durable (and an unlink's objects are handed to the reaper then).
//!   When every connection that wrote so lately has a step in the open group, or
//!   [`GATHER_MAX`] after the first, the loop runs the round (COMMIT, fdatasync) and
//!   sends all their replies. Clients that wait for each reply before the next request would
//!   otherwise commit in groups of one or two, paying the COMMIT, the WAL's pages and the
//!   flush per step (docs/metadata.md, "Group commit and durability").
//! - A connection reads no further request while it owes a reply or has reply bytes the
//!   socket has not taken, so replies leave in request order, and a client that stops reading
//!   holds only its own connection (cut off after `REPLY_WRITE_TIMEOUT`, `conn.rs`).
//! - The loop runs on the CPUs [`LoopConfig::cpus`] names; `tessera mds` by default names
//!   those that take its disk's interrupts, which end every flush (`loop_cpus.rs`). There a
//!   companion thread keeps the CPU from halting while a flush is in flight (`keep_awake.rs`).
//! - A frame whose header is bad ends the connection (the stream can no longer be trusted to
//!   be in step); a body that does not decode gets an error reply with its request id when the
//!   id is readable.

use std::collections::HashMap;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::poll_window::PollWindow;
use crate::poller::{Events, Interest, Poller};
use tessera_mds_proto::{encode_frame, DecodeError, Frame, FsError, Message, ObjectRef, Reply};

use crate::commit::Pending;
use crate::conn::{Conn, Input};
use crate::keep_awake::{FlushWait, KeepAwake};
use crate::loop_cpus::{LoopCpus, Placement};
use crate::proven::{self, Admission};
use crate::server::{Answer, Mds};
use crate::workers::Workers;

/// Connections served at most (one per client process); further ones are closed at accept.
/// Bounds memory (at most one frame buffer each) and worker threads (at most one each).
/// `tessera mds` lowers it to what its descriptor limit allows ([`LoopConfig::connections_max`]).
pub const CONNECTIONS_MAX: usize = 16_384;
/// How long the listener rests when the process is out of file descriptors.
const ACCEPT_PAUSE: Duration = Duration::from_millis(50);
/// The longest the open group waits for the steps of every connection that wrote lately.
pub const GATHER_MAX: Duration = Duration::from_micros(200);
/// Rounds a connection counts as writing after its last create or unlink.
const WRITER_ROUNDS: u64 = 8;
/// The listener's key in the poller; connections count up from 1.
const LISTENER: usize = 0;

/// The longest the loop polls its sockets before it sleeps, by default
/// ([`Poller::wait_polling`], [`PollWindow`]). 30 and 60 us measured alike (docs/metadata.md,
/// "The event loop's system calls").
pub const BUSY_POLL: Duration = Duration::from_micros(50);

/// How the event loop runs: how long it polls before it sleeps, and on which CPUs.
#[derive(Clone, Debug)]
pub struct LoopConfig {
    /// The longest the loop polls before it sleeps; it polls less while requests come farther
    /// apart (`poll_window.rs`). Zero: sleeps at once.
    pub busy_poll: Duration,
    pub cpus: LoopCpus,
    /// How the loop's CPU waits for a flush once the loop is placed (`keep_awake.rs`).
    pub flush_wait: FlushWait,
    /// Connections served at once, at most [`CONNECTIONS_MAX`].
    pub connections_max: usize,
}

impl Default for LoopConfig {
    /// Polls [`BUSY_POLL`], on any CPU.
    fn default() -> LoopConfig {
        LoopConfig { busy_poll: BUSY_POLL, cpus: LoopCpus::Any, flush_wait: FlushWait::Spin, connections_max: CONNECTIONS_MAX }
    }
}

/// Serves `listener` forever on a new thread, as [`LoopConfig::default`] says.
pub fn spawn(listener: TcpListener, mds: Arc<Mds>) -> io::Result<(SocketAddr, JoinHandle<()>)> {
    spawn_with(listener, mds, LoopConfig::default())
}

/// Serves `listener` forever on a new thread, run as `config` says.
pub fn spawn_with(listener: TcpListener, mds: Arc<Mds>, config: LoopConfig) -> io::Result<(SocketAddr, JoinHandle<()>)> {
    let addr = listener.local_addr()?;
    listener.set_nonblocking(true)?;
    let poller = Arc::new(Poller::new()?);
    poller.add(&listener, Interest::readable(LISTENER))?;
    let (back_tx, back_rx) = mpsc::channel();
    let mut front = Front {
        mds,
        poller,
        listener,
        conns: HashMap::new(),
        next_key: LISTENER + 1,
        workers: Workers::default(),
        back_tx,
        back_rx,
        at_workers: 0,
        owed: Vec::new(),
        first_owed_at: None,
        rounds: 0,
        writers: HashMap::new(),
        poll_window: PollWindow::new(config.busy_poll),
        keep_awake: KeepAwake::new(config.flush_wait),
        connections_max: config.connections_max.min(CONNECTIONS_MAX),
        accept_paused_until: None,
    };
    let cpus = config.cpus;
    let handle = std::thread::Builder::new().name(format!("mds-loop-{addr}")).spawn(move || front.run(Placement::start(cpus)))?;
    Ok((addr, handle))
}

/// A connection the loop holds (one a worker answers for is with the worker).
struct Slot {
    conn: Conn,
    /// Its create or unlink waits for the next round: it reads nothing meanwhile.
    owed: bool,
}

/// A connection coming back from a worker.
enum Back {
    /// Its reply sent, and already watched for its next request: the loop only takes it back.
    Watched(usize, Conn),
    /// The loop goes on with it (reply bytes still wait, or a next request was already read).
    Ready(usize, Conn),
    /// Closed (the reply could not be sent).
    Gone(usize),
}

/// A create's or an unlink's reply, owed until its group is durable.
struct Owed {
    key: usize,
    request_id: u64,
    pending: Pending,
    result: Result<Reply, FsError>,
    /// Objects the step journaled, removed once it is durable.
    removals: Vec<ObjectRef>,
}

struct Front {
    mds: Arc<Mds>,
    poller: Arc<Poller>,
    listener: TcpListener,
    conns: HashMap<usize, Slot>,
    next_key: usize,
    workers: Workers,
    back_tx: Sender<Back>,
    back_rx: Receiver<Back>,
    /// Connections with a worker.
    at_workers: usize,
    /// Creates and unlinks of the open group, in the order they ran.
    owed: Vec<Owed>,
    first_owed_at: Option<Instant>,
    /// Rounds run (the clock of `writers`).
    rounds: u64,
    /// Connections that created or unlinked lately, with the round of their last one.
    writers: HashMap<usize, u64>,
    /// How long a wait polls before it sleeps: up to [`LoopConfig::busy_poll`], as long as
    /// polls catch requests.
    poll_window: PollWindow,
    /// Keeps the loop's CPU from halting while a round's flush is in flight.
    keep_awake: KeepAwake,
    connections_max: usize,
    /// Out of file descriptors: the listener is not watched until then.
    accept_paused_until: Option<Instant>,
}

fn encode(request_id: u64, result: Result<Reply, FsError>) -> Vec<u8> {
    encode_frame(&Frame { request_id, message: Message::Reply(result) })
}

impl Front {
    fn run(&mut self, mut placement: Placement) {
        let mut events = Events::default();
        let mut ready = Vec::new();
        loop {
            placement.check(Instant::now());
            self.keep_awake.follow(placement.placed());
            self.resume_accepting();
            let timeout = self.next_deadline().map(|d| d.saturating_duration_since(Instant::now()));
            // Not while workers run: they need the CPU the polling would take.
            let polling = self.at_workers == 0;
            let poll_for = if polling { self.poll_window.current() } else { Duration::ZERO };
            match self.poller.wait_polling(&mut events, timeout, poll_for) {
                // Only waits the window chose teach it.
                Ok(waited) if polling => self.poll_window.record(waited),
                Ok(_) => {}
                Err(e) => {
                    tracing::error!(%e, "MDS event loop cannot wait for its sockets");
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                }
            }
            ready.clear();
            for key in events.keys() {
                if key == LISTENER {
                    self.accept();
                } else {
                    ready.push(key);
                }
            }
            while let Ok(back) = self.back_rx.try_recv() {
                self.at_workers -= 1;
                match back {
                    Back::Watched(key, conn) => {
                        self.conns.insert(key, Slot { conn, owed: false });
                    }
                    Back::Ready(key, conn) => {
                        self.conns.insert(key, Slot { conn, owed: false });
                        ready.push(key);
                    }
                    Back::Gone(key) => {
                        self.writers.remove(&key);
                    }
                }
            }
            for &key in &ready {
                if let Some(slot) = self.conns.get_mut(&key) {
                    if slot.conn.sending() {
                        if let Err(e) = slot.conn.flush() {
                            tracing::debug!(%e, "MDS connection closed while sending");
                            self.close(key);
                            continue;
                        }
                    }
                }
                self.advance(key);
            }
            self.cut_off_stalled();
            if self.gathered() {
                self.round();
            }
        }
    }

    /// The earliest of the gather deadline, the stalled sends' deadlines and the end of a
    /// pause in accepting.
    fn next_deadline(&self) -> Option<Instant> {
        let gather = self.first_owed_at.map(|t| t + GATHER_MAX);
        let stalled = self.conns.values().filter_map(|s| s.conn.send_deadline()).min();
        [gather, stalled, self.accept_paused_until].into_iter().flatten().min()
    }

    /// Watches the listener again once a pause for want of descriptors is over.
    fn resume_accepting(&mut self) {
        if self.accept_paused_until.is_some_and(|t| t <= Instant::now()) {
            self.accept_paused_until = None;
            if let Err(e) = self.poller.modify(&self.listener, Interest::readable(LISTENER)) {
                tracing::error!(%e, "cannot watch the MDS listener");
            }
        }
    }

    fn accept(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    if self.conns.len() + self.at_workers >= self.connections_max {
                        tracing::warn!(serving = self.connections_max, "as many MDS connections as this server takes; closing a new one");
                        continue;
                    }
                    let key = self.next_key;
                    self.next_key += 1;
                    let conn = match Conn::new(stream) {
                        Ok(c) => c,
                        Err(e) => {
                            tracing::warn!(%e, "cannot set up an MDS connection");
                            continue;
                        }
                    };
                    // Deleted from the poller before it is closed (`close`), and only the loop
                    // closes it.
                    if let Err(e) = self.poller.add(&conn.stream, Interest::readable(key)) {
                        tracing::warn!(%e, "cannot watch an MDS connection");
                        continue;
                    }
                    self.conns.insert(key, Slot { conn, owed: false });
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE)) => {
                    // The connection waits in the backlog; watching the listener again at once
                    // would wake the loop for it as fast as the CPU allows.
                    tracing::warn!(%e, "accept failed: out of file descriptors; pausing new connections for {ACCEPT_PAUSE:?}");
                    self.accept_paused_until = Some(Instant::now() + ACCEPT_PAUSE);
                    return;
                }
                Err(e) => {
                    tracing::warn!(%e, "accept failed");
                    break;
                }
            }
        }
        if let Err(e) = self.poller.modify(&self.listener, Interest::readable(LISTENER)) {
            tracing::error!(%e, "cannot watch the MDS listener");
        }
    }

    /// Reads and dispatches a connection's requests while it is free; then watches its socket
    /// for what it waits for (more bytes, or room for a reply), or for nothing while a reply
    /// is owed.
    fn advance(&mut self, key: usize) {
        self.advance_from(key, true)
    }

    /// [`Front::advance`]; without `read_now`, the socket is only read once it has bytes (just
    /// after a reply, a client that waits for it has sent nothing yet: a read would find
    /// nothing).
    fn advance_from(&mut self, key: usize, read_now: bool) {
        let mut read_now = read_now;
        loop {
            let Some(slot) = self.conns.get_mut(&key) else { return };
            if slot.conn.sending() {
                let watch = self.poller.modify(&slot.conn.stream, Interest::writable(key));
                if let Err(e) = watch {
                    tracing::warn!(%e, "cannot watch an MDS connection");
                    self.close(key);
                }
                return;
            }
            if slot.owed {
                return;
            }
            if !read_now && !slot.conn.holds_frame() {
                if let Err(e) = self.poller.modify(&slot.conn.stream, Interest::readable(key)) {
                    tracing::warn!(%e, "cannot watch an MDS connection");
                    self.close(key);
                }
                return;
            }
            read_now = true;
            match slot.conn.next_frame() {
                Ok(Input::Frame(body)) => self.dispatch(key, body),
                Ok(Input::WouldBlock) => {
                    if let Err(e) = self.poller.modify(&slot.conn.stream, Interest::readable(key)) {
                        tracing::warn!(%e, "cannot watch an MDS connection");
                        self.close(key);
                    }
                    return;
                }
                Ok(Input::Closed) => return self.close(key),
                Err(DecodeError::Unsealed) => {
                    tracing::warn!("a frame on a sealed MDS connection failed its integrity check (altered, replayed or injected on the way?); closing the connection");
                    return self.close(key);
                }
                Err(e) => {
                    tracing::debug!(%e, "bad frame header; closing the MDS connection");
                    return self.close(key);
                }
            }
        }
    }

    /// Answers one request: at once, after the next round (a create or an unlink), or on a worker.
    fn dispatch(&mut self, key: usize, body: Vec<u8>) {
        let (request_id, caller, request) = match Frame::decode_body(&body) {
            Ok(Frame { request_id, message: Message::Request(caller, request) }) => (request_id, caller, request),
            Ok(Frame { request_id, message: Message::Reply(_) }) => return self.send(key, encode(request_id, Err(FsError::Protocol))),
            Err(e) => match Frame::request_id_of(&body) {
                Some(id) => return self.send(key, encode(id, Err(e.fs_error()))),
                None => return self.close(key),
            },
        };
        let Some(slot) = self.conns.get_mut(&key) else { return };
        let (caller, request) = match proven::admit(self.mds.user_key(), &mut slot.conn.identity, caller, request) {
            Admission::Run(caller, request) => (caller, request),
            Admission::Answer(result) => {
                self.send(key, encode(request_id, result));
                // A proof just accepted: its reply left in the clear, everything after is sealed.
                if let Some(slot) = self.conns.get_mut(&key) {
                    if let Some(session) = slot.conn.identity.take_session() {
                        slot.conn.start_sealing(&session);
                    }
                }
                return;
            }
        };
        match self.mds.answer_without_blocking(&caller, request) {
            Ok(Answer::Now(result)) => self.send(key, encode(request_id, result)),
            Ok(Answer::WhenDurable(pending, result, removals)) => {
                if let Some(slot) = self.conns.get_mut(&key) {
                    slot.owed = true;
                }
                self.writers.insert(key, self.rounds);
                self.first_owed_at.get_or_insert_with(Instant::now);
                self.owed.push(Owed { key, request_id, pending, result, removals });
            }
            Err(request) => {
                let Some(slot) = self.conns.remove(&key) else { return };
                self.at_workers += 1;
                let (mds, back, poller) = (self.mds.clone(), self.back_tx.clone(), self.poller.clone());
                self.workers.run(move || {
                    let result = catch_unwind(AssertUnwindSafe(|| mds.handle_as(&caller, request))).unwrap_or_else(|_| {
                        tracing::error!("an MDS request panicked; answering EIO");
                        Err(FsError::Io)
                    });
                    answer_off_the_loop(key, slot.conn, encode(request_id, result), &poller, &back);
                });
            }
        }
    }

    /// Sends what the socket takes now; the rest waits in the connection (`advance` then
    /// watches for room).
    fn send(&mut self, key: usize, frame: Vec<u8>) {
        let Some(slot) = self.conns.get_mut(&key) else { return };
        if let Err(e) = slot.conn.send(frame) {
            tracing::debug!(%e, "reply not sent; closing the MDS connection");
            self.close(key);
        }
    }

    fn close(&mut self, key: usize) {
        if let Some(slot) = self.conns.remove(&key) {
            if let Err(e) = self.poller.delete(&slot.conn.stream) {
                tracing::warn!(%e, "cannot stop watching an MDS connection");
            }
        }
        self.writers.remove(&key);
    }

    /// Closes the connections whose clients have taken no reply bytes for too long.
    fn cut_off_stalled(&mut self) {
        let now = Instant::now();
        let late: Vec<usize> = self.conns.iter().filter(|(_, s)| s.conn.send_deadline().is_some_and(|d| d <= now)).map(|(k, _)| *k).collect();
        for key in late {
            tracing::debug!("a client did not take its reply; closing the connection");
            self.close(key);
        }
    }

    /// Whether the open group should be committed now: it holds a step of every connection
    /// that wrote lately, or has waited [`GATHER_MAX`].
    fn gathered(&mut self) -> bool {
        let Some(first) = self.first_owed_at else { return false };
        let rounds = self.rounds;
        self.writers.retain(|_, last| *last + WRITER_ROUNDS >= rounds);
        self.owed.len() >= self.writers.len() || first.elapsed() >= GATHER_MAX
    }

    /// Makes every owed step durable (one round, run here unless a worker is running one),
    /// sends their replies, then reads on from those connections.
    fn round(&mut self) {
        let owed = std::mem::take(&mut self.owed);
        self.first_owed_at = None;
        self.rounds += 1;
        let mds = &self.mds;
        let answered: Vec<(usize, Vec<u8>)> = self.keep_awake.during(owed.len(), || {
            owed.into_iter()
                .map(|o| {
                    let durable = mds.wait_durable(o.pending);
                    if durable.is_ok() {
                        mds.queue_removal(&o.removals);
                    }
                    (o.key, encode(o.request_id, durable.and(o.result)))
                })
                .collect()
        });
        let keys: Vec<usize> = answered.iter().map(|(key, _)| *key).collect();
        for (key, reply) in answered {
            if let Some(slot) = self.conns.get_mut(&key) {
                slot.owed = false;
            }
            self.send(key, reply);
        }
        for key in keys {
            self.advance_from(key, false);
        }
    }
}

/// A worker's end of a request: sends the reply without waiting and hands the connection back
/// to the loop. In the common case (the reply fit, no further request read yet) the worker
/// watches the socket itself, after handing it back, so the loop is not woken for it: the
/// loop touches a connection handed back so only when its socket reports.
fn answer_off_the_loop(key: usize, mut conn: Conn, reply: Vec<u8>, poller: &Poller, back: &Sender<Back>) {
    if let Err(e) = conn.send(reply) {
        tracing::debug!(%e, "reply not sent; closing the MDS connection");
        if let Err(e) = poller.delete(&conn.stream) {
            tracing::warn!(%e, "cannot stop watching an MDS connection");
        }
        drop(conn);
        return hand_back(Back::Gone(key), poller, back, true);
    }
    if conn.sending() || conn.holds_frame() {
        return hand_back(Back::Ready(key, conn), poller, back, true);
    }
    // The descriptor stays open: the connection is only closed by the loop, and the loop
    // waits for the event this asks for before it touches the connection again.
    let fd = std::os::fd::AsRawFd::as_raw_fd(&conn.stream);
    hand_back(Back::Watched(key, conn), poller, back, false);
    if let Err(e) = poller.modify_raw(fd, Interest::readable(key)) {
        tracing::error!(%e, "cannot watch an MDS connection");
    }
}

fn hand_back(returned: Back, poller: &Poller, back: &Sender<Back>, wake: bool) {
    // The loop is gone only if the server is shutting down.
    if back.send(returned).is_ok() && wake {
        if let Err(e) = poller.notify() {
            tracing::error!(%e, "cannot wake the MDS event loop");
        }
    }
}
