//! The grep heuristic beside BM25 top-2 on real SWE-bench instances.
//!
//! ```text
//! cargo run -p rewardlab-framework --example grep_baseline -- MIRRORS_DIR [INSTANCES.jsonl]
//! ```
//!
//! `MIRRORS_DIR` holds bare clones `owner__name.git`; instances whose
//! repository is not there are skipped (and counted). Targets are the files of
//! each gold patch; the table is file-level F_β (β = 0.5) mean, precision and
//! recall (means over instances), overall and per repository.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::BufReader;
use std::path::PathBuf;
use std::process::ExitCode;

use rewardlab_framework::bm25::{Bm25Index, Bm25Params, FileIndex};
use rewardlab_framework::heuristic::{GrepHeuristic, HeuristicParams};
use rewardlab_rewards::metrics::Counts;
use rewardlab_rewards::tasks::{RepoRef, load_swebench};

#[derive(Default, Clone, Copy)]
struct Sums {
    n: usize,
    f: f64,
    p: f64,
    r: f64,
}

impl Sums {
    fn add(&mut self, predicted: &[String], target: &[String]) {
        let counts = Counts::of_sets(predicted, target);
        self.n += 1;
        self.f += counts.f_beta(0.5);
        self.p += counts.precision();
        self.r += counts.recall();
    }

    fn row(&self, name: &str) -> String {
        let n = self.n.max(1) as f64;
        format!("{name:<28} {:>4}  {:.3}  {:.3}  {:.3}", self.n, self.f / n, self.p / n, self.r / n)
    }
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(mirrors) = args.next().map(PathBuf::from) else {
        eprintln!("usage: grep_baseline MIRRORS_DIR [INSTANCES.jsonl]");
        return ExitCode::from(2);
    };
    let jsonl = args.next().map_or_else(|| PathBuf::from("../shared/data/swebench_lite.jsonl"), PathBuf::from);
    let file = match File::open(&jsonl) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("cannot open {}: {e}", jsonl.display());
            return ExitCode::FAILURE;
        }
    };
    let loaded = match load_swebench(BufReader::new(file)) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("cannot read {}: {e}", jsonl.display());
            return ExitCode::FAILURE;
        }
    };
    let variants: Vec<(&str, HeuristicParams)> = vec![
        ("grep heuristic top-1", HeuristicParams::default()),
        ("  no definition bonus", HeuristicParams { definition_bonus: 0.0, ..HeuristicParams::default() }),
        ("  no code weight", HeuristicParams { code_weight: 1.0, ..HeuristicParams::default() }),
        ("  any file (docs, tests)", HeuristicParams { source_files_only: false, ..HeuristicParams::default() }),
        ("grep heuristic top-2", HeuristicParams { top_k: 2, ..HeuristicParams::default() }),
    ];
    let mut overall: BTreeMap<String, Sums> = BTreeMap::new();
    let mut per_repo: BTreeMap<(String, String), Sums> = BTreeMap::new();
    let mut skipped = 0;
    let started = std::time::Instant::now();
    for (_, task) in &loaded.records {
        let RepoRef::Name(name) = &task.repo else { continue };
        let dir = mirrors.join(format!("{}.git", name.replace('/', "__")));
        if !dir.is_dir() {
            skipped += 1;
            continue;
        }
        let bm25 = match Bm25Index::from_commit(&dir, &task.base_commit, Bm25Params::default()) {
            Ok(index) => index,
            Err(e) => {
                eprintln!("{}: {e}", task.id);
                skipped += 1;
                continue;
            }
        };
        let mut rows: Vec<(String, Vec<String>)> =
            vec![("BM25 top-2".into(), bm25.top_k(&task.prompt, 2).into_iter().map(|h| h.path).collect())];
        drop(bm25);
        match GrepHeuristic::from_commit(&dir, &task.base_commit, HeuristicParams::default()) {
            Ok(mut index) => {
                for (label, params) in &variants {
                    index.set_params(*params);
                    rows.push((label.to_string(), index.locate(&task.prompt)));
                }
            }
            Err(e) => eprintln!("{}: {e}", task.id),
        }
        for (label, predicted) in rows {
            overall.entry(label.clone()).or_default().add(&predicted, &task.targets.files);
            per_repo.entry((name.clone(), label)).or_default().add(&predicted, &task.targets.files);
        }
    }
    println!(
        "{} instances skipped (repository not in {}); {:.0} s",
        skipped,
        mirrors.display(),
        started.elapsed().as_secs_f64()
    );
    println!("{:<28} {:>4}  F0.5   P      R", "all", "n");
    for (label, sums) in &overall {
        println!("{}", sums.row(label));
    }
    let mut last = String::new();
    for ((repo, label), sums) in &per_repo {
        if *repo != last {
            println!("{repo}");
            last = repo.clone();
        }
        println!("{}", sums.row(&format!("  {label}")));
    }
    ExitCode::SUCCESS
}
