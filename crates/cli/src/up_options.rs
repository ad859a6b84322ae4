//! What a cluster directory was set up with, kept in `DIR/up.json` so that a later `tessera up`
//! restarts the same cluster: a forgotten flag must not add OSDs, leave part of the namespace
//! on a metadata server that is no longer started, or drop CHAP or capability security.
//!
//! Every field is optional: the flags of one `up` (`None` where not given), and what a
//! directory made before `up.json` existed reveals (its stores, keys and cluster file).

use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::cluster::{CLUSTER_FILE, KEYS_DIR};
use crate::running;

pub const OPTIONS_FILE: &str = "up.json";
/// Written instead of [`OPTIONS_FILE`] while a first start runs, and renamed to it once the
/// cluster is up: a directory holding it saw a first start that never finished (interrupted,
/// or a daemon that would not start), so the next `up` starts afresh rather than take the
/// stores it left for a cluster set up differently.
pub const STARTING_FILE: &str = "up.json.starting";
/// The security value of a cluster whose OSDs run NOSEC (`--insecure`).
pub const NOSEC: &str = "nosec";

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct UpOptions {
    pub osds: Option<u32>,
    pub mds: Option<u32>,
    pub host: Option<String>,
    pub stripe_unit: Option<u64>,
    pub stripe_count: Option<u32>,
    /// A capability method (`cmdrsp`, `capkey`, `alldata`), or [`NOSEC`].
    pub security: Option<String>,
    pub chap: Option<bool>,
}

impl UpOptions {
    /// The defaults of a new cluster.
    pub fn defaults() -> UpOptions {
        UpOptions {
            osds: Some(4),
            mds: Some(1),
            host: Some("127.0.0.1".into()),
            stripe_unit: Some(1 << 20),
            stripe_count: Some(0),
            security: Some("cmdrsp".into()),
            chap: Some(false),
        }
    }

    /// What `dir` holds: its `up.json`, or for a cluster made before that file existed what
    /// its stores and files tell; `None` for a directory without a cluster.
    pub fn recorded(dir: &Path) -> Result<Option<UpOptions>> {
        let path = dir.join(OPTIONS_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => return Ok(Some(serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?)),
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e).with_context(|| format!("reading {}", path.display())),
            Err(_) => {}
        }
        if dir.join(STARTING_FILE).exists() {
            return Ok(None);
        }
        let stores = running::stores(dir);
        if stores.is_empty() {
            return Ok(None);
        }
        let count = |role: &str| stores.iter().filter(|(r, _, _)| *r == role).count() as u32;
        let cluster_file = std::fs::read_to_string(dir.join(CLUSTER_FILE)).unwrap_or_default();
        Ok(Some(UpOptions {
            osds: Some(count("osd")).filter(|n| *n > 0),
            mds: Some(count("mds")).filter(|n| *n > 0),
            chap: Some(cluster_file.contains("chap_secret_file")),
            // Keys mean it was secured; the method is not kept anywhere, so take the one `up`
            // uses unless told otherwise.
            security: Some(if dir.join(KEYS_DIR).join("osd0.key").exists() { "cmdrsp" } else { NOSEC }.to_string()),
            ..UpOptions::default()
        }))
    }

    /// Writes `DIR/up.json` whole (a new file renamed over the old one).
    pub fn save(&self, dir: &Path) -> Result<()> {
        self.save_as(dir, OPTIONS_FILE)
    }

    /// Writes `DIR/name` whole (a new file renamed over the old one).
    pub fn save_as(&self, dir: &Path, name: &str) -> Result<()> {
        let path = dir.join(name);
        let new = dir.join(format!("{name}.new"));
        let text = serde_json::to_string_pretty(self)? + "\n";
        std::fs::write(&new, text).and_then(|()| std::fs::rename(&new, &path)).with_context(|| format!("writing {}", path.display()))
    }

    /// Each field from `self`, else `other`.
    pub fn or(self, other: UpOptions) -> UpOptions {
        UpOptions {
            osds: self.osds.or(other.osds),
            mds: self.mds.or(other.mds),
            host: self.host.or(other.host),
            stripe_unit: self.stripe_unit.or(other.stripe_unit),
            stripe_count: self.stripe_count.or(other.stripe_count),
            security: self.security.or(other.security),
            chap: self.chap.or(other.chap),
        }
    }

    /// How the flags `given` differ from what a cluster has (`self`), one line each; empty
    /// when they agree or only fill in what is not known.
    pub fn conflicts(&self, given: &UpOptions) -> Vec<String> {
        fn differ<T: PartialEq + std::fmt::Display>(out: &mut Vec<String>, what: &str, flag: &str, has: &Option<T>, asked: &Option<T>) {
            if let (Some(has), Some(asked)) = (has, asked) {
                if has != asked {
                    out.push(format!("{what}: the cluster has {has}, {flag} asks for {asked}"));
                }
            }
        }
        let mut out = Vec::new();
        differ(&mut out, "OSDs", "--osds", &self.osds, &given.osds);
        differ(&mut out, "metadata servers", "--mds", &self.mds, &given.mds);
        differ(&mut out, "host", "--host", &self.host, &given.host);
        differ(&mut out, "stripe unit", "--stripe-unit", &self.stripe_unit, &given.stripe_unit);
        differ(&mut out, "stripe count", "--stripe-count", &self.stripe_count, &given.stripe_count);
        differ(&mut out, "security", "--security/--insecure", &self.security, &given.security);
        let on_off = |c: &Option<bool>| c.map(|on| if on { "CHAP" } else { "no CHAP" });
        differ(&mut out, "CHAP", "--chap/--no-chap", &on_off(&self.chap), &on_off(&given.chap));
        out
    }
}

/// The options to start the cluster in `dir` with: what it has, and the flags `given` where
/// it has nothing (a new cluster: the defaults where no flag is given). A flag that would
/// change what it has is refused unless `reconfigure`.
pub fn resolve(dir: &Path, given: &UpOptions, reconfigure: bool) -> Result<(UpOptions, Option<UpOptions>)> {
    let recorded = UpOptions::recorded(dir)?;
    let Some(has) = &recorded else { return Ok((given.clone().or(UpOptions::defaults()), None)) };
    let conflicts = has.conflicts(given);
    if !conflicts.is_empty() && !reconfigure {
        bail!(
            "the cluster in {} was set up differently ({}): {}; leave these flags out to restart it as it is, or add --reconfigure to change it",
            dir.display(),
            dir.join(OPTIONS_FILE).display(),
            conflicts.join("; ")
        );
    }
    Ok((given.clone().or(has.clone()).or(UpOptions::defaults()), recorded))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restart_takes_what_the_cluster_has_and_refuses_a_change() {
        let dir = tempfile::tempdir().unwrap();
        let first = UpOptions { osds: Some(3), chap: Some(true), ..UpOptions::default() }.or(UpOptions::defaults());
        first.save(dir.path()).unwrap();
        let (again, _) = resolve(dir.path(), &UpOptions::default(), false).unwrap();
        assert_eq!(again, first);
        let insecure = UpOptions { security: Some(NOSEC.into()), ..UpOptions::default() };
        let err = resolve(dir.path(), &insecure, false).unwrap_err().to_string();
        assert!(err.contains("security: the cluster has cmdrsp, --security/--insecure asks for nosec"), "{err}");
        let (changed, _) = resolve(dir.path(), &insecure, true).unwrap();
        assert_eq!(changed.security.as_deref(), Some(NOSEC));
        assert_eq!(changed.osds, Some(3));
    }
}
