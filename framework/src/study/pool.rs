//! A fixed pool of worker threads over a list of jobs: at most `jobs` run at
//! once, each worker pulls the next index from a shared counter, and a job
//! that fails is recorded while the others go on. Failures come back in job
//! order after every job had its turn.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Runs `job(i)` for every `i` in `0..count` on at most `jobs` threads (at
/// least one) and calls `finished(i, outcome)` as each one ends, from the
/// thread that ran it. Returns the failed jobs' indices and errors, ascending.
pub fn run_pool<E>(
    count: usize,
    jobs: usize,
    job: impl Fn(usize) -> Result<(), E> + Sync,
    finished: impl Fn(usize, Result<(), &E>) + Sync,
) -> Vec<(usize, E)>
where
    E: Send,
{
    let next = AtomicUsize::new(0);
    let failures: Mutex<Vec<(usize, E)>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..jobs.clamp(1, count.max(1)) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= count {
                        break;
                    }
                    match job(i) {
                        Ok(()) => finished(i, Ok(())),
                        Err(e) => {
                            finished(i, Err(&e));
                            // A poisoned lock only means another worker's `finished` panicked.
                            failures.lock().unwrap_or_else(|p| p.into_inner()).push((i, e));
                        }
                    }
                }
            });
        }
    });
    let mut failures = failures.into_inner().unwrap_or_else(|p| p.into_inner());
    failures.sort_by_key(|(i, _)| *i);
    failures
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::study::error_chain;

    #[derive(Debug, thiserror::Error)]
    #[error("job {index} failed")]
    struct Outer {
        index: usize,
        #[source]
        source: std::io::Error,
    }

    #[test]
    fn a_failing_job_is_reported_with_its_chain_and_the_others_finish() {
        let done = Mutex::new(BTreeSet::new());
        let failures = run_pool(
            7,
            3,
            |i| {
                if i == 2 {
                    return Err(Outer { index: i, source: std::io::Error::other("disk full") });
                }
                done.lock().expect("lock").insert(i);
                Ok(())
            },
            |_, _| {},
        );
        assert_eq!(done.into_inner().expect("lock"), BTreeSet::from([0, 1, 3, 4, 5, 6]));
        assert_eq!(failures.len(), 1);
        let (index, error) = &failures[0];
        assert_eq!(*index, 2);
        assert_eq!(error_chain(error), "job 2 failed: disk full", "each cause once");
    }

    #[test]
    fn no_jobs_and_more_workers_than_jobs() {
        let failures = run_pool(0, 4, |_| -> Result<(), std::io::Error> { unreachable!("no job") }, |_, _| {});
        assert!(failures.is_empty());
        let count = AtomicUsize::new(0);
        run_pool(
            2,
            16,
            |_| -> Result<(), std::io::Error> {
                count.fetch_add(1, Ordering::SeqCst);
                Ok(())
            },
            |_, _| {},
        );
        assert_eq!(count.into_inner(), 2);
    }
}
