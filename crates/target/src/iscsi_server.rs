//! iSCSI server: listener and per-connection threads.
