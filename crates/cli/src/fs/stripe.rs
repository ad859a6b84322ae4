//! `setstripe` and `getstripe`, as in Lustre's `lfs`: a directory's default striping for new
//! files, or a new empty file with its own; and the layout of a file (OSDs and object ids).

use anyhow::{bail, Result};
use clap::Args;
use tessera_client::{Client, ClusterConfig, Stripe, StripeHint};

use super::ClusterArg;
use crate::units::{format_size, parse_size, parse_stripe_count};

#[derive(Args)]
pub struct SetStripeArgs {
    /// A directory (sets the default of files created in it) or a new file (created empty).
    path: String,
    /// OSDs to stripe over; -1 or 0 means every OSD. Default: the directory's current count.
    #[arg(short = 'c', long = "stripe-count", allow_negative_numbers = true, value_parser = parse_stripe_count)]
    count: Option<u32>,
    /// Stripe unit: bytes written to one OSD before moving to the next (e.g. 64K, 1M, 4M).
    /// Default: the directory's current unit.
    #[arg(short = 'S', long = "stripe-size", value_parser = parse_size)]
    size: Option<u64>,
    /// First OSD of the stripe. Default: the directory's, when it has one and -c or -S is left
    /// out; otherwise the metadata server spreads files over the OSDs.
    #[arg(short = 'i', long = "stripe-index")]
    index: Option<u32>,
    /// Remove a directory's own default (it then uses the server's).
    #[arg(short = 'd', long = "delete", conflicts_with_all = ["count", "size", "index"])]
    delete: bool,
    #[command(flatten)]
    cluster: ClusterArg,
}

#[derive(Args)]
pub struct GetStripeArgs {
    /// Files (their layout) or directories (the default their new files take).
    #[arg(required = true)]
    paths: Vec<String>,
    #[command(flatten)]
    cluster: ClusterArg,
}

pub fn setstripe(args: SetStripeArgs) -> Result<()> {
    let (client, _) = args.cluster.connect()?;
    let hint = match args.delete {
        true => None,
        // A new file takes what its directory gives, a directory what it has: as `lfs`, an
        // option not given keeps that.
        false => Some(complete(&client, &args.cluster, &args.path, args.count, args.size, args.index)?),
    };
    match client.setstripe(&args.path, hint) {
        Err(e) if e.fs_error() == Some(tessera_mds_proto::FsError::Exists) => {
            bail!("{e} (a file's layout is fixed when it is made: setstripe a directory, or a new path to make an empty file with that layout)")
        }
        other => Ok(other?),
    }
}

/// `count` and `unit`, each taken when `None` from the default striping that `path` has (a
/// directory) or would get (a new file), and then its first OSD too unless `start_osd` is given.
/// With both `count` and `unit` given the striping is new: no first OSD unless `start_osd`.
pub fn complete(client: &Client, cluster: &ClusterArg, path: &str, count: Option<u32>, unit: Option<u64>, start_osd: Option<u32>) -> Result<StripeHint> {
    if let (Some(stripe_count), Some(stripe_unit)) = (count, unit) {
        let hint = StripeHint { stripe_unit, stripe_count, start_osd };
        client.check_stripe(path, &hint)?;
        return Ok(hint);
    }
    let dir = match client.getstripe(path) {
        Ok(Stripe::Directory(_)) => path.to_string(),
        _ => parent(path),
    };
    let base = match client.getstripe(&dir)? {
        Stripe::Directory(Some(h)) => h,
        _ => match cluster_default(cluster) {
            Some(h) => h,
            None => bail!("{dir} uses the metadata server's default striping, which is not known here (no up.json beside the cluster file): give both -c and -S"),
        },
    };
    let hint = StripeHint { stripe_unit: unit.unwrap_or(base.stripe_unit), stripe_count: count.unwrap_or(base.stripe_count), start_osd: start_osd.or(base.start_osd) };
    client.check_stripe(path, &hint)?;
    Ok(hint)
}

/// The directory `path` is in.
fn parent(path: &str) -> String {
    match path.trim_end_matches('/').rsplit_once('/') {
        Some((dir, _)) if !dir.is_empty() => dir.to_string(),
        _ => "/".to_string(),
    }
}

/// The default striping of a cluster `tessera up` made: its metadata servers' default, which
/// they do not report, is in the `up.json` beside the cluster file.
fn cluster_default(cluster: &ClusterArg) -> Option<StripeHint> {
    let dir = cluster.cluster.as_deref()?.parent()?;
    let options = crate::up_options::UpOptions::recorded(dir).ok()??;
    Some(StripeHint { stripe_unit: options.stripe_unit?, stripe_count: options.stripe_count?, start_osd: None })
}

pub fn getstripe(args: GetStripeArgs) -> Result<()> {
    let (client, config) = args.cluster.connect()?;
    super::each_path("getstripe", &args.paths, |path| {
        let stripe = client.getstripe(path)?;
        println!("{path}");
        match stripe {
            Stripe::Directory(None) => match cluster_default(&args.cluster) {
                Some(h) => println!("{}  (the cluster default)", hint_line(&h)),
                None => println!("stripe: the metadata server's default (no default of its own)"),
            },
            stripe => print_stripe(&config, &stripe),
        }
        Ok(())
    })
}

/// `lfs getstripe`-style lines: the striping, and for a file each slot's OSD and object id.
pub fn print_stripe(config: &ClusterConfig, stripe: &Stripe) {
    match stripe {
        Stripe::Directory(None) => println!("stripe: the server default (no default of its own)"),
        Stripe::Directory(Some(h)) => println!("{}", hint_line(h)),
        Stripe::File(layout) => {
            let unit = layout.stripe.stripe_unit();
            println!("stripe_count: {}  stripe_size: {unit} ({})", layout.stripe.stripe_count(), format_size(unit));
            println!("{:>6} {:>18} {:>8}  portal", "slot", "object id", "osd");
            for (slot, object) in layout.objects.iter().enumerate() {
                let portal = config.osds.get(object.osd as usize).map(|o| o.addr.as_str()).unwrap_or("?");
                println!("{slot:>6} {:>#18x} {:>8}  {portal}", object.object_id, object.osd);
            }
        }
    }
}

/// A directory default as `stripe_count: 2  stripe_size: 65536 (64 KiB)  stripe_index: any`.
fn hint_line(h: &StripeHint) -> String {
    let count = if h.stripe_count == 0 { "all OSDs".to_string() } else { h.stripe_count.to_string() };
    let start = h.start_osd.map(|i| i.to_string()).unwrap_or_else(|| "any".into());
    format!("stripe_count: {count}  stripe_size: {} ({})  stripe_index: {start}", h.stripe_unit, format_size(h.stripe_unit))
}
