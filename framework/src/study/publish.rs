//! Publishing what concurrent `study` processes share under a study's results
//! directory: the synthetic task repository, `manifest.json`, the baseline
//! rows and their per-task records, and the Slurm script and run manifest. Slurm array tasks start
//! together on shared storage and each one writes these pieces; every writer
//! builds its copy under a name of its own and renames it into place, so no
//! process ever reads a half-written file or directory, and the same content
//! published twice is harmless.
//!
//! Renames are atomic within one file system (NFS and Lustre included), which
//! is why the private copies live inside the destination's directory.

use std::fs;
use std::path::{Path, PathBuf};

use super::baseline::BaselineTask;
use super::summary::{
    BASELINE_FILE, BASELINE_TASKS_FILE, BaselineRow, MANIFEST_FILE, Manifest, write_baseline_records, write_baselines,
};

/// File inside a published directory naming its content (see [`publish_dir`]).
pub const STAMP_FILE: &str = "rewardlab-stamp";

/// A boxed error of a caller's writer.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Publishing failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PublishError {
    /// A file-system operation, described by `what` (`renaming a to b`).
    #[error("{what}")]
    Io {
        /// The operation, for the message.
        what: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The caller's writer of a published file failed.
    #[error(transparent)]
    Write(BoxError),
    /// The destination changed under us in every round.
    #[error("{} keeps changing under concurrent writers; is another study with the same name running?", dest.display())]
    Contended {
        /// The destination being published to.
        dest: PathBuf,
    },
}

fn io_err(what: impl FnOnce() -> String) -> impl FnOnce(std::io::Error) -> PublishError {
    move |source| PublishError::Io { what: what(), source }
}

/// A name for private temporary copies that no other live process uses:
/// processes on different nodes of a cluster may share a pid, not a host name.
pub fn unique_tag() -> String {
    let host = fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_default();
    let host: String =
        host.trim().chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '.' { c } else { '_' }).collect();
    let host = if host.is_empty() { "host".to_string() } else { host };
    format!("{host}-{}", std::process::id())
}

/// Moves the complete directory `fresh` to `dest`, or drops it when `dest`
/// already holds the same content: `stamp` names the content (the synthetic
/// repository's commit ids, say), and is written into [`STAMP_FILE`] before
/// the rename, so a directory under its final name always carries its stamp.
///
/// A `dest` with another stamp (the study's task settings changed) or none (a
/// leftover of an older runner) is moved aside and replaced. Processes still
/// reading the old content then lose it, but they were working on another
/// study than this one.
pub fn publish_dir(fresh: &Path, dest: &Path, stamp: &str) -> Result<(), PublishError> {
    let stamp_path = fresh.join(STAMP_FILE);
    fs::write(&stamp_path, stamp).map_err(io_err(|| format!("writing {}", stamp_path.display())))?;
    // Two rounds: a stale `dest` is moved aside once, then the rename must succeed or meet a
    // concurrent writer's identical copy.
    for _ in 0..2 {
        // `rename` onto a non-empty directory fails (ENOTEMPTY): "publish unless present".
        let err = match fs::rename(fresh, dest) {
            Ok(()) => return Ok(()),
            Err(err) => err,
        };
        if !dest.is_dir() {
            return Err(io_err(|| format!("renaming {} to {}", fresh.display(), dest.display()))(err));
        }
        if fs::read_to_string(dest.join(STAMP_FILE)).is_ok_and(|s| s == stamp) {
            fs::remove_dir_all(fresh).map_err(io_err(|| format!("removing {}", fresh.display())))?;
            return Ok(());
        }
        let aside = sibling(dest, &format!("stale-{}", unique_tag()));
        match fs::rename(dest, &aside) {
            Ok(()) => fs::remove_dir_all(&aside).map_err(io_err(|| format!("removing {}", aside.display())))?,
            // Another process moved it aside first.
            Err(_) if !dest.exists() => {}
            Err(e) => return Err(io_err(|| format!("moving {} aside", dest.display()))(e)),
        }
    }
    Err(PublishError::Contended { dest: dest.to_owned() })
}

/// Writes the file `name` into `dir` by letting `write` create it in a
/// private directory inside `dir`, then renaming it into place: the writers
/// of the file formats stay their owners', and readers see the old file or
/// the whole new one.
pub fn publish_file<E: Into<BoxError>>(
    dir: &Path,
    name: &str,
    write: impl FnOnce(&Path) -> Result<(), E>,
) -> Result<(), PublishError> {
    fs::create_dir_all(dir).map_err(io_err(|| format!("creating {}", dir.display())))?;
    let private = dir.join(format!(".tmp-{name}-{}", unique_tag()));
    // A leftover of a killed process with the same tag (same host, recycled pid).
    let _ = fs::remove_dir_all(&private);
    fs::create_dir(&private).map_err(io_err(|| format!("creating {}", private.display())))?;
    let result = write(&private).map_err(|e| PublishError::Write(e.into())).and_then(|()| {
        let (from, to) = (private.join(name), dir.join(name));
        fs::rename(&from, &to).map_err(io_err(|| format!("renaming {} to {}", from.display(), to.display())))
    });
    let _ = fs::remove_dir_all(&private);
    result
}

/// Publishes `manifest.json` (see [`publish_file`]).
pub fn write_manifest(study_dir: &Path, manifest: &Manifest) -> Result<(), PublishError> {
    publish_file(study_dir, MANIFEST_FILE, |dir| manifest.write(dir))
}

/// Publishes `baseline_bm25.csv` (see [`publish_file`]).
pub fn write_baseline(study_dir: &Path, rows: &[BaselineRow]) -> Result<(), PublishError> {
    publish_file(study_dir, BASELINE_FILE, |dir| write_baselines(dir, rows))
}

/// Publishes `baseline_tasks.jsonl` (see [`publish_file`]).
pub fn write_baseline_tasks(study_dir: &Path, records: &[BaselineTask]) -> Result<(), PublishError> {
    publish_file(study_dir, BASELINE_TASKS_FILE, |dir| write_baseline_records(dir, records))
}

/// Publishes the text file `name` in `dir` (see [`publish_file`]); `what`
/// names it in an error (`the run manifest`).
pub fn write_text(dir: &Path, name: &str, text: &str, what: &str) -> Result<(), PublishError> {
    publish_file(dir, name, |private| fs::write(private.join(name), text).map_err(io_err(|| format!("writing {what}"))))
}

/// `dir/name.suffix` beside `path` (`data/repo.git` → `data/repo.git.stale-host-42`).
fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(format!(".{suffix}"));
    path.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir_with(root: &Path, name: &str, content: &str) -> PathBuf {
        let dir = root.join(name);
        fs::create_dir_all(&dir).expect("create dir");
        fs::write(dir.join("content"), content).expect("write content");
        dir
    }

    #[test]
    fn publish_dir_keeps_an_identical_copy_and_replaces_a_stale_one() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let dest = tmp.path().join("repo.git");
        publish_dir(&dir_with(tmp.path(), "a", "one"), &dest, "stamp-1").expect("first publish");
        assert_eq!(fs::read_to_string(dest.join("content")).expect("read"), "one");

        // Same stamp: the existing directory stays (its inode too), the fresh copy goes.
        let fresh = dir_with(tmp.path(), "b", "one-again");
        publish_dir(&fresh, &dest, "stamp-1").expect("second publish");
        assert_eq!(fs::read_to_string(dest.join("content")).expect("read"), "one");
        assert!(!fresh.exists(), "the redundant copy is removed");

        // Another stamp: replaced.
        publish_dir(&dir_with(tmp.path(), "c", "two"), &dest, "stamp-2").expect("third publish");
        assert_eq!(fs::read_to_string(dest.join("content")).expect("read"), "two");
        assert_eq!(fs::read_to_string(dest.join(STAMP_FILE)).expect("read"), "stamp-2");
        let left: Vec<_> = fs::read_dir(tmp.path()).expect("list").map(|e| e.expect("entry").file_name()).collect();
        assert_eq!(left, vec![std::ffi::OsString::from("repo.git")], "nothing is left beside it");
    }

    #[test]
    fn publish_file_leaves_only_the_file() {
        let tmp = tempfile::tempdir().expect("temp dir");
        for text in ["first", "second"] {
            publish_file(tmp.path(), "x.txt", |dir| fs::write(dir.join("x.txt"), text)).expect("publish");
            assert_eq!(fs::read_to_string(tmp.path().join("x.txt")).expect("read"), text);
        }
        let failed = publish_file(tmp.path(), "x.txt", |_| Err("the writer failed"));
        assert_eq!(failed.expect_err("the writer's error").to_string(), "the writer failed");
        assert_eq!(
            fs::read_to_string(tmp.path().join("x.txt")).expect("read"),
            "second",
            "a failed write keeps the old"
        );
        assert_eq!(fs::read_dir(tmp.path()).expect("list").count(), 1, "no private directory is left");
        write_text(tmp.path(), "y.txt", "text", "y").expect("publish text");
        assert_eq!(fs::read_to_string(tmp.path().join("y.txt")).expect("read"), "text");
    }

    #[test]
    fn unique_tags_name_host_and_process() {
        let tag = unique_tag();
        assert!(tag.ends_with(&format!("-{}", std::process::id())), "{tag}");
        assert!(tag.chars().all(|c| c.is_ascii_alphanumeric() || "-._".contains(c)), "{tag}");
    }
}
