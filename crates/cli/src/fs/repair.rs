//! `tessera repair`: asks every metadata server for orphans, objects in its id range on the
//! OSDs that no file, precreated range or removal journal accounts for (the removal journal
//! keeps unlink and create from leaking; orphans come from outside it, such as a metadata
//! store restored from an old backup). Reports them, and with `--remove` removes them.

use anyhow::Result;
use clap::Args;

use super::ClusterArg;

#[derive(Args)]
pub struct RepairArgs {
    /// Remove the orphans found (each server journals them and removes them now, or when their
    /// OSD answers again). Without it, only report them.
    #[arg(long)]
    remove: bool,
    #[command(flatten)]
    cluster: ClusterArg,
}

pub fn repair(args: RepairArgs) -> Result<()> {
    let (client, _) = args.cluster.connect()?;
    let reports = client.repair(args.remove)?;
    let mut total = 0;
    for r in &reports {
        total += r.found;
        let verb = if args.remove { "removed" } else { "found" };
        println!("mds{}: {} orphan object(s) {verb}", r.server, r.found);
        for o in &r.orphans {
            println!("  osd{:<4} object {:#x}", o.osd, o.object_id);
        }
        if r.found > r.orphans.len() as u64 {
            println!("  ... and {} more", r.found - r.orphans.len() as u64);
        }
    }
    match (total, args.remove) {
        (0, _) => println!("repair: every object on the OSDs is accounted for"),
        (n, false) => println!("repair: {n} orphan object(s); `tessera repair --remove` removes them"),
        (n, true) => println!("repair: {n} orphan object(s) removed (those on an OSD that does not answer go when it returns)"),
    }
    Ok(())
}
