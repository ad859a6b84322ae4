//! The user agent: proves to the metadata servers which user a local process is, for
//! processes that cannot read the cluster's user key (`tessera_mds_proto::identity`). It
//! listens on a unix socket that any local user may connect to, asks the kernel who connected
//! (SO_PEERCRED: the effective uid and gid at connect time, which the process cannot choose),
//! reads that process's supplementary groups from /proc, and proves that caller for the
//! metadata server's challenge the process passes on, with the key that connection will be
//! sealed under (`tessera_mds_proto::seal`; it is bound to that caller and challenge, so it
//! seals only the process's own connection):
//!
//! ```text
//! asked:    0  the challenge (16)
//! answered: 0  length of what follows (4, big-endian)   4  the proof (`Proof::encode`)   then the session key (32)
//! ```
//!
//! Metadata server 0 of a local cluster runs one (`tessera mds --agent-socket`); a client host
//! of a multi-host install runs `tessera agent`.

use std::io::{self, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::io::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::thread::JoinHandle;
use std::time::Duration;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tessera_mds_proto::identity::Challenge;
use tessera_mds_proto::limits::GROUPS_MAX;
use tessera_mds_proto::wire::Writer;
use tessera_mds_proto::{Caller, UserKey};

/// How long a client may take to send its challenge, or to read its proof.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(2);
/// Connections answered at once (a thread each); more are closed at once, so no local user
/// can exhaust the agent's host by connecting and staying silent.
const CONCURRENT_MAX: usize = 64;

/// Binds the agent's socket at `path`, open to every local user. A socket file left by an
/// agent that is gone is replaced; one an agent still answers on is not.
pub fn bind(path: &Path) -> io::Result<UnixListener> {
    if path.exists() {
        if UnixStream::connect(path).is_ok() {
            return Err(io::Error::new(io::ErrorKind::AddrInUse, format!("a user agent already answers at {}", path.display())));
        }
        std::fs::remove_file(path)?;
    }
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666))?;
    Ok(listener)
}

/// Serves proofs on `listener` from a thread of its own, for as long as the process lives.
pub fn spawn(listener: UnixListener, key: UserKey) -> io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name("user-agent".into()).spawn(move || serve(listener, key))
}

/// Answers every connection, each on a thread of its own, so a client that stays silent holds
/// up no other.
pub fn serve(listener: UnixListener, key: UserKey) {
    let busy = Arc::new(AtomicUsize::new(0));
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        if busy.fetch_add(1, Ordering::AcqRel) >= CONCURRENT_MAX {
            busy.fetch_sub(1, Ordering::AcqRel);
            tracing::warn!("user agent: {CONCURRENT_MAX} connections already waiting; one closed unanswered");
            continue;
        }
        let (key, done) = (key.clone(), busy.clone());
        let spawned = std::thread::Builder::new().name("user-agent-conn".into()).spawn(move || {
            match answer(stream, &key) {
                Ok(caller) => tracing::debug!(uid = caller.uid, gid = caller.gid, "proved a local user"),
                Err(e) => tracing::warn!(%e, "user agent: a request failed"),
            }
            done.fetch_sub(1, Ordering::AcqRel);
        });
        if spawned.is_err() {
            busy.fetch_sub(1, Ordering::AcqRel);
            tracing::warn!("user agent: no thread for a connection; closed unanswered");
        }
    }
}

fn answer(mut stream: UnixStream, key: &UserKey) -> io::Result<Caller> {
    stream.set_read_timeout(Some(CLIENT_TIMEOUT))?;
    stream.set_write_timeout(Some(CLIENT_TIMEOUT))?;
    let caller = peer_caller(&stream)?;
    let mut challenge = Challenge::default();
    stream.read_exact(&mut challenge)?;
    let (proof, session) = key.prove_sealed(&caller, &challenge);
    let mut w = Writer::default();
    proof.encode(&mut w);
    w.bytes(&session.0);
    let mut reply = (w.buf.len() as u32).to_be_bytes().to_vec();
    reply.extend_from_slice(&w.buf);
    stream.write_all(&reply)?;
    Ok(caller)
}

/// Who is at the other end of `stream`, by the kernel's word.
pub fn peer_caller(stream: &UnixStream) -> io::Result<Caller> {
    let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` is a ucred and `len` its size, as SO_PEERCRED expects.
    let rc = unsafe { libc::getsockopt(stream.as_raw_fd(), libc::SOL_SOCKET, libc::SO_PEERCRED, (&mut cred as *mut libc::ucred).cast(), &mut len) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let groups = std::fs::read_to_string(format!("/proc/{}/status", cred.pid)).map(|s| groups_of(&s, cred.gid)).map_err(|e| {
        io::Error::new(e.kind(), format!("reading the groups of pid {} (uid {}): {e}", cred.pid, cred.uid))
    })?;
    Ok(Caller { uid: cred.uid, gid: cred.gid, groups })
}

/// The supplementary groups in a /proc/PID/status text, as `Caller::of_process` sends them:
/// without the primary group, at most [`GROUPS_MAX`].
fn groups_of(status: &str, gid: u32) -> Vec<u32> {
    let line = status.lines().find_map(|l| l.strip_prefix("Groups:")).unwrap_or("");
    let mut groups: Vec<u32> = line.split_whitespace().filter_map(|g| g.parse().ok()).filter(|&g| g != gid).collect();
    groups.truncate(GROUPS_MAX);
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_come_from_the_status_line_without_the_primary_group() {
        let status = "Name:\tx\nUid:\t1000\t1000\t1000\t1000\nGroups:\t4 24 1000 50 \nVmPeak:\t1 kB\n";
        assert_eq!(groups_of(status, 1000), vec![4, 24, 50]);
        assert_eq!(groups_of("Groups:\t\n", 0), Vec::<u32>::new());
        let many: String = (0..40).map(|g| format!("{g} ")).collect();
        assert_eq!(groups_of(&format!("Groups:\t{many}\n"), 1000).len(), GROUPS_MAX);
    }

    #[test]
    fn the_kernel_names_the_connecting_process() {
        let (a, _b) = UnixStream::pair().unwrap();
        let me = peer_caller(&a).unwrap();
        assert_eq!(me, Caller::of_process(), "this process, as it would describe itself");
    }
}
