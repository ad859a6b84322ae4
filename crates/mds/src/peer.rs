//! A metadata server's connections to its peers (cross-server mkdir and rmdir, attributes of
//! remote directories) use the shared [`MdsConnection`]; tests and tools use it as a minimal
//! client.

use std::time::Duration;

pub use tessera_mds_proto::{ConnectionError as PeerError, MdsConnection};

/// How long a peer may take to answer one request before the connection is given up.
pub const PEER_TIMEOUT: Duration = Duration::from_secs(30);
