//! How an error is written for a person: its text and its causes on one line. The study runner's
//! reports, the engine's checkpoint errors and the Python package's `RewardError` messages all
//! write a failure this way, so the same failure reads the same everywhere (and as the CLI's
//! `{:#}` of an `anyhow::Error` prints it).

/// An error's text followed by each of its causes, `: `-separated (`outer: inner: innermost`),
/// each once: the workspace's error `Display`s never repeat their `source`.
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut out = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        out.push_str(": ");
        out.push_str(&e.to_string());
        cause = e.source();
    }
    out
}
