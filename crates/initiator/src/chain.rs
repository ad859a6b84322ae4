//! [`chained`]: commands to several OSDs in flight from one thread. Each command is sent, and
//! the next one is sent while it is in flight (the `meanwhile` of
//! `OsdClient::execute_meanwhile`), so a chain of N commands has all N out before the first
//! answer is awaited, and no thread is started. Why: a thread costs more than a small command
//! (tens of microseconds to start and join on a busy two-core node), and the answers of the
//! other OSDs wait in their sockets meanwhile, so nothing is lost by reading them in turn.
//!
//! Used by the metadata server (removals, object states, truncates over a file's objects) and
//! by the client (a file's per-object commands, and striped transfers of one small command per
//! OSD).

/// The most commands one chain has in flight: each holds a stack frame while the ones after
/// it are sent and answered. Longer lists run as several chains, one after another.
pub const IN_FLIGHT_MAX: usize = 16;

/// `one(i, meanwhile)` for every `i` in `0..n`, outcomes in order. `one` sends command `i`,
/// runs `meanwhile` (at most once) once the command has left, then waits for its answer;
/// `meanwhile` sends the commands after it. A command that fails before it left never runs
/// its `meanwhile`: the ones after it are then run one at a time, each with an empty one.
pub fn chained<R>(n: usize, one: &dyn Fn(usize, &mut dyn FnMut()) -> R) -> Vec<R> {
    let mut out: Vec<Option<R>> = (0..n).map(|_| None).collect();
    for (k, part) in out.chunks_mut(IN_FLIGHT_MAX).enumerate() {
        chain(k * IN_FLIGHT_MAX, part, one);
    }
    out.into_iter().enumerate().map(|(i, r)| r.unwrap_or_else(|| one(i, &mut || {}))).collect()
}

/// Runs the first command of `out`'s range, with the rest (recursively) as its `meanwhile`.
fn chain<R>(at: usize, out: &mut [Option<R>], one: &dyn Fn(usize, &mut dyn FnMut()) -> R) {
    let Some((first, rest)) = out.split_first_mut() else { return };
    let mut send_rest = || chain(at + 1, rest, one);
    *first = Some(one(at, &mut send_rest));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// Records what `one` does, in order: `Sent(i)` when command i leaves, `Answered(i)` when
    /// its answer is taken.
    #[derive(Debug, PartialEq, Clone, Copy)]
    enum Step {
        Sent(usize),
        Answered(usize),
    }

    fn run(n: usize, fails_before_leaving: &[usize]) -> (Vec<Result<usize, usize>>, Vec<Step>) {
        let log = RefCell::new(Vec::new());
        let failed_once = RefCell::new(Vec::new());
        let out = chained(n, &|i, meanwhile| {
            if fails_before_leaving.contains(&i) && !failed_once.borrow().contains(&i) {
                failed_once.borrow_mut().push(i);
                return Err(i);
            }
            log.borrow_mut().push(Step::Sent(i));
            meanwhile();
            log.borrow_mut().push(Step::Answered(i));
            Ok(i)
        });
        (out, log.into_inner())
    }

    #[test]
    fn every_command_of_a_chain_is_sent_before_the_first_answer_is_awaited() {
        let (out, log) = run(4, &[]);
        assert_eq!(out, vec![Ok(0), Ok(1), Ok(2), Ok(3)]);
        use Step::*;
        assert_eq!(log, vec![Sent(0), Sent(1), Sent(2), Sent(3), Answered(3), Answered(2), Answered(1), Answered(0)]);
    }

    #[test]
    fn long_lists_run_as_chains_of_at_most_in_flight_max() {
        let n = IN_FLIGHT_MAX * 2 + 3;
        let (out, log) = run(n, &[]);
        assert_eq!(out, (0..n).map(Ok).collect::<Vec<_>>());
        let mut in_flight = 0usize;
        let mut most = 0;
        for step in &log {
            match step {
                Step::Sent(_) => in_flight += 1,
                Step::Answered(_) => in_flight -= 1,
            }
            most = most.max(in_flight);
        }
        assert_eq!(most, IN_FLIGHT_MAX);
        assert_eq!(log.iter().filter(|s| matches!(s, Step::Sent(_))).count(), n);
    }

    #[test]
    fn commands_after_one_that_failed_before_leaving_still_run_each_once() {
        let (out, log) = run(5, &[2]);
        assert_eq!(out, vec![Ok(0), Ok(1), Err(2), Ok(3), Ok(4)]);
        let sent: Vec<usize> = log.iter().filter_map(|s| if let Step::Sent(i) = s { Some(*i) } else { None }).collect();
        // 0 and 1 went out in the chain; 2 failed before leaving, so 3 and 4 ran afterwards.
        assert_eq!(sent, vec![0, 1, 3, 4]);
    }

    #[test]
    fn an_empty_list_runs_nothing() {
        let (out, log) = run(0, &[]);
        assert!(out.is_empty() && log.is_empty());
    }
}
