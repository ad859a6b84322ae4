//! Goal: a path operation racing a removal or a rename of a directory on its path answers as
//! a local file system would, by what the path names when the operation runs (ENOENT once it
//! is gone), never ESTALE, which only says that an inode met on the way went meanwhile.
//! Method: one client removes and remakes a small tree in a loop while another stats, lists,
//! changes and makes names inside it; every refusal must be one the path itself explains.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use tessera_client::{Client, ClientError, FsError};

/// How long the walker races the churn: long enough for thousands of walks.
const RACE: Duration = Duration::from_secs(3);

/// What an operation's refusal was, for the tally.
fn refusal<T>(result: Result<T, ClientError>) -> Option<FsError> {
    match result {
        Ok(_) => None,
        Err(ClientError::Fs { source, .. }) => Some(source),
        Err(other) => panic!("not a namespace refusal: {other}"),
    }
}

/// The churn: `/w/sub` and `/w/sub/f` made and removed again, and `/w` renamed aside and back,
/// so a walk to `/w/sub/f` can meet a directory in every state.
fn churn(c: &Client, stop: &AtomicBool) -> u64 {
    let mut cycles = 0;
    while !stop.load(Ordering::Relaxed) {
        c.mkdir("/w", 0o777).unwrap();
        c.mkdir("/w/sub", 0o777).unwrap();
        drop(c.create("/w/sub/f", 0o666, None).unwrap());
        c.rename("/w", "/aside").unwrap();
        c.rename("/aside", "/w").unwrap();
        c.unlink("/w/sub/f").unwrap();
        // The walker may make /w/sub/new at any time.
        loop {
            match c.rmdir("/w/sub") {
                Ok(()) => break,
                Err(e) if e.fs_error() == Some(FsError::NotEmpty) => match c.rmdir("/w/sub/new") {
                    Ok(()) => {}
                    Err(e) => assert_eq!(e.fs_error(), Some(FsError::NotFound), "{e}"),
                },
                Err(e) => panic!("{e}"),
            }
        }
        c.rmdir("/w").unwrap();
        cycles += 1;
    }
    cycles
}

#[test]
fn walks_racing_removals_answer_by_what_the_path_names() {
    let cluster = start(1, 1);
    let churner = cluster.client();
    let walker = cluster.client();
    let stop = Arc::new(AtomicBool::new(false));
    let churning = {
        let stop = stop.clone();
        std::thread::spawn(move || churn(&churner, &stop))
    };

    let mut answered = 0u64;
    let mut refused: Vec<(&str, FsError)> = Vec::new();
    let started = Instant::now();
    while started.elapsed() < RACE {
        let outcomes = [
            ("stat", refusal(walker.stat("/w/sub/f"))),
            ("readdir", refusal(walker.readdir("/w/sub"))),
            ("chmod", refusal(walker.chmod("/w/sub", 0o777))),
            ("truncate", refusal(walker.truncate("/w/sub/f", 10))),
            ("getstripe", refusal(walker.getstripe("/w/sub/f"))),
            ("mkdir", refusal(walker.mkdir("/w/sub/new", 0o777))),
            ("open", refusal(walker.open("/w/sub/f"))),
        ];
        for (op, outcome) in outcomes {
            match outcome {
                None => answered += 1,
                Some(e) => refused.push((op, e)),
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let cycles = churning.join().unwrap();

    let unexplained: Vec<&(&str, FsError)> = refused.iter().filter(|(_, e)| !matches!(e, FsError::NotFound | FsError::Exists)).collect();
    assert!(unexplained.is_empty(), "refusals the path does not explain ({} of {}): {:?}", unexplained.len(), refused.len(), &unexplained[..unexplained.len().min(10)]);
    // The race was run: some operations found the tree, some did not.
    assert!(cycles > 50 && answered > 0 && refused.iter().any(|(_, e)| *e == FsError::NotFound), "cycles {cycles}, answered {answered}, refused {}", refused.len());
}
