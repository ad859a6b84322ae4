//! `attr`: reads and sets OSD-2 attributes on every data object of a file, with the file's
//! credentials.

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use tessera_client::File;
use tessera_osd_proto::{AttrId, Attribute};

use super::ClusterArg;

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
    /// Set one attribute of an application page (0x10000..0x1FFFFFFF) on every data object;
    /// VALUE is text, or bytes as 0x-prefixed hex.
    Set { path: String, attr: String, value: String },
    /// Every attribute of a page (default: 1, the user object information page) of each object.
    List {
        path: String,
        #[arg(long, default_value = "1", value_parser = parse_u32)]
        page: u32,
    },
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

/// The user-object pages applications own (OSD-2 r05 table 4). The pages below them are the
/// OSD's and the file system's: setting one on each object by hand would change every object's
/// logical length (1:0x82) and so the file's size, or its policy tag and so revoke the
/// capabilities every client holds.
pub(super) const APPLICATION_PAGES: std::ops::RangeInclusive<u32> = 0x1_0000..=0x1FFF_FFFF;

fn settable(id: AttrId) -> Result<AttrId> {
    if id.number == 0 || id.number == u32::MAX {
        // 0 identifies the page (OSD-2 r05 §7.1.2.2); 0xFFFFFFFF means every attribute of it.
        bail!("attribute number {:#x} cannot be set: 0 names the page itself and 0xffffffff all of its attributes; use 1..0xfffffffe", id.number);
    }
    if !APPLICATION_PAGES.contains(&id.page) {
        let hint = match id.page {
            1 => "; to change the file's length use `tessera truncate`",
            3 => "; to change the file's times use `tessera touch`",
            _ => "",
        };
        bail!(
            "page {:#x} is kept by the OSD and the file system, not set by hand; attr set writes application pages {:#x}..{:#x}{hint}",
            id.page,
            APPLICATION_PAGES.start(),
            APPLICATION_PAGES.end()
        );
    }
    Ok(id)
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
/// User object timestamps page (OSD-2 r05 §7.1.3.9): 6-byte milliseconds since the epoch.
const TIMESTAMPS_PAGE: u32 = 0x3;

fn show_value(id: AttrId, value: &[u8]) -> String {
    // Text pages (like a page identification) are NUL-padded.
    let text = value.iter().rposition(|b| *b != 0).map_or(&value[..0], |end| &value[..=end]);
    if !text.is_empty() && text.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
        return format!("{:?}", String::from_utf8_lossy(text));
    }
    let hex: String = value.iter().map(|b| format!("{b:02x}")).collect();
    let number = || value.iter().fold(0u64, |acc, &b| (acc << 8) | b as u64);
    match value.len() {
        8 => format!("0x{hex} ({})", number()),
        6 if id.page == TIMESTAMPS_PAGE => {
            let ms = number();
            format!("0x{hex} ({}.{:03} UTC)", super::namespace::time_string((ms / 1000) as i64), ms % 1000)
        }
        _ => format!("0x{hex}"),
    }
}

/// The file at `path`, opened (with credentials for its objects under capability security).
fn open_file(args: &ClusterArg, path: &str) -> Result<File> {
    let (client, _) = args.connect()?;
    Ok(client.open(path)?)
}

pub fn attr(args: AttrArgs) -> Result<()> {
    match &args.action {
        AttrAction::Get { path, attr } => {
            let id = parse_attr(attr)?;
            let file = open_file(&args.cluster, path)?;
            for (o, got) in file.layout().objects.iter().zip(file.object_attributes(&[id])?) {
                let value = got.iter().find(|a| a.id == id).and_then(|a| a.value.as_deref());
                let shown = value.map(|v| show_value(id, v)).unwrap_or_else(|| "(not set)".into());
                println!("osd {} object {:#x}: {shown}", o.osd, o.object_id);
            }
        }
        AttrAction::Set { path, attr, value } => {
            let id = settable(parse_attr(attr)?)?;
            let bytes = parse_value(value)?;
            let file = open_file(&args.cluster, path)?;
            file.set_object_attributes(&[Attribute { id, value: bytes }])?;
            for o in &file.layout().objects {
                println!("osd {} object {:#x}: set", o.osd, o.object_id);
            }
        }
        AttrAction::List { path, page } => {
            let file = open_file(&args.cluster, path)?;
            for (o, attrs) in file.layout().objects.iter().zip(file.object_attribute_page(*page)?) {
                println!("osd {} object {:#x}:", o.osd, o.object_id);
                for a in attrs {
                    if let Some(v) = a.value.as_deref() {
                        println!("  {:#x}:{:#x} = {}", a.id.page, a.id.number, show_value(a.id, v));
                    }
                }
            }
        }
    }
    Ok(())
}

