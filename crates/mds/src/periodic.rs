//! A background thread that runs a task, then again every interval, until it is dropped:
//! dropping asks it to stop and joins it. The retry of the journals (`revocation.rs`) and the
//! OSD probe (`health.rs`) run this way.

use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Whether the owner asked the thread to stop; a long task checks it between steps.
#[derive(Clone)]
pub struct Stop(Arc<(Mutex<bool>, Condvar)>);

impl Stop {
    pub fn requested(&self) -> bool {
        *self.0 .0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits `every`; true when a stop was asked meanwhile.
    fn wait(&self, every: Duration) -> bool {
        let (lock, cv) = &*self.0;
        let stopped = lock.lock().unwrap_or_else(|p| p.into_inner());
        let (stopped, _) = cv.wait_timeout_while(stopped, every, |s| !*s).unwrap_or_else(|p| p.into_inner());
        *stopped
    }
}

pub struct Periodic {
    stop: Stop,
    thread: Option<JoinHandle<()>>,
}

impl Periodic {
    /// Starts thread `name`, which runs `task` at once and then every `every`.
    pub fn start(name: &str, every: Duration, mut task: impl FnMut(&Stop) + Send + 'static) -> std::io::Result<Periodic> {
        let stop = Stop(Arc::new((Mutex::new(false), Condvar::new())));
        let flag = stop.clone();
        let thread = std::thread::Builder::new().name(name.into()).spawn(move || loop {
            task(&flag);
            if flag.requested() || flag.wait(every) {
                return;
            }
        })?;
        Ok(Periodic { stop, thread: Some(thread) })
    }
}

impl Drop for Periodic {
    fn drop(&mut self) {
        let (lock, cv) = &*self.stop.0;
        *lock.lock().unwrap_or_else(|p| p.into_inner()) = true;
        cv.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    #[test]
    fn runs_at_once_then_every_interval_and_stops_on_drop() {
        let runs = Arc::new(AtomicU32::new(0));
        let counted = runs.clone();
        let p = Periodic::start("periodic-test", Duration::from_millis(20), move |_| {
            counted.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
        std::thread::sleep(Duration::from_millis(110));
        drop(p);
        let after_drop = runs.load(Ordering::SeqCst);
        assert!(after_drop >= 2, "ran {after_drop} times in 110 ms at a 20 ms interval");
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(runs.load(Ordering::SeqCst), after_drop, "nothing runs after the drop");
    }

    #[test]
    fn a_long_interval_does_not_delay_the_drop() {
        let p = Periodic::start("periodic-test", Duration::from_secs(3600), |_| {}).unwrap();
        let t = std::time::Instant::now();
        drop(p);
        assert!(t.elapsed() < Duration::from_secs(5));
    }
}
