//! [`ClusterConfig`]: where the metadata servers and the OSDs are, as `cluster.toml` holds it
//! (the file `tessera up` writes and every front end reads). The format is in the crate docs.
//!
//! Indices are positions: the n-th `[[mds]]` table is metadata server n (the high bits of an
//! inode id), the n-th `[[osd]]` table is OSD n (an `ObjectRef::osd` in a file layout). The
//! order is therefore part of the cluster's identity and must match the MDS cluster map.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tessera_initiator::iscsi::{load_chap_secrets, ChapFileError, SessionConfig};
use tessera_mds_proto::limits::{OSDS_MAX, SERVERS_MAX};
use tessera_types::limits::TRANSFER_LEN_MAX;
use thiserror::Error;

/// The iSCSI initiator name used when the file gives none.
pub const DEFAULT_INITIATOR_NAME: &str = "iqn.2026-11.org.tessera:client";
/// The partition holding file data on every OSD (seed 002's PVFS layout; the MDS agrees).
pub const DEFAULT_PARTITION_ID: u64 = 0x10000;
/// iSCSI sessions per OSD: enough that a striped command and a pipelined follow-up ride on
/// different TCP connections, few enough that hundreds of OSDs stay cheap.
pub const DEFAULT_SESSIONS_PER_OSD: u32 = 2;
/// Most sessions per OSD the client opens.
pub const SESSIONS_PER_OSD_MAX: u32 = 16;
/// Largest single READ / WRITE the client sends by default (16 MiB): large enough that the
/// per-command cost vanishes, small enough that several commands pipeline on one OSD.
pub const DEFAULT_MAX_TRANSFER_BYTES: u64 = 16 << 20;
/// Smallest allowed command size cap; below this the per-command cost dominates.
pub const MAX_TRANSFER_BYTES_MIN: u64 = 64 << 10;

/// Why a cluster configuration was refused.
#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("cannot write {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
    #[error("{path}: {source}")]
    Parse { path: PathBuf, source: toml::de::Error },
    #[error("cannot encode the cluster configuration: {0}")]
    Encode(#[from] toml::ser::Error),
    #[error("the cluster configuration names no metadata server (add an [[mds]] table)")]
    NoMds,
    #[error("{count} metadata servers exceed the limit of {SERVERS_MAX}")]
    TooManyMds { count: usize },
    #[error("{count} OSDs exceed the limit of {OSDS_MAX}")]
    TooManyOsds { count: usize },
    #[error("sessions_per_osd = {0} is outside 1..={SESSIONS_PER_OSD_MAX}")]
    SessionsPerOsd(u32),
    #[error("max_transfer_bytes = {0} is outside {MAX_TRANSFER_BYTES_MIN}..={TRANSFER_LEN_MAX}")]
    MaxTransfer(u64),
    #[error("osd_liveness_secs = {0} is outside 1..=3600")]
    Liveness(u64),
    #[error("{what} {index} has an empty {field}")]
    Empty { what: &'static str, index: usize, field: &'static str },
    #[error(transparent)]
    Chap(#[from] ChapFileError),
}

/// One metadata server.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MdsEntry {
    /// `host:port` of its TCP listener.
    pub addr: String,
}

/// One OSD: its iSCSI portal and target.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OsdEntry {
    /// `host:port` of the iSCSI portal.
    pub addr: String,
    /// The iSCSI target name to log in to.
    pub target: String,
    /// The partition that holds file data objects.
    #[serde(default = "default_partition_id")]
    pub partition_id: u64,
    /// The OSD logical unit.
    #[serde(default)]
    pub lun: u64,
}

/// Which servers make up a Tessera cluster, and how this client talks to them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterConfig {
    #[serde(default = "default_initiator_name")]
    pub initiator_name: String,
    #[serde(default = "default_sessions_per_osd")]
    pub sessions_per_osd: u32,
    #[serde(default = "default_max_transfer_bytes")]
    pub max_transfer_bytes: u64,
    /// Seconds an OSD may stay silent while commands wait on it before it is pinged; a ping
    /// unanswered for as long again fails those commands, naming the OSD (1 to 3600).
    #[serde(default = "default_osd_liveness_secs")]
    pub osd_liveness_secs: u64,
    /// A CHAP secret file (mode 0600) for logging in to OSDs that require CHAP; its first line
    /// is this initiator's user and secret, an optional second line the OSDs' own (mutual CHAP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chap_secret_file: Option<PathBuf>,
    /// The cluster's user key (mode 0600), on a cluster whose metadata servers ask clients to
    /// prove their user: a process that can read it proves any user itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_key_file: Option<PathBuf>,
    /// The unix socket of this host's user agent, which proves the user of any process that
    /// asks (docs/security.md, "Users").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_agent_socket: Option<PathBuf>,
    /// Metadata servers by index.
    #[serde(rename = "mds", default)]
    pub mds: Vec<MdsEntry>,
    /// OSDs by index.
    #[serde(rename = "osd", default)]
    pub osds: Vec<OsdEntry>,
}

fn default_initiator_name() -> String {
    DEFAULT_INITIATOR_NAME.to_string()
}
fn default_partition_id() -> u64 {
    DEFAULT_PARTITION_ID
}
fn default_sessions_per_osd() -> u32 {
    DEFAULT_SESSIONS_PER_OSD
}
fn default_max_transfer_bytes() -> u64 {
    DEFAULT_MAX_TRANSFER_BYTES
}
fn default_osd_liveness_secs() -> u64 {
    tessera_initiator::iscsi::DEFAULT_LIVENESS.as_secs()
}

impl ClusterConfig {
    /// A configuration with the default client settings.
    pub fn new(mds: Vec<MdsEntry>, osds: Vec<OsdEntry>) -> ClusterConfig {
        ClusterConfig {
            initiator_name: default_initiator_name(),
            sessions_per_osd: DEFAULT_SESSIONS_PER_OSD,
            max_transfer_bytes: DEFAULT_MAX_TRANSFER_BYTES,
            osd_liveness_secs: default_osd_liveness_secs(),
            chap_secret_file: None,
            user_key_file: None,
            user_agent_socket: None,
            mds,
            osds,
        }
    }

    /// How to log in to OSD `osd`: this configuration's initiator name and, when it names a
    /// secret file, CHAP credentials (the file is read and its mode checked each time).
    pub fn session_config(&self, osd: &OsdEntry) -> Result<SessionConfig, ConfigError> {
        let config = SessionConfig { liveness: Duration::from_secs(self.osd_liveness_secs), ..SessionConfig::new(&self.initiator_name, &osd.target) };
        match &self.chap_secret_file {
            None => Ok(config),
            Some(path) => Ok(config.with_chap(load_chap_secrets(path).map_err(ConfigError::Chap)?)),
        }
    }

    /// Parses and validates TOML text; `origin` names the source in messages.
    pub fn from_toml_str(text: &str, origin: &Path) -> Result<ClusterConfig, ConfigError> {
        let config: ClusterConfig = toml::from_str(text).map_err(|source| ConfigError::Parse { path: origin.to_path_buf(), source })?;
        config.validate()?;
        Ok(config)
    }

    pub fn to_toml_string(&self) -> Result<String, ConfigError> {
        self.validate()?;
        Ok(toml::to_string(self)?)
    }

    pub fn load(path: &Path) -> Result<ClusterConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_path_buf(), source })?;
        Self::from_toml_str(&text, path)
    }

    /// Writes the file through a temporary neighbour and a rename, so a reader never sees half
    /// a configuration.
    pub fn save(&self, path: &Path) -> Result<(), ConfigError> {
        let text = self.to_toml_string()?;
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        std::fs::write(&tmp, text).map_err(|source| ConfigError::Write { path: tmp.clone(), source })?;
        std::fs::rename(&tmp, path).map_err(|source| ConfigError::Write { path: path.to_path_buf(), source })
    }

    /// Checks the bounds every other part of the client relies on.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.mds.is_empty() {
            return Err(ConfigError::NoMds);
        }
        if self.mds.len() > SERVERS_MAX as usize {
            return Err(ConfigError::TooManyMds { count: self.mds.len() });
        }
        if self.osds.len() > OSDS_MAX as usize {
            return Err(ConfigError::TooManyOsds { count: self.osds.len() });
        }
        if !(1..=SESSIONS_PER_OSD_MAX).contains(&self.sessions_per_osd) {
            return Err(ConfigError::SessionsPerOsd(self.sessions_per_osd));
        }
        if !(MAX_TRANSFER_BYTES_MIN..=TRANSFER_LEN_MAX).contains(&self.max_transfer_bytes) {
            return Err(ConfigError::MaxTransfer(self.max_transfer_bytes));
        }
        if !(1..=3600).contains(&self.osd_liveness_secs) {
            return Err(ConfigError::Liveness(self.osd_liveness_secs));
        }
        for (index, m) in self.mds.iter().enumerate() {
            if m.addr.is_empty() {
                return Err(ConfigError::Empty { what: "mds", index, field: "addr" });
            }
        }
        for (index, o) in self.osds.iter().enumerate() {
            if o.addr.is_empty() {
                return Err(ConfigError::Empty { what: "osd", index, field: "addr" });
            }
            if o.target.is_empty() {
                return Err(ConfigError::Empty { what: "osd", index, field: "target" });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = r#"
[[mds]]
addr = "10.0.0.1:7000"

[[osd]]
addr = "10.0.0.2:3260"
target = "iqn.2026-11.org.tessera:osd-0"

[[osd]]
addr = "10.0.0.3:3260"
target = "iqn.2026-11.org.tessera:osd-1"
partition_id = 131072
"#;

    /// Goal: the documented format parses with defaults filled in and survives a round trip.
    #[test]
    fn sample_parses_and_round_trips() {
        let c = ClusterConfig::from_toml_str(SAMPLE, Path::new("cluster.toml")).unwrap();
        assert_eq!(c.mds, vec![MdsEntry { addr: "10.0.0.1:7000".into() }]);
        assert_eq!(c.osds[0].partition_id, DEFAULT_PARTITION_ID);
        assert_eq!(c.osds[1].partition_id, 0x20000);
        assert_eq!(c.sessions_per_osd, DEFAULT_SESSIONS_PER_OSD);
        assert_eq!(c.initiator_name, DEFAULT_INITIATOR_NAME);
        let again = ClusterConfig::from_toml_str(&c.to_toml_string().unwrap(), Path::new("x")).unwrap();
        assert_eq!(again, c);
    }

    #[test]
    fn save_and_load() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cluster.toml");
        let c = ClusterConfig::from_toml_str(SAMPLE, Path::new("x")).unwrap();
        c.save(&path).unwrap();
        assert_eq!(ClusterConfig::load(&path).unwrap(), c);
    }

    #[test]
    fn bad_configs_are_refused() {
        let no_mds = ClusterConfig::from_toml_str("", Path::new("x"));
        assert!(matches!(no_mds, Err(ConfigError::NoMds)));
        let bad = format!("sessions_per_osd = 0\n{SAMPLE}");
        assert!(matches!(ClusterConfig::from_toml_str(&bad, Path::new("x")), Err(ConfigError::SessionsPerOsd(0))));
        let missing_target = "[[mds]]\naddr = \"a:1\"\n[[osd]]\naddr = \"b:2\"\n";
        let e = ClusterConfig::from_toml_str(missing_target, Path::new("c.toml")).unwrap_err();
        assert!(e.to_string().starts_with("c.toml:"), "{e}");
    }
}
