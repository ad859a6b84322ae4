//! Experiment 3: 1024 pieces of p bytes at a stride of 16 p (64 B at 1 KiB for the headline),
//! against one contiguous transfer of the same 1024 p bytes from the same object, WRITE and
//! READ. Native is what the client sends by itself (`Mode::Auto`: here the strided
//! descriptor); the SGL of the same pieces is measured too. The ratios are time ratios,
//! list over contiguous (1.0 = free), median of per-round paired ratios.

use std::cell::RefCell;

use anyhow::Result;
use serde_json::json;
use tessera_client::command_plan::SlotCommand;
use tessera_client::Mode;
use tessera_initiator::iscsi::Session;
use tessera_initiator::osd_client::OsdClient;
use tessera_osd_proto::DataLayout;
use tessera_types::ObjectAddr;

use super::pattern;
use super::timing::{interleaved, median, paired_ratio, reps_for, Variant};
use crate::bench::report::{Report, Series};

pub const PIECES: u64 = 1024;
/// Stride over piece size: one byte in 16 is accessed.
pub const SPREAD: u64 = 16;

/// Time ratios at one piece size.
#[derive(Clone, Copy, Debug)]
pub struct Ratios {
    pub piece: u64,
    pub native_write: f64,
    pub native_read: f64,
}

pub fn piece_sizes(quick: bool) -> Vec<u64> {
    if quick { vec![64, 4096] } else { vec![64, 256, 1024, 4096, 16384] }
}

pub fn run(client: &OsdClient<Session>, quick: bool, report: &mut Report) -> Result<(Vec<Ratios>, Vec<Series>)> {
    let (rounds, budget) = if quick { (3, 0.01) } else { (15, 0.05) };
    let pid = client.create_partition(None)?;
    let mut out = Vec::new();
    let (mut sw, mut sr) = (Vec::new(), Vec::new());
    for piece in piece_sizes(quick) {
        let addr = ObjectAddr::new(pid, client.create_one(pid)?);
        let extents = pattern::strided(PIECES, piece, piece * SPREAD);
        let len = PIECES * piece;
        client.write(addr, 0, &vec![1u8; pattern::span(&extents) as usize], false)?;
        let data: Vec<u8> = (0..len).map(|i| (i * 7 + piece) as u8).collect();
        let native = pattern::commands(&extents, Mode::Auto)?;
        let sgl = pattern::commands(&extents, Mode::Sgl)?;
        let contig = pattern::commands(&[tessera_layout::Extent { offset: 0, len }], Mode::Auto)?;
        let bufs = [0, 1, 2].map(|_| RefCell::new(vec![0u8; len as usize]));
        let reps = reps_for(budget, writer(client, addr, &contig, &data))?;
        let mut variants: Vec<Variant<'_>> = vec![
            writer(client, addr, &contig, &data),
            writer(client, addr, &native, &data),
            writer(client, addr, &sgl, &data),
            reader(client, addr, &contig, &bufs[0]),
            reader(client, addr, &native, &bufs[1]),
            reader(client, addr, &sgl, &bufs[2]),
        ];
        let t = interleaved(rounds, reps, &mut variants)?;
        drop(variants);
        anyhow::ensure!(*bufs[1].borrow() == data && *bufs[2].borrow() == data, "list reads returned other bytes than were written");
        let r = Ratios { piece, native_write: paired_ratio(&t[1], &t[0]), native_read: paired_ratio(&t[4], &t[3]) };
        report.row(json!({
            "piece_bytes": piece, "pieces": PIECES, "stride_bytes": piece * SPREAD,
            "native_descriptor": descriptor_name(&native[0].layout),
            "contig_write_us": median(&t[0]) * 1e6, "native_write_us": median(&t[1]) * 1e6, "sgl_write_us": median(&t[2]) * 1e6,
            "contig_read_us": median(&t[3]) * 1e6, "native_read_us": median(&t[4]) * 1e6, "sgl_read_us": median(&t[5]) * 1e6,
            "native_over_contig_write": r.native_write, "sgl_over_contig_write": paired_ratio(&t[2], &t[0]),
            "native_over_contig_read": r.native_read, "sgl_over_contig_read": paired_ratio(&t[5], &t[3]),
        }));
        sw.push((piece as f64, r.native_write));
        sr.push((piece as f64, r.native_read));
        out.push(r);
    }
    report.print_table(
        "1024 pieces of p bytes at a 16 p stride against one contiguous transfer of the same bytes (time ratios, median of paired rounds)",
        &["piece_bytes", "native_descriptor", "contig_write_us", "native_write_us", "sgl_write_us", "native_over_contig_write", "sgl_over_contig_write", "contig_read_us", "native_read_us", "native_over_contig_read", "sgl_over_contig_read"],
    );
    let series = vec![Series { name: "WRITE list / contiguous".into(), points: sw }, Series { name: "READ list / contiguous".into(), points: sr }];
    Ok((out, series))
}

/// The descriptor's name, for tables.
pub fn descriptor_name(layout: &DataLayout) -> &'static str {
    match layout {
        DataLayout::Contiguous => "contiguous",
        DataLayout::List(_) => "sgl",
        DataLayout::Strided { .. } => "strided",
        DataLayout::Nested { .. } => "nested",
    }
}

fn writer<'a>(client: &'a OsdClient<Session>, addr: ObjectAddr, cmds: &'a [SlotCommand], data: &'a [u8]) -> Variant<'a> {
    Box::new(move || pattern::write(client, addr, cmds, data))
}

fn reader<'a>(client: &'a OsdClient<Session>, addr: ObjectAddr, cmds: &'a [SlotCommand], buf: &'a RefCell<Vec<u8>>) -> Variant<'a> {
    Box::new(move || pattern::read(client, addr, cmds, &mut buf.borrow_mut()))
}
