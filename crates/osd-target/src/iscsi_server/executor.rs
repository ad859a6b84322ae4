//! The connection's executor thread: runs ready commands one at a time on the device and sends
//! their results (RFC 7143 §11.4, §11.7): Data-In split at the initiator's
//! MaxRecvDataSegmentLength, F at each MaxBurstLength sequence end, status on the last Data-In
//! (S bit) when there is no sense and the command is not bidirectional, otherwise a SCSI
//! Response carrying SenseLength + sense; residual over/underflow flags and counts. Data is
//! written from the device's buffer with vectored writes, never copied; a file range leaves
//! with `sendfile`, pieces of a mapping by reference or vectored (mapped_send.rs).

use std::io::{self, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;

use tessera_iscsi::bhs::RESERVED_TAG;
use tessera_iscsi::pdu::{tmf_response, DataIn, LogoutResponse, Pdu, ScsiResponse, RESPONSE_COMPLETED};
use tessera_scsi::sense::SENSE_MAX;
use tessera_scsi::{FileDataIn, MappedDataIn, ScsiOutcome, ScsiStatus, ScsiTask, TmfResult};
use tracing::{debug, warn};

use super::conn::{Connection, ReadyTask, Work};
use super::mapped_send;
use super::reader::send_tmf_response;

/// Sense data is prefixed by its 2-byte length in the SCSI Response data segment (§11.4.7).
const SENSE_LENGTH_LEN: usize = 2;

pub(crate) fn tmf_code(r: TmfResult) -> u8 {
    match r {
        TmfResult::FunctionComplete => tmf_response::FUNCTION_COMPLETE,
        TmfResult::TaskDoesNotExist => tmf_response::TASK_DOES_NOT_EXIST,
        TmfResult::LunDoesNotExist => tmf_response::LUN_DOES_NOT_EXIST,
        TmfResult::NotSupported => tmf_response::NOT_SUPPORTED,
        TmfResult::Rejected => tmf_response::FUNCTION_REJECTED,
    }
}

pub(crate) fn run(conn: &Connection) {
    loop {
        let work = {
            let mut q = conn.queue();
            q.running = None;
            loop {
                if let Some(w) = q.work.pop_front() {
                    if let Work::Task(t) = &w {
                        q.running = Some(t.itt);
                        q.running_buffered = t.placed.is_none();
                    }
                    break w;
                }
                if q.closed {
                    return;
                }
                q = conn.queue_cv.wait(q).expect("queue lock poisoned");
            }
        };
        let result = match work {
            Work::Task(task) => {
                let r = execute(conn, task);
                conn.command_done();
                r
            }
            Work::TmfResponse { itt, response } => send_tmf_response(conn, itt, response),
            Work::LunReset { itt, lun } => {
                let r = conn.device.lun_reset(&conn.nexus, lun);
                send_tmf_response(conn, itt, tmf_code(r))
            }
            Work::Logout { itt } => {
                let r = conn.send_status(
                    |stat_sn, exp_cmd_sn, max_cmd_sn| {
                        Pdu::LogoutResponse(LogoutResponse {
                            response: 0,
                            itt,
                            stat_sn,
                            exp_cmd_sn,
                            max_cmd_sn,
                            time2wait: 0,
                            time2retain: 0,
                        })
                    },
                    &[],
                );
                debug!(session = conn.nexus.session_id, "logout");
                let _ = conn.socket.shutdown(std::net::Shutdown::Write);
                let _ = r;
                return;
            }
        };
        if let Err(e) = result {
            warn!(session = conn.nexus.session_id, error = %e, "send failed; closing connection");
            let _ = conn.socket.shutdown(std::net::Shutdown::Both);
            return;
        }
    }
}

/// Largest command (Data-Out and Data-In bytes, each) the reader thread runs itself.
pub(crate) const INLINE_BYTES_MAX: usize = 64 * 1024;

/// Hands a ready task to the executor, or runs it right here on the reader thread when it is
/// small and nothing is queued or running. Why: a GET ATTRIBUTES costs a few microseconds, less
/// than waking the executor thread, so the hop would dominate its round trip; large transfers
/// still go to the executor so the reader can receive the next command's data meanwhile.
/// Order is kept: a task runs inline only when the executor has nothing before it.
pub(crate) fn submit(conn: &Connection, task: ReadyTask) -> io::Result<()> {
    // A placed WRITE's data is already stored, but its commit (an SQLite write) is left to the
    // executor so the reader goes on receiving the next command's data meanwhile.
    // Each direction is bounded on its own: a list READ's few bytes of descriptor (Data-Out)
    // must not send a READ the contiguous form would run inline through the executor hop.
    let small = task.placed.is_none() && task.data_out.len().max(task.data_in_len as usize) <= INLINE_BYTES_MAX;
    {
        let mut q = conn.queue();
        if !(small && q.work.is_empty() && q.running.is_none() && !q.closed) {
            q.work.push_back(Work::Task(task));
            conn.queue_cv.notify_one();
            return Ok(());
        }
        // Marked running so a TMF arriving meanwhile is answered after this task, as for the
        // executor's own tasks.
        q.running = Some(task.itt);
        q.running_buffered = true;
    }
    let result = execute(conn, task);
    conn.command_done();
    let mut q = conn.queue();
    q.running = None;
    if !q.work.is_empty() {
        conn.queue_cv.notify_one();
    }
    result
}

fn execute(conn: &Connection, mut task: ReadyTask) -> io::Result<()> {
    let outcome = match (task.failed.clone(), task.placed.take()) {
        // A placed command dropped here unfinished is abandoned by its device.
        (Some(sense), _) => ScsiOutcome::check_condition(sense),
        (None, Some(placed)) => placed.finish(),
        (None, None) => conn.device.execute(
            &conn.nexus,
            &ScsiTask { lun: task.lun, cdb: &task.cdb, data_out: &task.data_out, data_in_len: task.data_in_len },
        ),
    };
    let sent = send_result(conn, &task, outcome);
    conn.recycle_buffer(task.data_out);
    sent
}

fn send_result(conn: &Connection, task: &ReadyTask, outcome: ScsiOutcome) -> io::Result<()> {
    let expected = task.data_in_len as usize;
    let produced = outcome.data_in_len() as usize;
    let sent = produced.min(expected);
    let body = match (&outcome.data_in_file, &outcome.data_in_mapped) {
        (Some(file), _) => Body::File(file),
        (None, Some(mapped)) => Body::Mapped(mapped),
        (None, None) => Body::Bytes(&outcome.data_in[..sent]),
    };
    let mut scratch = Vec::new();
    let (overflow, underflow) = (produced > expected, produced < expected);
    let residual = produced.abs_diff(expected) as u32;
    let status_in_data_in = sent > 0 && outcome.sense.is_none() && !task.bidi;
    // SenseLength and sense data, on the stack: under CMDRSP every answer carries sense.
    let mut sense_buf = [0u8; SENSE_LENGTH_LEN + SENSE_MAX];
    let mut sense_len = 0;
    if let Some(sense) = &outcome.sense {
        let s = sense.encoded();
        sense_buf[..SENSE_LENGTH_LEN].copy_from_slice(&(s.len() as u16).to_be_bytes());
        sense_buf[SENSE_LENGTH_LEN..SENSE_LENGTH_LEN + s.len()].copy_from_slice(&s);
        sense_len = SENSE_LENGTH_LEN + s.len();
    }
    let sense_bytes = &sense_buf[..sense_len];
    if outcome.status == ScsiStatus::Good && outcome.sense.is_some() {
        debug!(itt = task.itt, "GOOD status with sense");
    }
    let bidi = task.bidi;
    let response = |stat_sn, exp_cmd_sn, max_cmd_sn, exp_data_sn| {
        Pdu::ScsiResponse(ScsiResponse {
            bidi_overflow: bidi && overflow,
            bidi_underflow: bidi && underflow,
            overflow: !bidi && overflow,
            underflow: !bidi && underflow,
            response: RESPONSE_COMPLETED,
            status: outcome.status.code(),
            itt: task.itt,
            snack_tag: 0,
            stat_sn,
            exp_cmd_sn,
            max_cmd_sn,
            exp_data_sn,
            bidi_read_residual_count: if bidi { residual } else { 0 },
            residual_count: if bidi { 0 } else { residual },
        })
    };

    let segment = conn.params.initiator_max_recv_data_segment_len.max(512) as usize;
    let burst = conn.params.max_burst_len.max(512) as usize;
    let mut data_sn: u32 = 0;
    let mut offset = 0usize;
    while offset < sent {
        let burst_end = (offset / burst + 1) * burst;
        let len = segment.min(sent - offset).min(burst_end - offset);
        let last = offset + len == sent;
        let mut tx = conn.tx();
        let (exp_cmd_sn, max_cmd_sn) = conn.window_fields();
        let with_status = last && status_in_data_in;
        let pdu = DataIn {
            final_bit: last || offset + len == burst_end,
            acknowledge: false,
            overflow: with_status && overflow,
            underflow: with_status && underflow,
            status: with_status.then_some(outcome.status.code()),
            lun: 0,
            itt: task.itt,
            ttt: RESERVED_TAG,
            stat_sn: if with_status { tx.next_stat_sn() } else { 0 },
            exp_cmd_sn,
            max_cmd_sn,
            data_sn,
            buffer_offset: offset as u32,
            residual_count: if with_status { residual } else { 0 },
        };
        let pdu = Pdu::DataIn(pdu);
        match body {
            // The last Data-In and the SCSI Response that must follow it (bidirectional
            // commands, sense data) leave in one write: one segment, one wake-up at the
            // initiator.
            Body::Bytes(data) if last && !status_in_data_in => {
                let status = response(tx.next_stat_sn(), exp_cmd_sn, max_cmd_sn, data_sn + 1);
                return tx.writer.write_pdus(&[(&pdu, &[&data[offset..offset + len]]), (&status, &[sense_bytes])]);
            }
            Body::Bytes(data) => tx.writer.write_pdu(&pdu, &[&data[offset..offset + len]])?,
            // The same for a small last piece of file or mapped data when a SCSI Response must
            // follow (sense data: every answer under CMDRSP carries its integrity value there):
            // copying a few KiB costs less than a second segment and a second wake-up.
            Body::File(_) | Body::Mapped(_) if last && !status_in_data_in && len <= COALESCE_MAX => {
                scratch.resize(len, 0);
                match body {
                    Body::File(file) => file.read_at(offset as u64, &mut scratch)?,
                    Body::Mapped(mapped) => mapped.read_at(offset as u64, &mut scratch)?,
                    Body::Bytes(_) => unreachable!("matched above"),
                }
                let status = response(tx.next_stat_sn(), exp_cmd_sn, max_cmd_sn, data_sn + 1);
                return tx.writer.write_pdus(&[(&pdu, &[&scratch]), (&status, &[sense_bytes])]);
            }
            // A data digest needs the bytes here; and a small last piece leaves in one write
            // with its header (and the status it carries), where `sendfile` would make a
            // second segment and wake the initiator twice: a 4 KiB READ costs ~6 us less.
            Body::File(file) if tx.writer.digests.data || (last && len <= ONE_WRITE_MAX) => {
                scratch.resize(len, 0);
                file.read_at(offset as u64, &mut scratch)?;
                tx.writer.write_pdu(&pdu, &[&scratch])?;
            }
            // A SCSI Response must follow (a CMDRSP answer carries its integrity value in
            // sense): corked from the header to the response, so the response leaves in the
            // data's last segment and the initiator is woken once. Corking an answer whose
            // status rides in the Data-In was measured slower, so only this one is corked
            // (docs/security.md, "Measured cost").
            Body::File(file) if last && !status_in_data_in => {
                let socket = tx.writer.get_ref().as_raw_fd();
                set_cork(socket, true);
                let mut result = tx.writer.write_pdu_streamed(&pdu, len, |socket| send_file_range(socket, file, offset as u64, len));
                if result.is_ok() {
                    let status = response(tx.next_stat_sn(), exp_cmd_sn, max_cmd_sn, data_sn + 1);
                    result = tx.writer.write_pdu(&status, &[sense_bytes]);
                }
                set_cork(socket, false);
                return result;
            }
            Body::File(file) => tx.writer.write_pdu_streamed(&pdu, len, |socket| send_file_range(socket, file, offset as u64, len))?,
            Body::Mapped(mapped) if tx.writer.digests.data => {
                // The digest needs the bytes in this process: a guarded copy, never a fault.
                scratch.resize(len, 0);
                mapped.read_at(offset as u64, &mut scratch)?;
                tx.writer.write_pdu(&pdu, &[&scratch])?;
            }
            Body::Mapped(mapped) => {
                let slices = mapped_send::slices(mapped, offset as u64, len);
                if mapped_send::worth_splicing(&slices) && mapped_send::send_pdu(&mut tx, &pdu, mapped, &slices)? {
                    conn.server.spliced_data_in.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                } else {
                    tx.writer.write_pdu(&pdu, &slices)?;
                }
            }
        }
        data_sn += 1;
        offset += len;
    }
    if status_in_data_in {
        return Ok(());
    }
    conn.send_status(|stat_sn, exp_cmd_sn, max_cmd_sn| response(stat_sn, exp_cmd_sn, max_cmd_sn, data_sn), &[sense_bytes])
}

/// Holds (or releases and pushes) partial segments on `socket`. A failure only costs the
/// coalescing, never data, so it is not reported.
fn set_cork(socket: std::os::fd::RawFd, on: bool) {
    let v: libc::c_int = on.into();
    // SAFETY: setsockopt on an open socket with a pointer to a local int and its size.
    unsafe { libc::setsockopt(socket, libc::IPPROTO_TCP, libc::TCP_CORK, &v as *const libc::c_int as *const libc::c_void, std::mem::size_of::<libc::c_int>() as libc::socklen_t) };
}

/// Largest last Data-In piece copied so it can leave in one write with the SCSI Response.
const COALESCE_MAX: usize = 64 * 1024;

/// Largest last piece of file data copied so that it leaves in one write with its header,
/// rather than a header write and a `sendfile`.
const ONE_WRITE_MAX: usize = 16 * 1024;

/// Where a command's Data-In bytes are.
#[derive(Clone, Copy)]
enum Body<'a> {
    Bytes(&'a [u8]),
    File(&'a FileDataIn),
    Mapped(&'a MappedDataIn),
}

/// Sends Data-In bytes `[at, at + len)` of a file-held range with `sendfile(2)`: the page cache
/// feeds the socket without a copy through user space. Bytes past what the file still holds are
/// sent as zeros, so the PDU always carries exactly the length its header announced.
fn send_file_range(socket: &mut TcpStream, file: &FileDataIn, at: u64, len: usize) -> io::Result<()> {
    let from_file = file.len.saturating_sub(at).min(len as u64);
    let mut file_offset = (file.offset + at) as libc::off_t;
    let mut sent = 0u64;
    while sent < from_file {
        let want = (from_file - sent).min(1 << 30) as usize;
        // SAFETY: both descriptors are open for the duration of the call (the socket is
        // borrowed, the file is held by an Arc); the kernel advances `file_offset`.
        let n = unsafe { libc::sendfile(socket.as_raw_fd(), file.file.as_raw_fd(), &mut file_offset, want) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            break; // the file shrank since the command ran: zeros below
        }
        sent += n as u64;
    }
    static ZEROS: [u8; 64 * 1024] = [0u8; 64 * 1024];
    let mut zeros = len as u64 - sent;
    while zeros > 0 {
        let n = zeros.min(ZEROS.len() as u64) as usize;
        socket.write_all(&ZEROS[..n])?;
        zeros -= n as u64;
    }
    Ok(())
}
