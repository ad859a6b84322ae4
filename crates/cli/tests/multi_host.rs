//! Goal: a cluster whose daemons live on different hosts works from a client on yet another
//! host (issue 3, "Multi-host"). Method: the metadata server and four OSDs each run in their
//! own network namespace, bound to that namespace's address (no loopback), joined by veth
//! pairs on a bridge; the cluster file names those addresses; every client command runs as a
//! `tessera` process in a fifth namespace. Where namespaces cannot be created the test prints
//! `SKIPPED: network namespaces unavailable: <reason>`, and fails instead when CI is set.

mod common;

use std::path::Path;
use std::process::Output;

use common::tessera_exe;
use tessera_cli::cluster::{SecuritySpec, ClusterSpec, LocalCluster, Placement, MDS_PORT};
use tessera_cli::netns::{self, Host, HostSpec, Topology};

/// Runs `tessera <args>` on `host` against `cluster` and requires success.
fn run_on(host: &Host, cluster: &Path, args: &[&str]) -> Output {
    let out = host.command(tessera_exe()).args(args).env("TESSERA_CLUSTER", cluster).output().expect("running tessera");
    assert!(
        out.status.success(),
        "`tessera {}` on {} failed: {}\n{}",
        args.join(" "),
        host.name,
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    out
}

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn metadata_server_and_four_osds_on_separate_hosts_serve_a_client_on_a_fifth() {
    if !netns::available_or_skip("multi_host") {
        return;
    }
    let names = ["mds", "osd0", "osd1", "osd2", "osd3", "client"];
    let topo = Topology::build(&names.map(HostSpec::new)).expect("building the namespaces");
    let dir = tempfile::Builder::new().prefix("tessera-multihost-").tempdir().unwrap();
    let spec = ClusterSpec {
        osds: 4,
        mds: 1,
        placement: Placement::Hosts {
            mds: vec![topo.host("mds").clone()],
            osds: (0..4).map(|i| topo.host(&format!("osd{i}")).clone()).collect(),
        },
        stripe_unit: 64 << 10,
        stripe_count: 0,
        security: SecuritySpec::default(),
    };
    let cluster = LocalCluster::start_spec(tessera_exe(), dir.path(), &spec).expect("starting the daemons in their namespaces");

    // The cluster file names each daemon by its own host's address.
    let config = cluster.config();
    assert_eq!(config.mds[0].addr, format!("{}:{MDS_PORT}", topo.host("mds").addr));
    for (i, osd) in config.osds.iter().enumerate() {
        let host = topo.host(&format!("osd{i}"));
        assert!(osd.addr.starts_with(&format!("{}:", host.addr)), "osd{i} at {} not on {}", osd.addr, host.addr);
    }

    let client = topo.host("client");
    let file = cluster.cluster_file();
    let work = tempfile::tempdir().unwrap();
    // 64 KiB units over 4 OSDs: three full rows and a tail, so every OSD holds data.
    let data: Vec<u8> = (0..3 * 4 * (64 << 10) + 12_345u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    let local = work.path().join("in");
    let back = work.path().join("out");
    std::fs::write(&local, &data).unwrap();
    run_on(client, &file, &["put", local.to_str().unwrap(), "/across.bin"]);
    run_on(client, &file, &["get", "/across.bin", back.to_str().unwrap()]);
    assert!(std::fs::read(&back).unwrap() == data, "the file read back differs from the file written");

    let stripe = text(&run_on(client, &file, &["getstripe", "/across.bin"]));
    assert!(stripe.contains("stripe_count: 4"), "{stripe}");
    for osd in &config.osds {
        assert!(stripe.contains(&osd.addr), "getstripe does not show {}:\n{stripe}", osd.addr);
    }

    let status = text(&run_on(client, &file, &["status"]));
    let up: Vec<&str> = status.lines().filter(|l| l.split_whitespace().nth(2) == Some("up")).collect();
    assert_eq!(up.len(), 5, "every daemon should be up:\n{status}");
    for addr in std::iter::once(&config.mds[0].addr).chain(config.osds.iter().map(|o| &o.addr)) {
        assert!(up.iter().any(|l| l.contains(addr.as_str())), "{addr} not reported up:\n{status}");
    }

    // The client's host reaches the daemons only across the bridge: its own loopback has none.
    let lo = client.command("ip").args(["-4", "-o", "addr", "show"]).output().unwrap();
    let addrs = text(&lo);
    assert!(addrs.contains(&client.addr.to_string()) && !addrs.contains(&topo.host("mds").addr.to_string()), "{addrs}");

    cluster.stop().expect("stopping the daemons");
}
