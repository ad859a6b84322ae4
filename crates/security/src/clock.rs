//! The wall clock in the unit capabilities carry: milliseconds since the Unix epoch. Expiry
//! times, key periods and nonce timestamps all compare against it. Engines take time from
//! their caller (so a simulator can drive them); this is the one place real daemons read it.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch; 0 on a clock set before 1970.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
