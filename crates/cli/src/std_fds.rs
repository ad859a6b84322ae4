//! Standard input, output and error that the caller closed (`tessera cat f >&-`, `<&-`).
//!
//! Rust's runtime fills a closed descriptor 0, 1 or 2 with `/dev/null` before `main`, so that
//! no file or socket takes its place. That hides the mistake: `cat` would print into nothing
//! and succeed, and `put -` would store an empty file. So [`note_closed`] looks first, from
//! the binary's `.init_array` (which runs before the runtime), and then:
//! - the commands that read standard input (`put -`, `get --pieces -`) refuse;
//! - standard output is refilled with `/dev/full` ([`fill_stdout`]), so a command that prints
//!   fails at its first line with a message that says why, as GNU tools do, and one that prints
//!   nothing still succeeds;
//! - standard error stays `/dev/null`: the caller chose not to see it.

use std::sync::atomic::{AtomicBool, Ordering};

static STDIN_CLOSED: AtomicBool = AtomicBool::new(false);
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

/// Notes which of descriptors 0 and 1 are closed. Runs before Rust's runtime starts (see the
/// `.init_array` entry in `main.rs`), so it may touch nothing but these atomics and libc.
pub extern "C" fn note_closed() {
    // SAFETY: fcntl(F_GETFD) only reads a descriptor's flags.
    let closed = |fd| unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1;
    STDIN_CLOSED.store(closed(0), Ordering::Relaxed);
    STDOUT_CLOSED.store(closed(1), Ordering::Relaxed);
}

/// Makes every write to a standard output the caller closed fail (it holds `/dev/null` by now).
/// A daemon keeps `/dev/null`: it writes its log to standard error.
pub fn fill_stdout() {
    if !stdout_closed() {
        return;
    }
    // SAFETY: open(2) of a constant path, dup2(2) onto descriptor 1 (which holds the runtime's
    // /dev/null), and close(2) of the descriptor just opened; no Rust handle owns either.
    unsafe {
        let full = libc::open(c"/dev/full".as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if full >= 0 {
            libc::dup2(full, 1);
            libc::close(full);
        }
    }
}

/// Whether standard output is a pipe whose reader has gone (`tessera ... | head` after `head`
/// exits): poll reports an error on it. Only poll(2), so a signal handler may call it.
pub fn stdout_reader_gone() -> bool {
    let mut stdout = libc::pollfd { fd: libc::STDOUT_FILENO, events: 0, revents: 0 };
    // SAFETY: poll reads and writes only `stdout`, which lives on this frame.
    unsafe { libc::poll(&mut stdout, 1, 0) == 1 && stdout.revents & libc::POLLERR != 0 }
}

/// Whether the caller closed standard output.
pub fn stdout_closed() -> bool {
    STDOUT_CLOSED.load(Ordering::Relaxed)
}

/// Refuses, for a command about to read its data from standard input, when that was closed.
pub fn require_stdin(what: &str) -> anyhow::Result<()> {
    if STDIN_CLOSED.load(Ordering::Relaxed) {
        anyhow::bail!("standard input is closed; {what} reads standard input (give it a file or a pipe)");
    }
    Ok(())
}

/// Refuses, for a command about to write its data to standard output, when that was closed.
pub fn require_stdout(what: &str) -> anyhow::Result<()> {
    if stdout_closed() {
        anyhow::bail!("standard output is closed; {what} writes to standard output (redirect it to a file)");
    }
    Ok(())
}
