//! The OSD target daemon (`tessera osd`): an iSCSI server ([`iscsi_server`]) in front of a SCSI
//! device ([`spc`] answers the primary commands every initiator sends) whose command set is
//! OSD-2 ([`osd_lu`], which hands decoded requests to the engine), with capability checks
//! around it when security is on ([`security_gate`]).

pub mod iscsi_server;
pub mod osd_lu;
pub mod security_gate;
pub mod spc;
