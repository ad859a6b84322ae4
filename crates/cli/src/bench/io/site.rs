//! Where a file-system bench runs: a cluster of real daemons plus, on every OSD's host, a raw
//! TCP server for the baseline, so that baseline and file system cross the same links. Either
//! everything on loopback, or every daemon and the client on a network namespace of its own
//! (see [`crate::netns`]), each OSD behind a rate-limited link.

use std::net::IpAddr;

use anyhow::{Context, Result};
use tempfile::TempDir;
use tessera_client::Client;

use super::super::baseline::{RawClient, RawServer};
use crate::cluster::{ClusterSpec, LocalCluster, Placement};
use crate::netns::{Entered, Host, HostSpec, Topology};
use crate::units::Rate;

/// Stripe unit of the bench's files (the default of `tessera up` and of Lustre).
pub const STRIPE_UNIT: u64 = 1 << 20;

pub struct Site {
    /// `loopback` or `netns`.
    pub label: &'static str,
    /// Each OSD's link rate (namespaces only).
    pub rate: Option<Rate>,
    client_host: Option<Host>,
    // Dropped in this order: raw servers, daemons, namespaces, directory.
    raw: Vec<RawServer>,
    cluster: LocalCluster,
    _topology: Option<Topology>,
    _dir: TempDir,
}

impl Site {
    /// `osds` OSDs and one metadata server on 127.0.0.1.
    pub fn loopback(osds: u32) -> Result<Site> {
        let dir = crate::children::scratch_dir("tessera-bench-fs-", None)?;
        let cluster = start_cluster(&dir, osds, Placement::Shared("127.0.0.1".into()))?;
        let raw = (0..osds).map(|_| RawServer::start()).collect::<Result<_>>()?;
        Ok(Site { label: "loopback", rate: None, client_host: None, raw, cluster, _topology: None, _dir: dir })
    }

    /// The metadata server, `osds` OSDs and the client each on a namespace of its own; every
    /// OSD's link limited to `rate` in each direction, the others unlimited.
    pub fn namespaces(osds: u32, rate: Rate) -> Result<Site> {
        crate::netns::available().map_err(|reason| anyhow::anyhow!("--netns: network namespaces unavailable: {reason}"))?;
        let mut specs = vec![HostSpec::new("mds"), HostSpec::new("client")];
        specs.extend((0..osds).map(|i| HostSpec::with_rate(&format!("osd{i}"), rate)));
        let topology = Topology::build(&specs)?;
        let osd_hosts: Vec<Host> = (0..osds).map(|i| topology.host(&format!("osd{i}")).clone()).collect();
        let dir = crate::children::scratch_dir("tessera-bench-fs-", None)?;
        let placement = Placement::Hosts { mds: vec![topology.host("mds").clone()], osds: osd_hosts.clone() };
        let cluster = start_cluster(&dir, osds, placement)?;
        let raw = osd_hosts
            .iter()
            .map(|h| {
                let _inside = h.enter()?;
                RawServer::start_on(IpAddr::V4(h.addr))
            })
            .collect::<Result<_>>()?;
        let client_host = Some(topology.host("client").clone());
        Ok(Site { label: "netns", rate: Some(rate), client_host, raw, cluster, _topology: Some(topology), _dir: dir })
    }

    /// Puts the calling thread on the client's host until the guard drops (nothing to do on
    /// loopback). Connect the client and the raw baseline inside.
    pub fn enter_client(&self) -> Result<Option<Entered>> {
        self.client_host.as_ref().map(Host::enter).transpose()
    }

    pub fn connect(&self) -> Result<Client> {
        Client::connect(self.cluster.config()).context("connecting the bench client to the cluster")
    }

    /// One raw TCP connection to each of the first `n` OSD hosts.
    pub fn raw_clients(&self, n: usize) -> Result<Vec<RawClient>> {
        self.raw.iter().take(n).map(RawServer::connect).collect()
    }

    /// Process ids of the metadata server and the OSDs (for CPU accounting).
    pub fn daemon_pids(&self) -> Vec<u32> {
        self.cluster.records().iter().map(|r| r.pid).collect()
    }

    /// Where the OSDs listen, for the report.
    pub fn osd_addrs(&self) -> Vec<String> {
        self.cluster.config().osds.iter().map(|o| o.addr.clone()).collect()
    }
}

fn start_cluster(dir: &TempDir, osds: u32, placement: Placement) -> Result<LocalCluster> {
    let exe = std::env::current_exe().context("finding the tessera executable")?;
    let spec = ClusterSpec { placement, stripe_unit: STRIPE_UNIT, stripe_count: 0, ..ClusterSpec::new(osds) };
    LocalCluster::start_spec(&exe, dir.path(), &spec)
}
