//! How long the event loop polls before it sleeps, sized by what its polls catch, as KVM
//! sizes a vCPU's halt polling (`halt_poll_ns`: grown from 10 us while wake-ups come soon
//! after the window, shrunk while they come later than the longest window).
//!
//! A poll pays only when the next request arrives while it lasts: then the loop skips a
//! wake-up. When requests come farther apart than `max` (one client that thinks between
//! requests, a quiet server), every poll is CPU spent for nothing: 36 us per create for a
//! client pausing 500 us, on top of 94 us of work (`tessera bench meta`, section "paced").
//! So the window starts at `max`, stays while polls catch requests, doubles towards `max`
//! while requests come within `max` of the wait's start but after the window, and halves
//! (to zero below [`GROW_START`]) while they come more than twice `max` after it. Between
//! the two it stays: on a virtual machine a client's wake-up now and then takes longer than
//! `max`, and four clients' creates come in waves that a lone late one does not end. Waits
//! that end by their timeout say nothing about requests and leave it as it is.
//!
//! Pure logic, no clock: the loop reports each wait ([`Waited`]) and asks for the next window.

use std::time::Duration;

/// The window a zero window grows to first (KVM's `halt_poll_ns_grow_start`).
pub const GROW_START: Duration = Duration::from_micros(10);

/// How one wait ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waited {
    /// Something was ready while the loop polled.
    Polled,
    /// Something came after the polling, this long after the wait began.
    Slept(Duration),
    /// The timeout came first.
    TimedOut,
}

#[derive(Clone, Debug)]
pub struct PollWindow {
    max: Duration,
    current: Duration,
}

impl PollWindow {
    /// A window of up to `max` (zero: never polls).
    pub fn new(max: Duration) -> PollWindow {
        PollWindow { max, current: max }
    }

    /// How long the next wait polls.
    pub fn current(&self) -> Duration {
        self.current
    }

    pub fn record(&mut self, waited: Waited) {
        match waited {
            Waited::Polled | Waited::TimedOut => {}
            Waited::Slept(after) if after <= self.max => {
                self.current = (self.current * 2).max(GROW_START).min(self.max);
            }
            Waited::Slept(after) if after <= self.max * 2 => {}
            Waited::Slept(_) => {
                self.current /= 2;
                if self.current < GROW_START {
                    self.current = Duration::ZERO;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: Duration = Duration::from_micros(50);

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    #[test]
    fn polls_that_catch_requests_keep_the_whole_window() {
        let mut w = PollWindow::new(MAX);
        for _ in 0..100 {
            w.record(Waited::Polled);
            w.record(Waited::TimedOut);
        }
        assert_eq!(w.current(), MAX);
    }

    #[test]
    fn requests_farther_apart_than_the_window_stop_the_polling() {
        let mut w = PollWindow::new(MAX);
        // 500 us apart: each wait polls its window for nothing, then sleeps.
        let mut windows = Vec::new();
        for _ in 0..4 {
            w.record(Waited::Slept(us(500)));
            windows.push(w.current());
        }
        assert_eq!(windows, [us(25), us(12) + Duration::from_nanos(500), Duration::ZERO, Duration::ZERO]);
        // Past twice the longest window is far apart.
        let mut w = PollWindow::new(MAX);
        for _ in 0..3 {
            w.record(Waited::Slept(MAX * 2 + us(1)));
        }
        assert_eq!(w.current(), Duration::ZERO);
    }

    #[test]
    fn a_request_a_little_later_than_the_window_changes_nothing() {
        let mut w = PollWindow::new(MAX);
        for _ in 0..10 {
            w.record(Waited::Slept(MAX + us(1)));
            w.record(Waited::Slept(MAX * 2));
        }
        assert_eq!(w.current(), MAX, "a late wake-up now and then keeps the polling");
        w.record(Waited::Slept(us(500)));
        w.record(Waited::Slept(MAX * 2));
        assert_eq!(w.current(), us(25), "and keeps a shrunk window shrunk");
    }

    #[test]
    fn requests_that_come_soon_again_bring_the_polling_back() {
        let mut w = PollWindow::new(MAX);
        for _ in 0..10 {
            w.record(Waited::Slept(us(900)));
        }
        assert_eq!(w.current(), Duration::ZERO);
        let mut windows = Vec::new();
        for _ in 0..4 {
            w.record(Waited::Slept(us(30)));
            windows.push(w.current());
        }
        assert_eq!(windows, [us(10), us(20), us(40), MAX], "from the grow start, doubling up to the maximum");
        w.record(Waited::Polled);
        assert_eq!(w.current(), MAX);
    }

    #[test]
    fn a_zero_maximum_never_polls() {
        let mut w = PollWindow::new(Duration::ZERO);
        for waited in [Waited::Slept(Duration::ZERO), Waited::Slept(us(5)), Waited::Polled, Waited::TimedOut, Waited::Slept(us(500))] {
            w.record(waited);
            assert_eq!(w.current(), Duration::ZERO, "{waited:?}");
        }
    }
}
