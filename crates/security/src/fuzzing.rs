//! Fuzz entry points (fuzz/fuzz_targets/security_*.rs), plain functions so proptest runs the
//! same code under `cargo test`. Each must return for every input; a panic is a bug.

use crate::capability::Capability;
use crate::key_commands::KeyCommand;

/// Capability decoding: whatever decodes must re-encode to bytes that decode to the same value.
pub fn capability_bytes(data: &[u8]) {
    if let Ok(c) = Capability::decode(data) {
        assert_eq!(Capability::decode(&c.encode()), Ok(c.clone()), "a decoded capability must round-trip");
    }
}

/// SET KEY / SET MASTER KEY decoding: whatever decodes must round-trip through `encode`.
pub fn key_command_bytes(data: &[u8]) {
    if let Ok(c) = KeyCommand::decode(data) {
        assert_eq!(KeyCommand::decode(&c.encode()), Ok(c), "a decoded key command must round-trip");
    }
}
