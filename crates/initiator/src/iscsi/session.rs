//! A logged-in iSCSI session on one connection, shared by many threads (RFC 7143 §3.2.2,
//! §4.2.2): each `execute` takes an ITT and a slot, waits for the CmdSN window, sends the
//! command with immediate and unsolicited data, answers R2Ts from the caller's gather list, and
//! sleeps until the reader thread ([`super::rx`]) fills the slot with Data-In and status.
//!
//! Lock order: `window` may be taken while holding `tx`, never the reverse wait; the reader
//! thread never takes `tx`, so a full socket can never stall the thread that drains the other
//! direction.

use std::collections::{HashMap, VecDeque};
use std::net::{Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tessera_iscsi::bhs::RESERVED_TAG;
use tessera_iscsi::login::{InitiatorNegotiator, SessionParams, SessionType};
use tessera_iscsi::lun::{encode_lun, LUN_NUMBER_MAX};
use tessera_iscsi::pdu::*;
use tessera_iscsi::serial::sn_le;
use tessera_iscsi::text::{encode_text, parse_text};
use tessera_iscsi::{PduReader, PduWriter};
use tessera_scsi::{LentResponse, ScsiRequest, ScsiResponse, ScsiStatus, ScsiTransport, Sense, TmfResult, TransportError};
use tessera_types::limits::{CDB_LEN_MAX, TRANSFER_LEN_MAX};
use tracing::debug;

use super::lent::LentMemory;
use super::login::{io_err, login, proto};
use super::{DiscoveredTarget, SessionConfig};

/// What the reader thread hands a waiting caller.
#[derive(Debug)]
pub(crate) enum Completion {
    Scsi { status: u8, sense: Option<Sense>, residual: i64 },
    Nop(Vec<u8>),
    Tmf(u8),
    Logout,
    Text(Vec<u8>),
}

#[derive(Default)]
pub(crate) struct SlotState {
    /// Data-In assembly buffer for offsets from `lent_len` on: allocated once, zeroed, at the
    /// expected length on the first Data-In (lazily mapped, so untouched pages cost nothing),
    /// never regrown.
    pub data_in: Vec<u8>,
    /// One past the highest Data-In byte received: the length handed to the caller.
    pub data_in_end: usize,
    /// Bytes of Data-In, from offset 0, that go to the caller's lent memory.
    pub lent_len: usize,
    /// The lent memory while the caller lends it (see [`super::lent`]); `None` once taken back.
    pub lent: Option<LentMemory>,
    pub r2ts: VecDeque<R2t>,
    pub done: Option<Result<Completion, TransportError>>,
    /// The task has its outcome (status, failure or abort): later Data-In is not taken.
    pub finished: bool,
}

/// One outstanding task.
pub(crate) struct Slot {
    pub state: Mutex<SlotState>,
    /// Bytes of Data-In the caller accepts.
    pub data_in_len: u32,
    pub lun: u64,
    pub cmd_sn: AtomicU32,
}

impl Slot {
    pub fn complete(&self, result: Result<Completion, TransportError>) {
        let mut s = self.state.lock().expect("slot lock poisoned");
        if !s.finished {
            s.finished = true;
            s.done = Some(result);
        }
    }
}

pub(crate) struct WindowState {
    pub next_cmd_sn: u32,
    pub max_cmd_sn: u32,
    pub closed: bool,
}

pub(crate) struct Inner {
    pub peer: String,
    pub params: SessionParams,
    pub tx: Mutex<PduWriter<TcpStream>>,
    pub window: Mutex<WindowState>,
    pub exp_stat_sn: AtomicU32,
    pub tasks: Mutex<HashMap<u32, Arc<Slot>>>,
    next_itt: AtomicU32,
    pub closed: AtomicBool,
    pub socket: TcpStream,
    pub rx: super::driver::Receiver,
    /// Held while a command sends its immediate and unsolicited data (see `execute_inner`).
    pub unsolicited_turn: Mutex<()>,
    /// The socket's read timeout: how long the reading thread waits on a silent target
    /// before it pings it ([`SessionConfig::liveness`]).
    pub liveness: Duration,
    /// The liveness ping in flight, if any (see `driver.rs`).
    pub ping: Mutex<Option<(u32, Arc<Slot>)>>,
}

impl Inner {
    pub fn tasks(&self) -> MutexGuard<'_, HashMap<u32, Arc<Slot>>> {
        self.tasks.lock().expect("task table lock poisoned")
    }

    pub fn closed_error(&self) -> TransportError {
        TransportError::SessionClosed { peer: self.peer.clone() }
    }

    /// Marks the session dead and wakes every waiter with `SessionClosed`.
    pub fn fail_all(&self) {
        self.fail_all_with(|| self.closed_error());
    }

    /// Marks the session dead and wakes every waiter with the error `why` makes.
    pub fn fail_all_with(&self, why: impl Fn() -> TransportError) {
        self.closed.store(true, Ordering::Release);
        let slots: Vec<_> = self.tasks().drain().map(|(_, s)| s).collect();
        for s in slots {
            s.complete(Err(why()));
        }
        self.window.lock().expect("window lock poisoned").closed = true;
        self.rx.wake();
    }

    pub(crate) fn register(&self, data_in_len: u32, lun: u64) -> (u32, Arc<Slot>) {
        self.register_with_buffer(data_in_len, lun, Vec::new(), 0)
    }

    /// Registers a task whose Data-In lands in `buffer`, resized to `data_in_len` (only a
    /// growth is zero-filled; Data-In arrives in order and the buffer is cut to what arrived).
    /// With `lent_len > 0` the first `lent_len` bytes go to memory the caller lends (the
    /// buffer is then not used) and the rest to a buffer allocated when they arrive.
    fn register_with_buffer(&self, data_in_len: u32, lun: u64, mut buffer: Vec<u8>, lent_len: usize) -> (u32, Arc<Slot>) {
        if lent_len > 0 {
            buffer = Vec::new();
        } else if data_in_len > 0 && data_in_len != u32::MAX {
            if buffer.len() > data_in_len as usize {
                buffer.truncate(data_in_len as usize);
            } else {
                buffer.resize(data_in_len as usize, 0);
            }
        }
        let slot = Arc::new(Slot {
            state: Mutex::new(SlotState { data_in: buffer, lent_len, ..SlotState::default() }),
            data_in_len,
            lun,
            cmd_sn: AtomicU32::new(0),
        });
        let mut tasks = self.tasks();
        loop {
            let itt = self.next_itt.fetch_add(1, Ordering::Relaxed);
            if itt != RESERVED_TAG && !tasks.contains_key(&itt) {
                tasks.insert(itt, slot.clone());
                return (itt, slot);
            }
        }
    }

    pub(crate) fn unregister(&self, itt: u32) {
        self.tasks().remove(&itt);
    }

    /// Sends a non-immediate PDU once the CmdSN window is open (RFC 7143 §4.2.2.1), assigning
    /// CmdSN under the writer lock so CmdSN order is wire order. `build` gets (CmdSN, ExpStatSN).
    fn send_windowed(&self, build: impl Fn(u32, u32) -> Pdu, data: &[&[u8]]) -> Result<u32, TransportError> {
        loop {
            {
                // Waiting for MaxCmdSN to move is waiting for responses: read them meanwhile.
                self.drive_until(None, || {
                    let w = self.window.lock().expect("window lock poisoned");
                    w.closed || sn_le(w.next_cmd_sn, w.max_cmd_sn)
                })?;
                if self.window.lock().expect("window lock poisoned").closed {
                    return Err(self.closed_error());
                }
            }
            let mut tx = self.tx.lock().expect("tx lock poisoned");
            let cmd_sn = {
                let mut w = self.window.lock().expect("window lock poisoned");
                if !sn_le(w.next_cmd_sn, w.max_cmd_sn) {
                    continue;
                }
                let sn = w.next_cmd_sn;
                w.next_cmd_sn = sn.wrapping_add(1);
                sn
            };
            let pdu = build(cmd_sn, self.exp_stat_sn.load(Ordering::Acquire));
            tx.write_pdu(&pdu, data).map_err(|e| io_err(&self.peer, e))?;
            return Ok(cmd_sn);
        }
    }

    /// Sends an immediate PDU (CmdSN not advanced, no window wait).
    fn send_immediate(&self, build: impl FnOnce(u32, u32) -> Pdu, data: &[&[u8]]) -> Result<(), TransportError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(self.closed_error());
        }
        let mut tx = self.tx.lock().expect("tx lock poisoned");
        let cmd_sn = self.window.lock().expect("window lock poisoned").next_cmd_sn;
        let pdu = build(cmd_sn, self.exp_stat_sn.load(Ordering::Acquire));
        tx.write_pdu(&pdu, data).map_err(|e| io_err(&self.peer, e))
    }

    fn send_plain(&self, pdu: &Pdu, data: &[&[u8]]) -> Result<(), TransportError> {
        let mut tx = self.tx.lock().expect("tx lock poisoned");
        tx.write_pdu(pdu, data).map_err(|e| io_err(&self.peer, e))
    }

    fn wait(&self, slot: &Slot, timeout: Option<Duration>) -> Result<Completion, TransportError> {
        let deadline = timeout.map(|t| Instant::now() + t);
        self.drive_until(deadline, || slot.state.lock().expect("slot lock poisoned").done.is_some())?;
        let done = slot.state.lock().expect("slot lock poisoned").done.take();
        done.unwrap_or_else(|| Err(self.closed_error()))
    }
}

/// The slices of a gather list covering `[offset, offset + len)`.
fn gather<'a>(data: &[&'a [u8]], offset: usize, len: usize) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    let (mut at, end) = (0usize, offset + len);
    for s in data {
        let (s_start, s_end) = (at, at + s.len());
        at = s_end;
        if s_end <= offset || s_start >= end {
            continue;
        }
        let a = offset.max(s_start) - s_start;
        let b = end.min(s_end) - s_start;
        out.push(&s[a..b]);
    }
    out
}

/// A logged-in session. Cheap to share by reference across threads.
pub struct Session {
    inner: Arc<Inner>,
}

impl Session {
    /// Logs in to `target_name` at `addr` (RFC 7143 §6.3) and starts the reader thread.
    pub fn login<A: ToSocketAddrs>(addr: A, config: SessionConfig) -> Result<Session, TransportError> {
        Self::start(addr, config, SessionType::Normal)
    }

    fn start<A: ToSocketAddrs>(addr: A, config: SessionConfig, kind: SessionType) -> Result<Session, TransportError> {
        let neg = InitiatorNegotiator::new(config.offer(), &config.initiator_name, &config.target_name, kind);
        let login_timeout = config.login_timeout();
        let (stream, peer) = connect_within(addr, login_timeout)?;
        // A target that goes silent during login, or stops reading what we send, fails the
        // session instead of hanging it.
        let timeouts = |read, write| stream.set_read_timeout(Some(read)).and_then(|_| stream.set_write_timeout(Some(write)));
        timeouts(login_timeout, login_timeout).map_err(|e| io_err(&peer, e))?;
        let max_recv = neg.params.initiator_max_recv_data_segment_len;
        let mut reader = PduReader::new(stream.try_clone().map_err(|e| io_err(&peer, e))?, max_recv);
        let mut writer = PduWriter::new(stream.try_clone().map_err(|e| io_err(&peer, e))?);
        let login_secs = login_timeout.as_secs();
        let result = login(&mut reader, &mut writer, config.isid, neg, config.chap, &peer).map_err(|e| super::login::as_unresponsive(e, &peer, login_secs))?;
        let params = result.params;
        reader.digests.header = params.header_digest;
        reader.digests.data = params.data_digest;
        writer.digests = reader.digests;
        debug!(%peer, tsih = result.tsih, "session logged in");
        // From here a read timeout means "ping the target" (driver.rs), not failure.
        timeouts(config.liveness, config.liveness * 2).map_err(|e| io_err(&peer, e))?;
        let inner = Arc::new(Inner {
            peer,
            params,
            tx: Mutex::new(writer),
            window: Mutex::new(WindowState { next_cmd_sn: result.cmd_sn, max_cmd_sn: result.max_cmd_sn, closed: false }),
            exp_stat_sn: AtomicU32::new(result.exp_stat_sn),
            tasks: Mutex::new(HashMap::new()),
            next_itt: AtomicU32::new(1),
            closed: AtomicBool::new(false),
            socket: stream,
            rx: super::driver::Receiver::new(reader),
            unsolicited_turn: Mutex::new(()),
            liveness: config.liveness,
            ping: Mutex::new(None),
        });
        Ok(Session { inner })
    }

    /// Asks the portal at `addr` for its targets (discovery session, SendTargets=All).
    pub fn discover<A: ToSocketAddrs>(addr: A, initiator_name: &str) -> Result<Vec<DiscoveredTarget>, TransportError> {
        Self::discover_with(addr, SessionConfig::new(initiator_name, ""))
    }

    /// [`Session::discover`] with a full configuration (CHAP credentials, say); the target
    /// name in `config` is not used.
    pub fn discover_with<A: ToSocketAddrs>(addr: A, config: SessionConfig) -> Result<Vec<DiscoveredTarget>, TransportError> {
        let session = Self::start(addr, config, SessionType::Discovery)?;
        let text = session.text(&[("SendTargets", "All")])?;
        let pairs = parse_text(&text).map_err(|e| proto(&session.inner.peer, e.to_string()))?;
        let mut out: Vec<DiscoveredTarget> = Vec::new();
        for (k, v) in pairs {
            match (k.as_str(), out.last_mut()) {
                ("TargetName", _) => out.push(DiscoveredTarget { name: v, addresses: Vec::new() }),
                ("TargetAddress", Some(t)) => t.addresses.push(v),
                _ => {}
            }
        }
        session.logout()?;
        Ok(out)
    }

    /// What login settled.
    pub fn negotiated(&self) -> &SessionParams {
        &self.inner.params
    }

    /// True when the connection is known to be gone: the session failed, or the target closed
    /// or reset it while the session sat idle (nobody reads an idle session, so only a look at
    /// the socket tells; a restarted OSD leaves every idle session of every client like this).
    /// The look never blocks and consumes nothing; bytes waiting count as alive.
    pub fn peer_gone(&self) -> bool {
        if self.inner.closed.load(Ordering::Acquire) {
            return true;
        }
        let mut byte = 0u8;
        // SAFETY: a one-byte buffer on the stack for a peek on our own open socket.
        let n = unsafe { libc::recv(self.inner.socket.as_raw_fd(), (&mut byte as *mut u8).cast(), 1, libc::MSG_PEEK | libc::MSG_DONTWAIT) };
        match n {
            0 => true,
            n if n > 0 => false,
            _ => !matches!(std::io::Error::last_os_error().kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted),
        }
    }

    /// Sends a Text Request and returns the response's text (single PDU exchanges).
    pub fn text(&self, pairs: &[(&str, &str)]) -> Result<Vec<u8>, TransportError> {
        let mut data = Vec::new();
        encode_text(pairs, &mut data);
        let (itt, slot) = self.inner.register(0, 0);
        let sent = self.inner.send_windowed(
            |cmd_sn, exp_stat_sn| {
                Pdu::TextRequest(TextRequest {
                    immediate: false,
                    final_bit: true,
                    cont: false,
                    lun: 0,
                    itt,
                    ttt: RESERVED_TAG,
                    cmd_sn,
                    exp_stat_sn,
                })
            },
            &[&data],
        );
        let r = sent.and_then(|_| self.inner.wait(&slot, None));
        self.inner.unregister(itt);
        match r? {
            Completion::Text(t) => Ok(t),
            other => Err(proto(&self.inner.peer, format!("unexpected answer to Text: {other:?}"))),
        }
    }

    /// NOP-Out ping (RFC 7143 §11.18) carrying `data`; returns the echoed data.
    pub fn nop_ping(&self, data: &[u8]) -> Result<Vec<u8>, TransportError> {
        let (itt, slot) = self.inner.register(0, 0);
        let sent = self.inner.send_immediate(
            |cmd_sn, exp_stat_sn| {
                Pdu::NopOut(NopOut { immediate: true, lun: 0, itt, ttt: RESERVED_TAG, cmd_sn, exp_stat_sn })
            },
            &[data],
        );
        let r = sent.and_then(|_| self.inner.wait(&slot, None));
        self.inner.unregister(itt);
        match r? {
            Completion::Nop(d) => Ok(d),
            other => Err(proto(&self.inner.peer, format!("unexpected answer to NOP-Out: {other:?}"))),
        }
    }

    /// ABORT TASK for the task with tag `itt` (RFC 7143 §11.5). Tags of commands in flight can
    /// be seen with [`Session::in_flight`].
    pub fn abort_task(&self, itt: u32) -> Result<TmfResult, TransportError> {
        let target = self.inner.tasks().get(&itt).cloned();
        let (lun, ref_cmd_sn) = match &target {
            Some(s) => (s.lun, Some(s.cmd_sn.load(Ordering::Acquire))),
            None => (0, None),
        };
        let r = self.tmf(tmf_function::ABORT_TASK, lun, itt, ref_cmd_sn)?;
        if r == TmfResult::FunctionComplete {
            if let Some(s) = target {
                s.complete(Err(TransportError::Aborted { peer: self.inner.peer.clone() }));
                self.inner.rx.wake();
            }
        }
        Ok(r)
    }

    /// LOGICAL UNIT RESET; on success, commands to `lun` still waiting fail with `Aborted`.
    pub fn lun_reset(&self, lun: u64) -> Result<TmfResult, TransportError> {
        let r = self.tmf(tmf_function::LOGICAL_UNIT_RESET, lun, RESERVED_TAG, None)?;
        if r == TmfResult::FunctionComplete {
            let victims: Vec<_> = self.inner.tasks().values().filter(|s| s.lun == lun && s.data_in_len != u32::MAX).cloned().collect();
            for s in victims {
                s.complete(Err(TransportError::Aborted { peer: self.inner.peer.clone() }));
            }
            self.inner.rx.wake();
        }
        Ok(r)
    }

    /// Tags of the SCSI commands currently outstanding.
    pub fn in_flight(&self) -> Vec<u32> {
        self.inner.tasks().keys().copied().collect()
    }

    fn tmf(&self, function: u8, lun: u64, referenced: u32, ref_cmd_sn: Option<u32>) -> Result<TmfResult, TransportError> {
        if lun > LUN_NUMBER_MAX {
            return Err(proto(&self.inner.peer, "LUN out of range"));
        }
        // u32::MAX data_in_len marks a TMF slot so a LUN reset does not abort itself.
        let (itt, slot) = self.inner.register(u32::MAX, lun);
        let sent = self.inner.send_immediate(
            |cmd_sn, exp_stat_sn| {
                Pdu::TaskMgmtRequest(TaskMgmtRequest {
                    immediate: true,
                    function,
                    lun: encode_lun(lun),
                    itt,
                    referenced_task_tag: referenced,
                    cmd_sn,
                    exp_stat_sn,
                    // Without a known task, RefCmdSN = our CmdSN: "not before this TMF", so
                    // the target answers "task does not exist".
                    ref_cmd_sn: ref_cmd_sn.unwrap_or(cmd_sn),
                    exp_data_sn: 0,
                })
            },
            &[],
        );
        let r = sent.and_then(|_| self.inner.wait(&slot, None));
        self.inner.unregister(itt);
        Ok(match r? {
            Completion::Tmf(tmf_response::FUNCTION_COMPLETE) => TmfResult::FunctionComplete,
            Completion::Tmf(tmf_response::TASK_DOES_NOT_EXIST) => TmfResult::TaskDoesNotExist,
            Completion::Tmf(tmf_response::LUN_DOES_NOT_EXIST) => TmfResult::LunDoesNotExist,
            Completion::Tmf(tmf_response::NOT_SUPPORTED) => TmfResult::NotSupported,
            Completion::Tmf(_) => TmfResult::Rejected,
            other => return Err(proto(&self.inner.peer, format!("unexpected answer to TMF: {other:?}"))),
        })
    }

    /// Logs out (close the session, RFC 7143 §11.14) and waits for the reader thread.
    pub fn logout(self) -> Result<(), TransportError> {
        let (itt, slot) = self.inner.register(0, 0);
        let sent = self.inner.send_immediate(
            |cmd_sn, exp_stat_sn| {
                Pdu::LogoutRequest(LogoutRequest {
                    immediate: true,
                    reason: LOGOUT_CLOSE_SESSION,
                    itt,
                    cid: 0,
                    cmd_sn,
                    exp_stat_sn,
                })
            },
            &[],
        );
        let r = sent.and_then(|_| self.inner.wait(&slot, Some(Duration::from_secs(30))));
        self.inner.unregister(itt);
        self.close();
        match r? {
            Completion::Logout => Ok(()),
            other => Err(proto(&self.inner.peer, format!("unexpected answer to Logout: {other:?}"))),
        }
    }

    fn close(&self) {
        let _ = self.inner.socket.shutdown(Shutdown::Both);
        // A thread reading for the session sees the shutdown, fails every slot and wakes all.
        self.inner.fail_all();
    }

    /// Runs one SCSI command. With `lent`, Data-In from offset 0 lands in the caller's slices
    /// (returned: how many of their bytes arrived) and only the rest in the response's buffer.
    /// `meanwhile` runs once the command and its unsolicited data have left.
    fn execute_inner(&self, req: &ScsiRequest<'_>, buffer: Vec<u8>, lent: Option<&mut [&mut [u8]]>, meanwhile: &mut dyn FnMut()) -> Result<(ScsiResponse, usize), TransportError> {
        let inner = &*self.inner;
        let peer = &inner.peer;
        let out_len = req.data_out_len();
        if out_len > TRANSFER_LEN_MAX || req.data_in_len as u64 > TRANSFER_LEN_MAX {
            return Err(TransportError::TooLarge { len: out_len.max(req.data_in_len as u64), max: TRANSFER_LEN_MAX });
        }
        if req.cdb.is_empty() || req.cdb.len() > CDB_LEN_MAX || req.lun > LUN_NUMBER_MAX {
            return Err(proto(peer, "CDB length or LUN out of range"));
        }
        let p = &inner.params;
        let out_len = out_len as u32;
        let write = out_len > 0;
        let read = req.data_in_len > 0;
        let unsolicited = if write { p.unsolicited_len(out_len) } else { 0 };
        let segment = p.target_max_recv_data_segment_len as usize;
        let immediate = if p.immediate_data { (unsolicited as usize).min(segment) } else { 0 };
        let mut cdb = req.cdb.to_vec();
        if cdb.len() < 16 {
            cdb.resize(16, 0);
        }
        let lun_field = encode_lun(req.lun);
        let lent_len = lent.as_ref().map_or(0, |l| l.iter().map(|p| p.len()).sum::<usize>());
        if lent_len > req.data_in_len as usize {
            return Err(proto(peer, "lent memory larger than the expected Data-In"));
        }
        let (itt, slot) = inner.register_with_buffer(req.data_in_len, req.lun, buffer, lent_len);
        // Taken back when this guard drops: before this function returns, however it returns.
        let lend = lent.filter(|_| lent_len > 0).map(|l| super::lent::Lend::new(slot.clone(), l));
        let result = (|| {
            let cmd = |cmd_sn, exp_stat_sn| {
                Pdu::ScsiCommand(ScsiCommand {
                    immediate: false,
                    final_bit: unsolicited as usize == immediate,
                    read,
                    write,
                    task_attr: TASK_ATTR_SIMPLE,
                    lun: lun_field,
                    itt,
                    expected_data_transfer_length: if write { out_len } else { req.data_in_len },
                    cmd_sn,
                    exp_stat_sn,
                    cdb: cdb.clone(),
                    bidi_read_len: (read && write).then_some(req.data_in_len),
                })
            };
            {
                // A command and its unsolicited data go out as one run, not interleaved with
                // other commands' data: the target can execute a command only once all of its
                // data is in, so interleaving several large WRITEs would make them all finish
                // together and leave nothing to overlap with the target's storing.
                let _turn = (unsolicited > 0).then(|| inner.unsolicited_turn.lock().expect("turn lock poisoned"));
                let cmd_sn = inner.send_windowed(cmd, &gather(req.data_out, 0, immediate))?;
                slot.cmd_sn.store(cmd_sn, Ordering::Release);
                // Unsolicited Data-Out after the immediate data (InitialR2T=No).
                self.send_data_out(lun_field, itt, RESERVED_TAG, req.data_out, immediate, unsolicited as usize - immediate)?;
            }
            meanwhile();
            loop {
                inner.drive_until(None, || {
                    let s = slot.state.lock().expect("slot lock poisoned");
                    !s.r2ts.is_empty() || s.done.is_some()
                })?;
                let r2t = slot.state.lock().expect("slot lock poisoned").r2ts.pop_front();
                let Some(r2t) = r2t else { break };
                let (off, len) = (r2t.buffer_offset as usize, r2t.desired_data_transfer_length as usize);
                if off + len > out_len as usize {
                    return Err(proto(peer, "R2T beyond the Data-Out buffer"));
                }
                self.send_data_out(lun_field, itt, r2t.ttt, req.data_out, off, len)?;
            }
            inner.wait(&slot, None)
        })();
        inner.unregister(itt);
        drop(lend);
        let completion = result?;
        let Completion::Scsi { status, sense, residual } = completion else {
            return Err(proto(peer, "unexpected completion for a SCSI command"));
        };
        let mut state = slot.state.lock().expect("slot lock poisoned");
        let mut data_in = std::mem::take(&mut state.data_in);
        let end = state.data_in_end.min(req.data_in_len as usize);
        data_in.truncate(end.saturating_sub(lent_len));
        Ok((ScsiResponse { status: ScsiStatus::from_code(status), data_in, sense, residual }, end.min(lent_len)))
    }

    /// Sends `[offset, offset + len)` of the gather list as Data-Out PDUs of at most the
    /// target's MaxRecvDataSegmentLength, DataSN from 0, F on the last (RFC 7143 §11.7).
    fn send_data_out(&self, lun: u64, itt: u32, ttt: u32, data: &[&[u8]], offset: usize, len: usize) -> Result<(), TransportError> {
        let segment = self.inner.params.target_max_recv_data_segment_len.max(512) as usize;
        let mut done = 0usize;
        let mut data_sn = 0u32;
        while done < len {
            let n = segment.min(len - done);
            let pdu = Pdu::DataOut(DataOut {
                final_bit: done + n == len,
                lun,
                itt,
                ttt,
                exp_stat_sn: self.inner.exp_stat_sn.load(Ordering::Acquire),
                data_sn,
                buffer_offset: (offset + done) as u32,
            });
            self.inner.send_plain(&pdu, &gather(data, offset + done, n))?;
            done += n;
            data_sn += 1;
        }
        Ok(())
    }
}

impl ScsiTransport for Session {
    fn execute(&self, request: &ScsiRequest<'_>) -> Result<ScsiResponse, TransportError> {
        self.execute_inner(request, Vec::new(), None, &mut || {}).map(|(r, _)| r)
    }

    fn execute_into(&self, request: &ScsiRequest<'_>, buffer: Vec<u8>) -> Result<ScsiResponse, TransportError> {
        self.execute_inner(request, buffer, None, &mut || {}).map(|(r, _)| r)
    }

    fn execute_lent(&self, request: &ScsiRequest<'_>, lent: &mut [&mut [u8]]) -> Result<LentResponse, TransportError> {
        self.execute_lent_meanwhile(request, lent, &mut || {})
    }

    fn execute_into_meanwhile(&self, request: &ScsiRequest<'_>, buffer: Vec<u8>, meanwhile: &mut dyn FnMut()) -> Result<ScsiResponse, TransportError> {
        self.execute_inner(request, buffer, None, meanwhile).map(|(r, _)| r)
    }

    fn execute_lent_meanwhile(&self, request: &ScsiRequest<'_>, lent: &mut [&mut [u8]], meanwhile: &mut dyn FnMut()) -> Result<LentResponse, TransportError> {
        let (response, lent_filled) = self.execute_inner(request, Vec::new(), Some(lent), meanwhile)?;
        Ok(LentResponse { response, lent_filled })
    }

    fn peer(&self) -> String {
        self.inner.peer.clone()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.close();
    }
}

pub(crate) fn connect<A: ToSocketAddrs>(addr: A) -> Result<(TcpStream, String), TransportError> {
    let addrs: Vec<SocketAddr> = addr.to_socket_addrs().map_err(|e| io_err("?", e))?.collect();
    let peer = addrs.first().map(|a| a.to_string()).unwrap_or_default();
    let stream = TcpStream::connect(&addrs[..]).map_err(|e| io_err(&peer, e))?;
    stream.set_nodelay(true).map_err(|e| io_err(&peer, e))?;
    Ok((stream, peer))
}

/// [`connect`], giving up on each address after `timeout` (an unreachable host would
/// otherwise hold the caller for the kernel's SYN retries, about two minutes).
pub(crate) fn connect_within<A: ToSocketAddrs>(addr: A, timeout: Duration) -> Result<(TcpStream, String), TransportError> {
    let addrs: Vec<SocketAddr> = addr.to_socket_addrs().map_err(|e| io_err("?", e))?.collect();
    let peer = addrs.first().map(|a| a.to_string()).unwrap_or_default();
    let mut last = std::io::Error::new(std::io::ErrorKind::InvalidInput, "no address to connect to");
    for a in &addrs {
        match TcpStream::connect_timeout(a, timeout) {
            Ok(stream) => {
                stream.set_nodelay(true).map_err(|e| io_err(&peer, e))?;
                return Ok((stream, a.to_string()));
            }
            Err(e) => last = e,
        }
    }
    Err(io_err(&peer, last))
}

#[cfg(test)]
mod tests {
    use super::gather;

    #[test]
    fn gather_slices_a_range() {
        let a = [1u8, 2, 3];
        let b = [4u8, 5];
        let c = [6u8, 7, 8, 9];
        let list: [&[u8]; 3] = [&a, &b, &c];
        assert_eq!(gather(&list, 2, 4).concat(), vec![3, 4, 5, 6]);
        assert_eq!(gather(&list, 0, 9).concat(), (1..=9).collect::<Vec<u8>>());
        assert!(gather(&list, 9, 0).is_empty());
        assert_eq!(gather(&list, 5, 1), vec![&[6u8][..]]);
    }
}
