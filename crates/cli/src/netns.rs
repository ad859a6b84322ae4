//! Test hosts on one machine: one network namespace per host, each joined by a veth pair to a
//! bridge that lives in a namespace of its own, so the root namespace's interfaces and routes
//! are never touched and two runs never share a wire.
//!
//! ```text
//! <run>-br      br0 ─┬─ p0 ══ veth ══ eth0  <run>-osd0     10.203.0.2/24
//!                    ├─ p1 ══ veth ══ eth0  <run>-osd1     10.203.0.3/24
//!                    └─ ...
//! ```
//!
//! A host may have a link rate: a `tc tbf` on both ends of its veth (what it sends leaves its
//! own `eth0`, what it receives leaves the bridge port), like a full-duplex link of that rate.
//! Daemons run inside with `ip netns exec` ([`Host::command`]); a thread of this process can
//! step inside with [`Host::enter`] (sockets belong to the namespace they were created in).
//!
//! Namespace names are `tessera-<pid>-<seq>-<host>`. Dropping the [`Topology`] kills what still
//! runs inside and deletes every namespace (the veths and the bridge go with them), also while
//! a panic unwinds; a process killed outright leaves its namespaces behind, and the next
//! [`Topology::build`] removes those of processes that no longer exist.

use std::ffi::OsStr;
use std::fs::File;
use std::io::Write;
use std::marker::PhantomData;
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

use anyhow::{bail, Context, Result};

use crate::units::Rate;

/// Every run's hosts share this /24 on their own bridge (runs are separate layer-2 domains).
const SUBNET: [u8; 3] = [10, 203, 0];
/// Host addresses start at .2 (.1 is left free, as for a gateway).
const FIRST_HOST: u8 = 2;
const NAME_PREFIX: &str = "tessera-";
/// Where `ip netns add` mounts a namespace.
const NETNS_DIR: &str = "/var/run/netns";

static NEXT_RUN: AtomicU32 = AtomicU32::new(0);

/// One host to create: a name (unique in the topology, up to 15 characters) and an optional
/// link rate.
#[derive(Clone, Debug)]
pub struct HostSpec {
    pub name: String,
    pub rate: Option<Rate>,
}

impl HostSpec {
    pub fn new(name: &str) -> HostSpec {
        HostSpec { name: name.to_string(), rate: None }
    }

    pub fn with_rate(name: &str, rate: Rate) -> HostSpec {
        HostSpec { name: name.to_string(), rate: Some(rate) }
    }
}

/// One host of a [`Topology`]; valid while the topology lives.
#[derive(Clone, Debug)]
pub struct Host {
    pub name: String,
    pub netns: String,
    pub addr: Ipv4Addr,
    pub rate: Option<Rate>,
}

impl Host {
    /// `ip netns exec <netns> <program>`: add arguments and spawn as usual. `ip` enters the
    /// namespace and execs the program, so the child's pid is the program's.
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.netns]).arg(program);
        cmd
    }

    /// Moves the calling thread into this host's namespace until the guard drops. Sockets
    /// created meanwhile, and threads spawned meanwhile, belong to this host.
    pub fn enter(&self) -> Result<Entered> {
        let home = File::open("/proc/thread-self/ns/net").context("opening this thread's network namespace")?;
        let path = format!("{NETNS_DIR}/{}", self.netns);
        let target = File::open(&path).with_context(|| format!("opening {path}"))?;
        set_netns(&target).with_context(|| format!("entering network namespace {}", self.netns))?;
        Ok(Entered { home, _same_thread: PhantomData })
    }
}

/// The calling thread is inside a host's namespace; dropping returns it home.
pub struct Entered {
    home: File,
    /// Namespaces are per thread: the guard must drop on the thread that entered.
    _same_thread: PhantomData<*const ()>,
}

impl Drop for Entered {
    fn drop(&mut self) {
        if let Err(e) = set_netns(&self.home) {
            // A thread left in a test namespace would create its next sockets there.
            panic!("cannot return to the original network namespace: {e}");
        }
    }
}

fn set_netns(ns: &File) -> std::io::Result<()> {
    // SAFETY: setns(2) on an open namespace file descriptor; affects only the calling thread.
    if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Hosts on one bridge; everything is removed on drop.
pub struct Topology {
    run: String,
    bridge_ns: String,
    hosts: Vec<Host>,
    /// Namespaces created so far (the bridge's first), for cleanup.
    created: Vec<String>,
}

/// Whether this process can build topologies: tries once (a namespace, a veth pair into it, a
/// bridge, a tbf qdisc) and remembers the answer. The error is the reason, for a skip message.
pub fn available() -> std::result::Result<(), String> {
    static ANSWER: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    ANSWER
        .get_or_init(|| {
            Topology::build(&[HostSpec::with_rate("probe", Rate::from_bits_per_sec(1_000_000_000))])
                .map(drop)
                .map_err(|e| format!("{e:#}"))
        })
        .clone()
}

impl Topology {
    /// Creates the bridge namespace and one namespace per host, addressed .2, .3, ... in order.
    pub fn build(specs: &[HostSpec]) -> Result<Topology> {
        if specs.len() > 250 {
            bail!("{} hosts do not fit one /24", specs.len());
        }
        remove_stale();
        let run = format!("{NAME_PREFIX}{}-{}", std::process::id(), NEXT_RUN.fetch_add(1, Ordering::Relaxed));
        let bridge_ns = format!("{run}-br");
        let mut topo = Topology { run, bridge_ns: bridge_ns.clone(), hosts: Vec::new(), created: Vec::new() };
        ip(&["netns", "add", &bridge_ns])?;
        topo.created.push(bridge_ns.clone());
        ip(&["-n", &bridge_ns, "link", "add", "br0", "type", "bridge"])?;
        ip(&["-n", &bridge_ns, "link", "set", "br0", "up"])?;
        for (i, spec) in specs.iter().enumerate() {
            let host = topo.add_host(i, spec)?;
            topo.hosts.push(host);
        }
        Ok(topo)
    }

    fn add_host(&mut self, i: usize, spec: &HostSpec) -> Result<Host> {
        if spec.name.is_empty() || spec.name.len() > 15 || !spec.name.chars().all(|c| c.is_ascii_alphanumeric()) {
            bail!("host name {:?}: use 1 to 15 letters and digits", spec.name);
        }
        if self.hosts.iter().any(|h| h.name == spec.name) {
            bail!("two hosts named {}", spec.name);
        }
        let netns = format!("{}-{}", self.run, spec.name);
        let addr = Ipv4Addr::new(SUBNET[0], SUBNET[1], SUBNET[2], FIRST_HOST + i as u8);
        let port = format!("p{i}");
        let br = self.bridge_ns.as_str();
        ip(&["netns", "add", &netns])?;
        self.created.push(netns.clone());
        ip(&["-n", &netns, "link", "set", "lo", "up"])?;
        ip(&["-n", br, "link", "add", &port, "type", "veth", "peer", "name", "eth0", "netns", &netns])?;
        ip(&["-n", br, "link", "set", &port, "master", "br0", "up"])?;
        ip(&["-n", &netns, "addr", "add", &format!("{addr}/24"), "dev", "eth0"])?;
        ip(&["-n", &netns, "link", "set", "eth0", "up"])?;
        if let Some(rate) = spec.rate {
            limit(&netns, "eth0", rate)?;
            limit(br, &port, rate)?;
        }
        Ok(Host { name: spec.name.clone(), netns, addr, rate: spec.rate })
    }

    pub fn hosts(&self) -> &[Host] {
        &self.hosts
    }

    /// The host called `name`.
    pub fn host(&self, name: &str) -> &Host {
        self.hosts.iter().find(|h| h.name == name).unwrap_or_else(|| panic!("no host {name} in this topology"))
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        for ns in self.created.iter().rev() {
            remove_namespace(ns);
        }
    }
}

/// `tc tbf` on `dev`'s egress. The bucket holds 1 ms of traffic but at least 128 KiB, so one
/// 64 KiB GSO packet always fits; the queue holds 20 ms, which TCP keeps short on its own.
fn limit(netns: &str, dev: &str, rate: Rate) -> Result<()> {
    let burst = (rate.bytes_per_sec() / 1000).max(128 << 10);
    let output = Command::new("tc")
        .args(["-n", netns, "qdisc", "add", "dev", dev, "root", "tbf"])
        .args(["rate", &format!("{}bit", rate.bits_per_sec())])
        .args(["burst", &burst.to_string(), "latency", "20ms"])
        .output()
        .context("running tc (install iproute2)")?;
    if !output.status.success() {
        bail!("tc qdisc add dev {dev} (namespace {netns}) tbf: {}", String::from_utf8_lossy(&output.stderr).trim());
    }
    Ok(())
}

fn ip(args: &[&str]) -> Result<()> {
    let output = Command::new("ip").args(args).output().context("running ip (install iproute2)")?;
    if !output.status.success() {
        bail!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&output.stderr).trim());
    }
    Ok(())
}

/// Kills every process still inside `ns` (only Tessera daemons a topology started run there)
/// and deletes it.
fn remove_namespace(ns: &str) {
    if let Ok(out) = Command::new("ip").args(["netns", "pids", ns]).output() {
        for pid in String::from_utf8_lossy(&out.stdout).split_whitespace().filter_map(|p| p.parse::<u32>().ok()) {
            crate::daemon::signal(pid, libc::SIGKILL);
        }
    }
    let _ = Command::new("ip").args(["netns", "del", ns]).output();
}

/// Removes namespaces that a process of this program left behind when it was killed outright
/// (its pid, the first field after the prefix, no longer exists).
fn remove_stale() {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else { return };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        let Some(pid) = name.strip_prefix(NAME_PREFIX).and_then(|rest| rest.split('-').next()).and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            remove_namespace(name);
        }
    }
}

/// For tests that need namespaces: true when they can be built. Otherwise prints
/// `SKIPPED: network namespaces unavailable: <reason>` and returns false, or panics when the
/// `CI` variable is set (CI runs as root with namespaces: a skip there would hide a failure).
pub fn available_or_skip(test: &str) -> bool {
    match available() {
        Ok(()) => true,
        Err(reason) if std::env::var_os("CI").is_some() => panic!("{test}: network namespaces unavailable under CI: {reason}"),
        Err(reason) => {
            // Straight to the stream, not through `eprintln!`, which the test harness captures
            // for passing tests: the skip must show in the test command's output.
            let _ = writeln!(std::io::stderr(), "SKIPPED: network namespaces unavailable: {reason} ({test})");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    use super::*;

    fn namespaces_of_this_process() -> Vec<String> {
        let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
        let me = format!("{NAME_PREFIX}{}-", std::process::id());
        String::from_utf8_lossy(&out.stdout).lines().filter(|l| l.starts_with(&me)).map(String::from).collect()
    }

    #[test]
    fn hosts_reach_each_other_over_the_bridge_and_vanish_on_drop() {
        if !available_or_skip("hosts_reach_each_other_over_the_bridge_and_vanish_on_drop") {
            return;
        }
        let topo = Topology::build(&[HostSpec::new("a"), HostSpec::with_rate("b", "100mbit".parse().unwrap())]).unwrap();
        let (a, b) = (topo.host("a").clone(), topo.host("b").clone());
        assert_ne!(a.addr, b.addr);
        let listener = {
            let _in_a = a.enter().unwrap();
            TcpListener::bind((a.addr, 0)).unwrap()
        };
        // The root namespace has no such address: binding it here fails.
        assert!(TcpListener::bind((a.addr, 0)).is_err(), "{} is visible outside its namespace", a.addr);
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut s, peer) = listener.accept().unwrap();
            let mut buf = [0u8; 5];
            s.read_exact(&mut buf).unwrap();
            s.write_all(&buf).unwrap();
            peer
        });
        let mut conn = {
            let _in_b = b.enter().unwrap();
            TcpStream::connect((a.addr, port)).unwrap()
        };
        conn.write_all(b"hello").unwrap();
        let mut back = [0u8; 5];
        conn.read_exact(&mut back).unwrap();
        assert_eq!(&back, b"hello");
        assert_eq!(server.join().unwrap().ip(), b.addr, "the connection came from host b's address");
        // `ip netns exec` runs a program inside: it sees eth0 with its own address.
        let shown = b.command("ip").args(["-4", "-o", "addr", "show", "dev", "eth0"]).output().unwrap();
        assert!(String::from_utf8_lossy(&shown.stdout).contains(&b.addr.to_string()));
        let qdisc = Command::new("tc").args(["-n", &b.netns, "qdisc", "show", "dev", "eth0"]).output().unwrap();
        assert!(String::from_utf8_lossy(&qdisc.stdout).contains("tbf"), "{}", String::from_utf8_lossy(&qdisc.stdout));

        let before = namespaces_of_this_process();
        assert!(before.iter().any(|n| n.starts_with(&a.netns)), "{before:?}");
        drop(topo);
        let after = namespaces_of_this_process();
        assert!(!after.iter().any(|n| n.starts_with(&a.netns) || n.starts_with(&b.netns)), "left behind: {after:?}");
    }

    #[test]
    fn a_panic_still_kills_what_runs_inside_and_removes_the_namespaces() {
        if !available_or_skip("a_panic_still_kills_what_runs_inside_and_removes_the_namespaces") {
            return;
        }
        let seen = std::sync::Mutex::new((String::new(), 0u32));
        let outcome = std::panic::catch_unwind(|| {
            let topo = Topology::build(&[HostSpec::new("p")]).unwrap();
            let host = topo.host("p");
            let child = host.command("sleep").arg("60").spawn().unwrap();
            *seen.lock().unwrap() = (host.netns.clone(), child.id());
            std::mem::forget(child); // the topology, not this handle, must end it
            panic!("a test failing half way");
        });
        assert!(outcome.is_err());
        let (netns, pid) = seen.into_inner().unwrap();
        assert!(!namespaces_of_this_process().iter().any(|n| n.starts_with(&netns)), "{netns} left behind");
        // SIGKILL was sent during the unwind; reap the child and check it is gone.
        let mut status = 0;
        // SAFETY: waitpid on our own child.
        let reaped = unsafe { libc::waitpid(pid as libc::pid_t, &mut status, 0) };
        assert_eq!(reaped, pid as libc::pid_t);
        assert!(libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGKILL, "status {status:#x}");
    }

    #[test]
    fn namespaces_of_a_process_killed_outright_are_removed_by_the_next_build() {
        if !available_or_skip("namespaces_of_a_process_killed_outright_are_removed_by_the_next_build") {
            return;
        }
        let mut gone = Command::new("true").spawn().unwrap();
        let dead_pid = gone.id();
        gone.wait().unwrap();
        let stale = format!("{NAME_PREFIX}{dead_pid}-0-br");
        ip(&["netns", "add", &stale]).unwrap();
        let topo = Topology::build(&[HostSpec::new("fresh")]).unwrap();
        let listed = String::from_utf8_lossy(&Command::new("ip").args(["netns", "list"]).output().unwrap().stdout).into_owned();
        drop(topo);
        let leftover = listed.lines().any(|l| l.split_whitespace().next() == Some(stale.as_str()));
        if leftover {
            remove_namespace(&stale);
        }
        assert!(!leftover, "{stale} survived a build:\n{listed}");
    }

    #[test]
    fn host_names_must_fit_an_interface_name() {
        if !available_or_skip("host_names_must_fit_an_interface_name") {
            return;
        }
        let err = Topology::build(&[HostSpec::new("a-name-far-too-long")]).err().expect("refused");
        assert!(format!("{err:#}").contains("1 to 15 letters and digits"), "{err:#}");
    }
}
