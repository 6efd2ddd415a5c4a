//! The BM25 top-k baseline on a study's held-out tasks (seed 000, Table 2's
//! "BM25 top-2"): each task's issue text queries a BM25 index of its commit,
//! and the top k files are the answer, scored like the policy's answers.

use std::collections::HashMap;
use std::path::PathBuf;

use rewardlab_rewards::metrics::Counts;

use super::summary::BaselineRow;
use crate::bm25::{Bm25Error, Bm25Index, Bm25Params};
use crate::engine::TaskSource;

/// β of the summary's F_β (file level), as in the engine's `fb_file`.
const BETA: f64 = 0.5;

/// Scores BM25 top-`k` on the held-out split of `tasks`. Task repositories
/// must be local paths (synthetic sources' are); see [`bm25_baseline_with`]
/// for repositories named in a store.
pub fn bm25_baseline(tasks: &dyn TaskSource, k: usize) -> Result<BaselineRow, Bm25Error> {
    bm25_baseline_with(tasks, k, &|repo| PathBuf::from(repo))
}

/// [`bm25_baseline`] with `repo_dir` mapping a task's `repo` (a store name
/// such as `owner/name`, say) to the git directory holding it.
pub fn bm25_baseline_with(
    tasks: &dyn TaskSource,
    k: usize,
    repo_dir: &dyn Fn(&str) -> PathBuf,
) -> Result<BaselineRow, Bm25Error> {
    let mut indexes: HashMap<(String, String), Bm25Index> = HashMap::new();
    let (mut fb, mut precision, mut recall) = (Vec::new(), Vec::new(), Vec::new());
    for &i in tasks.held_out() {
        let task = &tasks.tasks()[i];
        let key = (task.repo.clone(), task.commit.clone());
        if !indexes.contains_key(&key) {
            let index = Bm25Index::from_commit(&repo_dir(&task.repo), &task.commit, Bm25Params::default())?;
            indexes.insert(key.clone(), index);
        }
        let index = &indexes[&key];
        let predicted: Vec<String> = index.top_k(&task.prompt, k).into_iter().map(|h| h.path).collect();
        let target = task.target.files.clone().unwrap_or_default();
        let counts = Counts::of_sets(&predicted, &target);
        fb.push(counts.f_beta(BETA));
        precision.push(counts.precision());
        recall.push(counts.recall());
    }
    Ok(row(format!("BM25 top-{k}"), &fb, &precision, &recall))
}

/// A baseline row from per-task scores.
pub(crate) fn row(name: String, fb: &[f64], precision: &[f64], recall: &[f64]) -> BaselineRow {
    let mean = |v: &[f64]| if v.is_empty() { 0.0 } else { v.iter().sum::<f64>() / v.len() as f64 };
    let mut sorted = fb.to_vec();
    sorted.sort_by(f64::total_cmp);
    let median = match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    };
    BaselineRow {
        name,
        fb_mean: mean(fb),
        fb_median: median,
        precision: mean(precision),
        recall: mean(recall),
        fb_ge_0_8: mean(&fb.iter().map(|&x| f64::from(u8::from(x >= 0.8))).collect::<Vec<_>>()),
        tasks: fb.len(),
    }
}
