//! Ctrl-C (SIGINT), SIGTERM or SIGHUP during a command that copies into a temporary file beside
//! its destination (`put`, `mv` between metadata servers). Without this the process would end
//! mid-copy and leave the temporary behind. With it the first signal is noted, the copy stops
//! before its next chunk, the temporary is removed and the destination stays as it was, and the
//! command exits 128 + the signal's number as shells report a process the signal ended (130
//! for Ctrl-C, 143 for SIGTERM). A second signal ends the process at once, for a copy stuck
//! waiting on an OSD.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use anyhow::{Context, Result};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::flag;

/// The error an interrupted copy returns; `main` exits with [`Interrupted::exit_code`].
#[derive(Debug)]
pub struct Interrupted {
    pub signal: i32,
}

impl Interrupted {
    /// 128 + the signal's number, as shells report a process the signal ended.
    pub fn exit_code(&self) -> i32 {
        128 + self.signal
    }
}

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted")
    }
}

impl std::error::Error for Interrupted {}

/// Whether a signal arrived since [`Interrupt::catch`], and which.
pub struct Interrupt {
    seen: Arc<AtomicBool>,
    signal: Arc<AtomicUsize>,
}

static CAUGHT: OnceLock<Interrupt> = OnceLock::new();

impl Interrupt {
    /// Notes the first SIGINT, SIGTERM or SIGHUP from now on; a second one exits at once.
    /// Installed once per process, however often it is asked for (a `mv` of a directory
    /// copies file by file).
    pub fn catch() -> Result<&'static Interrupt> {
        if let Some(caught) = CAUGHT.get() {
            return Ok(caught);
        }
        let seen = Arc::new(AtomicBool::new(false));
        let signal = Arc::new(AtomicUsize::new(0));
        for sig in [SIGINT, SIGTERM, SIGHUP] {
            // Registered first, so it sees the flag as it was before this signal set it; the
            // signal's number is stored before the flag that says one came.
            flag::register_conditional_shutdown(sig, 128 + sig, seen.clone()).context("installing a signal handler")?;
            flag::register_usize(sig, signal.clone(), sig as usize).context("installing a signal handler")?;
            flag::register(sig, seen.clone()).context("installing a signal handler")?;
        }
        Ok(CAUGHT.get_or_init(|| Interrupt { seen, signal }))
    }

    /// [`Interrupted`] once a signal has arrived.
    pub fn check(&self) -> Result<(), Interrupted> {
        if self.seen.load(Ordering::SeqCst) {
            Err(Interrupted { signal: self.signal.load(Ordering::SeqCst) as i32 })
        } else {
            Ok(())
        }
    }
}
