//! A fixed pool of worker threads over a list of jobs: at most `jobs` run at
//! once, each worker pulls the next index from a shared counter, and a job
//! that fails is recorded while the others go on. Failures come back in job
//! order after every job had its turn.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Why a job did not succeed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JobError<E: std::error::Error + 'static> {
    /// The job returned an error.
    #[error(transparent)]
    Failed(E),
    /// The job panicked (see [`run_pool`]); the panic's message.
    #[error("panicked: {0}")]
    Panicked(String),
}

/// Runs `job(i)` for every `i` in `0..count` on at most `jobs` threads (at
/// least one) and calls `finished(i, outcome)` as each one ends, from the
/// thread that ran it. Returns the failed jobs' indices and errors, ascending.
pub fn run_pool<E>(
    count: usize,
    jobs: usize,
    job: impl Fn(usize) -> Result<(), E> + Sync,
    finished: impl Fn(usize, Result<(), &JobError<E>>) + Sync,
) -> Vec<(usize, JobError<E>)>
where
    E: std::error::Error + Send + 'static,
{
    let next = AtomicUsize::new(0);
    let failures: Mutex<Vec<(usize, JobError<E>)>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..jobs.clamp(1, count.max(1)) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= count {
                        break;
                    }
                    match run_catching(|| job(i)) {
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

/// Runs one job, turning a panic into [`JobError::Panicked`].
///
/// THE ONE `catch_unwind` OF THE STUDY RUNNER. Policies whose trait methods
/// cannot return errors (today's Qwen3 agent on a tensor failure) panic; a
/// panic then fails its run alone instead of the whole study. Once every
/// policy reports errors as values, this function becomes `job().map_err(JobError::Failed)`.
fn run_catching<E: std::error::Error + 'static>(job: impl FnOnce() -> Result<(), E>) -> Result<(), JobError<E>> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)) {
        Ok(result) => result.map_err(JobError::Failed),
        Err(payload) => Err(JobError::Panicked(panic_message(&*payload))),
    }
}

/// The text of a panic payload (`panic!` with a literal or a format string).
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
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
        assert!(matches!(error, JobError::Failed(_)));
        assert_eq!(error_chain(error), "job 2 failed: disk full", "each cause once");
    }

    #[test]
    fn a_panicking_job_fails_alone_and_every_job_is_reported_finished() {
        let ended = Mutex::new(Vec::new());
        let failures = run_pool(
            4,
            2,
            |i| -> Result<(), std::io::Error> {
                if i == 1 {
                    panic!("out of memory in job {i}");
                }
                Ok(())
            },
            |i, outcome| ended.lock().expect("lock").push((i, outcome.is_ok())),
        );
        let mut ended = ended.into_inner().expect("lock");
        ended.sort_unstable();
        assert_eq!(ended, [(0, true), (1, false), (2, true), (3, true)]);
        assert_eq!(failures.len(), 1);
        assert_eq!(failures[0].1.to_string(), "panicked: out of memory in job 1");
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
