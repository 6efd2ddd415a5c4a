//! Tests of the proxy policy over an in-memory fake repository: the tools are
//! simulated (literal grep, wildcard glob, line read) so the tests exercise
//! every decision kind without a git store. The engine tests in
//! `rewardlab-framework` drive the policy through the real sandbox.

use std::collections::BTreeSet;

use rewardlab_sandbox::{Status, ToolCall, ToolResult};

use super::*;
use crate::agent::{Answer, OptimStep, Policy, Sampling, TaskPrompt, TurnInfo, TurnOutput};

const ISSUE: &str = "# `RetryPolicy.send` raises ValueError for budget

We run acme 1.2 in kubernetes together with requests. We also use `CacheClient` from the cache layer, with `cache.max_entries` set to a small value.

Calling `RetryPolicy.send` with an unusual budget raises `ValueError` instead of handling it.

Traceback:

```
Traceback (most recent call last):
  File \"/srv/app/worker.py\", line 88, in handle
    result = run_job(job)
  File \"/srv/app/.venv/lib/python3.11/site-packages/acme/net/retry.py\", line 3, in send
    raise ValueError(f\"invalid retry budget: {budget!r}\")
ValueError: invalid retry budget: 'net.socket'
```

I first suspected `RetryTimer` in the network layer since it also deals with sockets.

Expected: the retry policy should accept the budget or fail with a clear message.
";

const TARGET: &str = "acme/net/retry.py";

const FILES: &[(&str, &str)] = &[
    (
        "acme/net/retry.py",
        "class RetryPolicy:\n    def send(self, budget):\n        if not budget:\n            raise ValueError(f\"invalid retry budget: {budget!r}\")\n        return budget\n",
    ),
    (
        "acme/net/timer.py",
        "class RetryTimer:\n    def send(self, budget):\n        # the retry budget of the timer\n        return budget\n",
    ),
    (
        "acme/cache/client.py",
        "class CacheClient:\n    max_entries = 4\n    def send(self, budget):\n        return budget\n",
    ),
    ("tests/test_retry.py", "from acme.net.retry import RetryPolicy\n\ndef test_send():\n    RetryPolicy().send(1)\n"),
    ("docs/budget.md", "The retry budget of a policy.\nA handling budget.\n"),
    ("acme/worker.py", "def run_job(job):\n    return job\n\ndef handle(job):\n    return run_job(job)\n"),
];

/// The simulated tools.
fn run(call: &ToolCall) -> ToolResult {
    let ok = |output: String, entities: Vec<String>| ToolResult {
        output,
        entities: entities.iter().map(|e| rewardlab_sandbox::Entity::parse(e)).collect(),
        status: Status::Ok,
    };
    match call {
        ToolCall::Grep(args) => {
            // Literal patterns, and the definition greps `(?:def|class) name\b`.
            let definition =
                args.pattern.strip_prefix("(?:def|class) ").map(|n| n.trim_end_matches("\\b").replace('\\', ""));
            let needle = args.pattern.replace('\\', "");
            let hit = |line: &str| match &definition {
                Some(name) => ["def ", "class "].iter().any(|kw| {
                    let wanted = format!("{kw}{name}");
                    line.match_indices(&wanted).any(|(at, _)| {
                        !line[at + wanted.len()..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
                    })
                }),
                None => line.contains(&needle),
            };
            let mut lines = Vec::new();
            let mut entities = Vec::new();
            for (path, text) in FILES {
                for (i, line) in text.lines().enumerate() {
                    if hit(line) {
                        lines.push(format!("{path}:{}:{line}", i + 1));
                        entities.push(format!("{path}:{}", i + 1));
                    }
                }
            }
            ok(lines.join("\n"), entities)
        }
        ToolCall::Glob(args) => {
            let paths: Vec<String> =
                FILES.iter().map(|(p, _)| p.to_string()).filter(|p| wildcard(&args.pattern, p)).collect();
            ok(paths.join("\n"), paths)
        }
        ToolCall::Read(args) => match FILES.iter().find(|(p, _)| *p == args.path) {
            Some((path, text)) => {
                let entities = (1..=text.lines().count()).map(|i| format!("{path}:{i}")).collect();
                ok(text.to_string(), entities)
            }
            None => ToolResult::error(rewardlab_sandbox::ErrorKind::NotFound, format!("no file {}", args.path)),
        },
        other => panic!("unexpected call {other:?}"),
    }
}

/// `*` matches anything (this fake does not distinguish `*` from `**`), and a
/// leading `**/` also matches no directory, as in the real glob.
fn wildcard(pattern: &str, text: &str) -> bool {
    if let Some(rest) = pattern.strip_prefix("**/")
        && wildcard(rest, text)
    {
        return true;
    }
    let parts: Vec<&str> = pattern.split('*').collect();
    let mut rest = text;
    for (i, part) in parts.iter().enumerate() {
        if i == 0 {
            match rest.strip_prefix(part) {
                Some(r) => rest = r,
                None => return false,
            }
        } else if i == parts.len() - 1 {
            return rest.ends_with(part);
        } else {
            match rest.find(part) {
                Some(at) => rest = &rest[at + part.len()..],
                None => return false,
            }
        }
    }
    rest.is_empty()
}

/// Runs one rollout of up to `max_turns` turns; returns the episode and its answer.
fn rollout(policy: &ProxyPolicy, sampling: Sampling, seed: u64, max_turns: usize) -> (ProxyEpisode, Option<Answer>) {
    let task = TaskPrompt { id: "t".into(), text: ISSUE.into() };
    let mut episode = policy.begin(&task, sampling, seed).expect("begin");
    for index in 0..max_turns {
        let turn = TurnInfo { index, max_turns, max_calls_per_turn: 8, must_answer: index + 1 == max_turns };
        let mut output = policy.act(&mut [&mut episode], turn).expect("act");
        match output.pop() {
            Some(TurnOutput::Answer(answer)) => return (episode, Some(answer)),
            Some(TurnOutput::Calls(calls)) => {
                let results: Vec<ToolResult> =
                    calls.iter().map(|c| c.as_ref().map_or_else(|r| r.clone(), run)).collect();
                policy.observe(&mut episode, &results).expect("observe");
            }
            Some(TurnOutput::Truncated) => return (episode, None),
            None => panic!("no turn output"),
        }
    }
    (episode, None)
}

/// File-level F1 against the single target.
fn reward(answer: &Option<Answer>) -> f64 {
    let Some(Answer::Structured { files, .. }) = answer else { return 0.0 };
    if !files.iter().any(|f| f == TARGET) {
        return 0.0;
    }
    let precision = 1.0 / files.len() as f64;
    2.0 * precision / (precision + 1.0)
}

fn optim(lr: f64) -> OptimStep {
    OptimStep { lr, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0, max_grad_norm: Some(1.0) }
}

/// A policy with small pseudo-random parameters, so no softmax is uniform.
fn perturbed() -> ProxyPolicy {
    let theta = (0..DIM).map(|i| (i as f64 * 0.7311).sin() * 0.8).collect();
    ProxyPolicy::with_theta(ProxyConfig::default(), theta)
}

/// Rollouts that used every decision kind.
fn episodes(policy: &ProxyPolicy, n: u64) -> Vec<ProxyEpisode> {
    (0..n).map(|s| rollout(policy, Sampling::Sample { temperature: 0.7 }, s, 4).0).collect()
}

#[test]
fn terms_come_from_messages_tracebacks_identifiers_and_prose() {
    let terms = text::extract(ISSUE, &ProxyConfig::default());
    let find = |source, text: &str| terms.iter().find(|t| t.source == source && t.text == text);
    let head = find(text::Source::MessageHead, "invalid retry budget").expect("message head");
    assert!(head.in_traceback && head.in_code);
    assert!(find(text::Source::MessageFull, "invalid retry budget: 'net.socket'").is_some());
    let path = find(text::Source::Path, "acme/net/retry.py").expect("site-packages path made relative");
    assert!(path.in_traceback);
    assert!(find(text::Source::Path, "app/worker.py").is_some(), "absolute paths keep their last two parts");
    let ident = find(text::Source::Identifier, "RetryPolicy.send").expect("dotted identifier");
    assert!(ident.in_title && ident.count >= 2, "{ident:?}");
    assert!(find(text::Source::Identifier, "cache.max_entries").is_some());
    assert!(find(text::Source::Word, "kubernetes").is_some());
    assert!(find(text::Source::Word, "should").is_none(), "stop words are dropped");
    // Versions and the interpreter's own paths are not search terms.
    assert!(terms.iter().all(|t| !t.text.starts_with(|c: char| c.is_ascii_digit())), "{terms:?}");
    assert!(terms.iter().all(|t| !t.text.contains("site-packages") && t.text != "venv"), "{terms:?}");
    assert_eq!(text::regex_literal("a.b(c)*"), "a\\.b\\(c\\)\\*");
    assert_eq!(text::snake_case("RetryPolicy"), "retry_policy");
    for (name, snake) in [
        ("HTTPAdapter", "http_adapter"),
        ("ASCII", "ascii"),
        ("getHTTPResponse", "get_http_response"),
        ("IPython", "i_python"),
        ("_TR56", "_tr56"),
        ("Point2D", "point2_d"),
        ("retry_policy", "retry_policy"),
    ] {
        assert_eq!(text::snake_case(name), snake, "{name}");
    }
}

#[test]
fn the_first_line_is_the_title_and_a_variable_receiver_is_not_part_of_a_name() {
    // A SWE-bench problem statement or a commit subject: the title is the first line with text,
    // without a Markdown heading.
    let issue = "\nlambdify fails on MatrixSymbol names\nThe `e.subs(x, 1)` call and \
                 `sy.Matrix.hstack(a, b)` differ, e.g. in self._print_Pow and np.array.\n";
    let terms = text::extract(issue, &ProxyConfig::default());
    let find = |source, text: &str| terms.iter().find(|t| t.source == source && t.text == text);
    assert!(find(text::Source::Word, "lambdify").expect("a title word").in_title);
    assert!(find(text::Source::Identifier, "MatrixSymbol").expect("a title name").in_title);
    assert!(!find(text::Source::Identifier, "subs").expect("a name of line two").in_title, "only the first line");
    // The receivers `e`, `sy`, `self` and `np` are the issue's variables: the names are what follows.
    for name in ["subs", "Matrix.hstack", "_print_Pow", "array"] {
        assert!(find(text::Source::Identifier, name).is_some(), "{name}: {terms:?}");
    }
    assert!(
        terms
            .iter()
            .filter(|t| t.source == text::Source::Identifier)
            .all(|t| !["e.", "sy.", "self.", "np."].iter().any(|r| t.text.starts_with(r))),
        "no receiver is kept: {terms:?}"
    );
    assert!(terms.iter().all(|t| t.text != "e.g" && t.text != "g"), "`e.g.` is no name: {terms:?}");
    // A module path keeps its first part (`sympy.core` is not a variable).
    let module = text::extract("sympy.core.basic.Basic is slow", &ProxyConfig::default());
    assert!(module.iter().any(|t| t.text == "sympy.core.basic.Basic"), "{module:?}");
}

/// Pull-request texts end in git trailers and name people: an e-mail's domain is no dotted module
/// (`users.noreply.github.com` gave globs of `**/users/noreply/github/com.py` and a definition grep
/// of `com`). A decorator, in code or prose, stays a name.
#[test]
fn addresses_and_trailers_give_no_terms() {
    let issue = "Fix `Dataset.rolling` with bottleneck\n\n\
        With `@cached_property`, see jane.doe@example.org for details.\n\n\
        ```python\n@pytest.fixture\ndef roll():\n    pass\n```\n\n\
        Co-authored-by: Some One <41898282+someone@users.noreply.github.com>\n\
        Signed-off-by: Jane Doe <jane@posteo.de>\n";
    let terms = text::extract(issue, &ProxyConfig::default());
    let texts: Vec<&str> = terms.iter().map(|t| t.text.as_str()).collect();
    for absent in ["example.org", "jane.doe", "users.noreply.github.com", "someone", "posteo.de", "jane"] {
        assert!(!texts.contains(&absent), "{absent} is no term: {texts:?}");
    }
    for present in ["Dataset.rolling", "bottleneck", "pytest.fixture", "cached_property", "details"] {
        assert!(texts.contains(&present), "{present} is a term: {texts:?}");
    }
}

#[test]
fn gradient_matches_finite_differences() {
    let policy = perturbed();
    let mut episodes = episodes(&policy, 6);
    // Sampled rollouts rarely glob the traceback's path, so one episode is fed
    // that glob and a definition grep before it answers, to put named paths and
    // definitions into the ranking for certain.
    let task = TaskPrompt { id: "t".into(), text: ISSUE.into() };
    let mut fed = policy.begin(&task, Sampling::Sample { temperature: 0.7 }, 99).expect("begin");
    let glob = ToolCall::Glob(rewardlab_sandbox::GlobArgs { pattern: "**/net/retry.py".into() });
    feed(&mut fed, episode::CallKind::GlobPath, glob, None);
    feed(&mut fed, episode::CallKind::GrepDefinition, grep("class RetryTimer"), None);
    let _ = policy.answer(&mut fed);
    episodes.push(fed);
    let refs: Vec<&ProxyEpisode> = episodes.iter().collect();
    let lens: Vec<usize> = refs.iter().map(|e| e.units.len()).collect();
    assert!(lens.iter().sum::<usize>() > 20, "rollouts made decisions: {lens:?}");
    // The new feature families must be among the checked units: definition greps
    // and module globs among the calls, rarity, definitions, named paths and path
    // overlap in the ranking, and sizes beyond one.
    let required = [
        (features::CALL_KIND + episode::CallKind::GrepDefinition as usize, "definition grep"),
        (features::CALL_KIND + episode::CallKind::GlobModule as usize, "module glob"),
        (features::GREP_TEXT + 14, "term rarity"),
        (features::RANK_FILE + 13, "rarity sum"),
        (features::RANK_FILE + features::FILE_DEFINES, "defines an issue name"),
        (features::RANK_FILE + 18, "path named by the issue"),
        (features::RANK_FILE + 19, "path overlap"),
        (features::SIZE_BIAS + 1, "answer size 2"),
        (features::SIZE_FILE, "size × file features"),
    ];
    let uses = |e: usize, u: usize, index: usize| {
        refs[e].units[u].options.iter().flatten().any(|&(i, x)| i == index && x != 0.0)
    };
    // A spread of units (every third), plus the first unit that uses each required feature.
    let mut units: BTreeSet<(usize, usize)> =
        lens.iter().enumerate().flat_map(|(e, &len)| (0..len).step_by(3).map(move |u| (e, u))).collect();
    for (index, what) in required {
        let first = lens.iter().enumerate().find_map(|(e, &len)| (0..len).find(|&u| uses(e, u, index)).map(|u| (e, u)));
        units.insert(first.unwrap_or_else(|| panic!("no rollout unit has a {what} feature ({index})")));
    }
    // One-hot coefficients, each unit checked on its own.
    for &(e, u) in &units {
        let coeffs: Vec<Vec<f64>> =
            lens.iter().enumerate().map(|(j, &n)| (0..n).map(|k| f64::from(j == e && k == u)).collect()).collect();
        let mut probe = policy.clone();
        probe.backward(&refs, &coeffs).expect("backward");
        let analytic = probe.grad.clone();
        for (i, &analytic) in analytic.iter().enumerate() {
            let h = 1e-5;
            let mut plus = policy.clone();
            plus.theta[i] += h;
            let mut minus = policy.clone();
            minus.theta[i] -= h;
            let numeric = (plus.logprobs(&refs).expect("logprobs")[e][u]
                - minus.logprobs(&refs).expect("logprobs")[e][u])
                / (2.0 * h);
            let scale = analytic.abs().max(numeric.abs()).max(1e-3);
            assert!(
                (analytic - numeric).abs() / scale < 1e-6,
                "unit {e}/{u}, parameter {i}: analytic {analytic} vs numeric {numeric}"
            );
        }
    }
    assert!(units.len() >= 8);
}

#[test]
fn recomputed_logprobs_equal_the_sampled_ones_and_the_reference_at_the_start() {
    let policy = perturbed();
    let episodes = episodes(&policy, 5);
    let refs: Vec<&ProxyEpisode> = episodes.iter().collect();
    let current = policy.logprobs(&refs).expect("logprobs");
    let reference = policy.reference_logprobs(&refs).expect("reference_logprobs");
    for (e, episode) in episodes.iter().enumerate() {
        let sampled = policy.sampled_logprobs(episode);
        assert_eq!(sampled.len(), current[e].len());
        for (u, s) in sampled.iter().enumerate() {
            assert!(*s <= 0.0 && s.is_finite());
            assert!((current[e][u] - s).abs() < 1e-12, "{e}/{u}");
            assert!((reference[e][u] - s).abs() < 1e-12, "{e}/{u}");
        }
        let entropy = policy.entropy(episode);
        assert!(entropy > 0.0 && entropy.is_finite());
    }
    // After a step the current log-probs move and the reference ones do not.
    let mut trained = policy.clone();
    let coeffs: Vec<Vec<f64>> = refs.iter().map(|e| vec![-1.0; e.units.len()]).collect();
    trained.backward(&refs, &coeffs).expect("backward");
    let stats = trained.step(&optim(0.05)).expect("step");
    assert!(stats.grad_norm > 0.0);
    assert_ne!(trained.logprobs(&refs).expect("logprobs"), current);
    assert_eq!(trained.reference_logprobs(&refs).expect("reference_logprobs"), reference);
}

#[test]
fn same_seed_same_rollout_and_greedy_is_deterministic() {
    let policy = perturbed();
    let sample = Sampling::Sample { temperature: 1.0 };
    let (a, answer_a) = rollout(&policy, sample, 42, 4);
    let (b, answer_b) = rollout(&policy, sample, 42, 4);
    assert_eq!(answer_a, answer_b);
    assert_eq!(policy.sampled_logprobs(&a), policy.sampled_logprobs(&b));
    assert_eq!(policy.completion_tokens(&a), policy.completion_tokens(&b));
    let others: BTreeSet<String> =
        (0..8).map(|s| format!("{:?}", policy.sampled_logprobs(&rollout(&policy, sample, s, 4).0))).collect();
    assert!(others.len() > 1, "different seeds give different rollouts");
    let greedy: Vec<Option<Answer>> = (0..3).map(|s| rollout(&policy, Sampling::Greedy, s, 4).1).collect();
    assert!(greedy.windows(2).all(|w| w[0] == w[1]), "greedy ignores the seed: {greedy:?}");
}

#[test]
fn the_fresh_policy_searches_first_and_counts_token_equivalents() {
    let policy = ProxyPolicy::default();
    let (episode, answer) = rollout(&policy, Sampling::Greedy, 0, 4);
    let Some(Answer::Structured { files, line_ranges }) = answer else { panic!("greedy answers: {answer:?}") };
    // Greedy at the prior: searching holds most of each count decision, so one call in each of
    // turns 0-2 (the likeliest count, ties to fewer), then the forced answer in turn 3 with its
    // best-ranked file only.
    assert_eq!(episode.used.len(), 3);
    assert_eq!(files.len(), episode.seen.len().min(1));
    for range in &line_ranges {
        let (path, span) = range.rsplit_once(':').expect("path:a-b");
        assert!(files.iter().any(|f| f == path));
        let (a, b) = span.split_once('-').expect("a-b");
        assert!(a.parse::<u64>().expect("a") <= b.parse::<u64>().expect("b"));
    }
    assert_eq!(
        policy.completion_tokens(&episode),
        4 * TOKENS_PER_TURN + 3 * TOKENS_PER_CALL + TOKENS_PER_FILE * files.len()
    );
    // Taking the count decision at its flat argmax instead, "answer" (1/9) beats each count
    // (1/9 each, ties to the first option) from turn 1 on.
    let flat = ProxyPolicy::new(ProxyConfig { greedy_answer_mass: false, ..ProxyConfig::default() });
    assert_eq!(rollout(&flat, Sampling::Greedy, 0, 4).0.used.len(), 1);
}

#[test]
fn reinforce_raises_the_probability_of_the_rewarded_choices() {
    let mut policy = ProxyPolicy::default();
    let group = 16u64;
    let mut mean_rewards = Vec::new();
    for iteration in 0..40u64 {
        let runs: Vec<(ProxyEpisode, Option<Answer>)> = (0..group)
            .map(|g| rollout(&policy, Sampling::Sample { temperature: 1.0 }, iteration * 1000 + g, 4))
            .collect();
        let rewards: Vec<f64> = runs.iter().map(|(_, a)| reward(a)).collect();
        let mean = rewards.iter().sum::<f64>() / group as f64;
        mean_rewards.push(mean);
        // REINFORCE with a mean baseline: loss = −Σ A · logp / G, so ∂loss/∂logp_u = −A / G.
        let refs: Vec<&ProxyEpisode> = runs.iter().map(|(e, _)| e).collect();
        let coeffs: Vec<Vec<f64>> =
            refs.iter().zip(&rewards).map(|(e, r)| vec![-(r - mean) / group as f64; e.units.len()]).collect();
        policy.backward(&refs, &coeffs).expect("backward");
        policy.step(&optim(0.1)).expect("step");
    }
    let early = mean_rewards[..5].iter().sum::<f64>() / 5.0;
    let late = mean_rewards[35..].iter().sum::<f64>() / 5.0;
    assert!(late > early + 0.2, "mean reward {early:.3} → {late:.3}: {mean_rewards:?}");
    // The greedy policy now answers with the target file.
    let greedy = rollout(&policy, Sampling::Greedy, 0, 4).1;
    assert!(reward(&greedy) > 0.6, "greedy answer after training: {greedy:?}");
    // Against the fresh policy taking one call and answering (its count decision at the flat
    // argmax, the fresh policy's weakest greedy episode).
    let flat = ProxyPolicy::new(ProxyConfig { greedy_answer_mass: false, ..ProxyConfig::default() });
    assert!(reward(&rollout(&flat, Sampling::Greedy, 0, 4).1) < reward(&greedy));
    // The answer ranking puts more weight on files a message grep hit.
    let message = features::RANK_FILE + features::FILE_BY_MESSAGE;
    assert!(policy.theta()[message] > 0.1, "θ[hit by message] = {}", policy.theta()[message]);
}

#[test]
fn the_answer_ranking_is_the_order_a_greedy_answer_picks_in() {
    // Perturbed parameters, so the scores differ from the hit order; the size decision of a
    // greedy answer takes a prefix of the greedy ranking.
    let config = ProxyConfig { max_answer_size: 4, ..ProxyConfig::default() };
    let theta = (0..DIM).map(|i| (i as f64 * 0.7311).sin() * 0.8).collect();
    let policy = ProxyPolicy::with_theta(config, theta);
    let (episode, answer) = rollout(&policy, Sampling::Greedy, 0, 4);
    let Some(Answer::Structured { files, .. }) = answer else { panic!("greedy answers: {answer:?}") };
    let ranking = policy.answer_ranking(&episode);
    assert!(ranking.len() >= 2 && !files.is_empty(), "{ranking:?}");
    let ranked: Vec<&str> = ranking.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(&ranked[..files.len()], files.iter().map(String::as_str).collect::<Vec<_>>().as_slice());
    assert!(ranking.windows(2).all(|w| w[0].score >= w[1].score), "best first: {ranking:?}");
    // Every feature by name; the scores are θ's rank block dotted with them.
    for file in &ranking {
        assert_eq!(file.features.len(), features::FILE);
        let by_index = features::FILE_NAMES.iter().enumerate();
        let score: f64 = by_index.map(|(k, name)| policy.theta()[features::RANK_FILE + k] * file.features[*name]).sum();
        assert!((score - file.score).abs() < 1e-12, "{score} vs {}", file.score);
    }
}

#[test]
fn file_feature_names_are_distinct_and_match_the_named_indices() {
    let names: BTreeSet<&str> = features::FILE_NAMES.into_iter().collect();
    assert_eq!(names.len(), features::FILE);
    assert_eq!(features::FILE_NAMES[features::FILE_BY_MESSAGE], "by_message");
    assert_eq!(features::FILE_NAMES[features::FILE_DEFINES], "defines");
    assert_eq!(features::FILE_NAMES[features::FILE_NOT_SOURCE], "not_source");
    assert_eq!(features::FILE_NAMES[features::FILE_RARITY_SUM], "rarity_sum");
}

#[test]
fn state_round_trip_restores_bitwise_the_same_behaviour() {
    let mut policy = perturbed();
    let episodes = episodes(&policy, 3);
    let refs: Vec<&ProxyEpisode> = episodes.iter().collect();
    let coeffs: Vec<Vec<f64>> = refs.iter().map(|e| vec![0.3; e.units.len()]).collect();
    policy.backward(&refs, &coeffs).expect("backward");
    policy.step(&optim(0.05)).expect("step");
    let json = serde_json::to_string(&policy.state().expect("state")).expect("state serialises");
    let mut restored = ProxyPolicy::default();
    restored.restore(serde_json::from_str(&json).expect("state deserialises")).expect("restore");
    assert_eq!(restored, policy);
    assert_eq!(restored.logprobs(&refs).expect("logprobs"), policy.logprobs(&refs).expect("logprobs"));
    let sample = Sampling::Sample { temperature: 1.0 };
    assert_eq!(rollout(&restored, sample, 9, 4).1, rollout(&policy, sample, 9, 4).1);
    // The optimiser state came along: the next steps agree bit for bit.
    for p in [&mut policy, &mut restored] {
        p.backward(&refs, &coeffs).expect("backward");
        p.step(&optim(0.05)).expect("step");
    }
    assert_eq!(restored.theta(), policy.theta());
    let mut bad = policy.state().expect("state");
    bad.theta.pop();
    let mut refused = ProxyPolicy::default();
    assert_eq!(refused.restore(bad), Err(ProxyError::Dimension { field: "theta", got: DIM - 1, expected: DIM }));
    assert_eq!(refused, ProxyPolicy::default(), "a refused state changes nothing");
}

#[test]
fn calls_never_repeat_in_a_rollout_and_reads_target_seen_files() {
    let policy = perturbed();
    for seed in 0..12 {
        let task = TaskPrompt { id: "t".into(), text: ISSUE.into() };
        let mut episode = policy.begin(&task, Sampling::Sample { temperature: 1.0 }, seed).expect("begin");
        let mut made = BTreeSet::new();
        for index in 0..4 {
            let turn = TurnInfo { index, max_turns: 4, max_calls_per_turn: 8, must_answer: index == 3 };
            let seen_before: BTreeSet<String> = episode.seen.iter().map(|f| f.path.clone()).collect();
            match policy.act(&mut [&mut episode], turn).expect("act").pop() {
                Some(TurnOutput::Calls(calls)) => {
                    assert!(!calls.is_empty() && calls.len() <= 8);
                    let calls: Vec<ToolCall> =
                        calls.into_iter().map(|c| c.expect("the proxy makes valid calls")).collect();
                    for call in &calls {
                        assert!(made.insert(call.to_json().to_string()), "seed {seed}: {call:?} repeated");
                        if let ToolCall::Read(args) = call {
                            assert!(seen_before.contains(&args.path), "read of an unseen file {}", args.path);
                            assert!(features::is_code(&args.path), "read of a file that is not code {}", args.path);
                        }
                    }
                    let results: Vec<ToolResult> = calls.iter().map(run).collect();
                    policy.observe(&mut episode, &results).expect("observe");
                }
                Some(TurnOutput::Answer(Answer::Structured { files, .. })) => {
                    let seen: BTreeSet<&String> = episode.seen.iter().map(|f| &f.path).collect();
                    assert!(files.iter().all(|f| seen.contains(f)), "answers only name seen files");
                    break;
                }
                other => panic!("unexpected {other:?}"),
            }
        }
    }
}

#[test]
fn line_ranges_widen_hits_and_merge_when_they_touch() {
    let lines: BTreeSet<u64> = [1, 5, 9, 30].into_iter().collect();
    assert_eq!(ranges(&lines, 3).collect::<Vec<_>>(), vec![(1, 12), (27, 33)]);
    assert_eq!(ranges(&BTreeSet::new(), 3).count(), 0);
}

#[test]
fn names_defined_in_read_files_become_grep_candidates() {
    let task = TaskPrompt { id: "t".into(), text: ISSUE.into() };
    let off = ProxyPolicy::default();
    let mut episode = off.begin(&task, Sampling::Greedy, 0).expect("begin");
    let read = ToolCall::Read(rewardlab_sandbox::ReadArgs { path: TARGET.into(), start: None, end: None });
    observe_call(&mut episode, episode::CallKind::ReadSeen, read.clone(), None, run(&read));
    assert!(episode.text_candidates.iter().all(|c| c.kind != episode::CallKind::GrepResultName), "off by default");
    let policy = ProxyPolicy::new(ProxyConfig { mine_result_names: true, ..ProxyConfig::default() });
    let mut episode = policy.begin(&task, Sampling::Greedy, 0).expect("begin");
    let read_candidate =
        episode::Candidate { kind: episode::CallKind::ReadSeen, call: read.clone(), term: None, seen: None };
    episode.pending.push(read_candidate);
    episode.observe(&[run(&read)]);
    let names: Vec<(String, Vec<(usize, f64)>)> = episode
        .text_candidates
        .iter()
        .filter(|c| c.kind == episode::CallKind::GrepResultName)
        .map(|c| match &c.call {
            ToolCall::Grep(args) => (args.pattern.clone(), features::call_features(&episode, c)),
            other => panic!("{other:?}"),
        })
        .collect();
    let patterns: Vec<&str> = names.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(patterns, ["RetryPolicy\\(", "send\\("]);
    // Both are named in the issue (`RetryPolicy.send`), so both carry the "named in the issue" feature.
    let named = features::GREP_TEXT + 13;
    assert!(names.iter().all(|(_, phi)| phi.contains(&(named, 1.0))), "{names:?}");
    assert!(episode.seen[episode.seen_index[TARGET]].read);
}

/// Feeds one call and its simulated result into `episode` as if the policy had made it.
fn feed(episode: &mut ProxyEpisode, kind: episode::CallKind, call: ToolCall, term: Option<usize>) {
    let result = run(&call);
    observe_call(episode, kind, call, term, result);
}

/// `result` as the sandbox returns it when the output limit cut `more` lines (40 characters each).
fn cut_at_limit(mut result: ToolResult, more: usize) -> ToolResult {
    let chars = 40 * more;
    result.output.push_str(&format!(
        "\n[output cut at 4096 characters: {more} more lines ({chars} characters) not shown; narrow]"
    ));
    result.status = Status::Truncated;
    result
}

/// Hands `result` to `episode` as what calling `call` (a candidate of `kind`, for `term`) returned.
fn observe_call(
    episode: &mut ProxyEpisode,
    kind: episode::CallKind,
    call: ToolCall,
    term: Option<usize>,
    result: ToolResult,
) {
    episode.pending.push(episode::Candidate { kind, call, term, seen: None });
    episode.observe(&[result]);
}

fn grep(pattern: &str) -> ToolCall {
    ToolCall::Grep(rewardlab_sandbox::GrepArgs { pattern: pattern.into(), path: None, case_sensitive: None })
}

#[test]
fn a_file_whose_path_the_issue_names_is_marked_however_it_was_found() {
    let task = TaskPrompt { id: "t".into(), text: ISSUE.into() };
    let config = ProxyConfig { issue_paths: true, ..ProxyConfig::default() };
    let mut episode = ProxyPolicy::new(config).begin(&task, Sampling::Greedy, 0).expect("begin");
    // The traceback's frame `…/site-packages/acme/net/retry.py` names the target; no glob is called.
    assert!(episode.named_paths.iter().any(|p| p == "net/retry.py"), "{:?}", episode.named_paths);
    feed(&mut episode, episode::CallKind::GrepIdentifier, grep("RetryTimer"), None);
    feed(&mut episode, episode::CallKind::GrepIdentifier, grep("RetryPolicy"), None);
    let named = |path: &str| episode.seen[episode.seen_index[path]].by_named_path;
    assert!(named(TARGET), "found by a grep, named by the traceback");
    assert!(!named("acme/net/timer.py") && !named("tests/test_retry.py"));
    let phi = features::file_features(&episode, &episode.seen[episode.seen_index[TARGET]], 0);
    assert!(phi.contains(&(18, 1.0)), "{phi:?}");
    // Whole components only: `retry.py` does not end `net/retry.py`'s `y.py`, nor `xnet/retry.py` it.
    let mut other = ProxyEpisode::new(
        "see `acme/net/retry.py`",
        ChaCha8Rng::seed_from_u64(0),
        None,
        *ProxyPolicy::default().config(),
    );
    other.named_paths = vec!["net/retry.py".into()];
    for (path, want) in
        [("net/retry.py", true), ("src/net/retry.py", true), ("src/xnet/retry.py", false), ("retry.py", false)]
    {
        assert_eq!(other.file(path).by_named_path, want, "{path}");
    }
    // Off by default, and off with the module-path family.
    for off in [ProxyConfig::default(), ProxyConfig { module_paths: false, ..config }] {
        let mut episode = ProxyEpisode::new(ISSUE, ChaCha8Rng::seed_from_u64(0), None, off);
        assert!(episode.named_paths.is_empty());
        assert!(!episode.file("src/acme/net/retry.py").by_named_path);
    }
}

#[test]
fn definition_greps_find_the_file_that_defines_an_issue_name() {
    let task = TaskPrompt { id: "t".into(), text: ISSUE.into() };
    let policy = ProxyPolicy::default();
    let mut episode = policy.begin(&task, Sampling::Greedy, 0).expect("begin");
    let definitions: Vec<(String, usize)> = episode
        .text_candidates
        .iter()
        .filter(|c| c.kind == episode::CallKind::GrepDefinition)
        .map(|c| match &c.call {
            ToolCall::Grep(args) => (args.pattern.clone(), c.term.expect("a definition grep has a term")),
            other => panic!("{other:?}"),
        })
        .collect();
    let patterns: Vec<&str> = definitions.iter().map(|(p, _)| p.as_str()).collect();
    // The class of a dotted name and its last part; plain CamelCase names too.
    for wanted in ["(?:def|class) RetryPolicy\\b", "(?:def|class) send\\b", "(?:def|class) CacheClient\\b"] {
        assert!(patterns.contains(&wanted), "{wanted} missing from {patterns:?}");
    }
    let (pattern, term) = definitions.iter().find(|(p, _)| p.contains("RetryPolicy")).expect("the class grep").clone();
    feed(&mut episode, episode::CallKind::GrepDefinition, grep(&pattern), Some(term));
    let target = &episode.seen[episode.seen_index[TARGET]];
    // Names are kept lowercase: the issue's `LaTeX` is the code's `def latex`.
    assert_eq!(target.defines.iter().collect::<Vec<_>>(), ["retrypolicy"]);
    assert!(target.by_identifier && target.rare_hit, "{target:?}");
    // A plain grep whose hit line is a definition counts too; a use of the name does not.
    feed(&mut episode, episode::CallKind::GrepIdentifier, grep("RetryTimer"), None);
    feed(&mut episode, episode::CallKind::GrepIdentifier, grep("RetryPolicy"), None);
    let timer = &episode.seen[episode.seen_index["acme/net/timer.py"]];
    assert!(timer.defines.contains("retrytimer"), "{timer:?}");
    let test = &episode.seen[episode.seen_index["tests/test_retry.py"]];
    assert!(test.hits > 0 && test.defines.is_empty(), "{test:?}");
    let defines = features::FILE_DEFINES;
    let phi = |path: &str| features::file_features(&episode, &episode.seen[episode.seen_index[path]], 0);
    assert!(phi(TARGET).contains(&(defines, 1.0)));
    assert!(phi("tests/test_retry.py").iter().all(|&(i, _)| i != defines));
    // One name defined (ln 2), named early in the issue (its title): 1 − position ≈ 1.
    let count = |path: &str| phi(path).iter().find(|&&(i, _)| i == 21).map(|&(_, x)| x);
    let early = |path: &str| phi(path).iter().find(|&&(i, _)| i == 22).map(|&(_, x)| x);
    assert_eq!(count(TARGET), Some(2f64.ln()));
    assert!(early(TARGET).is_some_and(|x| x > 0.9), "{:?}", phi(TARGET));
    assert!(early("acme/net/timer.py").is_some_and(|x| x < early(TARGET).unwrap_or(0.0)), "{:?}", phi(TARGET));
    assert_eq!((count("tests/test_retry.py"), early("tests/test_retry.py")), (None, None));
    // A read that shows `def send` marks the file as defining `send`.
    let read =
        ToolCall::Read(rewardlab_sandbox::ReadArgs { path: "acme/cache/client.py".into(), start: None, end: None });
    feed(&mut episode, episode::CallKind::ReadSeen, read, None);
    assert!(episode.seen[episode.seen_index["acme/cache/client.py"]].defines.contains("send"));
    // Without case: an issue that writes `LaTeX` names the file that defines `latex`.
    let mut latex =
        ProxyEpisode::new("# `LaTeX` output is wrong", ChaCha8Rng::seed_from_u64(0), None, *policy.config());
    let hit = ToolResult {
        status: Status::Ok,
        output: "pkg/printing/latex.py:7:def latex(expr):".into(),
        entities: vec![rewardlab_sandbox::Entity::Line { path: "pkg/printing/latex.py".into(), line: 7 }],
    };
    observe_call(&mut latex, episode::CallKind::GrepWord, grep("latex"), None, hit);
    assert!(latex.seen[0].defines.contains("latex"), "{:?}", latex.seen[0]);
    let phi = features::file_features(&latex, &latex.seen[0], 0);
    assert!(phi.contains(&(17, 1.0)), "a title name");
    // The name whole is an issue word (its snake parts `la`, `te`, `x` are too short): the stem
    // `latex` matches, and the path overlaps the issue in it.
    assert!(phi.contains(&(10, 1.0)), "stem is an issue word: {phi:?}");
    assert!(phi.contains(&(19, 2f64.ln())), "path overlap: {phi:?}");
    // Switched off, neither the candidates nor the feature exist.
    let off = ProxyPolicy::new(ProxyConfig { definitions: false, ..ProxyConfig::default() });
    let mut episode = off.begin(&task, Sampling::Greedy, 0).expect("begin");
    assert!(episode.text_candidates.iter().all(|c| c.kind != episode::CallKind::GrepDefinition));
    feed(&mut episode, episode::CallKind::GrepIdentifier, grep("RetryPolicy"), None);
    assert!(episode.seen.iter().all(|f| f.defines.is_empty()));
}

#[test]
fn a_module_level_definition_outranks_methods_of_the_same_name_when_switched_on() {
    let issue = "# Sum of a MatrixSymbol is wrong\n\n`Session.resolve_redirects` drops it too.";
    let hits = |lines: &[(&str, u64, &str)]| ToolResult {
        status: Status::Ok,
        output: lines.iter().map(|(path, line, code)| format!("{path}:{line}:{code}")).collect::<Vec<_>>().join("\n"),
        entities: lines
            .iter()
            .map(|(path, line, _)| rewardlab_sandbox::Entity::Line { path: (*path).into(), line: *line })
            .collect(),
    };
    let handler = ("pkg/assumptions/handlers.py", 40, "    def MatrixSymbol(expr, assumptions):");
    let class = ("pkg/matrices/expr.py", 12, "class MatrixSymbol(MatrixExpr):");
    let method = ("pkg/sessions.py", 90, "    def resolve_redirects(self, resp):");
    let run = |config: ProxyConfig, turns: &[&[(&str, u64, &str)]]| {
        let mut episode = ProxyEpisode::new(issue, ChaCha8Rng::seed_from_u64(0), None, config);
        for lines in turns {
            observe_call(
                &mut episode,
                episode::CallKind::GrepDefinition,
                grep("(?:def|class) MatrixSymbol\\b"),
                None,
                hits(lines),
            );
        }
        let defines = |path: &str| episode.seen[episode.seen_index[path]].defines.clone();
        (defines(handler.0), defines(class.0), defines(method.0))
    };
    let on = ProxyConfig { top_definitions: true, ..ProxyConfig::default() };
    let name = |n: &str| BTreeSet::from([n.to_owned()]);
    // Whether the handler's method is seen a turn before the class or in the same grep after it,
    // the handler stops defining the name; a method whose name has no module-level definition
    // still counts.
    for turns in [&[&[handler][..], &[class, method][..]][..], &[&[class, method, handler][..]][..]] {
        let (h, c, m) = run(on, turns);
        assert_eq!((h, c, m), (BTreeSet::new(), name("matrixsymbol"), name("resolve_redirects")), "{turns:?}");
        // Off (the default), every `def` of the name counts.
        let (h, c, _) = run(ProxyConfig::default(), turns);
        assert_eq!((h, c), (name("matrixsymbol"), name("matrixsymbol")));
    }
}

#[test]
fn rarity_weights_follow_how_many_lines_a_grep_hit_including_cut_ones() {
    assert_eq!(
        episode::cut_lines(
            "a:1:x\n[output cut at 4096 characters: 812 more lines (40000 characters) not shown; narrow]"
        ),
        812
    );
    assert_eq!(episode::cut_lines("a:1:x\nb:2:y"), 0);
    assert_eq!(episode::cut_lines(""), 0);
    let task = TaskPrompt { id: "t".into(), text: ISSUE.into() };
    let mut episode = ProxyPolicy::default().begin(&task, Sampling::Greedy, 0).expect("begin");
    let term = |text: &str| episode.terms.iter().position(|t| t.text == text).expect("an issue term");
    let (rare, common) = (term("RetryTimer"), term("budget"));
    feed(&mut episode, episode::CallKind::GrepIdentifier, grep("RetryTimer"), Some(rare));
    feed(&mut episode, episode::CallKind::GrepWord, grep("budget"), Some(common));
    let timer = &episode.seen[episode.seen_index["acme/net/timer.py"]];
    let client = &episode.seen[episode.seen_index["acme/cache/client.py"]];
    // timer.py was hit by both terms, client.py by the common one only.
    assert!(timer.rarity_max > client.rarity_max && timer.rarity_sum > timer.rarity_max, "{timer:?} {client:?}");
    assert!(timer.rare_hit && !client.rare_hit, "budget hits more than three files");
    // A result cut at the output limit weighs as many lines as it hit, shown or not.
    let cut = cut_at_limit(run(&grep("budget")), 500);
    let mut again = ProxyPolicy::default().begin(&task, Sampling::Greedy, 0).expect("begin");
    observe_call(&mut again, episode::CallKind::GrepWord, grep("budget"), Some(common), cut);
    let cut_client = &again.seen[again.seen_index["acme/cache/client.py"]];
    assert!(cut_client.rarity_max < client.rarity_max, "{} vs {}", cut_client.rarity_max, client.rarity_max);
    assert!(again.term_rarity["budget"] < episode.term_rarity["budget"]);
}

#[test]
fn a_term_whose_grep_found_nothing_is_marked_and_only_code_is_read() {
    let task = TaskPrompt { id: "t".into(), text: ISSUE.into() };
    let mut episode = ProxyPolicy::default().begin(&task, Sampling::Greedy, 0).expect("begin");
    let term = |episode: &ProxyEpisode, text: &str| episode.terms.iter().position(|t| t.text == text).expect("a term");
    // `cache.max_entries` is the issue's spelling: no file writes it, though one defines `max_entries`.
    let dotted = term(&episode, "cache.max_entries");
    feed(&mut episode, episode::CallKind::GrepIdentifier, grep("cache\\.max_entries"), Some(dotted));
    assert!(episode.found_nothing.contains("cache.max_entries"));
    let nothing = features::GREP_TEXT + 16;
    let later: Vec<&episode::Candidate> = episode.text_candidates.iter().filter(|c| c.term == Some(dotted)).collect();
    assert!(later.len() >= 2, "its glob and definition grep are still offered");
    for candidate in later {
        let base = if candidate.kind.is_grep() { features::GREP_TEXT } else { features::GLOB_TEXT };
        assert!(features::call_features(&episode, candidate).contains(&(base + 16, 1.0)), "{candidate:?}");
    }
    // A term whose grep hit lines is not marked, and a restricted repeat that hits nothing does not count.
    let budget = term(&episode, "budget");
    feed(&mut episode, episode::CallKind::GrepWord, grep("budget"), Some(budget));
    let empty = ToolCall::Grep(rewardlab_sandbox::GrepArgs {
        pattern: "no_such_name".into(),
        path: Some("*.md".into()),
        case_sensitive: None,
    });
    let timer = term(&episode, "RetryTimer");
    feed(&mut episode, episode::CallKind::GrepSource, empty, Some(timer));
    assert_eq!(episode.found_nothing.len(), 1, "{:?}", episode.found_nothing);
    assert!(!features::call_features(&episode, &episode.text_candidates[0]).iter().any(|&(i, _)| i == nothing));
    // `budget` hit the docs page and the code; only the code is offered for reading, unless asked.
    assert!(episode.seen_index.contains_key("docs/budget.md"));
    let reads = |episode: &ProxyEpisode| -> Vec<String> {
        episode
            .available(8)
            .into_iter()
            .filter_map(|c| match c.call {
                ToolCall::Read(args) => Some(args.path),
                _ => None,
            })
            .collect()
    };
    let code_only = reads(&episode);
    assert!(!code_only.is_empty() && code_only.iter().all(|p| features::is_code(p)), "{code_only:?}");
    episode.config.code_reads = false;
    assert!(reads(&episode).contains(&"docs/budget.md".to_string()), "off: any seen file");
}

/// The episode's glob candidates built from the issue: kind and pattern.
fn glob_candidates(episode: &ProxyEpisode) -> Vec<(episode::CallKind, String)> {
    episode
        .text_candidates
        .iter()
        .filter_map(|c| match &c.call {
            ToolCall::Glob(args) => Some((c.kind, args.pattern.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn dotted_modules_and_traceback_paths_become_globs_of_named_paths() {
    let issue = "Wrong result from sympy.core.basic.Basic.subs\n\n```\nTraceback (most recent call last):\n  File \"/usr/lib/python3/site-packages/acme/net/retry.py\", line 3, in send\nValueError: bad\n```\n";
    let task = TaskPrompt { id: "t".into(), text: issue.into() };
    let policy = ProxyPolicy::default();
    let mut episode = policy.begin(&task, Sampling::Greedy, 0).expect("begin");
    let globs = glob_candidates(&episode);
    let module = |p: &str| (episode::CallKind::GlobModule, p.to_owned());
    assert!(globs.contains(&module("**/sympy/core/basic.py")), "{globs:?}");
    assert!(globs.contains(&module("**/sympy/core.py")), "{globs:?}");
    assert!(globs.iter().all(|(_, p)| !p.contains("Basic.py")), "attributes are not modules: {globs:?}");
    let frame = globs.iter().find(|(k, _)| *k == episode::CallKind::GlobPath).expect("the traceback frame").clone();
    assert_eq!(frame.1, "**/net/retry.py");
    let call = ToolCall::Glob(rewardlab_sandbox::GlobArgs { pattern: frame.1 });
    feed(&mut episode, episode::CallKind::GlobPath, call, None);
    let target = &episode.seen[episode.seen_index[TARGET]];
    assert!(target.by_named_path && target.by_glob);
    assert!(features::file_features(&episode, target, 0).contains(&(18, 1.0)));
    let off = ProxyPolicy::new(ProxyConfig { module_paths: false, ..ProxyConfig::default() });
    let episode = off.begin(&task, Sampling::Greedy, 0).expect("begin");
    assert!(episode.text_candidates.iter().all(|c| c.kind != episode::CallKind::GlobModule));
}

#[test]
fn the_answer_is_a_ranking_and_a_learned_size() {
    let task = TaskPrompt { id: "t".into(), text: ISSUE.into() };
    // Every seen file is a candidate here (the docs page too), so the count below is of all of them.
    let policy = ProxyPolicy::new(ProxyConfig { code_answers: false, ..ProxyConfig::default() });
    let mut episode = policy.begin(&task, Sampling::Sample { temperature: 1.0 }, 3).expect("begin");
    feed(&mut episode, episode::CallKind::GrepWord, grep("budget"), None);
    let seen = episode.seen.len();
    assert!(seen >= 4, "{seen} files seen");
    let units_before = episode.units.len();
    let answer = policy.answer(&mut episode);
    let Answer::Structured { files, .. } = answer else { panic!("structured") };
    // K = 4 picks (a unit each while more than one file is left) and one size decision.
    let n = seen.min(policy.config().max_answer_files);
    let k = policy.config().max_answer_size.min(n);
    let picks = (0..k).filter(|j| n - j > 1).count();
    assert_eq!(episode.units.len() - units_before, picks + 1);
    let size = episode.units.last().expect("the size unit");
    assert_eq!(size.options.len(), k);
    assert!((1..=k).contains(&files.len()) && files.len() == size.chosen + 1);
    // The prior favours one file, and option 1 carries only its bias.
    let p: Vec<f64> = loglinear::log_softmax(&loglinear::logits(policy.theta(), &size.options, 1.0))
        .iter()
        .map(|l| l.exp())
        .collect();
    assert!(p[0] > 0.4 && p.iter().skip(1).all(|&x| x < p[0]), "{p:?}");
    assert_eq!(size.options[0], vec![(features::SIZE_BIAS, 1.0)]);
    // Larger sizes add the features of the files they add (the second pick's hits, at least).
    assert!(size.options[1].iter().any(|&(i, _)| i >= features::SIZE_FILE), "{:?}", size.options[1]);
    // Learning moves the size: rewarding size 3 makes it the greedy choice.
    let mut trained = policy.clone();
    for _ in 0..60 {
        let options = size.options.clone();
        let unit =
            loglinear::decide(trained.theta(), options, loglinear::Draw::Greedy, &mut ChaCha8Rng::seed_from_u64(0));
        let target = loglinear::Unit { chosen: 2, ..unit };
        // A loss of −log p(size 3): its coefficient is −1.
        target.accumulate(&trained.theta, -1.0, &mut trained.grad);
        trained.step(&optim(0.1)).expect("step");
    }
    let after = loglinear::log_softmax(&loglinear::logits(trained.theta(), &size.options, 1.0));
    let best = (0..after.len()).max_by(|&a, &b| after[a].total_cmp(&after[b])).expect("options");
    assert_eq!(best, 2, "{after:?}");
    // With the size switched off every file gets its own include decision.
    let bernoulli = ProxyPolicy::new(ProxyConfig { answer_size: false, code_answers: false, ..ProxyConfig::default() });
    let mut episode = bernoulli.begin(&task, Sampling::Greedy, 0).expect("begin");
    feed(&mut episode, episode::CallKind::GrepWord, grep("budget"), None);
    let Answer::Structured { files, .. } = bernoulli.answer(&mut episode) else { panic!("structured") };
    assert_eq!(episode.units.len(), episode.seen.len());
    assert!(episode.units.iter().all(|u| u.options.len() == 2 && u.options[0][0] == (features::INCLUDE_FILE, 1.0)));
    assert_eq!(files.len(), episode.seen.len(), "θ = 0 includes every file (ties go to include)");
}

#[test]
fn names_written_as_code_are_identifiers_and_builtins_are_not() {
    let issue = "# bell(n).limit(n, oo) should be oo\n\nThe `Permutation` constructor and `apart` fail; \
                 print(len(x)) works, and so does trigsimp(f). The bell numbers ...";
    let terms = text::extract(issue, &ProxyConfig::default());
    let identifier = |name: &str| terms.iter().any(|t| t.source == text::Source::Identifier && t.text == name);
    // Switched off, only names shaped like code are identifiers.
    let plain = text::extract(issue, &ProxyConfig { code_names: false, ..ProxyConfig::default() });
    assert!(
        !plain.iter().any(|t| t.source == text::Source::Identifier && ["bell", "apart"].contains(&t.text.as_str()))
    );
    for name in ["bell", "Permutation", "apart", "trigsimp"] {
        assert!(identifier(name), "{name}: {terms:?}");
    }
    for name in ["print", "len", "limit"] {
        // `limit` is dotted onto `bell(n)` (`.limit`), which the token rule skips as a name.
        assert!(!identifier(name), "{name}: {terms:?}");
    }
    // An identifier offers a definition grep: `bell(n)` finds where bell is defined.
    let episode = ProxyEpisode::new(issue, ChaCha8Rng::seed_from_u64(0), None, ProxyConfig::default());
    assert!(
        episode
            .text_candidates
            .iter()
            .any(|c| c.kind == episode::CallKind::GrepDefinition && c.call == grep("(?:def|class) bell\\b")),
        "{:?}",
        episode.text_candidates
    );
}

#[test]
fn files_that_are_not_source_code_are_marked_and_ranked_last_by_the_prior() {
    let issue = "`frobnicate` misbehaves";
    let policy = ProxyPolicy::new(ProxyConfig { ranking_prior: true, code_answers: false, ..ProxyConfig::default() });
    let mut episode = ProxyEpisode::new(issue, ChaCha8Rng::seed_from_u64(0), None, *policy.config());
    let paths = ["CHANGELOG.rst", "docs/api.py", "pkg/tests/test_core.py", "pkg/core.py", "data/frob.json"];
    let output: String = paths.iter().map(|p| format!("{p}:3:frobnicate()\n")).collect();
    let result = ToolResult {
        status: Status::Ok,
        output,
        entities: paths.iter().map(|p| rewardlab_sandbox::Entity::Line { path: (*p).into(), line: 3 }).collect(),
    };
    observe_call(&mut episode, episode::CallKind::GrepIdentifier, grep("frobnicate"), Some(0), result);
    for (i, path) in paths.iter().enumerate() {
        let phi = features::file_features(&episode, &episode.seen[i], i);
        let marked = phi.iter().any(|&(j, x)| j == features::FILE_NOT_SOURCE && x == 1.0);
        assert_eq!(marked, *path != "pkg/core.py", "{path}: {phi:?}");
    }
    // Every file has the same hits and rarity, so the prior alone puts the source file first,
    // although it was found fourth.
    let Answer::Structured { files, .. } = policy.answer(&mut episode) else { panic!("structured") };
    assert_eq!(files[0], "pkg/core.py", "{files:?}");
    // Without the prior the ranking starts in hit order (the changelog first); answering source
    // code only, every answer size names the source file alone.
    let uniform = ProxyPolicy::new(ProxyConfig { code_answers: false, ..ProxyConfig::default() });
    let Answer::Structured { files, .. } = uniform.answer(&mut episode.clone()) else { panic!("structured") };
    assert_eq!(files[0], "CHANGELOG.rst", "{files:?}");
    let code_only = ProxyPolicy::default();
    for seed in 0..8 {
        let mut sampled = episode.clone();
        sampled.rng = ChaCha8Rng::seed_from_u64(seed);
        sampled.temperature = Some(1.0);
        let Answer::Structured { files, .. } = code_only.answer(&mut sampled) else { panic!("structured") };
        assert_eq!(files, ["pkg/core.py"], "seed {seed}");
    }
    // With no source file seen, the answer still names what was seen.
    let mut no_code = ProxyEpisode::new(issue, ChaCha8Rng::seed_from_u64(0), None, *code_only.config());
    observe_call(
        &mut no_code,
        episode::CallKind::GrepIdentifier,
        grep("x"),
        Some(0),
        ToolResult {
            status: Status::Ok,
            output: "CHANGELOG.rst:3:frobnicate()\n".into(),
            entities: vec![rewardlab_sandbox::Entity::Line { path: "CHANGELOG.rst".into(), line: 3 }],
        },
    );
    let Answer::Structured { files, .. } = code_only.answer(&mut no_code) else { panic!("structured") };
    assert_eq!(files, ["CHANGELOG.rst"]);
}

#[test]
fn a_cut_grep_is_offered_again_over_source_files_only() {
    let task = TaskPrompt { id: "t".into(), text: ISSUE.into() };
    let source_greps = |episode: &ProxyEpisode| -> Vec<(Option<String>, String, Option<usize>)> {
        episode
            .text_candidates
            .iter()
            .filter(|c| c.kind == episode::CallKind::GrepSource)
            .map(|c| match &c.call {
                ToolCall::Grep(args) => (args.path.clone(), args.pattern.clone(), c.term),
                other => panic!("{other:?}"),
            })
            .collect()
    };
    let cut_budget = |episode: &mut ProxyEpisode, term: usize| {
        let cut = cut_at_limit(run(&grep("budget")), 300);
        observe_call(episode, episode::CallKind::GrepWord, grep("budget"), Some(term), cut);
    };
    let mut episode = ProxyPolicy::default().begin(&task, Sampling::Greedy, 0).expect("begin");
    let budget = episode.terms.iter().position(|t| t.text == "budget").expect("an issue term");
    // A complete output shows every hit already: nothing to repeat.
    feed(&mut episode, episode::CallKind::GrepIdentifier, grep("RetryPolicy"), None);
    assert!(source_greps(&episode).is_empty());
    // A cut one is offered again over `*.py`, the extension of the source files seen (tests and
    // docs/budget.md are not source code and do not vote), with the same term.
    cut_budget(&mut episode, budget);
    assert_eq!(source_greps(&episode), [(Some("*.py".to_owned()), "budget".to_owned(), Some(budget))]);
    assert!(episode.available(0).iter().any(|c| c.kind == episode::CallKind::GrepSource), "offered as a call");
    // Its hits count as the term's own kind of hit, with the term's rarity in the whole tree.
    let whole = episode.term_rarity["budget"];
    let restricted = ToolCall::Grep(rewardlab_sandbox::GrepArgs {
        pattern: "budget".into(),
        path: Some("*.py".into()),
        case_sensitive: None,
    });
    let target_hits = episode.seen[episode.seen_index[TARGET]].hits;
    feed(&mut episode, episode::CallKind::GrepSource, restricted, Some(budget));
    assert_eq!(episode.term_rarity["budget"], whole, "the restricted copy keeps the term's rarity in the tree");
    let target = &episode.seen[episode.seen_index[TARGET]];
    assert!(target.by_word && target.hits > target_hits, "{target:?}");
    // A grep with a path filter is never repeated, and the switch turns the candidates off.
    assert_eq!(source_greps(&episode).len(), 1);
    let off = ProxyPolicy::new(ProxyConfig { source_greps: false, ..ProxyConfig::default() });
    let mut episode = off.begin(&task, Sampling::Greedy, 0).expect("begin");
    feed(&mut episode, episode::CallKind::GrepIdentifier, grep("RetryPolicy"), None);
    cut_budget(&mut episode, budget);
    assert!(source_greps(&episode).is_empty());
}

#[test]
fn a_cut_that_hid_every_source_file_is_repeated_over_every_source_extension_and_marked() {
    let task = TaskPrompt { id: "t".into(), text: ISSUE.into() };
    // The first grep's output is docs and a changelog up to the cut: no source file, so no
    // extension to restrict to.
    let docs_only = |episode: &mut ProxyEpisode| {
        let term = episode.terms.iter().position(|t| t.text == "budget").expect("an issue term");
        let shown = ToolResult {
            status: Status::Ok,
            output: "CHANGELOG.rst:3:budget\ndocs/budget.md:1:budget".into(),
            entities: ["CHANGELOG.rst:3", "docs/budget.md:1"]
                .iter()
                .map(|e| rewardlab_sandbox::Entity::parse(e))
                .collect(),
        };
        observe_call(episode, episode::CallKind::GrepWord, grep("budget"), Some(term), cut_at_limit(shown, 300));
    };
    let repeat = |episode: &ProxyEpisode| {
        episode.text_candidates.iter().find(|c| c.kind == episode::CallKind::GrepSource).cloned()
    };
    let on = ProxyPolicy::new(ProxyConfig { hidden_source: true, ..ProxyConfig::default() });
    let mut episode = on.begin(&task, Sampling::Greedy, 0).expect("begin");
    docs_only(&mut episode);
    let candidate = repeat(&episode).expect("repeated although no source file was seen");
    let ToolCall::Grep(args) = &candidate.call else { panic!("{candidate:?}") };
    let filter = args.path.as_deref().expect("a path filter");
    assert!(filter.starts_with("*.{py,") && filter.ends_with('}'), "{filter}");
    for ext in rewardlab_protocol::paths::SOURCE_EXTENSIONS {
        assert!(
            filter.contains(&format!(",{ext},"))
                || filter.contains(&format!("{{{ext},"))
                || filter.ends_with(&format!(",{ext}}}")),
            "{ext}"
        );
    }
    let hidden = features::GREP_TEXT + 17;
    assert!(
        features::call_features(&episode, &candidate).contains(&(hidden, 1.0)),
        "marked: the cut hid every source file"
    );
    // A cut that showed source code leaves the repeat unmarked (and restricted to its extension).
    let mut shown = on.begin(&task, Sampling::Greedy, 0).expect("begin");
    feed(&mut shown, episode::CallKind::GrepIdentifier, grep("RetryPolicy"), None);
    let budget = shown.terms.iter().position(|t| t.text == "budget").expect("an issue term");
    let cut = cut_at_limit(run(&grep("budget")), 300);
    observe_call(&mut shown, episode::CallKind::GrepWord, grep("budget"), Some(budget), cut);
    let candidate = repeat(&shown).expect("repeated");
    assert!(!features::call_features(&shown, &candidate).iter().any(|&(i, _)| i == hidden));
    // Off (the default): nothing to repeat before a source file is seen.
    let mut episode = ProxyPolicy::default().begin(&task, Sampling::Greedy, 0).expect("begin");
    docs_only(&mut episode);
    assert!(repeat(&episode).is_none() && episode.hid_source.is_empty());
}

#[test]
fn word_and_identifier_greps_may_search_source_files_only() {
    let task = TaskPrompt { id: "t".into(), text: ISSUE.into() };
    let filters = |config: ProxyConfig, kind: episode::CallKind| -> BTreeSet<Option<String>> {
        let episode = ProxyPolicy::new(config).begin(&task, Sampling::Greedy, 0).expect("begin");
        let filters: BTreeSet<Option<String>> = episode
            .text_candidates
            .iter()
            .filter(|c| c.kind == kind)
            .map(|c| match &c.call {
                ToolCall::Grep(args) => args.path.clone(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert!(!filters.is_empty(), "{kind:?} candidates");
        filters
    };
    let (word, identifier) = (episode::CallKind::GrepWord, episode::CallKind::GrepIdentifier);
    let default = ProxyConfig::default();
    assert_eq!(filters(default, word), BTreeSet::from([None]));
    assert_eq!(filters(default, identifier), BTreeSet::from([None]));
    let words = ProxyConfig { source_word_greps: true, ..default };
    let word_filters: Vec<Option<String>> = filters(words, word).into_iter().collect();
    let [Some(filter)] = word_filters.as_slice() else { panic!("one filter: {word_filters:?}") };
    let filter = filter.clone();
    assert!(filter.starts_with("*.{py,"), "{filter}");
    assert_eq!(filters(words, identifier), BTreeSet::from([None]));
    let both = ProxyConfig { source_identifier_greps: true, ..words };
    assert_eq!(filters(both, identifier), BTreeSet::from([Some(filter)]));
}

#[test]
fn greedy_episodes_use_the_moving_average_when_asked_and_it_survives_a_restore() {
    let config = ProxyConfig { eval_average: 0.5, ..ProxyConfig::default() };
    let mut policy = ProxyPolicy::new(config);
    let start = policy.theta().to_vec();
    // One step on a pushed gradient: θ moves, θ̄ moves half way.
    policy.grad[features::SIZE_BIAS + 1] = -1.0;
    policy.step(&optim(0.1)).expect("step");
    let moved = policy.theta()[features::SIZE_BIAS + 1];
    assert!(moved != start[features::SIZE_BIAS + 1]);
    assert_eq!(policy.average[features::SIZE_BIAS + 1], 0.5 * start[features::SIZE_BIAS + 1] + 0.5 * moved);
    // Greedy decisions score with θ̄, sampled ones with θ: a policy whose θ̄ is another
    // policy's θ acts greedily like that policy, and unlike its own θ.
    let mut mixed = perturbed();
    mixed.config.eval_average = 0.5;
    mixed.average = mixed.theta.iter().map(|x| -x).collect();
    let logps = |p: &ProxyPolicy, sampling| -> Vec<(usize, f64)> {
        rollout(p, sampling, 3, 3).0.units.iter().map(|u| (u.chosen, u.logp)).collect()
    };
    let as_average = ProxyPolicy { config: ProxyConfig::default(), theta: mixed.average.clone(), ..mixed.clone() };
    let as_theta = ProxyPolicy { config: ProxyConfig::default(), ..mixed.clone() };
    assert_eq!(logps(&mixed, Sampling::Greedy), logps(&as_average, Sampling::Greedy));
    assert_ne!(logps(&mixed, Sampling::Greedy), logps(&as_theta, Sampling::Greedy));
    let sample = Sampling::Sample { temperature: 1.0 };
    assert_eq!(logps(&mixed, sample), logps(&as_theta, sample));
    // The checkpoint keeps θ̄ bit for bit, and a θ̄ of another layout is refused.
    let mut restored = ProxyPolicy::default();
    restored.restore(policy.state().expect("state")).expect("restore");
    assert_eq!(restored.average, policy.average);
    let mut short = policy.state().expect("state");
    short.average.pop();
    assert_eq!(restored.restore(short), Err(ProxyError::Dimension { field: "average", got: DIM - 1, expected: DIM }));
    // Off by default; a decay of 1 or more is refused when read.
    assert_eq!(ProxyConfig::default().eval_average, 0.0);
    let err = serde_json::from_str::<ProxyConfig>(r#"{"eval_average": 1.0}"#).expect_err("refused");
    assert!(err.to_string().contains("eval_average must lie in [0, 1)"), "{err}");
}

/// A policy whose "continue thinking" logit is `bias` (everything else at the prior).
fn thinker(bias: f64, config: ProxyConfig) -> ProxyPolicy {
    let mut policy = ProxyPolicy::new(config);
    policy.theta[features::THINK_CONTINUE] = bias;
    policy
}

#[test]
fn thinking_adds_chunks_the_policy_chooses_and_the_budget_cuts_the_rollout() {
    let sample = Sampling::Sample { temperature: 1.0 };
    let turn = |index| TurnInfo { index, max_turns: 4, max_calls_per_turn: 8, must_answer: index == 3 };
    // Nearly always "continue": every turn thinks its whole cap of chunks.
    let config = ProxyConfig { max_completion_tokens: 100_000, ..ProxyConfig::default() };
    let long = thinker(12.0, config);
    let task = TaskPrompt { id: "t".into(), text: ISSUE.into() };
    let mut episode = long.begin(&task, sample, 1).expect("begin");
    let out = long.act(&mut [&mut episode], turn(0)).expect("act").pop().expect("an output");
    let TurnOutput::Calls(calls) = out else { panic!("turn 0 calls: {out:?}") };
    let think = config.max_think_chunks * TOKENS_PER_THINK_CHUNK;
    assert_eq!(long.completion_tokens(&episode), TOKENS_PER_TURN + think + TOKENS_PER_CALL * calls.len());
    // One unit per thinking decision: the cap of continues, no stop after the last.
    assert!(episode.units.len() >= config.max_think_chunks);

    // "Stop" nearly always: no thinking tokens, and θ = 0 thinks nothing when greedy (ties go to "stop").
    let short = thinker(-12.0, ProxyConfig::default());
    let (episode, answer) = rollout(&short, sample, 1, 4);
    assert!(answer.is_some());
    let Some(Answer::Structured { files, .. }) = &answer else { panic!("structured: {answer:?}") };
    let turns = episode.tokens / TOKENS_PER_TURN; // an upper bound; exact below
    assert!(turns >= 1);
    assert!(
        (1..=4).any(|t| episode.tokens
            == t * TOKENS_PER_TURN + TOKENS_PER_CALL * episode.used.len() + TOKENS_PER_FILE * files.len()),
        "no thinking tokens: {}",
        episode.tokens
    );
    let (_, greedy) = rollout(&ProxyPolicy::default(), Sampling::Greedy, 0, 4);
    assert!(greedy.is_some());

    // A budget the thinking runs past: the rollout is cut there, without an answer.
    let budget = 3 * TOKENS_PER_THINK_CHUNK;
    let cut = thinker(12.0, ProxyConfig { max_completion_tokens: budget, ..ProxyConfig::default() });
    let mut episode = cut.begin(&task, sample, 2).expect("begin");
    let out = cut.act(&mut [&mut episode], turn(0)).expect("act").pop().expect("an output");
    assert_eq!(out, TurnOutput::Truncated);
    assert_eq!(cut.completion_tokens(&episode), budget, "cut at the budget");
    assert!(episode.pending.is_empty(), "no calls of a cut turn wait for results");

    // The thinking's length never changes what the rollout searched or answered.
    let (a, answer_a) = rollout(&thinker(-12.0, config), Sampling::Greedy, 0, 4);
    let (b, answer_b) = rollout(&ProxyPolicy::new(ProxyConfig { think: false, ..config }), Sampling::Greedy, 0, 4);
    assert_eq!((answer_a, a.used), (answer_b, b.used));
}

#[test]
fn greedy_thinking_by_length_takes_the_likeliest_number_of_chunks() {
    let config = ProxyConfig { max_completion_tokens: 100_000, greedy_think_length: false, ..ProxyConfig::default() };
    let by_length = ProxyConfig { greedy_think_length: true, ..config };
    let turn = TurnInfo { index: 0, max_turns: 4, max_calls_per_turn: 8, must_answer: false };
    let task = TaskPrompt { id: "t".into(), text: ISSUE.into() };
    let think_tokens = |policy: &ProxyPolicy| {
        let mut episode = policy.begin(&task, Sampling::Greedy, 0).expect("begin");
        let out = policy.act(&mut [&mut episode], turn).expect("act").pop().expect("an output");
        let TurnOutput::Calls(calls) = out else { panic!("turn 0 calls: {out:?}") };
        policy.completion_tokens(&episode) - TOKENS_PER_TURN - TOKENS_PER_CALL * calls.len()
    };
    // "Continue" at σ(0.2) ≈ 0.55 in every chunk: chunk by chunk, greedy thinks to the cap; the
    // likeliest length of that chain is none (0.45 against 0.55 · 0.45 for one chunk, and so on).
    let cap = config.max_think_chunks * TOKENS_PER_THINK_CHUNK;
    assert_eq!(think_tokens(&thinker(0.2, config)), cap);
    assert_eq!(think_tokens(&thinker(0.2, by_length)), 0);
    // Nearly sure to continue: both think to the cap. Nearly sure to stop: neither thinks.
    assert_eq!(think_tokens(&thinker(12.0, by_length)), cap);
    assert_eq!(think_tokens(&thinker(-12.0, by_length)), 0);
    // Sampled episodes are unchanged by the switch (same draws, same tokens).
    let sample = Sampling::Sample { temperature: 1.0 };
    let (a, _) = rollout(&thinker(0.2, config), sample, 3, 4);
    let (b, _) = rollout(&thinker(0.2, by_length), sample, 3, 4);
    assert_eq!((a.tokens, a.used), (b.tokens, b.used));

    // A "continue" that fades with the chunks thought: the mode against every length's
    // probability written out.
    let mut theta = vec![0.0; DIM];
    theta[features::THINK_CONTINUE] = 2.0;
    theta[features::THINK_CONTINUE + features::STATE + 1] = -8.0;
    let state = [1.0; features::STATE];
    let cap = 16;
    let go_on = |chunk: usize| {
        let logits = loglinear::logits(&theta, &features::think_options(&state, false, chunk, cap), 1.0);
        1.0 / (1.0 + (logits[0] - logits[1]).exp())
    };
    let probability = |n: usize| (0..n).map(go_on).product::<f64>() * if n < cap { 1.0 - go_on(n) } else { 1.0 };
    let total: f64 = (0..=cap).map(probability).sum();
    assert!((total - 1.0).abs() < 1e-12, "the lengths' probabilities sum to {total}");
    let mode = (0..=cap).fold(0, |best, n| if probability(n) > probability(best) { n } else { best });
    assert_eq!(likeliest_length(&theta, &state, false, cap), mode);
    assert!(mode > 0 && mode < cap, "an interior mode: {mode}");
}

#[test]
fn a_greedy_turn_answers_only_when_answering_holds_half_the_count_decision() {
    // Answer with probability 0.4, each of eight call counts with 0.075 (θ = 0 elsewhere).
    let mut theta = vec![0.0; DIM];
    theta[features::COUNT_BIAS] = (0.4f64 / 0.075).ln();
    let state = [0.0; features::STATE];
    let options = features::count_options(&state, 8);
    let p = loglinear::log_softmax(&loglinear::logits(&theta, &options, 1.0));
    assert!((p[0].exp() - 0.4).abs() < 1e-12 && (p[1].exp() - 0.075).abs() < 1e-12);
    assert_eq!(search_or_answer(&theta, &options), 1, "searching holds 0.6: the likeliest count, ties to fewer");
    theta[features::COUNT_BIAS + 3] = 0.5;
    assert_eq!(search_or_answer(&theta, &options), 3);
    theta[features::COUNT_BIAS] = (9.0 * (7.0 + 0.5f64.exp())).ln();
    assert_eq!(search_or_answer(&theta, &options), 0, "answering holds 0.9");

    // Through a turn: the flat argmax answers at 0.4 against 0.075 each, the two-step rule searches.
    let turn = TurnInfo { index: 1, max_turns: 4, max_calls_per_turn: 8, must_answer: false };
    let task = TaskPrompt { id: "t".into(), text: ISSUE.into() };
    let act = |greedy_answer_mass: bool| {
        let config = ProxyConfig { think: false, greedy_answer_mass, ..ProxyConfig::default() };
        let mut policy = ProxyPolicy::new(config);
        policy.theta = vec![0.0; DIM];
        policy.theta[features::COUNT_BIAS] = (0.4f64 / 0.075).ln();
        let mut episode = policy.begin(&task, Sampling::Greedy, 0).expect("begin");
        policy.act(&mut [&mut episode], turn).expect("act").pop().expect("an output")
    };
    assert!(matches!(act(false), TurnOutput::Answer(_)), "flat argmax answers");
    let TurnOutput::Calls(calls) = act(true) else { panic!("the two-step rule searches") };
    assert_eq!(calls.len(), 1);
    // Sampled turns are the same draws either way.
    let sample = Sampling::Sample { temperature: 1.0 };
    let with = ProxyConfig { greedy_answer_mass: true, ..ProxyConfig::default() };
    let (a, _) = rollout(&ProxyPolicy::new(with), sample, 3, 4);
    let (b, _) = rollout(&ProxyPolicy::new(ProxyConfig { greedy_answer_mass: false, ..with }), sample, 3, 4);
    assert_eq!((a.tokens, a.used), (b.tokens, b.used));
}

#[test]
fn the_thinking_decision_learns_from_the_advantage_like_any_other() {
    // REINFORCE that pays for long completions raises the continue logit; paying for short ones lowers it.
    for (sign, expect_up) in [(1.0, true), (-1.0, false)] {
        let mut policy = ProxyPolicy::default();
        for iteration in 0..20u64 {
            let runs: Vec<ProxyEpisode> = (0..8)
                .map(|g| rollout(&policy, Sampling::Sample { temperature: 1.0 }, iteration * 100 + g, 4).0)
                .collect();
            let lens: Vec<f64> = runs.iter().map(|e| e.tokens as f64).collect();
            let mean = lens.iter().sum::<f64>() / lens.len() as f64;
            let refs: Vec<&ProxyEpisode> = runs.iter().collect();
            let coeffs: Vec<Vec<f64>> =
                refs.iter().zip(&lens).map(|(e, l)| vec![-sign * (l - mean) / 800.0; e.units.len()]).collect();
            policy.backward(&refs, &coeffs).expect("backward");
            policy.step(&optim(0.1)).expect("step");
        }
        let bias = policy.theta()[features::THINK_CONTINUE];
        assert_eq!(bias > 0.3, expect_up, "continue bias {bias} after rewarding sign {sign}");
        assert_eq!(bias < -0.3, !expect_up, "continue bias {bias} after rewarding sign {sign}");
    }
}

#[test]
fn prose_words_and_acronyms_are_globbed_and_a_stem_holding_an_issue_word_is_marked() {
    let issue = "# The parser drops cache keys\n\n`LaTeX` output and `RetryPolicy` are fine.";
    let task = TaskPrompt { id: "t".into(), text: issue.into() };
    let policy = ProxyPolicy::default();
    let mut episode = policy.begin(&task, Sampling::Greedy, 0).expect("begin");
    let found = glob_candidates(&episode);
    for word in ["**/*parser*", "**/*cache*", "**/*keys*"] {
        assert!(found.contains(&(episode::CallKind::GlobWord, word.to_owned())), "{word}: {found:?}");
    }
    // An acronym split at its capitals is looked for whole too; a CamelCase name only as snake case.
    let identifier = |p: &str| (episode::CallKind::GlobIdentifier, p.to_owned());
    assert!(found.contains(&identifier("**/*la_te_x*")) && found.contains(&identifier("**/*latex*")), "{found:?}");
    assert!(found.contains(&identifier("**/*retry_policy*")), "{found:?}");
    assert!(!found.iter().any(|(_, p)| p == "**/*retrypolicy*"), "{found:?}");
    // A glob's files: the stem that holds "cache" is marked, the stem that is "cache" and an
    // unrelated one are not (feature 23).
    let paths = ["pkg/cacheprovider.py", "pkg/cache.py", "pkg/other.py"];
    let hit = ToolResult {
        status: Status::Ok,
        output: paths.join("\n"),
        entities: paths.iter().map(|p| rewardlab_sandbox::Entity::Path((*p).into())).collect(),
    };
    let call = ToolCall::Glob(rewardlab_sandbox::GlobArgs { pattern: "**/*cache*".into() });
    episode.pending.push(episode::Candidate { kind: episode::CallKind::GlobWord, call, term: None, seen: None });
    episode.observe(&[hit]);
    let holds =
        |path: &str| features::file_features(&episode, &episode.seen[episode.seen_index[path]], 0).contains(&(23, 1.0));
    assert_eq!(paths.map(holds), [true, false, false]);
    // Switched off, no word globs.
    let off = ProxyPolicy::new(ProxyConfig { word_globs: false, ..ProxyConfig::default() });
    let episode = off.begin(&task, Sampling::Greedy, 0).expect("begin");
    assert!(glob_candidates(&episode).iter().all(|(k, _)| *k != episode::CallKind::GlobWord));
}

#[test]
fn a_read_file_is_scored_by_the_share_of_the_issue_words_it_showed() {
    let task = TaskPrompt { id: "t".into(), text: ISSUE.into() };
    let share = |episode: &ProxyEpisode, path: &str| {
        features::file_features(episode, &episode.seen[episode.seen_index[path]], 0)
            .iter()
            .find(|&&(i, _)| i == 24)
            .map(|&(_, x)| x)
    };
    let read = |path: &str| ToolCall::Read(rewardlab_sandbox::ReadArgs { path: path.into(), start: None, end: None });
    for on in [true, false] {
        let policy = ProxyPolicy::new(ProxyConfig { read_words: on, ..ProxyConfig::default() });
        let mut episode = policy.begin(&task, Sampling::Greedy, 0).expect("begin");
        feed(&mut episode, episode::CallKind::GrepWord, grep("budget"), None);
        feed(&mut episode, episode::CallKind::ReadSeen, read(TARGET), None);
        let target = &episode.seen[episode.seen_index[TARGET]];
        if !on {
            assert!(target.read_words.is_empty() && share(&episode, TARGET).is_none());
            continue;
        }
        // `class RetryPolicy: def send(self, budget)` shows the issue's `retry`, `policy`, `send`
        // and `budget`, and `raise ValueError` its `valueerror` (whole) and `value`.
        for word in ["retry", "policy", "send", "budget", "valueerror", "value"] {
            assert!(target.read_words.contains(word), "{word}: {:?}", target.read_words);
        }
        let expected = target.read_words.len() as f64 / episode.issue_words.len() as f64;
        assert_eq!(share(&episode, TARGET), Some(expected));
        // A file seen by the grep but not read has no share.
        let unread = episode.seen.iter().find(|f| !f.read).expect("an unread file").path.clone();
        assert_eq!(share(&episode, &unread), None);
    }
}

#[test]
fn capitalised_words_are_prose_words_as_code_spells_them() {
    let issue = "Mathematica parser: Zarr stores lose LaTeX and ASCII names\n\nThe parser fails.";
    let words = |config: &ProxyConfig| -> Vec<String> {
        text::extract(issue, config).into_iter().filter(|t| t.source == text::Source::Word).map(|t| t.text).collect()
    };
    let on = words(&ProxyConfig::default());
    for word in ["mathematica", "zarr", "stores", "parser"] {
        assert!(on.iter().any(|w| w == word), "{word}: {on:?}");
    }
    // Names with capitals after the first letter are identifiers, not words; a capitalised stop
    // word (`The`) is still a stop word.
    assert!(on.iter().all(|w| !matches!(w.as_str(), "latex" | "ascii" | "the")), "{on:?}");
    let off = words(&ProxyConfig { capitalised_words: false, ..ProxyConfig::default() });
    assert!(off.iter().all(|w| w != "mathematica" && w != "zarr"), "{off:?}");
    assert!(off.iter().any(|w| w == "stores"), "{off:?}");
}

#[test]
fn first_turn_calls_are_the_first_turns_candidates() {
    let policy = ProxyPolicy::default();
    let calls = policy.first_turn_calls(ISSUE);
    let episode = ProxyEpisode::new(ISSUE, ChaCha8Rng::seed_from_u64(7), None, *policy.config());
    let offered: Vec<ToolCall> = episode.available(6).into_iter().map(|c| c.call).collect();
    assert_eq!(calls, offered, "nothing is seen yet, so no read is on offer");
    assert!(calls.iter().any(|c| matches!(c, ToolCall::Grep(g) if g.pattern == "(?:def|class) send\\b")), "{calls:?}");
    assert!(calls.iter().any(|c| matches!(c, ToolCall::Glob(_))), "{calls:?}");
    // Every call a sampled first turn makes is one of them.
    let task = TaskPrompt { id: "t".into(), text: ISSUE.into() };
    for seed in 0..8 {
        let mut episode = policy.begin(&task, Sampling::Sample { temperature: 1.0 }, seed).expect("begin");
        let turn = TurnInfo { index: 0, max_turns: 4, max_calls_per_turn: 8, must_answer: false };
        if let Some(TurnOutput::Calls(made)) = policy.act(&mut [&mut episode], turn).expect("act").pop() {
            assert!(made.iter().flatten().all(|c| calls.contains(c)), "seed {seed}: {made:?}");
        }
    }
}
