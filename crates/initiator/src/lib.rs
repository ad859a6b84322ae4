//! The initiator side: an iSCSI session ([`iscsi`]) that implements `ScsiTransport`, the typed
//! OSD-2 client ([`osd_client`]) that builds CDBs over any transport, and [`chain`], for
//! commands to several OSDs in flight from one thread.

pub mod chain;
pub mod iscsi;
pub mod osd_client;
