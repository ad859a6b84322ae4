//! SCSI primary commands (SPC-4) in front of a command set.
