//! OSD-2 capability security for Tessera's direct-access model (OSD-2 r05 §4.11; seed 002,
//! "Secure building block for direct-access filesystems"): clients talk to OSDs directly, so an
//! OSD must refuse every command the metadata server (the security manager) did not authorise.
//! Sans-IO: time and randomness come from the caller, keys are stored by the caller.
//!
//! Files: [`capability`] the 104-byte capability; [`keys`] the key hierarchy and SET KEY
//! derivation; [`icv`] every integrity check value; [`nonce`] nonces and the replay list;
//! [`policy`] what each command needs from its capability; [`check`] the OSD's ordered checks
//! and the sealing of answers; [`credential`] the client's signing and answer checks;
//! [`key_commands`] the SET KEY / SET MASTER KEY CDBs; [`manager`] the security manager's
//! copy of an OSD's keys; [`error`] refusals and their sense data;
//! [`fuzzing`] fuzz entry points. docs/security.md gives the threat model.

pub mod capability;
pub mod check;
pub mod clock;
pub mod credential;
pub mod error;
pub mod fuzzing;
pub mod icv;
pub mod key_commands;
pub mod keys;
pub mod manager;
pub mod nonce;
pub mod policy;
pub mod schedule;

#[cfg(test)]
mod tests;

pub use capability::{Capability, CapabilityError, ObjectType, Permissions, Scope, SecurityMethod};
pub use check::{Arrived, Authorized, Checker, CheckerConfig, ObjectFacts};
pub use credential::{Credential, ResponseError, SignError, Signed};
pub use error::SecurityError;
pub use key_commands::KeyCommand;
pub use keys::{Key, KeySlot};
pub use manager::{ManagerError, OsdKeys};
pub use nonce::{Nonce, NonceSource, NonceWindow};
pub use schedule::{scheduled_seed, KeySchedule};
