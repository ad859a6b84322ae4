//! iSCSI (RFC 7143), sans-IO.
