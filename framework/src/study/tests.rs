//! Study tests: the shipped studies check, invalid studies are diagnosed with
//! carets in the right file, grids expand, and summaries/plots come out of
//! metrics CSVs written here.

use std::path::{Path, PathBuf};

use super::summary::{BaselineRow, Manifest, write_baselines};
use super::*;
use crate::engine::MetricsRow;
use rewardlab_models::proxy::ProxyConfig;

fn studies_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../studies")
}

/// What the binary does: reward files are read from disk.
fn read_file(path: &Path) -> std::io::Result<String> {
    std::fs::read_to_string(path)
}

/// Reads and checks a study file, as the binary does.
fn load_study(path: &Path) -> Result<Study, StudyError> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    parse_study(path, &text, &read_file)
}

/// A study file in the repository's `studies/` directory (so `../rewards/...` resolves).
fn parse(text: &str) -> Result<Study, StudyError> {
    parse_study(&studies_dir().join("test.toml"), text, &read_file)
}

/// The rendered diagnostics of an invalid study.
fn rendered(result: Result<Study, StudyError>) -> String {
    match result {
        Err(StudyError::Invalid { diagnostics }) => diagnostics.render(),
        other => panic!("expected an invalid study, got {other:?}"),
    }
}

fn invalid(text: &str) -> String {
    rendered(parse(text))
}

const HEAD: &str = "seeds = 2\n[tasks]\nsource = \"synthetic\"\n[policy]\nkind = \"proxy\"\n";

#[test]
fn study_shipped_studies_check() {
    for name in ["codegrep", "fusesearch", "estimators", "placement"] {
        let study = load_study(&studies_dir().join(format!("{name}.toml"))).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(study.name, name);
        assert_eq!(study.variants.len(), 3, "{name}");
        let runs = study.runs();
        assert_eq!(runs.len(), 3 * study.seeds);
        assert!(matches!(study.policy, PolicySpec::Proxy(_)));
        let synthetic = study.tasks[0].synthetic_config().expect("synthetic source");
        assert_eq!((synthetic.files, synthetic.tasks), (120, 48));
        // The default study must stay within a few minutes on 2 cores: 18 runs x 80 steps x 64
        // rollouts (92,160) took 87 s on 2026-12-02; the README promises at most 5 minutes.
        let t = &study.training;
        assert!(runs.len() * t.total_steps * t.prompts_per_step * t.group_size <= 18 * 100 * 8 * 8, "{name}");
    }
}

#[test]
fn study_runs_share_seeds_across_variants() {
    let text = format!(
        "base_seed = 10\n{HEAD}[[variants]]\nname = \"a\"\nreward = 'Fb(file)'\n[[variants]]\nname = \"b\"\nreward = 'R(file)'\n"
    );
    let study = parse(&text).expect("valid");
    let runs = study.runs();
    let seeds: Vec<(&str, usize, u64)> = runs.iter().map(|r| (r.variant_name.as_str(), r.seed_index, r.seed)).collect();
    assert_eq!(seeds, [("a", 0, 10), ("a", 1, 11), ("b", 0, 10), ("b", 1, 11)]);
    assert_eq!(runs[3].dir, Path::new("runs/b/seed-001"));
    assert_eq!(study.engine_config(&runs[1]).seed, 11);
}

#[test]
fn study_toml_errors_have_line_and_column() {
    let text = format!("{HEAD}[training]\nprompt_per_step = 8\n");
    let out = invalid(&text);
    assert!(out.contains("test.toml:7:1: error"), "{out}");
    assert!(out.contains("prompt_per_step"), "{out}");
    assert!(out.contains("^"), "{out}");
}

#[test]
fn study_sandbox_table_sizes_the_store_and_rejects_unknown_keys() {
    let variant = "[[variants]]\nname = \"a\"\nreward = 'Fb(file)'\n";
    let default = parse(&format!("{HEAD}{variant}")).expect("valid");
    assert_eq!(default.sandbox, SandboxSpec::default());
    let defaults = rewardlab_sandbox::StoreOptions::default();
    assert_eq!(
        default.sandbox.store_options(),
        rewardlab_sandbox::StoreOptions { persist_index: true, blob_cache_bytes: 2 << 30, ..defaults }
    );

    assert_eq!(
        default.sandbox.limits(),
        rewardlab_sandbox::Limits { result_cache_bytes: 512 << 20, ..Default::default() }
    );

    let text = format!(
        "{HEAD}[sandbox]\nindex_mib = 1024\nblob_cache_mib = 0\ngrep_memo_mib = 3\nresult_cache_mib = 5\nskip_missing_blobs = true\n{variant}"
    );
    let study = parse(&text).expect("valid");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut small = study.clone();
    if let TaskSpec::Synthetic { files, commits, tasks, .. } = &mut small.tasks[0] {
        (*files, *commits, *tasks) = (40, 2, 4);
    }
    let prepared = prepare_tasks(&small, dir.path()).expect("prepares");
    let options = prepared.tasks.store.options();
    assert_eq!(
        (options.index_bytes, options.blob_cache_bytes, options.grep_memo_bytes, options.persist_index),
        (1 << 30, 0, 3 << 20, true)
    );
    assert_eq!(study.sandbox.limits().result_cache_bytes, 5 << 20);
    assert!(study.sandbox.limits().skip_missing_blobs && !default.sandbox.limits().skip_missing_blobs);

    // A bound past the address space is "no bound", not an overflow.
    let huge = SandboxSpec {
        index_mib: usize::MAX,
        blob_cache_mib: 1,
        grep_memo_mib: 1,
        result_cache_mib: 1,
        skip_missing_blobs: false,
    };
    assert_eq!(huge.store_options().index_bytes, usize::MAX);

    let out = invalid(&format!("{HEAD}[sandbox]\nindex_mb = 1024\n{variant}"));
    assert!(out.contains("index_mb") && out.contains("test.toml:7:1: error"), "{out}");
}

#[test]
fn study_inline_formula_errors_point_into_the_study_file() {
    let text = format!("{HEAD}[[variants]]\nname = \"bad\"\nreward = 'Fb(file) * Fbeta(file)'\n");
    let out = invalid(&text);
    // Line 8 is the reward line; `Fbeta` starts at column 22 (after `reward = '` and `Fb(file) * `).
    assert!(out.contains("test.toml:8:22: error"), "{out}");
    assert!(out.contains("reward = 'Fb(file) * Fbeta(file)'"), "{out}");
    assert!(out.contains("in variant `bad`"), "{out}");
    // Escapes would break the offset map: rejected with a hint.
    let text = format!("{HEAD}[[variants]]\nname = \"esc\"\nreward = \"Fb(\\u0066ile)\"\n");
    assert!(invalid(&text).contains("literal string"));
}

#[test]
fn study_reward_file_errors_point_into_the_reward_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("broken.reward"), "reward = Fb(file) +\n").expect("write");
    let text = format!("{HEAD}[[variants]]\nname = \"x\"\nfile = \"broken.reward\"\nparams = {{ nope = 1 }}\n");
    let out = rendered(parse_study(&dir.path().join("s.toml"), &text, &read_file));
    assert!(out.contains("broken.reward:1:"), "{out}");
    // An unknown param override on a good file points at the study's value.
    let text =
        format!("{HEAD}[[variants]]\nname = \"x\"\nfile = \"../rewards/grpo.reward\"\nparams = {{ nope = 1 }}\n");
    let out = invalid(&text);
    assert!(out.contains("test.toml:9:19: error") && out.contains("no param `nope`"), "{out}");
}

#[test]
fn study_semantic_errors_are_reported_before_anything_runs() {
    let dup = format!(
        "{HEAD}[[variants]]\nname = \"a\"\nreward = 'Fb(file)'\n[[variants]]\nname = \"a\"\nreward = 'Fb(file)'\n"
    );
    assert!(invalid(&dup).contains("declared twice"));
    let none = HEAD.to_string();
    assert!(invalid(&none).contains("no variant"));
    let both = format!("{HEAD}[[variants]]\nname = \"a\"\nfile = \"../rewards/grpo.reward\"\nreward = 'Fb(file)'\n");
    assert!(invalid(&both).contains("choose one"));
    let seed = format!("{HEAD}[training]\nseed = 3\n[[variants]]\nname = \"a\"\nreward = 'Fb(file)'\n");
    assert!(invalid(&seed).contains("base_seed"));
    let bad_g = format!("{HEAD}[training]\ngroup_size = 1\n[[variants]]\nname = \"a\"\nreward = 'Fb(file)'\n");
    assert!(invalid(&bad_g).contains("group_size"));
}

#[test]
fn study_grid_is_a_cartesian_product_with_params() {
    let text = format!(
        "{HEAD}[grid]\nreward = {{ fb = 'Fb(file) * w', f1 = 'F1(file) * w' }}\n\
         advantage = {{ plain = 'adv', disc = 'adv * sqrt(min(c / 4, 1))' }}\nparams = {{ w = [0.5, 1.0] }}\n"
    );
    let study = parse(&text).expect("valid grid");
    let names: Vec<&str> = study.variants.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "f1+disc+w=0.5",
            "f1+disc+w=1",
            "f1+plain+w=0.5",
            "f1+plain+w=1",
            "fb+disc+w=0.5",
            "fb+disc+w=1",
            "fb+plain+w=0.5",
            "fb+plain+w=1"
        ]
    );
    assert!(study.variants[1].source.starts_with("param w = 1.0\n"), "{}", study.variants[1].source);
    // A bad formula in one choice is reported once, at its place in the file.
    let text = format!("{HEAD}[grid]\nreward = {{ a = 'Fb(file)', b = 'nope' }}\nparams = {{ w = [1, 2] }}\n");
    let out = invalid(&text);
    assert_eq!(out.matches("error[").count() + out.matches(": error").count(), 1, "{out}");
}

fn row(step: usize, reward: f64, eval: Option<(f64, f64)>) -> MetricsRow {
    MetricsRow {
        step,
        reward_mean: reward,
        kl: 0.01 * step as f64,
        turns: 3.0,
        completion_len: 40.0 + step as f64,
        clip_ratio: 0.1,
        fb_file: reward,
        eval_fb_mean: eval.map(|e| e.0),
        eval_fb_median: eval.map(|e| e.0),
        eval_precision: eval.map(|e| e.1),
        eval_recall: eval.map(|e| e.0),
        eval_fb_ge_0_8: eval.map(|_| 0.25),
        eval_turns: eval.map(|_| 3.5),
        ..MetricsRow::default()
    }
}

/// Writes a study directory: variant `a` with seeds (held-out F_β 0.4, 0.6),
/// variant `b` with one seed, and a BM25 row.
fn fake_results(dir: &Path) {
    let manifest = Manifest {
        name: "fake".into(),
        precision_gate: 0.45,
        bm25_k: 2,
        variants: vec!["a".into(), "b".into(), "c".into()],
        runs: [("a", 0), ("a", 1), ("b", 0), ("c", 0)]
            .iter()
            .map(|&(v, s)| summary::ManifestRun {
                variant: v.into(),
                seed_index: s,
                seed: s as u64,
                dir: run_dir(v, s),
            })
            .collect(),
        reference: None,
    };
    manifest.write(dir).expect("manifest");
    let runs: [(&str, usize, f64, (f64, f64)); 3] =
        [("a", 0, 0.2, (0.4, 0.5)), ("a", 1, 0.3, (0.6, 0.3)), ("b", 0, 0.5, (0.7, 0.9))];
    for (v, s, base, eval) in runs {
        let run = dir.join(run_dir(v, s));
        std::fs::create_dir_all(&run).expect("run dir");
        let mut w = csv::Writer::from_path(run.join("metrics.csv")).expect("csv");
        for step in 1..=20 {
            let e = (step % 10 == 0).then_some(eval);
            w.serialize(row(step, base + 0.02 * step as f64 + 0.01 * (step as f64).sin(), e)).expect("row");
        }
        w.flush().expect("flush");
    }
    write_baselines(dir, &[baseline::row("BM25 top-2".into(), &[1.0, 0.0, 0.5], &[0.5, 0.0, 0.5], &[1.0, 0.0, 1.0])])
        .expect("baseline");
}

#[test]
fn study_summary_tables_from_metrics_csvs() {
    let dir = tempfile::tempdir().expect("tempdir");
    fake_results(dir.path());
    let s = summarize(dir.path()).expect("summary");
    assert_eq!(s.missing, [dir.path().join("runs/c/seed-000/metrics.csv")]);
    let a = &s.variants[0];
    // F_β mean over seeds (0.4, 0.6): 0.5 ± t(1) · 0.1414 / √2 = 12.706 · 0.1.
    let fb = a.stats[0].expect("fb");
    assert!((fb.mean - 0.5).abs() < 1e-12 && (fb.half_width.expect("2 seeds") - 1.2706).abs() < 1e-9);
    // Precision (0.5 + 0.3) / 2 = 0.4 < 0.45: the gate fails; `b` (0.9) passes.
    assert_eq!((a.passes_gate, s.variants[1].passes_gate, s.variants[2].passes_gate), (Some(false), Some(true), None));
    // KL of the last step (20) is 0.2 in every run.
    assert!((a.stats[7].expect("kl").mean - 0.2).abs() < 1e-12);
    write_tables(&s, dir.path()).expect("tables");
    let md = std::fs::read_to_string(dir.path().join("summary.md")).expect("md");
    assert!(md.contains("| a | 2 | 0.500 ± 1.271 |"), "{md}");
    assert!(md.contains("| b | 1 | 0.700 (n=1) |"), "{md}");
    assert!(md.contains("| BM25 top-2 | – | 0.500 | 0.500 | 0.333 | 0.667 | 0.333 |"), "{md}");
    assert!(md.contains("runs/c/seed-000/metrics.csv"), "{md}");
    let csv = std::fs::read_to_string(dir.path().join("summary.csv")).expect("csv");
    let lines: Vec<&str> = csv.lines().collect();
    assert!(lines[0].starts_with("variant,seeds,fb_mean_mean,fb_mean_ci95,fb_median_mean"), "{csv}");
    assert!(lines[2].starts_with("b,1,0.7,,0.7,,"), "{csv}");
    assert!(lines[0].ends_with("precision_gate") && lines[1].ends_with("fail") && lines[2].ends_with("pass"));
}

#[test]
fn study_plots_are_pngs_with_bands() {
    let dir = tempfile::tempdir().expect("tempdir");
    fake_results(dir.path());
    let s = summarize(dir.path()).expect("summary");
    let paths = write_plots(&s, dir.path()).expect("plots");
    assert_eq!(paths.len(), 6);
    for p in &paths {
        let bytes = std::fs::read(p).expect("png");
        assert!(bytes.starts_with(b"\x89PNG") && bytes.len() > 10_000, "{}", p.display());
    }
    if let Ok(keep) = std::env::var("REWARDLAB_KEEP_PLOTS") {
        for p in &paths {
            std::fs::copy(p, Path::new(&keep).join(p.file_name().expect("name"))).expect("keep");
        }
    }
    let b = plots::bands(s.variants[0].runs.iter().map(|r| &r.rows[..]), |r| r.reward_mean);
    assert_eq!(b.len(), 20);
    // Seeds differ by 0.1 at every step: the band is 0.1 wide around the mean.
    assert!(b.iter().all(|x| (x.max - x.min - 0.1).abs() < 1e-12 && (x.mean - (x.min + 0.05)).abs() < 1e-12));
}

#[test]
fn study_baseline_row_statistics() {
    let r: BaselineRow = baseline::row("b".into(), &[0.9, 0.1, 0.8, 0.2], &[1.0; 4], &[0.5; 4]);
    assert_eq!((r.fb_median, r.fb_ge_0_8, r.tasks), (0.5, 0.5, 4));
}

#[test]
fn study_bm25_baseline_on_a_synthetic_source() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config =
        crate::synthetic::SyntheticConfig { seed: 3, files: 60, commits: 2, tasks: 16, held_out_fraction: 0.25 };
    let source = crate::synthetic::generate(&config, dir.path()).expect("generate");
    let tasks = crate::engine::TaskSet::from_synthetic(&source, 0.15).expect("tasks");
    let row = bm25_baseline(&tasks, 2).expect("bm25");
    assert_eq!((row.name.as_str(), row.tasks), ("BM25 top-2", tasks.held_out.len()));
    assert!(row.tasks > 0);
    // Two files per answer: precision is a multiple of 1/2 per task, so the mean of n tasks is a multiple of 1/(2n).
    let scaled = row.precision * 2.0 * row.tasks as f64;
    assert!((scaled - scaled.round()).abs() < 1e-9, "{row:?}");
    // Issues name their files' vocabulary: BM25 finds some targets, but not all.
    assert!(row.recall > 0.0 && row.fb_mean > 0.0 && row.fb_mean < 1.0, "{row:?}");
}

#[test]
fn study_heuristic_baseline_on_a_synthetic_source() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config =
        crate::synthetic::SyntheticConfig { seed: 3, files: 60, commits: 2, tasks: 16, held_out_fraction: 0.25 };
    let source = crate::synthetic::generate(&config, dir.path()).expect("generate");
    let tasks = crate::engine::TaskSet::from_synthetic(&source, 0.15).expect("tasks");
    let row = heuristic_baseline_with(&tasks, &|repo| PathBuf::from(repo)).expect("heuristic");
    assert_eq!((row.name.as_str(), row.tasks), ("grep heuristic top-1", tasks.held_out.len()));
    // One file per answer: each task's precision is 0 or 1, so the mean of n tasks is a multiple of 1/n.
    let scaled = row.precision * row.tasks as f64;
    assert!((scaled - scaled.round()).abs() < 1e-9, "{row:?}");
    assert!(row.recall > 0.0 && row.fb_mean > 0.0 && row.fb_mean <= 1.0, "{row:?}");
}

#[test]
fn study_baselines_are_read_back_only_while_their_inputs_are_unchanged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config =
        crate::synthetic::SyntheticConfig { seed: 3, files: 60, commits: 2, tasks: 16, held_out_fraction: 0.25 };
    let source = crate::synthetic::generate(&config, &dir.path().join("repo")).expect("generate");
    let mut tasks = crate::engine::TaskSet::from_synthetic(&source, 0.15).expect("tasks");
    let (study, params, repo_dir) =
        (dir.path(), crate::heuristic::HeuristicParams::default(), |r: &str| PathBuf::from(r));
    let key = baseline::cache_key(&tasks, 2, &params).expect("full commit ids are cached");
    let held = tasks.held_out.len();
    assert_eq!(baseline::cached(study, &key, 2, &params, held), None, "nothing written yet");

    let computed =
        baseline::baseline_tasks(&tasks, 2, params, &repo_dir, &crate::bm25::TermCache::default(), &|_, _| {})
            .expect("baselines");
    publish::write_baseline_tasks(study, &[computed.0.clone(), computed.1.clone()].concat()).expect("records");
    publish::write_text(study, baseline::CACHE_KEY_FILE, &key, "key").expect("key");
    assert_eq!(baseline::cached(study, &key, 2, &params, held).as_ref(), Some(&computed));
    // Another k or another heuristic names other rows: not these.
    assert_ne!(baseline::cache_key(&tasks, 3, &params).as_ref(), Some(&key));
    let top2 = crate::heuristic::HeuristicParams { top_k: 2, ..params };
    assert_eq!(baseline::cached(study, &key, 2, &top2, held), None);

    // Any held-out task's text, target or commit changes the key.
    let first = tasks.held_out[0];
    let mut edited = tasks.clone();
    edited.tasks[first].prompt.push_str(" (edited)");
    let other = baseline::cache_key(&edited, 2, &params).expect("key");
    assert_ne!(other, key);
    assert_eq!(baseline::cached(study, &other, 2, &params, held), None);
    let mut edited = tasks.clone();
    edited.tasks[first].target.files = Some(vec!["elsewhere.py".into()]);
    assert_ne!(baseline::cache_key(&edited, 2, &params).as_ref(), Some(&key));
    // A revision name may move: never cached.
    tasks.tasks[first].commit = "HEAD".into();
    assert_eq!(baseline::cache_key(&tasks, 2, &params), None);

    // Records that do not read back whole are recomputed.
    let path = study.join(summary::BASELINE_TASKS_FILE);
    let text = std::fs::read_to_string(&path).expect("records");
    let shorter: Vec<&str> = text.lines().skip(1).collect();
    std::fs::write(&path, shorter.join("\n")).expect("write");
    assert_eq!(baseline::cached(study, &key, 2, &params, held), None);
    std::fs::write(&path, text.replace('{', "[")).expect("write");
    assert_eq!(baseline::cached(study, &key, 2, &params, held), None);
}

#[test]
fn study_checkpoints_about_twenty_times_per_run_unless_told() {
    let variant = "[[variants]]\nname = \"a\"\nreward = 'Fb(file)'\n";
    let every = |training: &str| parse(&format!("{HEAD}{training}{variant}")).expect("valid").training.checkpoint_every;
    assert_eq!(every("[training]\ntotal_steps = 80\n"), 4);
    assert_eq!(every("[training]\ntotal_steps = 7\n"), 1);
    assert_eq!(every("[training]\ntotal_steps = 80\ncheckpoint_every = 0\n"), 0);
    assert_eq!(every("[training]\ntotal_steps = 80\ncheckpoint_every = 50\n"), 50);
    let default_steps = crate::engine::EngineConfig::default().total_steps;
    assert_eq!(every(""), load::default_checkpoint_every(default_steps));
}

#[test]
fn study_real_task_sources_resolve_against_the_study_file() {
    let variant = "[policy]\nkind = \"proxy\"\n[[variants]]\nname = \"a\"\nreward = 'Fb(file)'\n";
    let text =
        format!("seeds = 1\n[tasks]\nsource = \"swebench\"\npath = \"lite.jsonl\"\nrepos = \"mirrors\"\n{variant}");
    let study = parse(&text).expect("valid");
    assert_eq!(study.tasks[0].held_out_fraction(), 0.2);
    match study.tasks.into_iter().next().expect("one source") {
        TaskSpec::Swebench { path, repos, seed, held_out_fraction } => {
            assert_eq!((path, repos), (studies_dir().join("lite.jsonl"), studies_dir().join("mirrors")));
            assert_eq!((seed, held_out_fraction), (0, None));
        }
        other => panic!("{other:?}"),
    }
    // SWE-bench instances name repositories; the study must say where their clones are.
    let no_repos = format!("seeds = 1\n[tasks]\nsource = \"swebench\"\npath = \"lite.jsonl\"\n{variant}");
    assert!(invalid(&no_repos).contains("missing field `repos`"), "{}", invalid(&no_repos));
    let text = format!("seeds = 1\n[tasks]\nsource = \"commits\"\nrepo = \"..\"\nmax_tasks = 5\n{variant}");
    match parse(&text).expect("valid").tasks.into_iter().next().expect("one source") {
        TaskSpec::Commits(c) => {
            let CommitsSpec { repo, rev, max_tasks, .. } = *c;
            assert_eq!((repo, rev.as_str(), max_tasks), (studies_dir().join(".."), "HEAD", Some(5)));
        }
        other => panic!("{other:?}"),
    }
    let bad = format!("seeds = 1\n[tasks]\nsource = \"commits\"\nrepo = \"..\"\nheld_out_fraction = 1.5\n{variant}");
    assert!(invalid(&bad).contains("held_out_fraction must be in [0, 1]"));
}

#[test]
fn study_function_level_features_are_refused_for_the_proxy_policy() {
    let text = format!("{HEAD}[[variants]]\nname = \"f\"\nreward = '0.5 * F1(file) + 0.5 * F1(func)'\n");
    let out = invalid(&text);
    assert!(out.contains("test.toml:7:8: error") && out.contains("reads F1(func)"), "{out}");
    let text = format!("{HEAD}[[variants]]\nname = \"f\"\nfile = \"../rewards/fusesearch_f1.reward\"\n");
    let out = invalid(&text);
    assert!(out.contains("test.toml:8:8: error") && out.contains("never functions"), "{out}");
    // Other policies may name functions.
    let qwen = HEAD.replace("kind = \"proxy\"", "kind = \"qwen3\"\nmodel = \"m\"");
    parse(&format!("{qwen}[[variants]]\nname = \"f\"\nreward = 'F1(func)'\n")).expect("valid for qwen3");
}

/// Trains a two-variant proxy study for two steps (evaluating at both) into
/// `dir` on the tasks of two generated repositories; returns the
/// repositories' names as the tasks give them.
fn two_repository_study(dir: &Path) -> Vec<String> {
    use std::sync::Arc;

    use rewardlab_models::proxy::ProxyPolicy;
    use rewardlab_sandbox::RepoStore;

    use crate::engine::TaskSet;

    let text = "seeds = 1\n[tasks]\nsource = \"synthetic\"\n[policy]\nkind = \"proxy\"\n[training]\ntotal_steps = 2\n\
                prompts_per_step = 2\ngroup_size = 2\neval_every = 1\n[[variants]]\nname = \"fb\"\nreward = 'Fb(file)'\n\
                [[variants]]\nname = \"recall\"\nreward = 'R(file)'\n";
    let study = parse_study(&dir.join("t.toml"), text, &read_file).expect("a valid study");
    let mut set = TaskSet::default();
    let mut repos = Vec::new();
    for (seed, name) in [(3, "alpha.git"), (4, "beta.git")] {
        let config =
            crate::synthetic::SyntheticConfig { seed, files: 40, commits: 2, tasks: 12, held_out_fraction: 0.25 };
        let repo = dir.join("data").join(name);
        let mut source = crate::synthetic::generate(&config, &repo).expect("generate");
        source.repo_path = repo.canonicalize().expect("absolute");
        let part = TaskSet::from_synthetic(&source, 0.15).expect("tasks");
        let offset = set.tasks.len();
        set.train.extend(part.train.iter().map(|i| i + offset));
        set.held_out.extend(part.held_out.iter().map(|i| i + offset));
        set.tasks.extend(part.tasks);
        repos.push(source.repo_path.to_string_lossy().into_owned());
    }
    let store = RepoStore::open(dir.join("store")).expect("store");
    let repo_dirs = repos.iter().map(|r| (r.clone(), PathBuf::from(r))).collect();
    let tasks = StudyTasks { tasks: Arc::new(set), store: Arc::new(store), repo_dirs };
    let runs = study.runs();
    Manifest::new(&study, &runs).write(dir).expect("manifest");
    let policy = |_: &RunSpec, _: &PolicyContext<'_>| Ok::<_, publish::BoxError>(ProxyPolicy::default());
    let hook = |_: &RunSpec, _: &crate::engine::Engine<ProxyPolicy>, _: &Path| Ok::<_, publish::BoxError>(());
    train_runs(&study, &tasks, &runs, 1, dir, policy, hook, &train::Quiet).expect("the study trains");
    repos
}

#[test]
fn study_summary_breaks_held_out_scores_down_by_repository() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let repos = two_repository_study(dir);
    let s = summarize(dir).expect("summary");
    write_tables(&s, dir).expect("tables");

    // Both baselines are rows of the overall table.
    let names: Vec<&str> = s.baselines.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(names, ["BM25 top-2", "grep heuristic top-1"]);
    let md = std::fs::read_to_string(dir.join("summary.md")).expect("md");
    assert!(md.contains("| BM25 top-2 | – |") && md.contains("| grep heuristic top-1 | – |"), "{md}");
    assert!(md.contains("Per repository (2 of them): `summary_by_repo.md`."), "{md}");

    // One table per repository, sorted, each with both variants and both baselines.
    let mut sorted = repos.clone();
    sorted.sort();
    assert_eq!(s.by_repo.iter().map(|r| r.repo.clone()).collect::<Vec<_>>(), sorted);
    for r in &s.by_repo {
        assert_eq!(r.variants.iter().map(|v| v.name.as_str()).collect::<Vec<_>>(), ["fb", "recall"]);
        assert_eq!(r.baselines.iter().map(|b| b.name.as_str()).collect::<Vec<_>>(), names);
        let held = r.baselines[0].tasks;
        assert!(held > 0 && r.variants.iter().all(|v| v.tasks == held && v.seeds == 1), "{r:?}");
    }
    // The repositories' tables add up to the overall one: task-weighted means
    // of the per-repository means are the overall means, for runs and baselines.
    let weighted = |value: &dyn Fn(&by_repo::RepoSummary) -> (f64, usize)| {
        let (sum, n) = s.by_repo.iter().map(value).fold((0.0, 0), |(s, n), (v, k)| (s + v * k as f64, n + k));
        sum / n as f64
    };
    for (v, variant) in s.variants.iter().enumerate() {
        for c in [0, 2, 3, 5] {
            let overall = variant.stats[c].expect("evaluated").mean;
            let parts = weighted(&|r| (r.variants[v].stats[c].expect("evaluated").mean, r.variants[v].tasks));
            assert!((overall - parts).abs() < 1e-9, "{} column {c}: {overall} vs {parts}", variant.name);
        }
    }
    for (b, baseline) in s.baselines.iter().enumerate() {
        let parts = weighted(&|r| (r.baselines[b].fb_mean, r.baselines[b].tasks));
        assert!((baseline.fb_mean - parts).abs() < 1e-9, "{}", baseline.name);
        assert_eq!(s.by_repo.iter().map(|r| r.baselines[b].tasks).sum::<usize>(), baseline.tasks);
    }
    let by_repo_md = std::fs::read_to_string(dir.join(by_repo::SUMMARY_BY_REPO_MD)).expect("md");
    for repo in &repos {
        assert!(by_repo_md.contains(&format!("## `{repo}`")), "{by_repo_md}");
    }
    assert_eq!(by_repo_md.matches("| grep heuristic top-1 | – |").count(), 2, "{by_repo_md}");
    let csv = std::fs::read_to_string(dir.join(by_repo::SUMMARY_BY_REPO_CSV)).expect("csv");
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 1 + 2 * 4, "{csv}");
    assert!(lines[0].starts_with("repo,variant,seeds,fb_mean_mean,fb_mean_ci95,") && lines[0].ends_with(",tasks"));
    assert!(lines[1].starts_with(&format!("{},fb,1,", sorted[0])), "{csv}");

    // A study from before the per-task records still summarises, without the breakdown.
    std::fs::remove_file(dir.join(summary::BASELINE_TASKS_FILE)).expect("remove");
    for spec in Manifest::read(dir).expect("manifest").runs {
        std::fs::remove_file(dir.join(&spec.dir).join(crate::engine::EVAL_FILE)).expect("remove");
    }
    let old = summarize(dir).expect("summary without records");
    assert!(old.by_repo.is_empty());
    assert_eq!((&old.variants, &old.baselines), (&s.variants, &s.baselines));
    assert!(!summary::render_markdown(&old).contains("Per repository"));
}

#[test]
fn study_variants_may_change_proxy_settings_for_an_ablation() {
    let text = format!(
        "{HEAD}[[variants]]\nname = \"full\"\nreward = 'Fb(file)'\n\
         [[variants]]\nname = \"no-rarity\"\nreward = 'Fb(file)'\npolicy = {{ rarity = false, max_answer_size = 2 }}\n"
    );
    let study = parse(&text).expect("valid");
    let base = match &study.policy {
        PolicySpec::Proxy(config) => *config,
        other => panic!("{other:?}"),
    };
    assert_eq!(study.variants[0].proxy, None);
    let ablated = study.variants[1].proxy.expect("an override");
    assert!(base.rarity && !ablated.rarity);
    assert_eq!(ablated.max_answer_size, 2);
    // Everything not named keeps the study's value.
    assert_eq!(ProxyConfig { rarity: true, max_answer_size: base.max_answer_size, ..ablated }, base);

    let typo = text.replace("rarity = false", "rarty = false");
    let out = invalid(&typo);
    assert!(out.contains("variant `no-rarity`: invalid proxy policy settings") && out.contains("rarty"), "{out}");
    let qwen = typo.replace("kind = \"proxy\"", "kind = \"qwen3\"\nmodel = \"m\"");
    assert!(invalid(&qwen).contains("apply to the proxy policy only"));
}

#[test]
fn study_alerts_reach_every_variant_and_their_errors_point_into_the_study() {
    let ok = format!(
        "{HEAD}[[variants]]\nname = \"a\"\nreward = 'Fb(file)'\n[[variants]]\nname = \"b\"\nfile = \"../rewards/grpo.reward\"\n\
         [[alerts]]\nwhen = 'step.turns < 1.5'\nsteps = 3\nmessage = \"turn \\\"collapse\\\"\"\n"
    );
    let study = parse(&ok).expect("valid");
    for v in &study.variants {
        assert!(v.source.ends_with("alert step.turns < 1.5 for 3 steps : \"turn \\\"collapse\\\"\"\n"), "{}", v.source);
    }
    // The reward file keeps its own alerts before the study's.
    assert_eq!(study.variants[1].source.matches("\nalert ").count(), 3, "{}", study.variants[1].source);

    let bad =
        format!("{HEAD}[[variants]]\nname = \"a\"\nreward = 'Fb(file)'\n[[alerts]]\nwhen = 'T < 2'\nmessage = \"m\"\n");
    let text = invalid(&bad);
    assert!(text.contains("error: `T` is a per-rollout value; an alert reads batch-level values"), "{text}");
    assert!(text.contains("test.toml:10:9"), "the caret is on `T` in the study file: {text}");
    let zero = format!(
        "{HEAD}[[variants]]\nname = \"a\"\nreward = 'Fb(file)'\n[[alerts]]\nwhen = 'step.kl > 1'\nsteps = 0\nmessage = \"m\"\n"
    );
    assert!(invalid(&zero).contains("`steps` of an alert must be at least 1"));
}
