//! Data-Out bookkeeping for one command being received (RFC 7143 §4.2.5, §11.7, §11.8):
//! unsolicited data (immediate data plus Data-Out with the reserved TTT, at most
//! FirstBurstLength, ended by the F bit), then solicited bursts, each answering one R2T of at
//! most MaxBurstLength, with at most MaxOutstandingR2T R2Ts outstanding. DataPDUInOrder and
//! DataSequenceInOrder are Yes, so every PDU must continue exactly where the previous one of its
//! sequence ended.

use tessera_iscsi::bhs::RESERVED_TAG;
use tessera_iscsi::pdu::{DataOut, ScsiCommand};
use tessera_scsi::{Destination, PlacedDataOut, Sense};

use super::conn::ReadyTask;

/// One R2T the target has sent and whose data is still arriving.
#[derive(Debug)]
struct OutstandingR2t {
    ttt: u32,
    offset: u32,
    len: u32,
    received: u32,
}

/// The next R2T to send.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct R2tPlan {
    pub r2t_sn: u32,
    pub offset: u32,
    pub len: u32,
}

pub(crate) struct Receiving {
    pub itt: u32,
    /// LUN number (for the device) and wire field (echoed in R2Ts).
    pub lun: u64,
    pub lun_field: u64,
    cdb: Vec<u8>,
    write_len: u32,
    data_in_len: u32,
    bidi: bool,
    buf: Vec<u8>,
    /// Where the Data-Out goes when the device takes it straight into place (then `buf` stays
    /// empty).
    pub placed: Option<Box<dyn PlacedDataOut>>,
    /// Data-Out `[0, n)` received so far while the device waits for a prefix of it to decide
    /// where the rest goes (reader/staged.rs).
    pub prefix: Vec<u8>,
    received_total: u32,
    unsolicited_max: u32,
    unsolicited_received: u32,
    unsolicited_done: bool,
    next_offset: u32,
    r2t_sn: u32,
    r2ts: Vec<OutstandingR2t>,
    abandoned: bool,
    /// The outcome is already decided; remaining data is discarded.
    pub failed: Option<Sense>,
}

impl Receiving {
    pub fn new(cmd: &ScsiCommand, lun: u64, write_len: u32, data_in_len: u32, unsolicited_max: u32) -> Self {
        Receiving {
            itt: cmd.itt,
            lun,
            lun_field: cmd.lun,
            cdb: cmd.cdb.clone(),
            write_len,
            data_in_len,
            bidi: cmd.read && cmd.write,
            buf: Vec::new(),
            placed: None,
            prefix: Vec::new(),
            received_total: 0,
            unsolicited_max,
            unsolicited_received: 0,
            unsolicited_done: cmd.final_bit,
            next_offset: 0,
            r2t_sn: 0,
            r2ts: Vec::new(),
            abandoned: false,
            failed: None,
        }
    }

    /// The slice `[offset, offset + len)` of the assembly buffer. The buffer is allocated once
    /// at the Expected Data Transfer Length (bounded by `TRANSFER_LEN_MAX` before this task was
    /// created) with a zeroed allocation: the allocator maps zero pages lazily, so resident
    /// memory still follows the data actually received, and no byte is ever copied by growth.
    /// Callers have checked `offset + len <= write_len`.
    pub fn grow(&mut self, offset: u32, len: usize) -> &mut [u8] {
        let start = offset as usize;
        let end = start + len;
        debug_assert!(end <= self.write_len as usize);
        if self.buf.len() < end {
            if self.buf.is_empty() {
                self.buf = vec![0u8; (self.write_len as usize).max(end)];
            } else {
                self.buf.resize(end, 0);
            }
        }
        &mut self.buf[start..end]
    }

    /// Assembles Data-Out in a recycled buffer of exactly the write length. Its old bytes are
    /// never seen: the task is handed on only when every byte of `[0, write_len)` has arrived
    /// (in-order data, checked per PDU), and it is cut to the bytes received.
    pub fn use_buffer(&mut self, buf: Vec<u8>) {
        debug_assert_eq!(buf.len(), self.write_len as usize);
        self.buf = buf;
    }

    /// Receives the Data-Out into its final place instead of a buffer.
    pub fn place(&mut self, placed: Box<dyn PlacedDataOut>) {
        self.placed = Some(placed);
    }

    /// True once the device has said where the Data-Out goes (not while it waits for a
    /// prefix: the command may still be received into a buffer).
    pub fn is_placed(&self) -> bool {
        self.placed.as_ref().is_some_and(|p| !matches!(p.destination(), Destination::Prefix { .. }))
    }

    pub fn write_len(&self) -> u32 {
        self.write_len
    }

    /// Records immediate data.
    pub fn received(&mut self, _offset: u32, len: u32, _final: bool) {
        self.received_total += len;
        self.unsolicited_received += len;
        if self.unsolicited_done {
            self.next_offset = self.received_total;
        }
    }

    /// Checks a Data-Out header against the transfer before its data is read.
    pub fn check_data_out(&self, d: &DataOut, len: u32) -> Result<(), &'static str> {
        if d.ttt == RESERVED_TAG {
            if self.unsolicited_done {
                return Err("unsolicited Data-Out after the final one");
            }
            if d.buffer_offset != self.unsolicited_received {
                return Err("unsolicited Data-Out out of order");
            }
            if self.unsolicited_received as u64 + len as u64 > self.unsolicited_max as u64 {
                return Err("unsolicited data beyond FirstBurstLength");
            }
            return Ok(());
        }
        let r = self.r2ts.iter().find(|r| r.ttt == d.ttt).ok_or("Data-Out for an unknown TTT")?;
        if d.buffer_offset != r.offset + r.received {
            return Err("solicited Data-Out out of order");
        }
        if r.received as u64 + len as u64 > r.len as u64 {
            return Err("Data-Out beyond the R2T's length");
        }
        Ok(())
    }

    /// Records a checked Data-Out's data.
    pub fn received_data_out(&mut self, d: &DataOut, len: u32) {
        self.received_total += len;
        if d.ttt == RESERVED_TAG {
            self.unsolicited_received += len;
            if d.final_bit || self.unsolicited_received == self.unsolicited_max {
                self.unsolicited_done = true;
                self.next_offset = self.unsolicited_received;
            }
            return;
        }
        if let Some(i) = self.r2ts.iter().position(|r| r.ttt == d.ttt) {
            self.r2ts[i].received += len;
            if self.r2ts[i].received == self.r2ts[i].len {
                self.r2ts.swap_remove(i);
            }
        }
    }

    /// No more data will be accepted for this task.
    pub fn abandon(&mut self) {
        self.abandoned = true;
    }

    pub fn is_complete(&self) -> bool {
        if self.abandoned {
            return true;
        }
        if !self.unsolicited_done || !self.r2ts.is_empty() {
            return false;
        }
        self.failed.is_some() || self.received_total == self.write_len
    }

    pub fn next_r2t(&self, max_outstanding: u32, max_burst: u32) -> Option<R2tPlan> {
        if self.failed.is_some() || !self.unsolicited_done || self.next_offset >= self.write_len {
            return None;
        }
        if self.r2ts.len() as u32 >= max_outstanding.max(1) {
            return None;
        }
        let len = max_burst.max(1).min(self.write_len - self.next_offset);
        Some(R2tPlan { r2t_sn: self.r2t_sn, offset: self.next_offset, len })
    }

    pub fn r2t_sent(&mut self, ttt: u32, offset: u32, len: u32) {
        debug_assert_eq!(offset, self.next_offset);
        self.r2ts.push(OutstandingR2t { ttt, offset, len, received: 0 });
        self.next_offset += len;
        self.r2t_sn = self.r2t_sn.wrapping_add(1);
    }

    pub fn into_ready(mut self, failed: Option<Sense>) -> ReadyTask {
        self.buf.truncate(self.received_total as usize);
        ReadyTask {
            itt: self.itt,
            lun: self.lun,
            cdb: self.cdb,
            data_out: self.buf,
            placed: self.placed,
            data_in_len: self.data_in_len,
            bidi: self.bidi,
            failed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(final_bit: bool) -> ScsiCommand {
        ScsiCommand {
            immediate: false,
            final_bit,
            read: false,
            write: true,
            task_attr: 1,
            lun: 0,
            itt: 9,
            expected_data_transfer_length: 10_000,
            cmd_sn: 1,
            exp_stat_sn: 1,
            cdb: vec![0; 16],
            bidi_read_len: None,
        }
    }

    /// Immediate 1000 bytes, unsolicited up to a first burst of 3000, then R2Ts of 4000 with
    /// two outstanding: 3000..7000 and 7000..10000.
    #[test]
    fn plans_r2ts_after_first_burst() {
        let mut t = Receiving::new(&cmd(false), 0, 10_000, 0, 3000);
        t.grow(0, 1000);
        t.received(0, 1000, false);
        assert_eq!(t.next_r2t(2, 4000), None, "unsolicited data still coming");
        let d = DataOut { final_bit: true, itt: 9, ttt: RESERVED_TAG, buffer_offset: 1000, ..Default::default() };
        assert!(t.check_data_out(&d, 2001).is_err());
        t.check_data_out(&d, 2000).unwrap();
        t.received_data_out(&d, 2000);
        let p = t.next_r2t(2, 4000).unwrap();
        assert_eq!(p, R2tPlan { r2t_sn: 0, offset: 3000, len: 4000 });
        t.r2t_sent(100, p.offset, p.len);
        let p = t.next_r2t(2, 4000).unwrap();
        assert_eq!(p, R2tPlan { r2t_sn: 1, offset: 7000, len: 3000 });
        t.r2t_sent(101, p.offset, p.len);
        assert_eq!(t.next_r2t(2, 4000), None);
        let d = DataOut { itt: 9, ttt: 101, buffer_offset: 7000, final_bit: true, ..Default::default() };
        t.received_data_out(&d, 3000);
        assert!(!t.is_complete());
        let d = DataOut { itt: 9, ttt: 100, buffer_offset: 3000, final_bit: true, ..Default::default() };
        assert!(t.check_data_out(&DataOut { buffer_offset: 3001, ..d.clone() }, 10).is_err());
        t.received_data_out(&d, 4000);
        assert!(t.is_complete());
    }
}
