//! Typed OSD-2 client over a ScsiTransport.
