//! A cache of mined tasks, so a rerun (or each task of a Slurm array) reads
//! what the first run mined instead of walking the history again.
//!
//! The key is the canonical JSON of: the mining format version, the
//! repository's directory name (task ids start with it), the resolved commit
//! range (tip and hidden commit ids: a commit id fixes its whole history, so
//! the same content under another path or on another machine hits the same
//! entry) and every option but `threads`. The file is
//! `<cache dir>/<repo name>-<64-bit FNV-1a of the key, hex>.json` and holds
//! the key itself, so a hash collision or a stale file reads as a miss, never
//! as the wrong tasks. Entries are written to a temporary file in the same
//! directory and renamed into place, so a reader never sees half a file and
//! concurrent writers of one key leave one whole entry.
//!
//! A hit resolves only the references of the range (no object is read) and
//! rewrites each task's repository to the caller's path.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::RepoRef;
use super::commits::{
    CommitError, CommitOptions, MineStats, Mined, MinedTask, ResolvedRange, mine_range, repo_name, resolve_range,
};

/// Bump when the mined output changes for the same key (a new field, a different target rule).
pub const MINING_FORMAT: u32 = 1;

/// What a cache entry is the answer to.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CacheKey {
    /// The [`MINING_FORMAT`] the entry was mined with.
    pub format: u32,
    /// The repository's directory name (after canonicalising its path); task ids start with it.
    pub repo: String,
    /// The commit range mined, as full commit ids.
    pub range: ResolvedRange,
    /// The mining options, with `threads` zeroed because it never changes the result.
    pub options: CommitOptions,
}

impl CacheKey {
    /// The key of mining `repo_path` with `options` (resolves the range).
    pub fn new(repo_path: &Path, options: &CommitOptions) -> Result<CacheKey, CommitError> {
        let range = resolve_range(repo_path, &options.rev)?;
        // Threads change how fast, never what, so they are no part of the key.
        let options = CommitOptions { threads: 0, ..options.clone() };
        Ok(CacheKey { format: MINING_FORMAT, repo: repo_name(repo_path), range, options })
    }

    /// The entry's file name in a cache directory.
    pub fn file_name(&self) -> String {
        let canonical = serde_json::to_string(self).expect("a cache key serialises");
        format!("{}-{:016x}.json", self.repo, fnv1a(canonical.as_bytes()))
    }
}

#[derive(Serialize, Deserialize)]
struct Entry {
    key: CacheKey,
    stats: MineStats,
    tasks: Vec<MinedTask>,
}

/// [`super::commits::mine`] through the cache in `cache_dir` (created when
/// missing): a hit returns the stored tasks with `stats.from_cache` set; a
/// miss mines and stores the result. Failed minings are not stored.
pub fn mine_cached(repo_path: &Path, options: &CommitOptions, cache_dir: &Path) -> Result<Mined, CommitError> {
    let started = Instant::now();
    let key = CacheKey::new(repo_path, options)?;
    let file = cache_dir.join(key.file_name());
    if let Some(mut entry) = read_entry(&file)?
        && entry.key == key
    {
        for task in &mut entry.tasks {
            task.task.repo = RepoRef::Path(repo_path.to_path_buf());
        }
        let stats = MineStats { from_cache: true, ..entry.stats };
        return Ok(Mined { tasks: entry.tasks, stats, seconds: started.elapsed().as_secs_f64() });
    }
    let repo = gix::open(repo_path).map_err(|source| CommitError::Open { path: repo_path.to_path_buf(), source })?;
    let mined = mine_range(repo, repo_path, options, &key.range)?;
    let entry = Entry { key, stats: mined.stats.clone(), tasks: mined.tasks.clone() };
    write_atomically(cache_dir, &file, &entry)?;
    Ok(mined)
}

fn cache_error(path: &Path, message: String) -> CommitError {
    CommitError::Cache { path: path.to_path_buf(), message }
}

/// The entry at `file`, `None` when there is none or it does not parse (an
/// older format): it is then mined again and replaced.
fn read_entry(file: &Path) -> Result<Option<Entry>, CommitError> {
    match std::fs::read(file) {
        Ok(bytes) => Ok(serde_json::from_slice(&bytes).ok()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(cache_error(file, format!("reading: {e}"))),
    }
}

fn write_atomically(dir: &Path, file: &Path, entry: &Entry) -> Result<(), CommitError> {
    std::fs::create_dir_all(dir).map_err(|e| cache_error(dir, format!("creating the directory: {e}")))?;
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let name = file.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let temp: PathBuf = dir.join(format!(".{name}.{}.{nanos}.tmp", std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut out = std::fs::File::create(&temp)?;
        serde_json::to_writer(&mut out, entry)?;
        out.flush()?;
        out.sync_all()?;
        std::fs::rename(&temp, file)
    };
    write().map_err(|e| {
        // The temporary file is useless once the write failed; a failure to remove it changes nothing.
        let _ = std::fs::remove_file(&temp);
        cache_error(file, format!("writing: {e}"))
    })
}

/// 64-bit FNV-1a: stable across Rust versions and platforms, unlike `std`'s hasher.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_reference_values() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn keys_differ_by_filter_and_range_and_ignore_threads() {
        let key = |options: CommitOptions, tip: &str| CacheKey {
            format: MINING_FORMAT,
            repo: "r".into(),
            range: ResolvedRange { tip: tip.into(), hidden: Vec::new() },
            options,
        };
        let base = key(CommitOptions::default(), "a");
        let threads = key(CommitOptions { threads: 7, ..CommitOptions::default() }, "a");
        let files = key(CommitOptions { max_files: 3, ..CommitOptions::default() }, "a");
        assert_eq!(base.file_name(), threads.file_name());
        assert_ne!(base.file_name(), files.file_name());
        assert_ne!(base.file_name(), key(CommitOptions::default(), "b").file_name());
        assert!(base.file_name().starts_with("r-"));
    }
}
