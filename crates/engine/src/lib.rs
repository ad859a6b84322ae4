//! The OSD object engine.
