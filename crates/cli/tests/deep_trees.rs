//! Goal: the tree commands (`mkdir -p`, `chmod -R`, `cp -r`, `put -r`, `get -r`, `rm -r`, `ls -R`) cost
//! a number of metadata requests linear in a tree's depth, and do the right thing at depth.
//! Walking each path from the root costs d²/2 lookups for a chain of depth d (6.8 s at depth
//! 400 before the walks held directory handles).
//! Method: a real cluster (one `tessera mds`, one `tessera osd`); the commands' own functions
//! run in this process on a `Client`, whose request counter says what each cost, on chains of
//! two depths; the results checked through the `tessera` command and the local file system.

mod common;

use common::{run, tessera_exe};
use tessera_cli::cluster::{ClusterSpec, LocalCluster};
use tessera_cli::fs::{copy, namespace, tree_attrs, trees};
use tessera_client::Client;

/// `/top/d1/.../d{depth-1}`.
fn chain(top: &str, depth: usize) -> String {
    let mut path = top.to_string();
    for i in 1..depth {
        path.push_str(&format!("/d{i}"));
    }
    path
}

/// Metadata requests `f` sends.
fn requests(client: &Client, f: impl FnOnce()) -> u64 {
    let before = client.mds_requests();
    f();
    client.mds_requests() - before
}

#[test]
fn tree_commands_cost_requests_linear_in_depth() {
    let dir = tempfile::Builder::new().prefix("tessera-deep-").tempdir().unwrap();
    let cluster = LocalCluster::start_spec(tessera_exe(), dir.path(), &ClusterSpec::new(1)).unwrap();
    let client = Client::connect(cluster.config()).unwrap();
    let file = cluster.cluster_file();
    let local = dir.path().join("local");
    let mut costs = Vec::new();
    for depth in [40usize, 160] {
        let top = format!("/t{depth}");
        let deepest = chain(&top, depth);
        let mkdir = requests(&client, || namespace::make_parents(&client, &deepest, 0o755, 0o755).unwrap());
        client.create(&format!("{deepest}/f"), 0o644, None).unwrap().pwrite(0, b"deep").unwrap();
        let chmod = requests(&client, || {
            let changes = |_: &tessera_client::Attr| tessera_client::SetAttrs { mode: Some(0o750), ..Default::default() };
            tree_attrs::below(&client, &top, tree_attrs::Links::Skip, &changes).unwrap()
        });
        assert_eq!(client.stat(&format!("{deepest}/f")).unwrap().mode & 0o777, 0o750, "chmod -R reached the bottom");
        client.chmod(&format!("{deepest}/f"), 0o644).unwrap();
        let cp = requests(&client, || copy::copy_tree(&client, &top, &format!("{top}c"), 0o755, 4).unwrap());
        let get = requests(&client, || trees::get_tree(&client, &top, &local, 4, &mut Default::default()).unwrap());
        let put = requests(&client, || trees::put_tree(&client, &local, &format!("{top}p"), 4, &mut Default::default()).unwrap());
        std::fs::remove_dir_all(&local).unwrap();
        // Every copy holds the chain and the file at its bottom.
        for copy in [format!("{top}c"), format!("{top}p")] {
            let out = run(&["cat", &format!("{}/f", chain(&copy, depth))], Some(&file));
            assert_eq!(out.stdout, b"deep", "{copy}: {}", String::from_utf8_lossy(&out.stderr));
            let listed = run(&["ls", "-R", &copy], Some(&file));
            assert!(listed.status.success());
            let headers = String::from_utf8_lossy(&listed.stdout).lines().filter(|l| l.ends_with(':')).count();
            assert_eq!(headers, depth, "ls -R {copy} heads every directory of the chain");
        }
        let rm = requests(&client, || {
            for t in [top.clone(), format!("{top}c"), format!("{top}p")] {
                namespace::remove(&client, &t, true, 4).unwrap();
            }
        });
        assert!(client.readdir("/").unwrap().is_empty(), "rm -r took every tree");
        costs.push((depth, [("mkdir -p", mkdir), ("chmod -R", chmod), ("cp -r", cp), ("get -r", get), ("put -r", put), ("rm -r x3", rm)]));
    }
    // Linear: four times the depth costs about four times the requests (a walk from the root
    // per directory would cost sixteen times as many). Per level, a handful each.
    eprintln!("metadata requests by depth: {costs:?}");
    let (shallow, deep) = (&costs[0], &costs[1]);
    for ((what, few), (_, many)) in shallow.1.iter().zip(deep.1.iter()) {
        assert!(*many <= 5 * few, "{what}: {few} requests at depth {}, {many} at depth {}: {costs:?}", shallow.0, deep.0);
        assert!(*many <= 12 * deep.0 as u64, "{what}: {many} requests at depth {}: {costs:?}", deep.0);
    }
}
