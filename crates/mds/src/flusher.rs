//! The flusher thread: syncs committed groups off the event loop, so that on a slow disk the
//! loop runs the next group's steps while the last group's fdatasync is under way
//! ([`GroupCommit::commit_for_flusher`]; docs/metadata.md, "Group commit and durability").
//! One hand-off per group, not per request.

use std::sync::Arc;
use std::thread::JoinHandle;

use crate::commit::GroupCommit;
use crate::db::DbError;

pub struct Flusher {
    writer: Arc<GroupCommit>,
    thread: Option<JoinHandle<()>>,
}

impl Flusher {
    pub fn start(writer: Arc<GroupCommit>) -> Result<Flusher, DbError> {
        let thread_writer = writer.clone();
        let thread = std::thread::Builder::new()
            .name("mds-flush".into())
            .spawn(move || thread_writer.run_flusher())
            .map_err(|source| DbError::Thread { source })?;
        Ok(Flusher { writer, thread: Some(thread) })
    }
}

impl Drop for Flusher {
    fn drop(&mut self) {
        self.writer.stop_flusher();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
