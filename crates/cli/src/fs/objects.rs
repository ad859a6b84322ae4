//! `attr` and `df`: commands that go to the OSDs' object model itself. `attr` reads and sets
//! OSD-2 attributes on every data object of a file; `df` reads each OSD's root information
//! page (capacity and use) and the metadata servers' inode counts.

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use tessera_client::{ClusterConfig, FileLayout};
use tessera_initiator::iscsi::{Session, SessionConfig};
use tessera_initiator::osd_client::OsdClient;
use tessera_osd_proto::pages::ROOT_INFO_PAGE;
use tessera_osd_proto::{AttrId, Attribute};
use tessera_types::ObjectAddr;

use super::ClusterArg;
use crate::units::format_size;

/// Root information page: total and used capacity (OSD-2 r05 §7.1.2.8).

#[derive(Args)]
pub struct AttrArgs {
    #[command(subcommand)]
    action: AttrAction,
    #[command(flatten)]
    cluster: ClusterArg,
}

#[derive(Subcommand)]
enum AttrAction {
    /// Print one attribute (PAGE:NUMBER, e.g. 0x10000:1 or 1:0x82) of each data object.
    Get { path: String, attr: String },
    /// Set one attribute on every data object; VALUE is text, or bytes as 0x-prefixed hex.
    Set { path: String, attr: String, value: String },
    /// Every attribute of a page (default: 1, the user object information page) of each object.
    List {
        path: String,
        #[arg(long, default_value = "1", value_parser = parse_u32)]
        page: u32,
    },
}

#[derive(Args)]
pub struct DfArgs {
    #[command(flatten)]
    cluster: ClusterArg,
}

fn parse_u32(text: &str) -> Result<u32, String> {
    let t = text.trim();
    let parsed = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16),
        None => t.parse(),
    };
    parsed.map_err(|_| format!("`{text}` is not a 32-bit number (decimal or 0x hex)"))
}

fn parse_attr(text: &str) -> Result<AttrId> {
    let (page, number) = text.split_once(':').with_context(|| format!("`{text}`: write an attribute as PAGE:NUMBER, e.g. 0x10000:1"))?;
    let page = parse_u32(page).map_err(anyhow::Error::msg)?;
    let number = parse_u32(number).map_err(anyhow::Error::msg)?;
    Ok(AttrId::new(page, number))
}

fn parse_value(text: &str) -> Result<Vec<u8>> {
    match text.strip_prefix("0x") {
        Some(hex) if hex.len() % 2 == 0 => (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).with_context(|| format!("`{text}` is not hex")))
            .collect(),
        Some(_) => bail!("`{text}`: hex needs an even number of digits"),
        None => Ok(text.as_bytes().to_vec()),
    }
}

/// Text when the bytes are printable, hex otherwise; 8-byte values also as a number.
fn show_value(value: &[u8]) -> String {
    // Text pages (like a page identification) are NUL-padded.
    let text = value.iter().rposition(|b| *b != 0).map_or(&value[..0], |end| &value[..=end]);
    if !text.is_empty() && text.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
        return format!("{:?}", String::from_utf8_lossy(text));
    }
    let hex: String = value.iter().map(|b| format!("{b:02x}")).collect();
    if value.len() == 8 {
        format!("0x{hex} ({})", u64::from_be_bytes(value.try_into().unwrap_or_default()))
    } else {
        format!("0x{hex}")
    }
}

fn osd_client(config: &ClusterConfig, osd: u32) -> Result<OsdClient<Session>> {
    let entry = config.osds.get(osd as usize).with_context(|| format!("OSD {osd} is not in the cluster file"))?;
    let session = Session::login(entry.addr.as_str(), SessionConfig::new(&config.initiator_name, &entry.target))
        .with_context(|| format!("logging in to OSD {osd} at {}", entry.addr))?;
    Ok(OsdClient::new(session, entry.lun))
}

/// Each data object of the file at `path`: (OSD index, object address, a client for it).
fn file_objects(args: &ClusterArg, path: &str) -> Result<Vec<(u32, ObjectAddr, OsdClient<Session>)>> {
    let (client, config) = args.connect()?;
    let layout: FileLayout = client.open(path)?.layout().clone();
    layout
        .objects
        .iter()
        .map(|o| {
            let partition = config.osds.get(o.osd as usize).map(|e| e.partition_id).unwrap_or_default();
            Ok((o.osd, ObjectAddr::new(partition, o.object_id), osd_client(&config, o.osd)?))
        })
        .collect()
}

pub fn attr(args: AttrArgs) -> Result<()> {
    match &args.action {
        AttrAction::Get { path, attr } => {
            let id = parse_attr(attr)?;
            for (osd, addr, client) in file_objects(&args.cluster, path)? {
                let got = client.get_attributes(addr, &[id])?;
                let value = got.iter().find(|a| a.id == id).and_then(|a| a.value.as_deref());
                let shown = value.map(show_value).unwrap_or_else(|| "(not set)".into());
                println!("osd {osd} object {:#x}: {shown}", addr.object_id.0);
            }
        }
        AttrAction::Set { path, attr, value } => {
            let id = parse_attr(attr)?;
            let bytes = parse_value(value)?;
            for (osd, addr, client) in file_objects(&args.cluster, path)? {
                client.set_attributes(addr, &[Attribute { id, value: bytes.clone() }])?;
                println!("osd {osd} object {:#x}: set", addr.object_id.0);
            }
        }
        AttrAction::List { path, page } => {
            for (osd, addr, client) in file_objects(&args.cluster, path)? {
                println!("osd {osd} object {:#x}:", addr.object_id.0);
                for a in client.get_attribute_page(addr, *page)? {
                    if let Some(v) = a.value.as_deref() {
                        println!("  {:#x}:{:#x} = {}", a.id.page, a.id.number, show_value(v));
                    }
                }
            }
        }
    }
    Ok(())
}

pub fn df(args: DfArgs) -> Result<()> {
    let (client, config) = args.cluster.connect()?;
    println!("{:<6} {:<22} {:>12} {:>12} {:>12} {:>5}", "osd", "portal", "size", "used", "avail", "use%");
    let (mut total_all, mut used_all) = (0u64, 0u64);
    for (i, entry) in config.osds.iter().enumerate() {
        let osd = osd_client(&config, i as u32)?;
        let got = osd.get_attributes(ObjectAddr::ROOT, &[ROOT_TOTAL_CAPACITY, ROOT_USED_CAPACITY])?;
        let number = |id: AttrId| -> Result<u64> {
            let v = got.iter().find(|a| a.id == id).and_then(|a| a.value.as_deref()).with_context(|| format!("OSD {i} did not report {id:?}"))?;
            Ok(u64::from_be_bytes(v.try_into().with_context(|| format!("OSD {i}: {id:?} is {} bytes, not 8", v.len()))?))
        };
        let (total, used) = (number(ROOT_TOTAL_CAPACITY)?, number(ROOT_USED_CAPACITY)?);
        total_all = total_all.saturating_add(total);
        used_all = used_all.saturating_add(used);
        print_row(&format!("osd{i}"), &entry.addr, total, used);
    }
    print_row("total", "", total_all, used_all);
    let fs = client.statfs()?;
    println!("namespace: {} files, {} directories, {} symlinks, {} objects awaiting removal", fs.files, fs.directories, fs.symlinks, fs.pending_removals);
    Ok(())
}

fn print_row(name: &str, portal: &str, total: u64, used: u64) {
    let avail = total.saturating_sub(used);
    let pct = if total == 0 { 0.0 } else { used as f64 * 100.0 / total as f64 };
    println!("{name:<6} {portal:<22} {:>12} {:>12} {:>12} {pct:>4.0}%", format_size(total), format_size(used), format_size(avail));
}
