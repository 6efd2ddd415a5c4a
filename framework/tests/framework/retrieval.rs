//! Retrieval baselines on the synthetic source: BM25 over files against a
//! scripted searcher that greps the issue's quoted strings and identifiers.
//! The synthetic task is only useful if searching beats lexical similarity.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use rewardlab_framework::bm25::{Bm25Index, Bm25Params, FileIndex, TermCache};
use rewardlab_framework::heuristic::{GrepHeuristic, HeuristicParams};
use rewardlab_framework::synthetic::{MIN_WEIGHT, Task};
use rewardlab_framework::warm_start::{IssueLiteral, issue_literals};

use crate::common::{default_source, evaluate, git};

#[test]
fn bm25_indexes_every_file_of_a_commit() {
    let source = default_source();
    for commit in [&source.commits[0], source.commits.last().expect("commits")] {
        let index = Bm25Index::from_commit(&source.repo_path, &commit.id, Bm25Params::default()).expect("index");
        let listing = git(&source.repo_path, &["ls-tree", "-r", "--name-only", &commit.id]);
        let expected: BTreeSet<&str> = listing.lines().collect();
        let indexed: BTreeSet<&str> = index.paths().iter().map(String::as_str).collect();
        assert_eq!(indexed, expected);
        assert_eq!(index.len(), commit.files);
    }
    let by_tag = Bm25Index::from_commit(
        &source.repo_path,
        &format!("refs/tags/{}", source.commits[0].tag),
        Bm25Params::default(),
    )
    .expect("index by tag");
    assert_eq!(by_tag.len(), source.commits[0].files);
    assert!(Bm25Index::from_commit(&source.repo_path, "refs/heads/nope", Bm25Params::default()).is_err());
}

/// The blob cache changes nothing: across every commit, indexes built through one shared
/// [`TermCache`] score every task exactly as indexes of the commit's files read with `git show`
/// (path, newline, content), and each blob shared by several commits is tokenized once.
#[test]
fn indexes_through_a_shared_blob_cache_equal_fresh_ones() {
    let source = default_source();
    let cache = TermCache::default();
    let mut files_read = 0;
    for commit in &source.commits {
        let listing = git(&source.repo_path, &["ls-tree", "-r", "--name-only", &commit.id]);
        let documents: Vec<(String, String)> = listing
            .lines()
            .map(|path| (path.to_owned(), git(&source.repo_path, &["show", &format!("{}:{path}", commit.id)])))
            .collect();
        files_read += documents.len();
        let cached =
            Bm25Index::from_commit_cached(&source.repo_path, &commit.id, Bm25Params::default(), &cache).expect("index");
        let fresh = Bm25Index::from_documents(
            documents.iter().map(|(p, text)| (p.clone(), format!("{p}\n{text}"))),
            Bm25Params::default(),
        );
        let heuristic =
            GrepHeuristic::from_commit_cached(&source.repo_path, &commit.id, HeuristicParams::default(), &cache)
                .expect("heuristic");
        let fresh_heuristic = GrepHeuristic::from_documents(documents.iter().cloned(), HeuristicParams::default());
        assert_eq!(cached.paths(), fresh.paths());
        for task in &source.tasks {
            assert_eq!(cached.scores(&task.prompt), fresh.scores(&task.prompt), "{}", task.id);
            assert_eq!(heuristic.scores(&task.prompt), fresh_heuristic.scores(&task.prompt), "{}", task.id);
        }
    }
    assert!(cache.len() < files_read, "{} blobs for {files_read} files", cache.len());
}

#[test]
fn searching_beats_bm25_on_held_out_tasks() {
    let source = default_source();
    let mut indexes: BTreeMap<usize, Bm25Index> = BTreeMap::new();
    let mut bm25 = |task: &Task| -> Vec<String> {
        let index = indexes.entry(task.base_index).or_insert_with(|| {
            Bm25Index::from_commit(&source.repo_path, &task.base_commit, Bm25Params::default()).expect("index")
        });
        index.top_k(&task.prompt, 2).into_iter().map(|h| h.path).collect()
    };
    let relevant = |task: &Task| task.relevant_files(MIN_WEIGHT);
    let patch = |task: &Task| task.targets.files.clone();
    let held_out = &source.held_out;
    let bm25_relevant = evaluate(source, held_out, relevant, &mut bm25);
    let bm25_patch = evaluate(source, held_out, patch, &mut bm25);
    let search = |task: &Task| scripted_search(&source.repo_path, task);
    let search_relevant = evaluate(source, held_out, relevant, search);
    let search_patch = evaluate(source, held_out, patch, search);
    let mean_relevant = held_out.iter().map(|&i| source.tasks[i].relevant_files(MIN_WEIGHT).len()).sum::<usize>()
        as f64
        / held_out.len() as f64;
    eprintln!("held-out tasks: {}, mean relevant files {mean_relevant:.2}", held_out.len());
    eprintln!("                      P      R      F0.5   (targets: patch + aux w>=0.15 | patch only)");
    eprintln!(
        "BM25 top-2          {:.3}  {:.3}  {:.3}  | {:.3}  {:.3}  {:.3}",
        bm25_relevant.0, bm25_relevant.1, bm25_relevant.2, bm25_patch.0, bm25_patch.1, bm25_patch.2
    );
    eprintln!(
        "scripted grep top-2 {:.3}  {:.3}  {:.3}  | {:.3}  {:.3}  {:.3}",
        search_relevant.0, search_relevant.1, search_relevant.2, search_patch.0, search_patch.1, search_patch.2
    );
    assert!(bm25_relevant.0 < 0.6, "BM25 precision {:.3} should be below 0.6", bm25_relevant.0);
    assert!(bm25_relevant.0 > 0.1, "BM25 precision {:.3} should not be trivially zero", bm25_relevant.0);
    assert!(
        search_relevant.0 >= bm25_relevant.0 + 0.2,
        "search {:.3} vs BM25 {:.3}",
        search_relevant.0,
        bm25_relevant.0
    );
    assert!(
        search_relevant.2 >= bm25_relevant.2 + 0.2,
        "search F0.5 {:.3} vs BM25 {:.3}",
        search_relevant.2,
        bm25_relevant.2
    );
    assert!(
        search_patch.2 > bm25_patch.2,
        "search F0.5 {:.3} vs BM25 {:.3} on patch files",
        search_patch.2,
        bm25_patch.2
    );
}

/// A scripted searcher, the strategy the synthetic task should reward.
/// Step 1: grep (fixed strings, `*.py` only, as CodeGrep's `grep -rn
/// --include=*.py`) for the error message, quoted fragments and identifiers
/// of the issue; each pattern spreads its weight over the files it hits; the
/// best file is the first answer. Step 2: read the function around the
/// message in that file and grep for its name; the file that uses it most
/// (its test or a caller) is the second answer.
fn scripted_search(repo: &Path, task: &Task) -> Vec<String> {
    let mut scores: BTreeMap<String, f64> = BTreeMap::new();
    // The same literals the warm start's scripted searcher greps for.
    let patterns = issue_literals(&task.prompt);
    for IssueLiteral { text, weight, whole_word } in &patterns {
        let hits = git_grep(repo, &task.base_commit, text, *whole_word);
        if hits.is_empty() || hits.len() > 12 {
            continue;
        }
        for hit in &hits {
            *scores.entry(hit.clone()).or_default() += weight / hits.len() as f64;
        }
    }
    let mut ranked: Vec<(String, f64)> = scores.into_iter().collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let Some((best, _)) = ranked.first().cloned() else { return Vec::new() };
    let mut answer = vec![best.clone()];
    let strings: Vec<&str> = patterns.iter().filter(|p| p.weight >= 3.0).map(|p| p.text.as_str()).collect();
    if let Some(name) = enclosing_function(repo, &task.base_commit, &best, &strings) {
        let mut users: Vec<(String, usize)> =
            git_grep_counts(repo, &task.base_commit, &name).into_iter().filter(|(path, _)| *path != best).collect();
        users.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        answer.extend(users.into_iter().take(1).map(|(path, _)| path));
    }
    if answer.len() < 2 {
        answer.extend(ranked.into_iter().skip(1).take(1).map(|(path, _)| path));
    }
    answer
}

/// The name of the function in `path` whose body holds the first line that
/// contains one of `strings`.
fn enclosing_function(repo: &Path, commit: &str, path: &str, strings: &[&str]) -> Option<String> {
    let text = git(repo, &["show", &format!("{commit}:{path}")]);
    let lines: Vec<&str> = text.lines().collect();
    let hit = lines.iter().position(|line| strings.iter().any(|s| line.contains(s)))?;
    lines[..=hit].iter().rev().find_map(|line| {
        let rest = line.trim_start().strip_prefix("def ")?;
        rest.split_once('(').map(|(name, _)| name.to_string())
    })
}

/// Files of `commit` using the word `name`, with their match counts.
fn git_grep_counts(repo: &Path, commit: &str, name: &str) -> Vec<(String, usize)> {
    let output = Command::new("git")
        .arg("--git-dir")
        .arg(repo)
        .args(["grep", "-c", "-F", "-w", "-e", name, commit, "--", "*.py"])
        .output()
        .expect("run git grep");
    assert!(
        output.status.code().is_some_and(|c| c <= 1),
        "git grep failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| {
            let (_, rest) = line.split_once(':')?;
            let (path, count) = rest.rsplit_once(':')?;
            Some((path.to_string(), count.parse().ok()?))
        })
        .collect()
}

/// Files of `commit` whose content contains `pattern` (`git grep -F`).
fn git_grep(repo: &Path, commit: &str, pattern: &str, whole_word: bool) -> Vec<String> {
    let mut command = Command::new("git");
    command.arg("--git-dir").arg(repo).args(["grep", "-l", "-F"]);
    if whole_word {
        command.arg("-w");
    }
    let output = command.args(["-e", pattern, commit, "--", "*.py"]).output().expect("run git grep");
    // Exit status 1 means no match.
    assert!(
        output.status.code().is_some_and(|c| c <= 1),
        "git grep failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.split_once(':').map(|(_, path)| path.to_string()))
        .collect()
}
