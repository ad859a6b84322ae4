//! `setstripe` and `getstripe`, as in Lustre's `lfs`: a directory's default striping for new
//! files, or a new empty file with its own; and the layout of a file (OSDs and object ids).

use anyhow::Result;
use clap::Args;
use tessera_client::{ClusterConfig, Stripe, StripeHint};

use super::ClusterArg;
use crate::units::{format_size, parse_size};

#[derive(Args)]
pub struct SetStripeArgs {
    /// A directory (sets the default of files created in it) or a new file (created empty).
    path: String,
    /// OSDs to stripe over; 0 means every OSD.
    #[arg(short = 'c', long = "stripe-count", default_value_t = 0)]
    count: u32,
    /// Stripe unit: bytes written to one OSD before moving to the next (e.g. 64K, 1M, 4M).
    #[arg(short = 'S', long = "stripe-size", default_value = "1M", value_parser = parse_size)]
    size: u64,
    /// First OSD of the stripe; default: the metadata server spreads files.
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
    path: String,
    #[command(flatten)]
    cluster: ClusterArg,
}

pub fn setstripe(args: SetStripeArgs) -> Result<()> {
    let (client, _) = args.cluster.connect()?;
    let hint = (!args.delete).then_some(StripeHint { stripe_unit: args.size, stripe_count: args.count, start_osd: args.index });
    client.setstripe(&args.path, hint)?;
    Ok(())
}

pub fn getstripe(args: GetStripeArgs) -> Result<()> {
    let (client, config) = args.cluster.connect()?;
    println!("{}", args.path);
    print_stripe(&config, &client.getstripe(&args.path)?);
    Ok(())
}

/// `lfs getstripe`-style lines: the striping, and for a file each slot's OSD and object id.
pub fn print_stripe(config: &ClusterConfig, stripe: &Stripe) {
    match stripe {
        Stripe::Directory(None) => println!("stripe: the server default (no default of its own)"),
        Stripe::Directory(Some(h)) => {
            let count = if h.stripe_count == 0 { "all OSDs".to_string() } else { h.stripe_count.to_string() };
            let start = h.start_osd.map(|i| i.to_string()).unwrap_or_else(|| "any".into());
            println!("stripe_count: {count}  stripe_size: {} ({})  stripe_index: {start}", h.stripe_unit, format_size(h.stripe_unit));
        }
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
