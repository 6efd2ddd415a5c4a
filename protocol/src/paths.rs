//! Repository-relative path normalisation, shared by the answer schema, the
//! diff parser, the task sources and CATM so that `./a/b.py`, `a//b.py` and
//! `a/b.py` name one file everywhere.

/// Why a path cannot name a file inside a repository.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PathError {
    /// The path is empty, or has only `.` and empty components.
    #[error("path is empty")]
    Empty,
    /// The path starts at `/` instead of the repository root.
    #[error("absolute path `{0}`: paths must be relative to the repository root")]
    Absolute(String),
    /// The path has a `..` component.
    #[error("path `{0}` leaves or climbs within the repository with `..`")]
    ParentDir(String),
    /// The path ends in `/`, so it names a directory.
    #[error("path `{0}` names a directory, not a file")]
    Directory(String),
}

/// Normalises a repository-relative file path lexically: drops `.` components
/// and empty components (`a//b`). A backslash is a legal file-name byte on
/// Unix, so it is kept as it is. Absolute paths and any `..`
/// component are rejected rather than resolved, because resolving them needs a
/// file system and a model that writes them has not followed the schema.
pub fn normalize(path: &str) -> Result<String, PathError> {
    if path.is_empty() {
        return Err(PathError::Empty);
    }
    if path.starts_with('/') {
        return Err(PathError::Absolute(path.to_string()));
    }
    if path.ends_with('/') {
        return Err(PathError::Directory(path.to_string()));
    }
    if is_normal(path) {
        // The common case, kept cheap: no segment to drop, nothing to join.
        return Ok(path.to_string());
    }
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err(PathError::ParentDir(path.to_string())),
            p => parts.push(p),
        }
    }
    if parts.is_empty() {
        return Err(PathError::Empty);
    }
    Ok(parts.join("/"))
}

/// Whether `path` is already what [`normalize`] makes of it: not empty, and
/// no empty, `.` or `..` segment (so no leading, trailing or doubled `/`).
pub fn is_normal(path: &str) -> bool {
    // Byte by byte (a rollout log asks this of every path it names): every
    // `/`-separated segment is non-empty and neither `.` nor `..`.
    let bytes = path.as_bytes();
    !bytes.is_empty() && bytes.split(|&b| b == b'/').all(|segment| !matches!(segment, b"" | b"." | b".."))
}

/// Normalises when possible and keeps the text otherwise. Used for rollout
/// records, where an unnormalisable prediction is simply a miss, not a broken record.
pub fn normalize_lossy(path: &str) -> String {
    normalize(path).unwrap_or_else(|_| path.to_string())
}

/// Extensions of the languages whose files count as source files (lowercase).
pub const SOURCE_EXTENSIONS: &[&str] = &[
    "py", "pyi", "pyx", "pxd", "c", "h", "cc", "cpp", "cxx", "hpp", "hh", "rs", "go", "java", "kt", "scala", "js",
    "jsx", "ts", "tsx", "mjs", "rb", "php", "cs", "swift", "m", "mm", "jl", "r", "lua", "pl", "sh",
];

/// Whether `path` is a source file that is not a test: a file with a programming language's
/// extension outside `test`/`tests`/`testing` directories that is not named like a test
/// (`test_*`, `*_test.*`, `*_tests.*`, `conftest.py`, `tests.py`). Changelogs, documentation
/// pages and data files are not source files. The grep heuristic answers only with these, and
/// the proxy policy knows which seen files are.
pub fn is_source_file(path: &str) -> bool {
    source_extension(path).is_some()
}

/// The extension of a source file (as [`is_source_file`] decides), as written in `path`; `None`
/// for anything that is not one.
pub fn source_extension(path: &str) -> Option<&str> {
    let mut parts: Vec<&str> = path.split('/').collect();
    let name = parts.pop()?;
    let (stem, extension) = name.rsplit_once('.')?;
    if !SOURCE_EXTENSIONS.contains(&extension.to_ascii_lowercase().as_str()) {
        return None;
    }
    let stem = stem.to_ascii_lowercase();
    let test_dir = parts.iter().any(|d| matches!(d.to_ascii_lowercase().as_str(), "test" | "tests" | "testing"));
    let test_file = stem.starts_with("test_")
        || stem.ends_with("_test")
        || stem.ends_with("_tests")
        || stem == "conftest"
        || stem == "tests";
    (!(test_dir || test_file)).then_some(extension)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_dot_and_double_slash() {
        assert_eq!(normalize("./a/b.py").as_deref(), Ok("a/b.py"));
        assert_eq!(normalize("a//./b.py").as_deref(), Ok("a/b.py"));
        assert_eq!(normalize("b.py").as_deref(), Ok("b.py"));
    }

    #[test]
    fn rejects_absolute_parent_and_empty() {
        assert!(matches!(normalize("/etc/passwd"), Err(PathError::Absolute(_))));
        assert!(matches!(normalize("a/../b.py"), Err(PathError::ParentDir(_))));
        assert!(matches!(normalize("../b.py"), Err(PathError::ParentDir(_))));
        assert_eq!(normalize(""), Err(PathError::Empty));
        assert_eq!(normalize("./"), Err(PathError::Directory("./".into())));
        assert_eq!(normalize("."), Err(PathError::Empty));
        assert_eq!(normalize_lossy("/x"), "/x");
    }

    #[test]
    fn is_normal_is_exactly_what_normalize_keeps() {
        // Every path of up to 6 characters over `a . /`: the fast path and
        // the full normalisation agree on all of them.
        let mut paths = vec![String::new()];
        for _ in 0..6 {
            let longer: Vec<String> = paths.iter().flat_map(|p| ['a', '.', '/'].map(|c| format!("{p}{c}"))).collect();
            paths.extend(longer);
        }
        paths.sort();
        paths.dedup();
        for p in &paths {
            let kept = {
                let mut parts: Vec<&str> = Vec::new();
                let ok = !p.is_empty() && !p.starts_with('/') && !p.ends_with('/') && {
                    let mut ok = true;
                    for part in p.split('/') {
                        match part {
                            "" | "." => {}
                            ".." => ok = false,
                            q => parts.push(q),
                        }
                    }
                    ok && !parts.is_empty()
                };
                ok && parts.join("/") == *p
            };
            assert_eq!(is_normal(p), kept, "{p:?}");
            if is_normal(p) {
                assert_eq!(normalize(p).as_deref(), Ok(p.as_str()));
            }
        }
    }

    #[test]
    fn source_files_are_code_that_is_not_a_test() {
        for path in ["src/_pytest/python.py", "requests/models.py", "lib/core.RS", "setup.py", "attest/latest.py"] {
            assert!(is_source_file(path), "{path}");
        }
        for path in [
            "CHANGELOG.rst",
            "doc/en/fixture.rst",
            "README",
            "testing/code/test_excinfo.py",
            "tests/models.py",
            "sympy/core/tests/test_basic.py",
            "pkg/widget_test.go",
            "conftest.py",
            "Makefile",
        ] {
            assert!(!is_source_file(path), "{path}");
            assert_eq!(source_extension(path), None, "{path}");
        }
        assert_eq!(source_extension("lib/core.RS"), Some("RS"));
        assert_eq!(source_extension("src/_pytest/python.py"), Some("py"));
    }
}
