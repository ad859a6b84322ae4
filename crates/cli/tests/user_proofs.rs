//! Goal: on a cluster with a user key (every `tessera up` cluster), a metadata server answers a
//! connection only for the user it proved, so a client cannot act for someone else by naming
//! them in its frames. Method: real `tessera mds` and `tessera osd` processes; a hostile
//! client (the metadata protocol driven by hand over TCP) with no proof, a proof without a
//! challenge, a forged proof, a tampered one, a good one replayed on another connection, and a
//! good proof for one user followed by frames naming another; the same server answering an
//! honest client of that user. Then the sealing that follows a proof: frames in the clear,
//! altered, replayed or sealed under another key end the connection with nothing done, and
//! a layout's capability keys never cross the wire in the clear.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use common::tessera_exe;
use tessera_cli::cluster::{ClusterSpec, LocalCluster};
use tessera_client::{Caller, Client, ClientError, ClusterConfig};
use tessera_mds_proto::identity::{Challenge, USER_KEY_LEN};
use tessera_mds_proto::request::NewInode;
use tessera_mds_proto::seal::End;
use tessera_mds_proto::{decode_frame, encode_request_frame, Frame, FsError, InodeId, MdsConnection, Message, Proof, Reply, Request, Seal, SessionKey, UserKey, FRAME_HEADER_LEN};

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

/// Sends `proof`; accepted, the connection is sealed under the session key `key` gives it.
fn authenticate(conn: &mut MdsConnection, key: &UserKey, proof: Proof) -> Result<(), FsError> {
    let session = key.session_key(&proof);
    conn.authenticate(proof, &session).unwrap()
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
    assert_eq!(authenticate(&mut conn, &key, key.prove(&root, &[0; 16])), Err(FsError::NotPermitted));

    // A proof made with another key, or altered: refused, and the connection stays unproven.
    let (mut conn, c) = challenged(&config, &root);
    assert_eq!(authenticate(&mut conn, &key, UserKey::from_bytes(&[7; USER_KEY_LEN]).prove(&root, &c)), Err(FsError::NotPermitted));
    assert_eq!(conn.call(&mkdir("by-forger", &root)).unwrap(), Err(FsError::NotPermitted));
    let (mut conn, c) = challenged(&config, &root);
    let tampered = Proof { caller: root.clone(), ..key.prove(&alice, &c) };
    assert_eq!(authenticate(&mut conn, &key, tampered), Err(FsError::NotPermitted), "alice's proof rewritten to name root");

    // A good proof read off one connection and replayed on another: refused there.
    let (mut first, c) = challenged(&config, &alice);
    let proof = key.prove(&alice, &c);
    let (mut second, _) = challenged(&config, &alice);
    assert_eq!(authenticate(&mut second, &key, proof.clone()), Err(FsError::NotPermitted));
    assert_eq!(second.call(&Request::StatFs).unwrap(), Err(FsError::NotPermitted));

    // On its own connection it proves alice: then frames naming root, or alice with a group
    // more, are refused; frames naming alice are hers.
    assert_eq!(authenticate(&mut first, &key, proof), Ok(()));
    assert!(first.is_sealed());
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

/// A raw TCP connection to metadata server 0, proven as `caller` by hand: the stream, and the
/// client's seal for every frame after the proof.
fn proven_raw(config: &ClusterConfig, key: &UserKey, caller: &Caller) -> (TcpStream, Seal) {
    let mut stream = TcpStream::connect(config.mds[0].addr.as_str()).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream.write_all(&encode_request_frame(1, caller, &Request::Challenge)).unwrap();
    let challenge = match decode_frame(&read_raw(&mut stream).expect("a challenge")).unwrap().message {
        Message::Reply(Ok(Reply::Challenge(c))) => c,
        other => panic!("Challenge answered {other:?}"),
    };
    let (proof, session) = key.prove_sealed(caller, &challenge);
    stream.write_all(&encode_request_frame(2, caller, &Request::Authenticate { proof })).unwrap();
    let accepted = decode_frame(&read_raw(&mut stream).expect("an answer to the proof")).unwrap().message;
    assert_eq!(accepted, Message::Reply(Ok(Reply::Sealed)), "the proof's answer, the last frame in the clear");
    (stream, Seal::new(&session, End::Client))
}

/// One frame as it crossed the wire (header and body), or `None` once the server has closed
/// the connection.
fn read_raw(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut header = [0u8; FRAME_HEADER_LEN];
    match stream.read_exact(&mut header) {
        Ok(()) => {}
        Err(e) if matches!(e.kind(), ErrorKind::UnexpectedEof | ErrorKind::ConnectionReset) => return None,
        Err(e) => panic!("reading a frame: {e}"),
    }
    let mut frame = header.to_vec();
    frame.resize(FRAME_HEADER_LEN + u32::from_be_bytes(header) as usize, 0);
    stream.read_exact(&mut frame[FRAME_HEADER_LEN..]).unwrap();
    Some(frame)
}

/// Opens a sealed reply read off the wire.
fn open(seal: &mut Seal, raw: &[u8]) -> Result<Reply, FsError> {
    let mut body = raw[FRAME_HEADER_LEN..].to_vec();
    seal.open_body(&mut body).expect("the server's reply opens");
    match Frame::decode_body(&body).unwrap().message {
        Message::Reply(r) => r,
        other => panic!("{other:?}"),
    }
}

fn sealed(seal: &mut Seal, id: u64, caller: &Caller, request: &Request) -> Vec<u8> {
    let mut frame = encode_request_frame(id, caller, request);
    seal.seal_frame(&mut frame);
    frame
}

/// Goal: after its proof a connection carries only frames sealed by its two ends, in order:
/// one in the clear, one sealed under another key, one altered and one replayed each end the
/// connection with nothing done; and the capability keys a create's reply carries (with which
/// anyone could act on the file's objects) are not on the wire. Method: the protocol driven
/// by hand over TCP against a real `tessera mds`.
#[test]
fn a_proven_connection_is_sealed_both_ways() {
    let dir = tempfile::Builder::new().prefix("tessera-proofs-").tempdir().unwrap();
    let cluster = start(dir.path());
    let config = cluster.config().clone();
    let key = key_of(&config);
    let root = Caller::ROOT;
    let admin = Client::connect(&config).unwrap();

    let (mut s, _) = proven_raw(&config, &key, &root);
    s.write_all(&encode_request_frame(3, &root, &mkdir("in-the-clear", &root))).unwrap();
    assert_eq!(read_raw(&mut s), None, "a frame in the clear after the proof ends the connection");

    let (mut s, _) = proven_raw(&config, &key, &root);
    let mut other_key = Seal::new(&SessionKey([1; 32]), End::Client);
    s.write_all(&sealed(&mut other_key, 3, &root, &mkdir("other-key", &root))).unwrap();
    assert_eq!(read_raw(&mut s), None, "a frame sealed under another key ends the connection");

    let (mut s, mut seal) = proven_raw(&config, &key, &root);
    let mut altered = sealed(&mut seal, 3, &root, &mkdir("altered", &root));
    altered[FRAME_HEADER_LEN + 20] ^= 1;
    s.write_all(&altered).unwrap();
    assert_eq!(read_raw(&mut s), None, "an altered frame ends the connection");

    let (mut s, mut seal) = proven_raw(&config, &key, &root);
    let once = sealed(&mut seal, 3, &root, &mkdir("once", &root));
    s.write_all(&once).unwrap();
    assert!(matches!(open(&mut seal, &read_raw(&mut s).unwrap()), Ok(Reply::Attr(_))), "a sealed request is answered, sealed");
    admin.rmdir("/once").unwrap();
    s.write_all(&once).unwrap();
    assert_eq!(read_raw(&mut s), None, "a replayed frame ends the connection");
    assert!(admin.lookup("/once").is_err(), "and is not run again");

    let (mut s, mut seal) = proven_raw(&config, &key, &root);
    let name = "a-name-only-the-two-ends-read";
    let create = Request::Create { parent: InodeId::ROOT, name: name.into(), new: NewInode { mode: 0o644, uid: 0, gid: 0 }, stripe: None };
    let request = sealed(&mut seal, 3, &root, &create);
    assert!(!contains(&request, name.as_bytes()), "names cross the wire sealed");
    s.write_all(&request).unwrap();
    let raw = read_raw(&mut s).unwrap();
    let Ok(Reply::Created { grant, .. }) = open(&mut seal, &raw) else { panic!("the create was not answered") };
    assert!(!grant.is_empty(), "a CMDRSP cluster grants capabilities with a create");
    for credential in &grant {
        assert!(!contains(&raw, &credential.key), "a capability key crossed the wire in the clear");
    }

    // Of everything sent above, only the sealed create and the sealed mkdir (removed) took effect.
    let names: Vec<String> = admin.readdir("/").unwrap().into_iter().map(|e| e.name).collect();
    assert_eq!(names, vec![name.to_string()]);
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}
