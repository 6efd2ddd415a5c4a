//! The streamed replay against the replay on records (the oracle: how
//! `study replay` read a log before it was streamed).

use super::*;

/// A deterministic log of `n` rollouts in groups of 4 that interleave (two
/// groups open at a time), over `steps` logged steps, with line ranges,
/// functions, entities and escapes in `args`; every `escape`-th line has an
/// escaped group name, which the hand-written reader declines.
fn log(n: usize, steps: usize, escape: usize) -> String {
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move |m: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % m
    };
    let mut out = String::new();
    for i in 0..n {
        let group = (i / 8) * 2 + i % 2;
        let path = |k: u64| format!("src/m{k}.py");
        let files: Vec<String> = (0..1 + next(3)).map(|_| path(next(6))).collect();
        let target: Vec<String> = (0..1 + next(2)).map(|_| path(next(6))).collect();
        let ranges = |fs: &[String], next: &mut dyn FnMut(u64) -> u64| -> Vec<String> {
            fs.iter()
                .map(|f| {
                    let s = 1 + next(50);
                    format!("\"{f}:{s}-{}\"", s + next(20))
                })
                .collect()
        };
        let (pr, tr) = (ranges(&files, &mut next), ranges(&target, &mut next));
        let quoted = |fs: &[String]| fs.iter().map(|f| format!("\"{f}\"")).collect::<Vec<_>>().join(", ");
        let mut turns = Vec::new();
        for _ in 0..next(4) {
            let calls: Vec<String> = (0..next(3))
                .map(|_| {
                    let hits: Vec<String> =
                        (0..next(4)).map(|_| format!("\"{}:{}\"", path(next(6)), 1 + next(9))).collect();
                    format!(
                        r#"{{"tool": "grep", "args": {{"pattern": "def f\\b"}}, "entities": [{}]}}"#,
                        hits.join(", ")
                    )
                })
                .collect();
            turns.push(format!("[{}]", calls.join(", ")));
        }
        turns.push("[]".to_string());
        let group = if escape > 0 && i % escape == 0 { format!("g\\u0031{group}") } else { format!("g1{group}") };
        out.push_str(&format!(
            r#"{{"group": "{group}", "step": {}, "predicted": {{"files": [{}], "line_ranges": [{}], "functions": ["src/m1.py::f"]}}, "target": {{"files": [{}], "line_ranges": [{}], "functions": ["src/m1.py::f"]}}, "turns": [{}], "completion_tokens": {}, "valid": {}, "truncated": false}}"#,
            1 + i * steps / n,
            quoted(&files),
            pr.join(", "),
            quoted(&target),
            tr.join(", "),
            turns.join(", "),
            10 + next(500),
            next(9) != 0,
        ));
        out.push('\n');
    }
    out
}

/// Variants with distinct and shared features, a param, and alerts on the step metrics.
fn variants() -> Vec<Variant> {
    let mut tuned = Variant::inline("tuned", "param w = 0.5\nreward = w * Fb(file) + (1 - w) * Fb(lr, 1)\n");
    tuned.params = vec![("w".into(), 0.25)];
    vec![
        Variant::inline(
            "base",
            "reward = Fb(file) * mask(c > 0)\n\
             alert step.calls < 2 for 2 steps : \"few calls\"\n\
             alert step.zero_std_groups > 0.2 : \"flat groups\"\n\
             alert step.kl > 0.1 : \"drift\"\n",
        ),
        Variant::inline("fe", "reward = Fb(file) * (0.5 + 0.5 * e)\nadvantage = reward - group.mean(reward)\n"),
        tuned,
        Variant::inline(
            "lr",
            "reward = (Fb(func) + F1(lr)) / 2 / max(1, c / 4)\nalert batch.mean(valid) < 0.9 : \"invalid\"\n",
        ),
    ]
}

/// Both replays' results, as text (floats printed exactly).
fn both(variants: &[Variant], data: &[u8]) -> (String, String) {
    (format!("{:?}", replay_log(variants, data)), format!("{:?}", replay_records(variants, data)))
}

#[test]
fn the_streamed_replay_equals_the_replay_on_records_across_chunks() {
    // Several parallel chunks, so groups and steps span their boundaries.
    let text = log(9_000, 7, 0);
    assert!(text.len() > 3 << 20, "{} bytes", text.len());
    let vs = variants();
    let streamed = streamed(&vs, text.as_bytes()).expect("reads").expect("streams");
    assert_eq!(streamed.rows.len(), 4);
    let alerts = streamed.alerts.as_ref().expect("alerts replay");
    assert_eq!(alerts.steps, 7);
    assert_eq!(alerts.skipped.len(), 1, "{alerts:?}");
    assert!(!alerts.fired.is_empty(), "{alerts:?}");
    let (got, want) = both(&vs, text.as_bytes());
    assert_eq!(got, want);
    // Lines the hand-written reader declines (escapes), blank lines and CRLF change nothing.
    let mixed: String = log(3_000, 3, 7)
        .lines()
        .enumerate()
        .map(|(i, l)| if i % 5 == 0 { format!("{l}\r\n\n") } else { format!("{l}\n") })
        .collect();
    assert!(streamed_ok(&vs, &mixed));
    let (got, want) = both(&vs, mixed.as_bytes());
    assert_eq!(got, want);
}

fn streamed_ok(variants: &[Variant], text: &str) -> bool {
    matches!(streamed(variants, text.as_bytes()), Ok(Some(_)))
}

#[test]
fn what_the_stream_cannot_replay_fails_as_the_replay_on_records_does() {
    let text = log(500, 2, 0);
    // One line does not log `completion_tokens`: `len` is unavailable there.
    let lacking = text.replacen(r#", "completion_tokens": "#, r#", "tokens": "#, 1);
    let vs = vec![Variant::inline("a", "reward = Fb(file)\n"), Variant::inline("len", "reward = len / 1000\n")];
    assert!(matches!(streamed(&vs, lacking.as_bytes()), Ok(None)));
    let (got, want) = both(&vs, lacking.as_bytes());
    assert_eq!(got, want);
    assert!(got.contains("completion_tokens"), "{got}");
    // A variant that does not compile, an unknown param.
    let mut bad_param = Variant::inline("p", "reward = Fb(file)\n");
    bad_param.params = vec![("gamma".into(), 1.0)];
    for vs in [
        vec![Variant::inline("a", "reward = Fb(file)\n"), Variant::inline("bad", "reward = nope\n")],
        vec![Variant::inline("a", "reward = Fb(file)\n"), bad_param],
    ] {
        let (got, want) = both(&vs, text.as_bytes());
        assert_eq!(got, want);
        assert!(got.starts_with("Err(Replay("), "{got}");
    }
    // An alert that fails on a batch (len is missing there) after the comparison succeeded.
    let vs = vec![Variant::inline("a", "reward = Fb(file)\nalert step.completion_len > 100 : \"long\"\n")];
    let (got, want) = both(&vs, lacking.as_bytes());
    assert_eq!(got, want);
    assert!(got.contains("alerts: Err("), "{got}");
}

#[test]
fn bad_lines_are_named_with_their_numbers_as_before() {
    let text = log(20_000, 3, 0);
    let mut lines: Vec<&str> = text.lines().collect();
    lines[3] = r#"{"group": "", "turns": [[]]}"#;
    lines[15_000] = "not json";
    let bad = lines.join("\n");
    let vs = variants();
    let (got, want) = both(&vs, bad.as_bytes());
    assert_eq!(got, want);
    let Err(ReplayLogError::BadRecords(errors)) = replay_log(&vs, bad.as_bytes()) else { panic!("bad records") };
    let numbers: Vec<usize> = errors.iter().map(|e| e.line).collect();
    assert_eq!(numbers, [4, 15_001]);
    // A byte that is not UTF-8 is a read error at its line.
    let mut bytes = text.into_bytes();
    let at = bytes.len() / 2;
    let line = bytes[..at].iter().filter(|&&b| b == b'\n').count() + 1;
    bytes[at] = 0xff;
    match replay_log(&vs, &bytes) {
        Err(ReplayLogError::Read(e)) => assert_eq!(e.line, line),
        other => panic!("{other:?}"),
    }
    assert!(matches!(replay_log(&vs, b"\n \n"), Err(ReplayLogError::Replay(ReplayError::Empty))));
}
