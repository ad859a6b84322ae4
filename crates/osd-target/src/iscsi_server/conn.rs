//! One connection's shared state: the writer (with StatSN, so that status numbers follow wire
//! order), the CmdSN window (RFC 7143 §4.2.2.1) and the queue between the reader thread and
//! the executor thread.

use std::collections::VecDeque;
use std::io;
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use tessera_iscsi::login::SessionParams;
use tessera_iscsi::pdu::{Pdu, Reject};
use tessera_iscsi::{PduReader, PduWriter, BHS_LEN};
use tessera_scsi::{Nexus, PlacedDataOut, ScsiDevice, Sense};
use tessera_types::limits::CMD_WINDOW;
use tracing::{debug, info, warn};

use super::login::{login, LoginOutcome};
use super::splice::SplicePipe;
use super::{executor, reader, ServerShared};

/// The socket writer and the StatSN counter it hands out.
pub(crate) struct Tx {
    pub writer: PduWriter<TcpStream>,
    stat_sn: u32,
    /// For sending list READ data by reference (mapped_send.rs); made on first use. `Err`
    /// when it could not be made: such data is then copied into the socket.
    pub send_pipe: Option<Result<SplicePipe, ()>>,
}

impl Tx {
    /// The next StatSN, advanced: for status-carrying PDUs.
    pub fn next_stat_sn(&mut self) -> u32 {
        let s = self.stat_sn;
        self.stat_sn = self.stat_sn.wrapping_add(1);
        s
    }

    /// The StatSN the initiator expects next, not advanced: for R2T and Data-In without status.
    pub fn current_stat_sn(&self) -> u32 {
        self.stat_sn
    }
}

/// CmdSN window. MaxCmdSN = ExpCmdSN + CMD_WINDOW - 1 - (commands received but not answered),
/// so it only grows when a command completes: the initiator can never have more than
/// CMD_WINDOW commands at the target, and MaxCmdSN never decreases.
#[derive(Debug)]
pub(crate) struct Window {
    pub exp_cmd_sn: u32,
    pub outstanding: u32,
}

impl Window {
    pub fn max_cmd_sn(&self) -> u32 {
        self.exp_cmd_sn.wrapping_add(CMD_WINDOW - 1).wrapping_sub(self.outstanding)
    }
}

/// A command whose Data-Out is complete, waiting for the executor.
pub(crate) struct ReadyTask {
    pub itt: u32,
    pub lun: u64,
    pub cdb: Vec<u8>,
    pub data_out: Vec<u8>,
    /// The device took the Data-Out straight into place (`data_out` is then empty).
    pub placed: Option<Box<dyn PlacedDataOut>>,
    /// Expected Data-In (the bidirectional read length for bidirectional commands).
    pub data_in_len: u32,
    pub bidi: bool,
    /// Set when the transport already decided the outcome (e.g. transfer too long).
    pub failed: Option<Sense>,
}

/// Work for the executor, in order.
pub(crate) enum Work {
    Task(ReadyTask),
    /// Answer a TMF after the task that was running when it arrived has finished.
    TmfResponse { itt: u32, response: u8 },
    LunReset { itt: u32, lun: u64 },
    Logout { itt: u32 },
}

#[derive(Default)]
pub(crate) struct Queue {
    pub work: VecDeque<Work>,
    /// ITT of the task the executor is running.
    pub running: Option<u32>,
    /// The running task's Data-Out was assembled in memory (not placed).
    pub running_buffered: bool,
    pub closed: bool,
}

impl Queue {
    /// True when no task whose Data-Out was assembled in memory (or that has none) is queued
    /// or running: every task ahead already has its data in place.
    pub fn only_placed_ahead(&self) -> bool {
        !(self.running.is_some() && self.running_buffered) && self.work.iter().all(|w| !matches!(w, Work::Task(t) if t.placed.is_none()))
    }
}

/// The reader's buffer. Reading a header may pull this much of the data behind it into the
/// buffer, and those bytes cost one more copy, so it is kept small: large data segments are
/// read straight into their task's buffer or file.
const READ_BUFFER_LEN: usize = 16 * 1024;

/// Data-Out buffers at least this large are recycled within a connection.
pub(crate) const RECYCLED_BUFFER_MIN: usize = 256 * 1024;
/// Recycled buffers kept per connection.
const RECYCLED_BUFFERS_MAX: usize = 4;

pub(crate) struct Connection {
    pub server: Arc<ServerShared>,
    pub device: Arc<dyn ScsiDevice>,
    pub params: SessionParams,
    pub nexus: Nexus,
    pub tx: Mutex<Tx>,
    pub window: Mutex<Window>,
    pub queue: Mutex<Queue>,
    pub queue_cv: Condvar,
    pub socket: TcpStream,
    /// Data-Out buffers of finished commands, reused so that a large WRITE does not pay for a
    /// fresh zeroed allocation (page faults or a memset of every byte) each time.
    pub spare_buffers: Mutex<Vec<Vec<u8>>>,
}

impl Connection {
    pub fn tx(&self) -> MutexGuard<'_, Tx> {
        self.tx.lock().expect("tx lock poisoned")
    }

    pub fn queue(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().expect("queue lock poisoned")
    }

    /// A buffer of exactly `len` bytes, recycled when one is large enough. Bytes beyond the old
    /// length are zero; the others are whatever the previous command left (see
    /// `Receiving::use_buffer` for why they are never seen).
    pub fn take_buffer(&self, len: usize) -> Vec<u8> {
        let mut spare = self.spare_buffers.lock().expect("spare buffers poisoned");
        let mut buf = match spare.iter().position(|b| b.capacity() >= len) {
            Some(i) => spare.swap_remove(i),
            None => return vec![0u8; len],
        };
        drop(spare);
        if buf.len() > len {
            buf.truncate(len);
        } else {
            buf.resize(len, 0);
        }
        buf
    }

    /// Keeps a finished command's Data-Out buffer for reuse.
    pub fn recycle_buffer(&self, buf: Vec<u8>) {
        if buf.capacity() < RECYCLED_BUFFER_MIN {
            return;
        }
        let mut spare = self.spare_buffers.lock().expect("spare buffers poisoned");
        if spare.len() < RECYCLED_BUFFERS_MAX {
            spare.push(buf);
        }
    }

    /// (ExpCmdSN, MaxCmdSN) for an outgoing PDU.
    pub fn window_fields(&self) -> (u32, u32) {
        let w = self.window.lock().expect("window lock poisoned");
        (w.exp_cmd_sn, w.max_cmd_sn())
    }

    /// A command left the target (answered or aborted): open the window by one.
    pub fn command_done(&self) {
        let mut w = self.window.lock().expect("window lock poisoned");
        w.outstanding = w.outstanding.saturating_sub(1);
    }

    pub fn push_work(&self, work: Work, front: bool) {
        let mut q = self.queue();
        if front {
            q.work.push_front(work);
        } else {
            q.work.push_back(work);
        }
        self.queue_cv.notify_one();
    }

    /// Sends a status-bearing PDU built from (StatSN, ExpCmdSN, MaxCmdSN).
    pub fn send_status(&self, build: impl FnOnce(u32, u32, u32) -> Pdu, data: &[&[u8]]) -> io::Result<()> {
        let mut tx = self.tx();
        let (exp, max) = self.window_fields();
        let stat_sn = tx.next_stat_sn();
        let pdu = build(stat_sn, exp, max);
        tx.writer.write_pdu(&pdu, data)
    }

    /// Rejects a PDU (RFC 7143 §11.17): the data segment is the offending header.
    pub fn reject(&self, reason: u8, bhs: &[u8; BHS_LEN]) -> io::Result<()> {
        debug!(reason, opcode = bhs[0] & 0x3F, "rejecting PDU");
        self.send_status(
            |stat_sn, exp_cmd_sn, max_cmd_sn| {
                Pdu::Reject(Reject { reason, stat_sn, exp_cmd_sn, max_cmd_sn, data_sn: 0 })
            },
            &[bhs],
        )
    }
}

/// Runs one TCP connection from login to close.
pub(crate) fn run_connection(server: &Arc<ServerShared>, stream: TcpStream) {
    let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_default();
    if let Err(e) = stream.set_nodelay(true) {
        warn!(%peer, error = %e, "cannot set TCP_NODELAY");
    }
    let (read_half, write_half) = match super::clone_socket(server, &stream) {
        Ok(r) => (r, stream),
        Err(e) => {
            warn!(%peer, error = %e, "cannot clone socket");
            return;
        }
    };
    let mut reader = PduReader::with_buffer_len(read_half, tessera_iscsi::login::DEFAULT_MAX_RECV_DATA_SEGMENT_LEN, READ_BUFFER_LEN);
    let mut writer = PduWriter::new(write_half);
    let outcome = match login(server, &mut reader, &mut writer) {
        Ok(Some(o)) => o,
        Ok(None) => {
            let _ = writer.get_ref().shutdown(Shutdown::Both);
            return;
        }
        Err(e) => {
            debug!(%peer, error = %e, "login ended");
            let _ = writer.get_ref().shutdown(Shutdown::Both);
            return;
        }
    };
    let LoginOutcome { params, nexus, stat_sn, exp_cmd_sn, claim } = outcome;
    info!(%peer, initiator = %params.initiator_name, session = nexus.session_id,
          kind = params.session_type.as_str(), "login complete");
    reader.digests.header = params.header_digest;
    reader.digests.data = params.data_digest;
    reader.max_data_segment_len = params.target_max_recv_data_segment_len;
    writer.digests = reader.digests;
    let normal = params.session_type == tessera_iscsi::login::SessionType::Normal;
    let socket = match super::clone_socket(server, writer.get_ref()) {
        Ok(s) => s,
        Err(e) => {
            warn!(%peer, error = %e, "cannot clone socket after login; closing");
            if normal {
                // The login counted this session; it ends here.
                server.sessions.fetch_sub(1, Ordering::AcqRel);
            }
            return;
        }
    };
    let conn = Arc::new(Connection {
        server: server.clone(),
        device: server.device.clone(),
        params,
        nexus,
        tx: Mutex::new(Tx { writer, stat_sn, send_pipe: None }),
        window: Mutex::new(Window { exp_cmd_sn, outstanding: 0 }),
        queue: Mutex::new(Queue::default()),
        queue_cv: Condvar::new(),
        socket,
        spare_buffers: Mutex::new(Vec::new()),
    });
    if normal {
        conn.device.nexus_added(&conn.nexus);
    }
    let exec_conn = conn.clone();
    let exec = std::thread::Builder::new()
        .name(format!("iscsi-exec-{}", conn.nexus.session_id))
        .spawn(move || executor::run(&exec_conn));
    match exec {
        Ok(exec) => {
            let logged_out = reader::run(&conn, &mut reader);
            {
                let mut q = conn.queue();
                q.closed = true;
                if !logged_out {
                    // The connection is lost, and with it the session (ErrorRecoveryLevel 0):
                    // no one will hear these answers, and the initiator may be about to
                    // resend them on a new session, so queued commands are dropped unrun.
                    q.work.clear();
                }
                conn.queue_cv.notify_all();
            }
            let _ = exec.join();
        }
        Err(e) => warn!(error = %e, "cannot spawn executor thread"),
    }
    let _ = conn.socket.shutdown(Shutdown::Both);
    if normal {
        conn.device.nexus_removed(&conn.nexus);
        conn.server.sessions.fetch_sub(1, Ordering::AcqRel);
    }
    info!(%peer, session = conn.nexus.session_id, "connection closed");
    // Last: a login reinstating this session goes on only now.
    drop(claim);
}
