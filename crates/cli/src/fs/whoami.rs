//! `tessera whoami`: the user the metadata servers answer this client's requests for, and how
//! they know it (docs/security.md, "Users"). It opens a real connection, so a proof the
//! servers refuse shows here first.

use anyhow::Result;
use clap::Args;

use super::ClusterArg;

#[derive(Args)]
pub struct WhoamiArgs {
    #[command(flatten)]
    cluster: ClusterArg,
}

pub fn whoami(args: WhoamiArgs) -> Result<()> {
    let (client, _) = args.cluster.connect()?;
    let me = client.caller();
    let groups: Vec<String> = me.groups.iter().map(u32::to_string).collect();
    let groups = if groups.is_empty() { "-".to_string() } else { groups.join(",") };
    println!("uid={} gid={} groups={groups} ({})", me.uid, me.gid, client.caller_proof());
    Ok(())
}
