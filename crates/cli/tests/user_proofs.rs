//! Goal: on a cluster with a user key (every `tessera up` cluster), a metadata server answers a
//! connection only for the user it proved, so a client cannot act for someone else by naming
//! them in its frames. Method: real `tessera mds` and `tessera osd` processes; a hostile
//! client (the metadata protocol driven by hand over TCP) with no proof, a proof without a
//! challenge, a forged proof, a tampered one, a good one replayed on another connection, and a
//! good proof for one user followed by frames naming another; the same server answering an
//! honest client of that user.

mod common;

use std::path::Path;

use common::tessera_exe;
use tessera_cli::cluster::{ClusterSpec, LocalCluster};
use tessera_client::{Caller, Client, ClientError, ClusterConfig};
use tessera_mds_proto::identity::{Challenge, USER_KEY_LEN};
use tessera_mds_proto::request::NewInode;
use tessera_mds_proto::{FsError, InodeId, MdsConnection, Proof, Reply, Request, UserKey};

fn start(dir: &Path) -> LocalCluster {
    LocalCluster::start_spec(tessera_exe(), dir, &ClusterSpec::new(1)).expect("starting the cluster")
}

fn key_of(config: &ClusterConfig) -> UserKey {
    tessera_cli::cmd_mds::read_user_key(config.user_key_file.as_ref().expect("up names a user key")).unwrap()
}

/// A raw connection whose frames name `caller`, and the challenge it was sent.
fn challenged(config: &ClusterConfig, caller: &Caller) -> (MdsConnection, Challenge) {
    let mut conn = MdsConnection::connect(config.mds[0].addr.as_str()).unwrap().with_caller(caller.clone());
    match conn.call(&Request::Challenge).unwrap() {
        Ok(Reply::Challenge(c)) => (conn, c),
        other => panic!("Challenge answered {other:?}"),
    }
}

fn authenticate(conn: &mut MdsConnection, proof: Proof) -> Result<Reply, FsError> {
    conn.call(&Request::Authenticate { proof }).unwrap()
}

fn mkdir(name: &str, owner: &Caller) -> Request {
    Request::Mkdir { parent: InodeId::ROOT, name: name.into(), new: NewInode { mode: 0o755, uid: owner.uid, gid: owner.gid } }
}

#[test]
fn a_connection_acts_only_for_the_user_it_proved() {
    let dir = tempfile::Builder::new().prefix("tessera-proofs-").tempdir().unwrap();
    let cluster = start(dir.path());
    let config = cluster.config().clone();
    let key = key_of(&config);
    let alice = Caller { uid: 1000, gid: 1000, groups: vec![50] };
    let root = Caller::ROOT;

    // Nothing proven: refused, whoever the frames name.
    let mut conn = MdsConnection::connect(config.mds[0].addr.as_str()).unwrap().with_caller(root.clone());
    assert_eq!(conn.call(&mkdir("by-nobody", &root)).unwrap(), Err(FsError::NotPermitted));
    assert_eq!(conn.call(&Request::StatFs).unwrap(), Err(FsError::NotPermitted), "not even a read");
    // A proof made before any challenge was asked for.
    assert_eq!(authenticate(&mut conn, key.prove(&root, &[0; 16])), Err(FsError::NotPermitted));

    // A proof made with another key, or altered: refused, and the connection stays unproven.
    let (mut conn, c) = challenged(&config, &root);
    assert_eq!(authenticate(&mut conn, UserKey::from_bytes(&[7; USER_KEY_LEN]).prove(&root, &c)), Err(FsError::NotPermitted));
    assert_eq!(conn.call(&mkdir("by-forger", &root)).unwrap(), Err(FsError::NotPermitted));
    let (mut conn, c) = challenged(&config, &root);
    let tampered = Proof { caller: root.clone(), ..key.prove(&alice, &c) };
    assert_eq!(authenticate(&mut conn, tampered), Err(FsError::NotPermitted), "alice's proof rewritten to name root");

    // A good proof read off one connection and replayed on another: refused there.
    let (mut first, c) = challenged(&config, &alice);
    let proof = key.prove(&alice, &c);
    let (mut second, _) = challenged(&config, &alice);
    assert_eq!(authenticate(&mut second, proof.clone()), Err(FsError::NotPermitted));
    assert_eq!(second.call(&Request::StatFs).unwrap(), Err(FsError::NotPermitted));

    // On its own connection it proves alice: then frames naming root, or alice with a group
    // more, are refused; frames naming alice are hers.
    assert_eq!(authenticate(&mut first, proof), Ok(Reply::Done));
    let mut conn = first.with_caller(root.clone());
    assert_eq!(conn.call(&mkdir("as-root", &root)).unwrap(), Err(FsError::NotPermitted), "no switching users on a proven connection");
    let mut conn = conn.with_caller(Caller { groups: vec![50, 0], ..alice.clone() });
    assert_eq!(conn.call(&Request::StatFs).unwrap(), Err(FsError::NotPermitted), "nor adding a group");
    let mut conn = conn.with_caller(alice.clone());
    // The root directory is root's 0755: alice may not add to it, and is told so as alice.
    assert_eq!(conn.call(&mkdir("alices", &alice)).unwrap(), Err(FsError::Access));
    assert!(matches!(conn.call(&Request::StatFs).unwrap(), Ok(Reply::StatFs(_))));

    // Nothing refused above was made.
    let admin = Client::connect(&config).unwrap();
    assert!(admin.readdir("/").unwrap().is_empty(), "{:?}", admin.readdir("/"));

    // The library proves its user itself when it can read the key: root acts for alice.
    admin.mkdir("/home", 0o777).unwrap();
    let as_alice = Client::connect_for(&config, alice.clone()).unwrap();
    as_alice.mkdir("/home/alice", 0o700).unwrap();
    let a = admin.stat("/home/alice").unwrap();
    assert_eq!((a.uid, a.gid), (1000, 1000));
}

#[test]
fn a_client_that_cannot_prove_its_user_says_why() {
    let dir = tempfile::Builder::new().prefix("tessera-proofs-").tempdir().unwrap();
    let cluster = start(dir.path());
    let mut config = cluster.config().clone();
    // Neither the key nor an agent: refused before any request, naming the key.
    config.user_key_file = Some(dir.path().join("no-such.key"));
    config.user_agent_socket = None;
    let Err(err) = Client::connect(&config) else { panic!("connected without a usable proof") };
    assert!(matches!(err, ClientError::UserProof { .. }) && err.to_string().contains("no-such.key"), "{err}");
    // The agent proves the process's own user, so asking it to prove another is refused
    // here, before any server sees it.
    config.user_agent_socket = cluster.config().user_agent_socket.clone();
    let mut via_agent = config.clone();
    via_agent.user_key_file = None;
    let me = Client::connect(&via_agent).unwrap();
    assert_eq!(me.caller().uid, Caller::of_process().uid, "the agent proves this process");
    let Err(err) = Client::connect_for(&via_agent, Caller::user(4321, 4321)) else { panic!("the agent proved another user") };
    assert!(err.to_string().contains("agent proves this process is uid"), "{err}");
    // A key that is not the servers': the server refuses the proof and the error says so.
    let other = dir.path().join("other.key");
    std::fs::write(&other, format!("{}\n", "ab".repeat(USER_KEY_LEN))).unwrap();
    config.user_key_file = Some(other);
    let Err(err) = Client::connect(&config) else { panic!("connected without a usable proof") };
    assert!(err.to_string().contains("refused this client's proof of user"), "{err}");
}

/// Goal: `tessera agent` serves a client host's users with the cluster's key, and refuses a
/// key file others could read (they could prove anyone with it).
#[test]
fn a_separate_agent_proves_local_users_and_refuses_a_readable_key() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new().prefix("tessera-proofs-").tempdir().unwrap();
    let cluster = start(dir.path());
    let socket = dir.path().join("host-agent.sock");
    let agent = tessera_cli::daemon::Daemon::spawn_exe(tessera_exe(), &["agent", "--cluster", cluster.cluster_file().to_str().unwrap(), "--socket", socket.to_str().unwrap()]).expect("the agent starts");
    let mut config = cluster.config().clone();
    config.user_key_file = None;
    config.user_agent_socket = Some(socket.clone());
    let client = Client::connect(&config).unwrap();
    client.mkdir("/via-host-agent", 0o755).unwrap();
    drop(agent);

    let key = cluster.config().user_key_file.clone().unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = std::process::Command::new(tessera_exe())
        .args(["agent", "--cluster", cluster.cluster_file().to_str().unwrap(), "--socket", dir.path().join("x.sock").to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("user key file"), "{err}");
}
