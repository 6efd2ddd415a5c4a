//! Glob patterns: the `glob` tool's pattern and `grep`'s `path` filter.
//!
//! Both use shell semantics through globset with `literal_separator(true)`: `*`, `?` and `[...]`
//! never match `/`, `**` matches any number of directories. Patterns are relative to the root.

use globset::{Glob, GlobBuilder, GlobSet, GlobSetBuilder};

use super::{ErrorKind, ToolResult};
use crate::Limits;

/// `grep`'s path filter. Beyond the pattern itself, a pattern without `/` also matches names at
/// any depth (`*.py`, like `grep --include`), and a pattern without wildcards also matches
/// everything below that directory (`src/utils`).
pub(crate) struct PathFilter {
    set: GlobSet,
}

impl PathFilter {
    pub(crate) fn new(pattern: &str, limits: &Limits) -> Result<Self, ToolResult> {
        let pattern = clean(pattern, "grep: `path`", limits)?;
        let has_slash = pattern.contains('/');
        let has_wildcard = pattern.contains(['*', '?', '[', '{', '\\']);
        let mut variants = vec![pattern.to_owned()];
        if !has_slash {
            variants.push(format!("**/{pattern}"));
        }
        if !has_wildcard {
            variants.push(format!("{pattern}/**"));
            if !has_slash {
                variants.push(format!("**/{pattern}/**"));
            }
        }
        let mut set = GlobSetBuilder::new();
        for variant in &variants {
            set.add(compile(variant, "grep: `path`")?);
        }
        let set = set.build().map_err(|e| {
            ToolResult::error(ErrorKind::InvalidPattern, format!("grep: `path` is not a valid glob: {e}"))
        })?;
        Ok(PathFilter { set })
    }

    pub(crate) fn matches(&self, path: &str) -> bool {
        self.set.is_match(path)
    }
}

/// Compiles the `glob` tool's pattern.
pub(crate) fn glob_matcher(pattern: &str, limits: &Limits) -> Result<globset::GlobMatcher, ToolResult> {
    let pattern = clean(pattern, "glob: `pattern`", limits)?;
    Ok(compile(pattern, "glob: `pattern`")?.compile_matcher())
}

/// Checks a pattern's length and refuses what can only be an attempt to leave the tree, with a
/// message that says patterns are relative to the root. A leading `./` is dropped.
fn clean<'p>(pattern: &'p str, what: &str, limits: &Limits) -> Result<&'p str, ToolResult> {
    if pattern.len() > limits.max_pattern_len {
        return Err(ToolResult::error(
            ErrorKind::PatternTooLong,
            format!("{what} is {} bytes long; the limit is {}", pattern.len(), limits.max_pattern_len),
        ));
    }
    let refused = |why: &str| Err(ToolResult::error(ErrorKind::Refused, format!("{what} refused: {why}")));
    if pattern.contains('\0') {
        return refused("patterns may not contain NUL bytes");
    }
    if pattern.starts_with('/') {
        return refused("patterns are relative to the repository root; absolute patterns are refused");
    }
    if pattern.split('/').any(|c| c == "..") {
        return refused("`..` is refused; patterns are relative to the repository root");
    }
    if pattern.split('/').any(crate::path::is_git_dir) {
        return refused("the `.git` directory is not part of the tree");
    }
    let mut pattern = pattern;
    while let Some(rest) = pattern.strip_prefix("./") {
        pattern = rest;
    }
    let pattern = pattern.trim_end_matches('/');
    if pattern.is_empty() || pattern == "." {
        return Err(ToolResult::error(ErrorKind::InvalidPattern, format!("{what} is empty")));
    }
    Ok(pattern)
}

fn compile(pattern: &str, what: &str) -> Result<Glob, ToolResult> {
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(|e| ToolResult::error(ErrorKind::InvalidPattern, format!("{what} is not a valid glob: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(p: &str) -> PathFilter {
        PathFilter::new(p, &Limits::default()).unwrap_or_else(|r| panic!("{p}: {}", r.output))
    }

    #[test]
    fn star_never_crosses_a_slash() {
        let m = glob_matcher("src/*.py", &Limits::default()).unwrap_or_else(|r| panic!("{}", r.output));
        assert!(m.is_match("src/a.py"));
        assert!(!m.is_match("src/sub/a.py"));
        let m = glob_matcher("src/**/*.py", &Limits::default()).unwrap_or_else(|r| panic!("{}", r.output));
        assert!(m.is_match("src/a.py"));
        assert!(m.is_match("src/sub/deeper/a.py"));
        let m = glob_matcher("*.py", &Limits::default()).unwrap_or_else(|r| panic!("{}", r.output));
        assert!(m.is_match("a.py"));
        assert!(!m.is_match("src/a.py"));
    }

    #[test]
    fn grep_path_filter_conveniences() {
        assert!(filter("*.py").matches("deep/dir/a.py"));
        assert!(!filter("*.py").matches("deep/dir/a.rs"));
        assert!(filter("src").matches("src/a/b.py"));
        assert!(filter("utils").matches("pkg/utils/x.py"));
        assert!(filter("src/a").matches("src/a/b.py"));
        assert!(!filter("src/a").matches("lib/src/a/b.py"));
        assert!(filter("src/*.py").matches("src/x.py"));
        assert!(!filter("src/*.py").matches("src/y/x.py"));
        // Alternatives, as the proxy's source-only repeat of a grep writes them.
        let any_source = filter("*.{py,rs}");
        assert!(any_source.matches("src/_pytest/a.py") && any_source.matches("lib.rs"));
        assert!(!any_source.matches("doc/en/changelog.rst"));
    }

    #[test]
    fn escaping_patterns_are_refused() {
        for p in ["../*", "/etc/*", "a/../../b", ".git/*", "x\0y"] {
            let err = glob_matcher(p, &Limits::default()).err().unwrap_or_else(|| panic!("{p:?} accepted"));
            assert_eq!(err.status, super::super::Status::Error(ErrorKind::Refused), "{p:?}");
        }
    }
}
