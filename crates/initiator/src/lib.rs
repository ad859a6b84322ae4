//! The initiator side: an iSCSI session ([`iscsi`]) that implements `ScsiTransport`, and the
//! typed OSD-2 client ([`osd_client`]) that builds CDBs over any transport.

pub mod iscsi;
pub mod osd_client;
