//! The OSD-2 command set: decode, execute on the engine, encode.
