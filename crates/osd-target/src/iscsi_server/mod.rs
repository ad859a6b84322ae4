//! The target's iSCSI server (RFC 7143): a listener thread accepts TCP connections; each
//! connection gets a reader thread (login, then every PDU the initiator sends: commands,
//! Data-Out, task management, NOP, text, logout) and, once in full feature phase, an executor
//! thread that runs the ready commands one at a time against the [`ScsiDevice`] and sends their
//! Data-In and status. Execution is serial per connection, so a command still queued or still
//! receiving Data-Out can really be aborted. One connection per session (MaxConnections=1); a
//! login with a live session's ISID reinstates it (reinstatement.rs).
//!
//! Blocking std threads, no async runtime: a target serves tens of initiators, and a thread per
//! connection keeps the data path (read into the task buffer, execute, writev the result) free
//! of any hand-off.

mod conn;
mod executor;
mod login;
mod mapped_send;
mod placed_pieces;
mod placement;
mod r2t;
mod reader;
mod reinstatement;
mod splice;

use std::collections::HashMap;
use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use tessera_iscsi::login::auth::ChapSecrets;
use tessera_iscsi::login::Offer;
use tessera_scsi::ScsiDevice;
use tessera_types::limits::SESSIONS_MAX;
use tracing::{debug, info, warn};

/// How the target is reached and what it offers at login.
#[derive(Clone, Debug)]
pub struct TargetConfig {
    /// The target's iSCSI name, e.g. `iqn.2026-11.org.tessera:osd0`.
    pub target_name: String,
    /// Where to listen, e.g. `0.0.0.0:3260` or `127.0.0.1:0`.
    pub portal: String,
    /// TargetAlias sent at login, if any.
    pub alias: Option<String>,
    /// Address reported in SendTargets (`ip:port`); by default the address the initiator
    /// connected to.
    pub advertised_address: Option<String>,
    /// The most the target accepts for each negotiable key (see [`Offer::default`]).
    pub offer: Offer,
    /// When set, every login (normal and discovery) must pass CHAP with these secrets
    /// (docs/security.md, "CHAP at login"); otherwise AuthMethod=None.
    pub chap: Option<ChapSecrets>,
    /// Normal sessions served at once (at most [`SESSIONS_MAX`]); a further login is refused
    /// with "out of resources", which initiators report rather than retry at once.
    pub sessions_max: usize,
}

impl TargetConfig {
    pub fn new(target_name: &str, portal: &str) -> Self {
        TargetConfig {
            target_name: target_name.to_string(),
            portal: portal.to_string(),
            alias: None,
            advertised_address: None,
            offer: Offer::default(),
            chap: None,
            sessions_max: SESSIONS_MAX,
        }
    }
}

/// Target portal group tag of our single portal group.
pub const PORTAL_GROUP_TAG: u16 = 1;

/// State every connection thread shares with the server.
pub(crate) struct ServerShared {
    pub config: TargetConfig,
    pub device: Arc<dyn ScsiDevice>,
    pub stopping: AtomicBool,
    /// Source of session ids (the TSIH is the low 16 bits, never 0).
    next_session_id: AtomicU64,
    pub sessions: AtomicUsize,
    /// Live normal sessions by initiator port, for reinstatement.
    pub ports: Arc<reinstatement::PortSessions>,
    /// Logins that replaced a live session of the same initiator port.
    pub reinstated: AtomicU64,
    /// Logins refused with Authentication failure.
    pub auth_failures: AtomicU64,
    /// Data-In PDUs whose data left by reference from an object's mapping (mapped_send.rs).
    pub spliced_data_in: AtomicU64,
    /// Clones of live sockets so that shutdown can close them.
    connections: Mutex<HashMap<u64, TcpStream>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl ServerShared {
    /// A new session id whose low 16 bits (the TSIH) are not 0 (RFC 7143 §11.12.6: TSIH 0 is
    /// reserved).
    pub fn allocate_session_id(&self) -> u64 {
        loop {
            let id = self.next_session_id.fetch_add(1, Ordering::Relaxed);
            if id & 0xFFFF != 0 {
                return id;
            }
        }
    }
}

pub struct TargetServer {
    listener: TcpListener,
    shared: Arc<ServerShared>,
}

impl TargetServer {
    pub fn bind(config: TargetConfig, device: Arc<dyn ScsiDevice>) -> io::Result<TargetServer> {
        let addrs: Vec<SocketAddr> = config.portal.to_socket_addrs()?.collect();
        let listener = TcpListener::bind(&addrs[..])?;
        Self::on(listener, config, device)
    }

    /// Serves on a socket already listening (one the process was handed, see `tessera osd
    /// --listen-fd`); `config.portal` is only what discovery answers if the socket cannot say.
    pub fn on(listener: TcpListener, config: TargetConfig, device: Arc<dyn ScsiDevice>) -> io::Result<TargetServer> {
        let auth = if config.chap.is_some() { "CHAP" } else { "None" };
        info!(portal = %listener.local_addr()?, target = %config.target_name, auth, "iSCSI target listening");
        let shared = Arc::new(ServerShared {
            config,
            device,
            stopping: AtomicBool::new(false),
            next_session_id: AtomicU64::new(1),
            sessions: AtomicUsize::new(0),
            ports: Arc::default(),
            reinstated: AtomicU64::new(0),
            auth_failures: AtomicU64::new(0),
            spliced_data_in: AtomicU64::new(0),
            connections: Mutex::new(HashMap::new()),
            threads: Mutex::new(Vec::new()),
        });
        Ok(TargetServer { listener, shared })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Accepts connections on a background thread.
    pub fn spawn(self) -> ServerHandle {
        let shared = self.shared.clone();
        let addr = self.listener.local_addr().ok();
        let thread = std::thread::Builder::new()
            .name("iscsi-accept".into())
            .spawn(move || self.serve())
            .expect("spawning the accept thread");
        ServerHandle { shared, addr, thread: Some(thread) }
    }

    /// Accepts connections on this thread until [`ServerHandle::shutdown`] (or forever).
    pub fn serve(self) {
        let mut next_conn_id: u64 = 0;
        for stream in self.listener.incoming() {
            if self.shared.stopping.load(Ordering::Acquire) {
                break;
            }
            let stream = match stream {
                Ok(s) => s,
                Err(e) if out_of_descriptors(&e) => {
                    // The connection waits in the backlog; accepting again at once would only
                    // fail again, as fast as the CPU allows.
                    warn!(error = %e, "accept failed: out of file descriptors; pausing new connections for {ACCEPT_PAUSE:?}");
                    std::thread::sleep(ACCEPT_PAUSE);
                    continue;
                }
                Err(e) => {
                    warn!(error = %e, "accept failed");
                    continue;
                }
            };
            next_conn_id += 1;
            let id = next_conn_id;
            // Registered before its thread starts, so that `shutdown` closes it.
            match clone_socket(&self.shared, &stream) {
                Ok(clone) => {
                    self.shared.connections.lock().expect("connections lock").insert(id, clone);
                }
                Err(e) => {
                    warn!(error = %e, "closing a new connection: no descriptor for it");
                    continue;
                }
            }
            let shared = self.shared.clone();
            let spawned = std::thread::Builder::new().name(format!("iscsi-conn-{id}")).spawn(move || {
                conn::run_connection(&shared, stream);
                shared.connections.lock().expect("connections lock").remove(&id);
            });
            match spawned {
                Ok(h) => {
                    let mut threads = self.shared.threads.lock().expect("threads lock");
                    threads.retain(|t| !t.is_finished());
                    threads.push(h);
                }
                Err(e) => warn!(error = %e, "cannot spawn connection thread"),
            }
        }
        debug!("accept loop finished");
    }
}

/// How long the listener rests when the process is out of file descriptors.
const ACCEPT_PAUSE: std::time::Duration = std::time::Duration::from_millis(50);

/// The longest an accepted connection waits for a descriptor it needs before it is closed.
const DESCRIPTOR_WAIT_MAX: std::time::Duration = std::time::Duration::from_secs(10);

/// EMFILE or ENFILE: no descriptor for the next connection until one is closed.
fn out_of_descriptors(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE))
}

/// A clone of an accepted connection's socket, waiting out a shortage of descriptors: retried
/// every [`ACCEPT_PAUSE`] for up to [`DESCRIPTOR_WAIT_MAX`], or until the server stops.
///
/// Why wait: Linux takes an accept's descriptor number before the call blocks, so a connection
/// arriving during a shortage is still accepted, and only its clones find no number left.
/// Closing it then would turn a passing shortage into a failed login; waiting leaves it as if
/// it were still in the backlog.
pub(crate) fn clone_socket(shared: &ServerShared, stream: &TcpStream) -> io::Result<TcpStream> {
    let deadline = std::time::Instant::now() + DESCRIPTOR_WAIT_MAX;
    let mut warned = false;
    loop {
        match stream.try_clone() {
            Err(e) if out_of_descriptors(&e) && std::time::Instant::now() < deadline && !shared.stopping.load(Ordering::Acquire) => {
                if !warned {
                    let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_default();
                    warn!(%peer, error = %e, "out of file descriptors: the connection waits for one (at most {DESCRIPTOR_WAIT_MAX:?})");
                    warned = true;
                }
                std::thread::sleep(ACCEPT_PAUSE);
            }
            other => return other,
        }
    }
}

/// Controls a server started with [`TargetServer::spawn`].
pub struct ServerHandle {
    shared: Arc<ServerShared>,
    addr: Option<SocketAddr>,
    thread: Option<JoinHandle<()>>,
}

impl ServerHandle {
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.addr
    }

    /// Logins refused so far because authentication failed.
    pub fn auth_failures(&self) -> u64 {
        self.shared.auth_failures.load(Ordering::Relaxed)
    }

    /// Sessions reinstated so far: logins that reused a live session's initiator port and
    /// replaced it once its tasks had ended.
    pub fn reinstated_sessions(&self) -> u64 {
        self.shared.reinstated.load(Ordering::Relaxed)
    }

    /// Data-In PDUs sent by reference from an object's mapping so far (list READs of large
    /// pieces: the pages handed to the socket, no copy on the target).
    pub fn spliced_data_in_pdus(&self) -> u64 {
        self.shared.spliced_data_in.load(Ordering::Relaxed)
    }

    /// Stops accepting, closes every connection and waits for all server threads.
    pub fn shutdown(mut self) {
        self.stop();
    }

    /// Waits for the accept thread (which runs until `shutdown` from elsewhere, i.e. forever).
    pub fn join(mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    fn stop(&mut self) {
        if self.shared.stopping.swap(true, Ordering::AcqRel) {
            return;
        }
        // Wake the blocking accept with a connection of our own.
        if let Some(addr) = self.addr {
            let mut wake = addr;
            if wake.ip().is_unspecified() {
                wake.set_ip(if wake.is_ipv4() { [127, 0, 0, 1].into() } else { std::net::Ipv6Addr::LOCALHOST.into() });
            }
            let _ = TcpStream::connect(wake);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        for (_, s) in self.shared.connections.lock().expect("connections lock").drain() {
            let _ = s.shutdown(Shutdown::Both);
        }
        let threads: Vec<_> = self.shared.threads.lock().expect("threads lock").drain(..).collect();
        for t in threads {
            let _ = t.join();
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.stop();
    }
}
