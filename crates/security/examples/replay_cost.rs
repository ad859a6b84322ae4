//! The replay list's cost per accepted nonce once it holds its capacity (256 Ki nonces, in
//! time order at 8 a millisecond), hot and with cold caches (a 4 MiB sweep before each).
//!
//! `cargo run --release -p tessera-security --example replay_cost`
use std::time::Instant;
use tessera_security::nonce::{Nonce, NonceWindow, ReplayList};
fn main() {
    let start = 1_800_000_000_000u64;
    let mut l = ReplayList::new(NonceWindow::default(), start);
    let per_ms = 8u64; // 8 commands a ms: the list fills to its capacity within the window
    let n = 600_000u64;
    let mut hot = 0f64;
    let mut junk = vec![0u8; 4 << 20];
    let mut cold = 0f64;
    for i in 0..n {
        let now = start + i / per_ms;
        if i >= n - 2000 {
            for j in (0..junk.len()).step_by(64) { junk[j] = junk[j].wrapping_add(1); }
            let t0 = Instant::now();
            l.accept(&Nonce::new(now, i), now).unwrap();
            cold += t0.elapsed().as_nanos() as f64;
        } else if i >= n - 100_000 {
            let t0 = Instant::now();
            l.accept(&Nonce::new(now, i), now).unwrap();
            hot += t0.elapsed().as_nanos() as f64;
        } else {
            l.accept(&Nonce::new(now, i), now).unwrap();
        }
    }
    println!("len {} hot {:.0} ns/accept, cold {:.0} ns/accept", l.len(), hot / 98_000.0, cold / 2000.0);
}
