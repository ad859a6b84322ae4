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
    let (client, config) = args.cluster.connect()?;
    let me = client.caller();
    let groups: Vec<String> = me.groups.iter().map(u32::to_string).collect();
    let how = match (&config.user_key_file, &config.user_agent_socket) {
        (None, None) => "believed: this cluster's metadata servers do not ask for proof".to_string(),
        (Some(key), _) if std::fs::File::open(key).is_ok() => format!("proven with the user key {}", key.display()),
        (_, Some(agent)) => format!("proven by the user agent at {}", agent.display()),
        (Some(key), None) => format!("proven with the user key {}", key.display()),
    };
    println!("uid={} gid={} groups={} ({how})", me.uid, me.gid, if groups.is_empty() { "-".to_string() } else { groups.join(",") });
    Ok(())
}
