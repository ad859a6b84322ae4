//! The `tessera` command's library: each subcommand in its own module, plus the daemon harness
//! ([`daemon`]) and connection helper ([`session`]) that the integration tests reuse.

pub mod bench;
pub mod cluster;
pub mod chap_file;
pub mod children;
pub mod cmd_agent;
pub mod cmd_cluster;
pub mod cmd_mds;
pub mod cmd_osd;
pub mod daemon;
pub mod demo;
pub mod fd_limit;
pub mod fs;
pub mod listeners;
pub mod lock;
pub mod netns;
pub mod parent_tie;
pub mod report;
pub mod running;
pub mod session;
pub mod std_fds;
pub mod units;
pub mod up_options;
