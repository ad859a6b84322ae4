//! Copies to and from a mapped object file that fail instead of killing the process.
//!
//! Touching a file mapping raises SIGBUS where a `pread`/`pwrite` would return an error: a
//! page past the end of the file, a disk error while paging in, no space for a block on a
//! write fault. Tessera never crashes on such an error, so every copy through a mapping runs
//! armed ([`guarded`]): a SIGBUS inside the armed range marks the mapping damaged, replaces
//! the faulting page with an anonymous zero page (so the copy can finish) and returns. The
//! caller sees the damage afterwards, drops the mapping and redoes the command with system
//! calls, which report the real error (or succeed, if the cause has gone). A SIGBUS anywhere
//! else goes to the handler that was there before (Rust's own, or the default: a crash, as
//! without this module).
//!
//! Any thread's fault marks the shared mapping, so a command that copied from a replaced page
//! on another thread fails too rather than returning its zeros as data.

use std::cell::Cell;
use std::io;
use std::sync::atomic::{compiler_fence, AtomicBool, Ordering};
use std::sync::OnceLock;

/// The range a thread is copying through, and the flag of the mapping it belongs to.
#[derive(Clone, Copy)]
struct Armed {
    start: usize,
    end: usize,
    damaged: *const AtomicBool,
}

thread_local! {
    // Const-initialised and without a destructor: reading it from the signal handler is a
    // plain thread-local load.
    static ARMED: Cell<Option<Armed>> = const { Cell::new(None) };
}

/// The SIGBUS disposition before ours, called for faults that are not ours.
struct Previous(libc::sigaction);
// SAFETY: written once before the handler is installed, only read afterwards.
unsafe impl Sync for Previous {}
unsafe impl Send for Previous {}

static PREVIOUS: OnceLock<Result<Previous, i32>> = OnceLock::new();
static PAGE: OnceLock<usize> = OnceLock::new();

pub fn page_size() -> usize {
    // SAFETY: sysconf takes an integer and returns one.
    *PAGE.get_or_init(|| (unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).max(4096) as usize)
}

/// Installs the handler once per process; an error if the system refused (then mappings are
/// not used at all).
fn install() -> io::Result<()> {
    page_size();
    let installed = PREVIOUS.get_or_init(|| {
        // SAFETY: both sigaction structs are valid for the calls; the handler only does
        // async-signal-safe work (a thread-local load, an atomic store, mmap, sigaction).
        unsafe {
            let mut ours: libc::sigaction = std::mem::zeroed();
            ours.sa_sigaction = on_sigbus as *const () as usize;
            ours.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut ours.sa_mask);
            let mut previous: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGBUS, &ours, &mut previous) != 0 {
                return Err(io::Error::last_os_error().raw_os_error().unwrap_or(libc::EINVAL));
            }
            Ok(Previous(previous))
        }
    });
    match installed {
        Ok(_) => Ok(()),
        Err(code) => Err(io::Error::from_raw_os_error(*code)),
    }
}

extern "C" fn on_sigbus(signal: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for an SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    let armed = ARMED.try_with(Cell::get).ok().flatten();
    if let Some(a) = armed.filter(|a| (a.start..a.end).contains(&addr)) {
        // SAFETY: `damaged` points into a mapping the armed thread holds an Arc of; the page
        // lies inside that mapping, which nobody else unmaps while it is armed.
        unsafe {
            (*a.damaged).store(true, Ordering::SeqCst);
            let page = addr & !(page_size() - 1);
            let fresh = libc::mmap(
                page as *mut libc::c_void,
                page_size(),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            );
            if fresh != libc::MAP_FAILED {
                return;
            }
        }
    }
    pass_on(signal, info, context);
}

/// Hands a fault that is not ours to the previous disposition.
fn pass_on(signal: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    let Some(Ok(Previous(previous))) = PREVIOUS.get() else { return };
    let handler = previous.sa_sigaction;
    // SAFETY: calling or restoring the disposition that was installed before ours, as the
    // kernel would have; returning after restoring SIG_DFL re-runs the faulting instruction,
    // which then takes the default action.
    unsafe {
        if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
            libc::sigaction(libc::SIGBUS, previous, std::ptr::null_mut());
        } else if previous.sa_flags & libc::SA_SIGINFO != 0 {
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) = std::mem::transmute(handler);
            f(signal, info, context);
        } else {
            let f: extern "C" fn(libc::c_int) = std::mem::transmute(handler);
            f(signal);
        }
    }
}

/// Runs `copy`, which touches only `[start, start + len)` of a mapping whose damage flag is
/// `damaged`; an error if the mapping is damaged afterwards (by this copy or another thread's).
pub fn guarded<R>(start: *const u8, len: usize, damaged: &AtomicBool, copy: impl FnOnce() -> R) -> io::Result<R> {
    install()?;
    let armed = Armed { start: start as usize, end: start as usize + len, damaged };
    ARMED.with(|a| a.set(Some(armed)));
    // The handler runs on this thread: keep the copy between arming and disarming.
    compiler_fence(Ordering::SeqCst);
    let out = copy();
    compiler_fence(Ordering::SeqCst);
    ARMED.with(|a| a.set(None));
    if damaged.load(Ordering::SeqCst) {
        return Err(io::Error::other("a mapped page could not be read or written"));
    }
    Ok(out)
}

/// Whether the handler could be installed (a mapping is worth making only then).
pub fn available() -> bool {
    install().is_ok()
}
