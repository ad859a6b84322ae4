//! `tessera`: the one binary. Daemons (`osd`, `mds`), a local cluster's life cycle (`up`,
//! `down`, `status`), the client commands (`put`, `get`, `ls`, ...), the demonstration (`demo`)
//! and the benchmarks (`bench ...`). Each subcommand lives in its own module of the
//! `tessera_cli` library; this file only parses arguments.

use clap::{Args, Parser, Subcommand};
use tessera_cli::fs::{copy, df, links, mv, namespace, objects, owner, repair, stripe, touch, transfer, truncate, usage, whoami};
use tessera_cli::{bench, cmd_agent, cmd_cluster, cmd_mds, cmd_osd, demo};

#[derive(Parser)]
#[command(
    name = "tessera",
    version,
    about = "Tessera: a parallel file system on object-based storage devices (T10 OSD-2 over iSCSI)",
    long_about = "Tessera: a parallel file system whose storage nodes are object-based storage devices.\n\n\
        Each storage node runs `tessera osd`, an OSD-2 target served over iSCSI; `tessera mds` keeps the\n\
        namespace and file layouts. Clients read and write file data on the OSDs directly.\n\n\
        Quick start:\n\
        \x20 tessera up --dir /tmp/tc --osds 4        # a local cluster, in the background\n\
        \x20 export TESSERA_CLUSTER=/tmp/tc/cluster.toml   # or --cluster FILE, before or after the command\n\
        \x20 tessera put big.dat /big.dat && tessera getstripe /big.dat\n\
        \x20 tessera down --dir /tmp/tc\n\n\
        `tessera demo` does all of this in a temporary directory; `tessera bench` reproduces the seed\n\
        papers' experiments against a baseline measured in the same run."
)]
struct Cli {
    /// Log filter (e.g. `info`, `tessera_target=debug`); also read from RUST_LOG.
    #[arg(long, global = true, default_value = "warn")]
    log: String,
    /// `tessera --cluster FILE ls` as well as `tessera ls --cluster FILE`: clap hands a value
    /// given here to the subcommand's own `--cluster`. Hidden, as commands without one ignore it.
    #[arg(long, global = true, value_name = "FILE", hide = true)]
    cluster: Option<std::path::PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve one object-based storage device (LUN 0) over iSCSI.
    Osd(cmd_osd::OsdArgs),
    /// Serve the namespace and file layouts (one metadata server of a cluster file).
    Mds(cmd_mds::MdsArgs),
    /// Prove to the metadata servers the user of every local process that asks (a client host's
    /// agent; a local cluster's metadata server 0 is its own). Needs the cluster's user key.
    Agent(cmd_agent::AgentArgs),
    /// Start a local cluster (metadata server + N OSDs) in the background; writes DIR/cluster.toml.
    Up(cmd_cluster::UpArgs),
    /// Stop the local cluster `tessera up --dir DIR` started (OSDs flush first).
    Down(cmd_cluster::DownArgs),
    /// Report every daemon of a cluster as up or down.
    Status(cmd_cluster::StatusArgs),
    /// Copy a local file into Tessera.
    Put(transfer::PutArgs),
    /// Copy a file out of Tessera (or only some of its pieces, with --pieces).
    Get(transfer::GetArgs),
    /// Write a file's contents to standard output.
    Cat(transfer::CatArgs),
    /// List a directory.
    Ls(namespace::LsArgs),
    /// Show a file's or directory's attributes.
    Stat(namespace::StatArgs),
    /// Make directories.
    Mkdir(namespace::MkdirArgs),
    /// Remove files (and with -r, directories).
    Rm(namespace::RmArgs),
    /// Remove empty directories.
    Rmdir(namespace::RmdirArgs),
    /// Copy files (with -r, directories) inside Tessera, through this client, no local file in between.
    Cp(copy::CpArgs),
    /// Rename or move a file or directory (copied and removed when the move crosses metadata servers).
    Mv(mv::MvArgs),
    /// Change a file's or directory's permission bits; only its owner (or root) may (revokes a file's capabilities).
    Chmod(namespace::ChmodArgs),
    /// Change files' owner and group: `chown OWNER[:GROUP]`, by number or by this host's names; only root gives a file to another owner, and an owner may change the group to one of its own.
    Chown(owner::ChownArgs),
    /// Make a symbolic link: `ln -s TARGET LINK`.
    Ln(links::LnArgs),
    /// Print symbolic links' targets.
    Readlink(links::ReadlinkArgs),
    /// Set files' sizes (shrinking, or growing with a hole); makes missing files.
    Truncate(truncate::TruncateArgs),
    /// Make empty files, or set existing ones' times to now.
    Touch(touch::TouchArgs),
    /// Set a directory's default striping, or create an empty file with its own.
    Setstripe(stripe::SetStripeArgs),
    /// Show a file's layout (stripe unit, count, OSDs, object ids) or a directory's default.
    Getstripe(stripe::GetStripeArgs),
    /// Get, set or list OSD attributes of a file's data objects.
    Attr(objects::AttrArgs),
    /// The user the metadata servers answer this client for, and how they know it.
    Whoami(whoami::WhoamiArgs),
    /// Capacity and use of every OSD, and the namespace's inode counts.
    ///
    /// `size` is an OSD's formatted capacity; `avail` is what it can still take, no more than
    /// the file system under it has free. OSDs that share one file system (all of a local
    /// cluster's) are named below the table, and the total counts that file system once.
    Df(df::DfArgs),
    /// Bytes in a tree's files, per directory (apparent sizes: file lengths).
    Du(usage::DuArgs),
    /// Find objects on the OSDs that no file accounts for (orphans), temporaries left by copies
    /// that did not finish, and sources a killed mv left renamed aside; --remove removes the
    /// first two (a mv's source is reported with the command that puts it back).
    Repair(repair::RepairArgs),
    /// Start a local cluster in a temporary directory, write and read back a striped file, restart it, and run a short benchmark.
    Demo(demo::DemoArgs),
    /// Reproduce the seed papers' experiments; every bench also measures its baseline.
    Bench(BenchArgs),
}

#[derive(Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    which: bench::BenchCommand,
    #[command(flatten)]
    common: bench::CommonArgs,
}

/// Runs before Rust's runtime, which fills closed standard descriptors with /dev/null and so
/// hides that the caller closed them (`std_fds`).
#[used]
#[link_section = ".init_array"]
static NOTE_CLOSED_STD_FDS: extern "C" fn() = tessera_cli::std_fds::note_closed;

fn main() {
    tune_allocator();
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Osd(_) | Command::Mds(_) | Command::Agent(_)) {
        tessera_cli::std_fds::fill_stdout();
    }
    let filter = std::env::var("RUST_LOG").unwrap_or(cli.log.clone());
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_writer(std::io::stderr)
        // Colour only on a terminal: a daemon's stderr is its log file, read with grep and less.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    if !matches!(cli.command, Command::Osd(_) | Command::Mds(_) | Command::Agent(_)) {
        restore_sigpipe();
        exit_cleanly_when_stdout_fails();
    }
    if matches!(cli.command, Command::Up(_) | Command::Demo(_) | Command::Bench(_)) {
        // These start daemons: an interrupt must not leave them running.
        if let Err(e) = tessera_cli::children::stop_all_on_signals() {
            eprintln!("tessera: warning: {e:#}");
        }
    }
    let result = match cli.command {
        Command::Osd(args) => cmd_osd::run(args),
        Command::Mds(args) => cmd_mds::run(args),
        Command::Agent(args) => cmd_agent::run(args),
        Command::Up(args) => cmd_cluster::up(args),
        Command::Down(args) => cmd_cluster::down(args),
        Command::Status(args) => cmd_cluster::status(args),
        Command::Put(args) => transfer::put(args),
        Command::Get(args) => transfer::get(args),
        Command::Cat(args) => transfer::cat(args),
        Command::Ls(args) => namespace::ls(args),
        Command::Stat(args) => namespace::stat(args),
        Command::Mkdir(args) => namespace::mkdir(args),
        Command::Rm(args) => namespace::rm(args),
        Command::Rmdir(args) => namespace::rmdir(args),
        Command::Cp(args) => copy::cp(args),
        Command::Mv(args) => mv::mv(args),
        Command::Chmod(args) => namespace::chmod(args),
        Command::Chown(args) => owner::chown(args),
        Command::Ln(args) => links::ln(args),
        Command::Readlink(args) => links::readlink(args),
        Command::Truncate(args) => truncate::truncate(args),
        Command::Touch(args) => touch::touch(args),
        Command::Setstripe(args) => stripe::setstripe(args),
        Command::Getstripe(args) => stripe::getstripe(args),
        Command::Attr(args) => objects::attr(args),
        Command::Whoami(args) => whoami::whoami(args),
        Command::Df(args) => df::df(args),
        Command::Du(args) => usage::du(args),
        Command::Repair(args) => repair::repair(args),
        Command::Demo(args) => demo::run(args),
        Command::Bench(args) => bench::run(args.which, args.common),
    };
    // An interrupt's daemons are being stopped: that thread reports and exits.
    tessera_cli::children::wait_if_interrupted();
    if let Err(e) = result {
        eprintln!("{}{}", tessera_cli::daemon::ERROR_PREFIX, tessera_cli::report::error_chain(&e));
        let interrupted = e.chain().find_map(|c| c.downcast_ref::<tessera_cli::fs::interrupt::Interrupted>());
        std::process::exit(interrupted.map_or_else(|| tessera_cli::report::exit_status(&e), |i| i.exit_code()));
    }
}

/// `tessera cat f | head` should end quietly when `head` does, as other Unix tools do (Rust
/// ignores SIGPIPE and would panic on the failed print). But a SIGPIPE also comes from a socket
/// to an OSD or a metadata server that went away mid-write, and that must not end the command
/// silently: its write fails with EPIPE and the command says which daemon. So the handler ends
/// the process as SIGPIPE does only when standard output's reader is gone, and otherwise lets
/// the write fail. A command with daemons and scratch directories to clean up (`bench`, `demo`)
/// is not ended here, where nothing may be cleaned: its failed print ends it, through
/// [`exit_cleanly_when_stdout_fails`]. Daemons keep ignoring SIGPIPE: a detached daemon's
/// stdout pipe closes when `tessera up` exits.
fn restore_sigpipe() {
    extern "C" fn on_sigpipe(_: libc::c_int) {
        // SAFETY: stdout_reader_gone and cleans_up only poll and load an atomic; signal and
        // raise are async-signal-safe.
        unsafe {
            if tessera_cli::std_fds::stdout_reader_gone() && !tessera_cli::children::cleans_up() {
                libc::signal(libc::SIGPIPE, libc::SIG_DFL);
                libc::raise(libc::SIGPIPE);
            }
        }
    }
    // SAFETY: installs a handler before any other thread exists; the handler only makes
    // async-signal-safe calls.
    unsafe {
        libc::signal(libc::SIGPIPE, on_sigpipe as extern "C" fn(libc::c_int) as libc::sighandler_t);
    }
}

/// `print!` panics when standard output cannot be written (`tessera ls > /dev/full`): a
/// backtrace and exit status 101 for what is an ordinary error. The hook turns that one panic
/// into the error line and status 1 every other failure gets; any other panic is reported as
/// before.
fn exit_cleanly_when_stdout_fails() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info.payload().downcast_ref::<String>().map(String::as_str).or_else(|| info.payload().downcast_ref::<&str>().copied());
        // Its daemons and scratch directories go first, if it has any: exit runs no destructors.
        let exit = |code| -> ! {
            match tessera_cli::children::cleans_up() {
                true => tessera_cli::children::exit_after_stopping_all(code),
                false => std::process::exit(code),
            }
        };
        match message.and_then(|m| m.strip_prefix("failed printing to stdout: ")) {
            // The reader went away (`| head`): end quietly, as SIGPIPE would have.
            Some(_) if tessera_cli::std_fds::stdout_reader_gone() => exit(128 + libc::SIGPIPE),
            Some(_) if tessera_cli::std_fds::stdout_closed() => {
                eprintln!("{}standard output is closed; this command prints its result there", tessera_cli::daemon::ERROR_PREFIX);
                exit(1);
            }
            Some(why) => {
                eprintln!("{}writing to standard output: {why}", tessera_cli::daemon::ERROR_PREFIX);
                exit(1);
            }
            None => default(info),
        }
    }));
}

/// Keeps multi-megabyte I/O buffers in the heap instead of a fresh mmap per command: glibc
/// otherwise maps and unmaps every buffer above its threshold, and each transfer then pays a
/// page fault and a kernel zeroing per 4 KiB page (measured: throughput fell from 1 MiB to
/// 16 MiB transfers). 32 MiB is the largest threshold glibc accepts.
fn tune_allocator() {
    // SAFETY: mallopt only sets allocator parameters; called before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30);
    }
}
