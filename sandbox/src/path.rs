//! Lexical normalisation of paths supplied by a policy, before any resolution.
//!
//! The rules are deliberately strict: a policy has no reason to write `..` or an absolute path
//! when every path it has seen came from this sandbox relative to the repository root.

/// Why a path was refused before resolution.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    Nul,
    Absolute,
    ParentDir,
    GitDir,
}

impl Refusal {
    pub(crate) fn message(&self) -> &'static str {
        match self {
            Refusal::Nul => "paths may not contain NUL bytes",
            Refusal::Absolute => "paths are relative to the repository root; absolute paths are refused",
            Refusal::ParentDir => "`..` is refused; paths are relative to the repository root",
            Refusal::GitDir => "the `.git` directory is not part of the tree",
        }
    }
}

/// Splits `input` into its normal components: empty components and `.` are dropped, and `..`,
/// a leading `/`, NUL bytes and `.git` components are refused. An empty result names the root.
pub(crate) fn normalise(input: &str) -> Result<Vec<&str>, Refusal> {
    if input.contains('\0') {
        return Err(Refusal::Nul);
    }
    if input.starts_with('/') {
        return Err(Refusal::Absolute);
    }
    let mut out = Vec::new();
    for component in input.split('/') {
        match component {
            "" | "." => {}
            ".." => return Err(Refusal::ParentDir),
            c if is_git_dir(c) => return Err(Refusal::GitDir),
            c => out.push(c),
        }
    }
    Ok(out)
}

/// `.git` in any letter case: on a case-insensitive filesystem `.GIT` would be the same directory.
pub(crate) fn is_git_dir(component: &str) -> bool {
    component.eq_ignore_ascii_case(".git")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_paths_are_split_and_cleaned() {
        assert_eq!(normalise("src/a.py"), Ok(vec!["src", "a.py"]));
        assert_eq!(normalise("./src//a.py/"), Ok(vec!["src", "a.py"]));
        assert_eq!(normalise(""), Ok(vec![]));
        assert_eq!(normalise("."), Ok(vec![]));
    }

    #[test]
    fn hostile_paths_are_refused() {
        assert_eq!(normalise("../x"), Err(Refusal::ParentDir));
        assert_eq!(normalise("src/../../x"), Err(Refusal::ParentDir));
        assert_eq!(normalise("src/.."), Err(Refusal::ParentDir));
        assert_eq!(normalise("/etc/passwd"), Err(Refusal::Absolute));
        assert_eq!(normalise("a\0b"), Err(Refusal::Nul));
        assert_eq!(normalise(".git/config"), Err(Refusal::GitDir));
        assert_eq!(normalise("sub/.GIT/HEAD"), Err(Refusal::GitDir));
        // Names that merely contain dots are ordinary files.
        assert_eq!(normalise("...").map(|v| v.len()), Ok(1));
        assert_eq!(normalise(".gitignore").map(|v| v.len()), Ok(1));
    }
}
