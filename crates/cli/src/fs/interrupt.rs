//! Ctrl-C (SIGINT), SIGTERM or SIGHUP during a command that copies into a temporary file beside
//! its destination (`put`, `mv` between metadata servers). Without this the process would end
//! mid-copy and leave the temporary behind. With it the first signal is noted, the copy stops
//! before its next chunk, the temporary is removed and the destination stays as it was, and the
//! command exits 130 as an interrupted one does. A second signal ends the process at once, for
//! a copy stuck waiting on an OSD.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use anyhow::{Context, Result};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::flag;

/// The error an interrupted copy returns; `main` exits 130 for it.
#[derive(Debug)]
pub struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted")
    }
}

impl std::error::Error for Interrupted {}

/// Whether a signal arrived since [`Interrupt::catch`].
pub struct Interrupt(Arc<AtomicBool>);

/// Exit status of a command ended by SIGINT, as shells report it.
pub const INTERRUPTED_EXIT: i32 = 130;

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
        for sig in [SIGINT, SIGTERM, SIGHUP] {
            // Registered first, so it sees the flag as it was before this signal set it.
            flag::register_conditional_shutdown(sig, INTERRUPTED_EXIT, seen.clone()).context("installing a signal handler")?;
            flag::register(sig, seen.clone()).context("installing a signal handler")?;
        }
        Ok(CAUGHT.get_or_init(|| Interrupt(seen)))
    }

    /// [`Interrupted`] once a signal has arrived.
    pub fn check(&self) -> Result<(), Interrupted> {
        if self.0.load(Ordering::Relaxed) {
            Err(Interrupted)
        } else {
            Ok(())
        }
    }
}
