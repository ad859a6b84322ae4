//! Handling what the target sends: each PDU is routed by ITT to the
//! waiting caller (RFC 7143 §11): Data-In straight into the caller's buffer, R2Ts to the caller
//! that must answer them, status, NOP-In, TMF, Text and Logout responses, and Rejects. It also
//! tracks ExpStatSN and MaxCmdSN. It never writes to the socket (a target ping is answered from
//! a short-lived thread), so the two directions cannot deadlock. Which thread reads is decided in
//! [`super::driver`].

use std::sync::atomic::Ordering;

use tessera_iscsi::bhs::{RESERVED_TAG, OFF_ITT};
use tessera_iscsi::pdu::*;
use tessera_iscsi::serial::sn_lt;
use tessera_iscsi::{Incoming, PduReader, ReadError};
use tessera_scsi::{Sense, TransportError};
use tracing::{debug, warn};

use super::login::proto;
use super::session::{Completion, Inner};
use std::net::TcpStream;

/// What one read brought.
pub(crate) enum Activity {
    Handled,
    /// Nothing arrived within the socket's read timeout.
    Idle,
}

/// Reads one PDU and handles it. An error means the connection is unusable.
pub(crate) fn read_one(inner: &Inner, reader: &mut PduReader<TcpStream>) -> Result<Activity, TransportError> {
    let inc = match reader.read_header() {
        Ok(i) => i,
        Err(ReadError::Idle) => return Ok(Activity::Idle),
        Err(e) => {
            if !matches!(e, ReadError::Closed) && !inner.closed.load(Ordering::Acquire) {
                debug!(peer = %inner.peer, error = %e, "session connection failed");
            }
            return Err(stalled(inner, super::login::read_err(&inner.peer, e)));
        }
    };
    handle(inner, reader, inc).map_err(|e| stalled(inner, e)).inspect_err(|e| warn!(peer = %inner.peer, error = %e, "closing session"))?;
    Ok(Activity::Handled)
}

/// A read that timed out part-way through a PDU (the target stopped mid-send for a whole
/// liveness interval), said as the liveness check says it rather than as the socket's EAGAIN.
fn stalled(inner: &Inner, e: TransportError) -> TransportError {
    super::login::as_unresponsive(e, &inner.peer, inner.liveness.as_secs())
}

/// Updates ExpStatSN and the CmdSN window from a target PDU (RFC 7143 §4.2.2.1: MaxCmdSN only
/// moves forward, and only when it is not below ExpCmdSN - 1).
fn update_sn(inner: &Inner, stat_sn: Option<u32>, exp_cmd_sn: u32, max_cmd_sn: u32) {
    if let Some(s) = stat_sn {
        let next = s.wrapping_add(1);
        let cur = inner.exp_stat_sn.load(Ordering::Acquire);
        if sn_lt(cur, next) {
            inner.exp_stat_sn.store(next, Ordering::Release);
        }
    }
    if sn_lt(max_cmd_sn, exp_cmd_sn.wrapping_sub(1)) {
        return;
    }
    let mut w = inner.window.lock().expect("window lock poisoned");
    if sn_lt(w.max_cmd_sn, max_cmd_sn) {
        w.max_cmd_sn = max_cmd_sn;
    }
}

fn handle(inner: &Inner, reader: &mut PduReader<TcpStream>, inc: Incoming) -> Result<(), TransportError> {
    let peer = &inner.peer;
    let len = inc.data_segment_len();
    let read_err = |e: ReadError| super::login::read_err(peer, e);
    let pdu = inc.pdu.map_err(|e| proto(peer, e.to_string()))?;
    match pdu {
        Pdu::DataIn(d) => {
            update_sn(inner, d.status.map(|_| d.stat_sn), d.exp_cmd_sn, d.max_cmd_sn);
            let Some(slot) = inner.tasks().get(&d.itt).cloned() else {
                reader.discard_data(len).map_err(read_err)?;
                return Ok(());
            };
            let end = d.buffer_offset as u64 + len as u64;
            if end > slot.data_in_len as u64 {
                reader.discard_data(len).map_err(read_err)?;
                slot.complete(Err(proto(peer, "Data-In beyond the expected length")));
                return Ok(());
            }
            {
                let mut guard = slot.state.lock().expect("slot lock poisoned");
                let s = &mut *guard;
                let (start, end) = (d.buffer_offset as usize, end as usize);
                if s.finished || (s.lent_len > 0 && s.lent.is_none()) {
                    // After the status or a failure, or for memory the caller has taken back:
                    // nothing more is written for this task.
                    drop(guard);
                    reader.discard_data(len).map_err(read_err)?;
                    return Ok(());
                }
                if s.lent_len > 0 && start != s.data_in_end {
                    // The lent memory is filled by a cursor (DataPDUInOrder and
                    // DataSequenceInOrder are Yes): a gap would leave bytes unwritten.
                    drop(guard);
                    reader.discard_data(len).map_err(read_err)?;
                    slot.complete(Err(proto(peer, "Data-In out of order")));
                    return Ok(());
                }
                let lent_len = s.lent_len;
                let mut parts: Vec<&mut [u8]> = match &mut s.lent {
                    Some(lent) if start < lent_len => lent.take(end.min(lent_len) - start),
                    _ => Vec::new(),
                };
                if end > lent_len {
                    if s.data_in.len() < end - lent_len {
                        // Allocate once, at the length the caller chose (`end <= data_in_len`
                        // was checked above).
                        s.data_in = vec![0u8; slot.data_in_len as usize - lent_len];
                    }
                    parts.push(&mut s.data_in[start.max(lent_len) - lent_len..end - lent_len]);
                }
                s.data_in_end = s.data_in_end.max(end);
                match reader.read_data_parts(&mut parts) {
                    Ok(()) => {}
                    Err(ReadError::DataDigest) => {
                        drop(parts);
                        drop(guard);
                        slot.complete(Err(proto(peer, "Data-In digest mismatch")));
                        return Ok(());
                    }
                    Err(e) => return Err(read_err(e)),
                }
            }
            if let Some(status) = d.status {
                let residual = residual(d.underflow, d.overflow, d.residual_count);
                slot.complete(Ok(Completion::Scsi { status, sense: None, residual }));
            }
        }
        Pdu::ScsiResponse(r) => {
            update_sn(inner, Some(r.stat_sn), r.exp_cmd_sn, r.max_cmd_sn);
            let data = reader.read_data_vec(len).map_err(read_err)?;
            let sense = match data.get(..2) {
                Some(l) => {
                    let sense_len = u16::from_be_bytes([l[0], l[1]]) as usize;
                    data.get(2..2 + sense_len).and_then(|s| Sense::decode(s).ok())
                }
                None => None,
            };
            let bidi = r.bidi_overflow || r.bidi_underflow;
            let residual = if bidi {
                residual(r.bidi_underflow, r.bidi_overflow, r.bidi_read_residual_count)
            } else {
                residual(r.underflow, r.overflow, r.residual_count)
            };
            if let Some(slot) = inner.tasks().get(&r.itt).cloned() {
                slot.complete(Ok(Completion::Scsi { status: r.status, sense, residual }));
            }
        }
        Pdu::R2t(r) => {
            update_sn(inner, None, r.exp_cmd_sn, r.max_cmd_sn);
            reader.discard_data(len).map_err(read_err)?;
            if let Some(slot) = inner.tasks().get(&r.itt).cloned() {
                slot.state.lock().expect("slot lock poisoned").r2ts.push_back(r);
            }
        }
        Pdu::NopIn(n) => {
            update_sn(inner, (n.itt != RESERVED_TAG).then_some(n.stat_sn), n.exp_cmd_sn, n.max_cmd_sn);
            let data = reader.read_data_vec(len).map_err(read_err)?;
            if n.itt != RESERVED_TAG {
                if let Some(slot) = inner.tasks().get(&n.itt).cloned() {
                    slot.complete(Ok(Completion::Nop(data)));
                }
            } else if n.ttt != RESERVED_TAG {
                debug!(peer, "target ping; not answered (targets we talk to never ping)");
            }
        }
        Pdu::TaskMgmtResponse(t) => {
            update_sn(inner, Some(t.stat_sn), t.exp_cmd_sn, t.max_cmd_sn);
            reader.discard_data(len).map_err(read_err)?;
            if let Some(slot) = inner.tasks().get(&t.itt).cloned() {
                slot.complete(Ok(Completion::Tmf(t.response)));
            }
        }
        Pdu::TextResponse(t) => {
            update_sn(inner, Some(t.stat_sn), t.exp_cmd_sn, t.max_cmd_sn);
            let data = reader.read_data_vec(len).map_err(read_err)?;
            if let Some(slot) = inner.tasks().get(&t.itt).cloned() {
                slot.complete(Ok(Completion::Text(data)));
            }
        }
        Pdu::LogoutResponse(l) => {
            update_sn(inner, Some(l.stat_sn), l.exp_cmd_sn, l.max_cmd_sn);
            reader.discard_data(len).map_err(read_err)?;
            if let Some(slot) = inner.tasks().get(&l.itt).cloned() {
                slot.complete(Ok(Completion::Logout));
            }
        }
        Pdu::Reject(r) => {
            update_sn(inner, Some(r.stat_sn), r.exp_cmd_sn, r.max_cmd_sn);
            let data = reader.read_data_vec(len).map_err(read_err)?;
            let itt = data.get(OFF_ITT..OFF_ITT + 4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
            warn!(peer, reason = r.reason, ?itt, "target rejected a PDU");
            if let Some(slot) = itt.and_then(|i| inner.tasks().get(&i).cloned()) {
                slot.complete(Err(proto(peer, format!("PDU rejected, reason {:#04x}", r.reason))));
            }
        }
        Pdu::AsyncMessage(a) => {
            update_sn(inner, Some(a.stat_sn), a.exp_cmd_sn, a.max_cmd_sn);
            reader.discard_data(len).map_err(read_err)?;
            debug!(peer, event = a.async_event, "asynchronous message");
        }
        other => return Err(proto(peer, format!("unexpected {:?} from target", other.opcode()))),
    }
    Ok(())
}

/// Residual as the transport reports it: positive for underflow, negative for overflow.
fn residual(underflow: bool, overflow: bool, count: u32) -> i64 {
    if underflow {
        count as i64
    } else if overflow {
        -(count as i64)
    } else {
        0
    }
}
