//! One object, one access pattern: the commands a [`Mode`] turns it into (the client library's
//! own planner, so the bench measures what an application gets) and executing them through the
//! OSD client, one command at a time as the seed's client did.

use anyhow::{ensure, Result};
use tessera_client::command_plan::{slot_commands, SlotCommand};
use tessera_client::Mode;
use tessera_initiator::iscsi::Session;
use tessera_initiator::osd_client::OsdClient;
use tessera_layout::{Extent, PerOsdPlan, Piece};
use tessera_types::limits::BURST_LEN_MAX;
use tessera_types::ObjectAddr;

/// `count` blocks of `block` bytes, block starts `stride` apart, from object offset 0.
pub fn strided(count: u64, block: u64, stride: u64) -> Vec<Extent> {
    (0..count).map(|i| Extent { offset: i * stride, len: block }).collect()
}

/// The object bytes a pattern spans (one past its last byte).
pub fn span(extents: &[Extent]) -> u64 {
    extents.iter().map(|e| e.offset + e.len).max().unwrap_or(0)
}

/// The commands that carry `extents` (memory contiguous, in list order) under `mode`.
pub fn commands(extents: &[Extent], mode: Mode) -> Result<Vec<SlotCommand>> {
    let mut at = 0;
    let pieces = extents
        .iter()
        .map(|e| {
            let p = Piece { object_offset: e.offset, len: e.len, buffer_offset: at };
            at += e.len;
            p
        })
        .collect();
    Ok(slot_commands(&PerOsdPlan { slot: 0, pieces }, mode, BURST_LEN_MAX as u64)?)
}

/// Writes `data` (the commands' stream end to end) with each command in turn.
pub fn write(client: &OsdClient<Session>, addr: ObjectAddr, cmds: &[SlotCommand], data: &[u8]) -> Result<()> {
    for c in cmds {
        let s = c.stream_start as usize;
        client.write_layout(addr, c.offset, &data[s..s + c.len as usize], c.layout.clone(), false)?;
    }
    Ok(())
}

/// Reads with each command in turn into `buf` (the stream end to end), each command's bytes
/// received in place as the client library receives them.
pub fn read(client: &OsdClient<Session>, addr: ObjectAddr, cmds: &[SlotCommand], buf: &mut [u8]) -> Result<()> {
    for c in cmds {
        let s = c.stream_start as usize;
        let got = client.read_into(addr, c.offset, c.len, c.layout.clone(), &mut [&mut buf[s..s + c.len as usize]])?;
        ensure!(got.received == c.len, "short read: {} of {} bytes", got.received, c.len);
    }
    Ok(())
}

/// Bytes the commands carry.
pub fn bytes(cmds: &[SlotCommand]) -> u64 {
    cmds.iter().map(|c| c.len).sum()
}
