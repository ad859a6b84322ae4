//! iSCSI initiator session.
