//! How this client proves which user it acts for, on a cluster whose metadata servers ask
//! (`tessera_mds_proto::identity`, docs/security.md "Users"). Each new connection is sent a
//! challenge and answers it with a proof. The cluster file names the user key and the agent's
//! socket: a process that can read the key makes its own proofs, for any user (the superuser,
//! the cluster's owner); any other process asks the agent, which proves the uid and gid the
//! kernel reports for it, and only those.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tessera_mds_proto::identity::{Challenge, CHALLENGE_LEN};
use tessera_mds_proto::wire::Reader;
use tessera_mds_proto::{Caller, ConnectionError, FsError, MdsConnection, Proof, SessionKey, UserKey};

use crate::config::ClusterConfig;
use crate::error::{ClientError, MdsLinkError};

/// Longest answer an agent may send: a proof with every group a caller may have, and a
/// session key.
const AGENT_REPLY_MAX: usize = 512;
/// How long an agent may take to answer.
const AGENT_TIMEOUT: Duration = Duration::from_secs(5);

enum Source {
    /// The servers believe callers: nothing to prove.
    Believed,
    Key(UserKey),
    Agent(PathBuf),
}

/// Proves one caller to each new metadata connection, when the servers ask.
pub struct Prover {
    source: Source,
    caller: Caller,
}

impl Prover {
    /// The prover for `caller` under `config`, and the caller the servers will see: an agent
    /// proves the process's own uid and gid with the groups the kernel reports, so a client
    /// that asked for another user is refused here, and its groups become the agent's.
    pub fn new(config: &ClusterConfig, caller: Caller) -> Result<(Prover, Caller), ClientError> {
        let source = match (&config.user_key_file, &config.user_agent_socket) {
            (None, None) => Source::Believed,
            (None, Some(agent)) => Source::Agent(agent.clone()),
            (Some(key), agent) => match (read_key(key), agent) {
                (Ok(key), _) => Source::Key(key),
                // The key is its owner's: everyone else asks the agent.
                (Err(e), Some(agent)) if e.kind() == std::io::ErrorKind::PermissionDenied => Source::Agent(agent.clone()),
                (Err(e), agent) => {
                    let reason = format!("cannot read the user key {}: {e}{}", key.display(), if agent.is_some() { "" } else { ", and the cluster file names no agent" });
                    return Err(ClientError::UserProof { reason });
                }
            },
        };
        let mut prover = Prover { source, caller };
        if let Source::Agent(socket) = &prover.source {
            // Who the agent says this process is, asked once now (with a challenge no server
            // sent, so the answer proves nothing anywhere).
            let proven = ask_agent(socket, &[0; CHALLENGE_LEN])?.0.caller;
            if (proven.uid, proven.gid) != (prover.caller.uid, prover.caller.gid) {
                let reason = format!(
                    "asked to act for uid {} gid {}, but the agent proves this process is uid {} gid {} (only a process that can read the user key acts for others)",
                    prover.caller.uid, prover.caller.gid, proven.uid, proven.gid
                );
                return Err(ClientError::UserProof { reason });
            }
            prover.caller = proven;
        }
        let caller = prover.caller.clone();
        Ok((prover, caller))
    }

    /// The user this prover proves.
    pub fn caller(&self) -> &Caller {
        &self.caller
    }

    /// How the servers know who this client acts for, in words (`tessera whoami`).
    pub fn describe(&self) -> String {
        match &self.source {
            Source::Believed => "believed: this cluster's metadata servers do not ask for proof".into(),
            Source::Key(_) => "proven with the cluster's user key; metadata connections sealed".into(),
            Source::Agent(socket) => format!("proven by the user agent at {}; metadata connections sealed", socket.display()),
        }
    }

    /// A new connection to metadata server `index` at `addr`, whose requests are sent for this
    /// prover's caller, proven first (a challenge, then a proof for it) when the servers ask,
    /// and then sealed (`tessera_mds_proto::seal`); `timeout` bounds the connect and each
    /// reply (the connection's default otherwise).
    pub fn open(&self, index: u32, addr: &str, timeout: Option<Duration>) -> Result<MdsConnection, ClientError> {
        let link_error = |source: MdsLinkError| ClientError::Mds { server: index, addr: addr.to_string(), source };
        let connected = match timeout {
            Some(t) => MdsConnection::connect_with_timeout(addr, t),
            None => MdsConnection::connect(addr),
        };
        let mut link = connected.map(|c| c.with_caller(self.caller.clone())).map_err(|e| link_error(ConnectionError::from(e).into()))?;
        if matches!(self.source, Source::Believed) {
            return Ok(link);
        }
        let Ok(challenge) = link.challenge().map_err(|e| link_error(e.into()))? else {
            return Err(link_error(MdsLinkError::ProofRefused { uid: self.caller.uid }));
        };
        let (proof, session) = self.prove(&challenge)?;
        match link.authenticate(proof, &session).map_err(|e| link_error(e.into()))? {
            Ok(()) => Ok(link),
            Err(FsError::Protocol) => Err(link_error(MdsLinkError::NotSealed)),
            Err(_) => Err(link_error(MdsLinkError::ProofRefused { uid: self.caller.uid })),
        }
    }

    fn prove(&self, challenge: &Challenge) -> Result<(Proof, SessionKey), ClientError> {
        match &self.source {
            Source::Key(key) => Ok(key.prove_sealed(&self.caller, challenge)),
            Source::Agent(socket) => ask_agent(socket, challenge),
            Source::Believed => unreachable!("nothing is proven to servers that believe their callers"),
        }
    }
}

/// The user key at `path` (64 hex digits, as every Tessera key file). Its mode is checked by
/// the servers and agents that hold it; a client that can read it may use it.
fn read_key(path: &Path) -> std::io::Result<UserKey> {
    let text = std::fs::read_to_string(path)?;
    let key = tessera_security::Key::from_hex(&text)
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidData, "it must hold a 32-byte key as 64 hex digits"))?;
    Ok(UserKey::from_bytes(key.bytes()))
}

/// A proof for `challenge` from the agent listening on `socket`, and the key the connection
/// is sealed under once the server accepts it.
fn ask_agent(socket: &Path, challenge: &Challenge) -> Result<(Proof, SessionKey), ClientError> {
    let failed = |what: &str, e: std::io::Error| ClientError::UserProof { reason: format!("the user agent at {}: {what}: {e}", socket.display()) };
    let mut stream = UnixStream::connect(socket).map_err(|e| failed("cannot connect (is the cluster's metadata server 0 running?)", e))?;
    stream.set_read_timeout(Some(AGENT_TIMEOUT)).map_err(|e| failed("setting a timeout", e))?;
    stream.set_write_timeout(Some(AGENT_TIMEOUT)).map_err(|e| failed("setting a timeout", e))?;
    stream.write_all(challenge).map_err(|e| failed("sending the challenge", e))?;
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).map_err(|e| failed("no answer", e))?;
    let len = u32::from_be_bytes(len) as usize;
    if len > AGENT_REPLY_MAX {
        return Err(ClientError::UserProof { reason: format!("the user agent at {} announced a {len}-byte proof (at most {AGENT_REPLY_MAX})", socket.display()) });
    }
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).map_err(|e| failed("a short answer", e))?;
    let mut r = Reader::new(&body);
    let proof = Proof::decode(&mut r).map_err(|e| ClientError::UserProof { reason: format!("the user agent at {} sent a malformed proof: {e}", socket.display()) })?;
    let session = r.array().map(SessionKey).map_err(|e| ClientError::UserProof { reason: format!("the user agent at {} sent no session key after its proof: {e}", socket.display()) })?;
    if r.remaining() != 0 {
        return Err(ClientError::UserProof { reason: format!("the user agent at {} sent {} bytes after its proof and session key", socket.display(), r.remaining()) });
    }
    Ok((proof, session))
}

/// A connection to metadata server `index` of `config` for this process's own user, proven
/// when the servers ask: for tools and tests that send requests by hand.
pub fn open_mds(config: &ClusterConfig, index: u32, timeout: Option<Duration>) -> Result<MdsConnection, ClientError> {
    let addr = config.mds.get(index as usize).ok_or_else(|| ClientError::UnknownIndex {
        path: String::new(),
        what: "metadata server",
        index,
        configured: config.mds.len(),
    })?;
    let (prover, _) = Prover::new(config, Caller::of_process())?;
    prover.open(index, &addr.addr, timeout)
}
