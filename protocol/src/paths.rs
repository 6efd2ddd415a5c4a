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

/// Normalises when possible and keeps the text otherwise. Used for rollout
/// records, where an unnormalisable prediction is simply a miss, not a broken record.
pub fn normalize_lossy(path: &str) -> String {
    normalize(path).unwrap_or_else(|_| path.to_string())
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
}
