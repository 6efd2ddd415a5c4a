//! CATM stage 2: a judge classifies each mined file's post-reasoning as
//! RELEVANT or NOT_RELEVANT, with the seed's conservative bias: anything not
//! clearly NOT_RELEVANT is RELEVANT.
//!
//! "Clearly" means the judge's text says NOT_RELEVANT (also written
//! `NOT RELEVANT`, `not-relevant` or `IRRELEVANT`, any case) and says
//! RELEVANT nowhere else; an empty, hedged or contradictory reply is RELEVANT.
//! A request that still fails after its retries is also RELEVANT (the bias
//! again), and is counted in the run's summary so a broken judge is visible.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// What the judge is asked about one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JudgeRequest {
    /// The SWE-bench instance the file was read for.
    pub instance_id: String,
    /// The issue text, when the instance file provides it.
    pub issue: Option<String>,
    /// The file, relative to the repository root.
    pub path: String,
    /// The agent's post-reasoning after reading the file.
    pub reasoning: String,
}

/// The judge's classification.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// The file helped, or the judge did not clearly say it did not.
    Relevant,
    /// The judge clearly said the file did not help.
    NotRelevant,
}

/// A judge that could not answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("judge failed after {attempts} attempt(s): {message}")]
pub struct JudgeError {
    /// Attempts made, the first included.
    pub attempts: usize,
    /// The last attempt's failure, for humans.
    pub message: String,
}

/// Classifies one file. Implementations must be shareable across worker threads.
pub trait Judge: Sync {
    /// Classifies `request`'s file; an error means the judge gave no usable answer, which
    /// the pipeline counts as RELEVANT.
    fn judge(&self, request: &JudgeRequest) -> Result<Verdict, JudgeError>;
}

/// Applies the conservative rule to a judge's reply text.
pub fn conservative_verdict(reply: &str) -> Verdict {
    let mut text = reply.to_ascii_uppercase();
    let mut negative = false;
    for form in ["NOT_RELEVANT", "NOT RELEVANT", "NOT-RELEVANT", "IRRELEVANT"] {
        if text.contains(form) {
            negative = true;
            text = text.replace(form, " ");
        }
    }
    if negative && !text.contains("RELEVANT") { Verdict::NotRelevant } else { Verdict::Relevant }
}

/// A deterministic judge for tests, CI and offline runs: NOT_RELEVANT when the
/// reasoning dismisses the file in so many words ("not relevant", "unrelated",
/// "wrong file", ...), RELEVANT otherwise. It reads only the reasoning, so it
/// is a filter for explicit dead ends, not a relevance model.
#[derive(Clone, Debug, Default)]
pub struct HeuristicJudge;

impl HeuristicJudge {
    const DISMISSALS: [&'static str; 12] = [
        "not relevant",
        "irrelevant",
        "unrelated",
        "not related",
        "isn't related",
        "is not related",
        "doesn't seem related",
        "not what we need",
        "not what i need",
        "wrong file",
        "not the right file",
        "nothing relevant",
    ];
}

impl Judge for HeuristicJudge {
    fn judge(&self, request: &JudgeRequest) -> Result<Verdict, JudgeError> {
        let lower = request.reasoning.to_lowercase();
        let dismissed = HeuristicJudge::DISMISSALS.iter().any(|d| lower.contains(d));
        Ok(if dismissed { Verdict::NotRelevant } else { Verdict::Relevant })
    }
}

/// Judges every request with at most `parallelism` requests in flight,
/// calling `progress` after each. Results are in request order.
pub fn judge_all(
    judge: &dyn Judge,
    requests: &[JudgeRequest],
    parallelism: usize,
    progress: &(dyn Fn() + Sync),
) -> Vec<Result<Verdict, JudgeError>> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<Verdict, JudgeError>>>> = Mutex::new(vec![None; requests.len()]);
    let workers = parallelism.clamp(1, requests.len().max(1));
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(request) = requests.get(i) else {
                        break;
                    };
                    let verdict = judge.judge(request);
                    results.lock().expect("no worker panics while holding the lock")[i] = Some(verdict);
                    progress();
                }
            });
        }
    });
    results
        .into_inner()
        .expect("workers have finished")
        .into_iter()
        .map(|r| r.expect("every request index was taken by a worker"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conservative_rule() {
        assert_eq!(conservative_verdict("NOT_RELEVANT"), Verdict::NotRelevant);
        assert_eq!(conservative_verdict("Verdict: not relevant."), Verdict::NotRelevant);
        assert_eq!(conservative_verdict("irrelevant"), Verdict::NotRelevant);
        assert_eq!(conservative_verdict("RELEVANT"), Verdict::Relevant);
        assert_eq!(conservative_verdict(""), Verdict::Relevant);
        assert_eq!(conservative_verdict("I cannot tell"), Verdict::Relevant);
        assert_eq!(conservative_verdict("RELEVANT or NOT_RELEVANT, hard to say"), Verdict::Relevant);
    }

    #[test]
    fn heuristic_judge_and_parallel_runner_keep_order() {
        let requests: Vec<JudgeRequest> = (0..50)
            .map(|i| JudgeRequest {
                instance_id: "i".into(),
                issue: None,
                path: format!("f{i}.py"),
                reasoning: if i % 3 == 0 {
                    "This file is unrelated to the bug.".into()
                } else {
                    "The bug is here.".into()
                },
            })
            .collect();
        let done = AtomicUsize::new(0);
        let verdicts = judge_all(&HeuristicJudge, &requests, 4, &|| {
            done.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(done.load(Ordering::Relaxed), 50);
        for (i, v) in verdicts.into_iter().enumerate() {
            let want = if i % 3 == 0 { Verdict::NotRelevant } else { Verdict::Relevant };
            assert_eq!(v, Ok(want), "request {i}");
        }
    }
}
