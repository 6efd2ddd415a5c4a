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
        let has_wildcard = !is_literal(pattern);
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

/// The `glob` tool's pattern: a path compare where the pattern is a literal path, at any depth or
/// not; else globset's matcher behind a literal prefilter, compiled on demand.
///
/// globset matches a pattern like `**/*word*` or `**/pkg/sub/mod.py` with a regex: compiling it
/// costs tens to hundreds of microseconds, and matching a path with it about a hundred
/// nanoseconds, for every path of the tree (thousands on a real repository). `**/name.py` and
/// `**/pkg/sub/mod.py` (the proxy's file and module globs) are a path compare; other patterns
/// first look for their longest literal run ([`required_literal`]), which rules most paths out
/// in about a tenth of the matcher's time, and the matcher, compiled when the first path passes,
/// decides the rest. Neither changes what a glob lists (property tests check both against
/// globset).
pub(crate) struct GlobPattern {
    shape: Shape,
    glob: Glob,
    matcher: std::cell::OnceCell<globset::GlobMatcher>,
}

enum Shape {
    /// A pattern without wildcard, class, alternative or escape ([`is_literal`]): only this path.
    Path(String),
    /// `**/` and then such a path: this path, or it below any directory.
    AtAnyDepth(String),
    /// Anything else, with the literal run every match contains, if any.
    General(Option<Box<memchr::memmem::Finder<'static>>>),
}

impl GlobPattern {
    pub(crate) fn is_match(&self, path: &str) -> bool {
        match &self.shape {
            Shape::Path(literal) => path == literal,
            Shape::AtAnyDepth(literal) => {
                path.strip_suffix(literal.as_str()).is_some_and(|head| head.is_empty() || head.ends_with('/'))
            }
            Shape::General(literal) => {
                literal.as_ref().is_none_or(|literal| literal.find(path.as_bytes()).is_some()) && self.full_match(path)
            }
        }
    }

    /// globset's verdict, without the shortcuts.
    fn full_match(&self, path: &str) -> bool {
        self.matcher.get_or_init(|| self.glob.compile_matcher()).is_match(path)
    }
}

/// Parses the `glob` tool's pattern (an invalid one is refused here, before any path).
pub(crate) fn glob_matcher(pattern: &str, limits: &Limits) -> Result<GlobPattern, ToolResult> {
    let pattern = clean(pattern, "glob: `pattern`", limits)?;
    let glob = compile(pattern, "glob: `pattern`")?;
    let shape = match pattern.strip_prefix("**/") {
        _ if is_literal(pattern) => Shape::Path(pattern.to_owned()),
        Some(rest) if is_literal(rest) => Shape::AtAnyDepth(rest.to_owned()),
        _ => Shape::General(
            required_literal(pattern)
                .map(|literal| Box::new(memchr::memmem::Finder::new(literal.as_bytes()).into_owned())),
        ),
    };
    Ok(GlobPattern { shape, glob, matcher: std::cell::OnceCell::new() })
}

/// Whether a glob pattern is a path as written: no wildcard, class, alternative or escape (a
/// lone `]` stands for itself; a lone `}` is no valid glob).
fn is_literal(pattern: &str) -> bool {
    !pattern.contains(['*', '?', '[', '{', '\\'])
}

/// The longest run of characters that every path a (valid) glob pattern matches contains, in
/// the semantics of [`compile`]: outside `[...]` classes and `{...}` alternatives, a character
/// that is not `*` or `?` stands for itself (after `\`, any character does), except a `/` beside
/// `**`, which may match nothing (`**/a.py` matches `a.py`, `a/**/b` matches `a/b`). `None` when
/// there is no such run, or the pattern holds what this reading does not cover (a class or an
/// escape inside alternatives, an unclosed group): then every path goes to the matcher.
pub(crate) fn required_literal(pattern: &str) -> Option<String> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut best = String::new();
    let mut run = String::new();
    let mut end_run = |run: &mut String| {
        if run.len() > best.len() {
            best = std::mem::take(run);
        } else {
            run.clear();
        }
    };
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '\\' => {
                run.push(*chars.get(i + 1)?);
                i += 2;
            }
            '*' if chars.get(i + 1) == Some(&'*') => {
                if run.ends_with('/') {
                    run.pop();
                }
                end_run(&mut run);
                i += 2;
                if chars.get(i) == Some(&'/') {
                    i += 1;
                }
            }
            '*' | '?' => {
                end_run(&mut run);
                i += 1;
            }
            '[' => {
                end_run(&mut run);
                // A `]` first in the class (after a negation) is a member, not its end.
                let mut j = i + 1;
                if matches!(chars.get(j), Some('!' | '^')) {
                    j += 1;
                }
                if chars.get(j) == Some(&']') {
                    j += 1;
                }
                while *chars.get(j)? != ']' {
                    j += 1;
                }
                i = j + 1;
            }
            '{' => {
                end_run(&mut run);
                let mut j = i + 1;
                loop {
                    match *chars.get(j)? {
                        '}' => break,
                        '[' | '\\' | '{' => return None,
                        _ => j += 1,
                    }
                }
                i = j + 1;
            }
            c => {
                run.push(c);
                i += 1;
            }
        }
    }
    end_run(&mut run);
    (!best.is_empty()).then_some(best)
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
    fn required_literals_of_the_proxy_s_globs() {
        for (pattern, literal) in [
            ("**/retry.py", Some("retry.py")),
            ("**/*cache*", Some("cache")),
            ("**/polys/polytools.py", Some("polys/polytools.py")),
            ("src/**/*.py", Some("src")),
            ("a/**/bc", Some("bc")),
            ("*.{py,rs}", Some(".")),
            ("**/*", None),
            ("[ab]*", None),
            (r"\*x\?", Some("*x?")),
            ("x[]y]zz", Some("zz")),
            ("{a,[b]}", None),
        ] {
            assert_eq!(required_literal(pattern).as_deref(), literal, "{pattern:?}");
        }
    }

    use proptest::strategy::Strategy;

    proptest::proptest! {
        /// The shortcuts agree with globset on every path: what `glob` lists is unchanged.
        #[test]
        fn the_shortcuts_agree_with_globset(
            parts in proptest::collection::vec(
                proptest::sample::select(vec!["a", "b", "ab", ".py", "/", "*", "?", "**/", "/**", "[ab]", "[!a]", "{a,b}", "{ab,/}", r"\*", r"\a", "]", "}"]),
                1..7,
            ),
            paths in proptest::collection::vec(
                proptest::collection::vec(
                    proptest::prop_oneof![
                        proptest::sample::select(vec!["a", "b", "ab", "a.py", "ab.py", ".py", "*", "?", "]", "}"]).prop_map(str::to_owned),
                        "[ab.*?]{1,4}",
                    ],
                    1..5,
                ).prop_map(|components| components.join("/")),
                1..40,
            ),
        ) {
            let pattern: String = parts.concat();
            let Ok(glob) = glob_matcher(&pattern, &Limits::default()) else { return Ok(()) };
            for path in &paths {
                proptest::prop_assert_eq!(glob.is_match(path), glob.full_match(path), "{:?} on {:?}", pattern, path);
            }
        }
    }

    proptest::proptest! {
        /// Literal paths, at the root or at any depth (`**/pkg/mod.py`), against globset, on paths
        /// made of the same names so that many match.
        #[test]
        fn literal_paths_agree_with_globset(
            any_depth in proptest::bool::ANY,
            names in proptest::collection::vec(proptest::sample::select(vec!["a", "b", "a.py", "a]"]), 1..3),
            paths in proptest::collection::vec(
                proptest::collection::vec(proptest::sample::select(vec!["a", "b", "a.py", "xa", "a]", "b}"]), 1..5),
                1..40,
            ),
        ) {
            let pattern = format!("{}{}", if any_depth { "**/" } else { "" }, names.join("/"));
            let glob = glob_matcher(&pattern, &Limits::default()).unwrap_or_else(|r| panic!("{pattern}: {}", r.output));
            proptest::prop_assert!(!matches!(glob.shape, Shape::General(_)), "{:?} is a literal path", pattern);
            for path in paths.iter().map(|names| names.join("/")) {
                proptest::prop_assert_eq!(glob.is_match(&path), glob.full_match(&path), "{:?} on {:?}", pattern, path);
            }
        }
    }

    #[test]
    fn escaping_patterns_are_refused() {
        for p in ["../*", "/etc/*", "a/../../b", ".git/*", "x\0y"] {
            let err = glob_matcher(p, &Limits::default()).err().unwrap_or_else(|| panic!("{p:?} accepted"));
            assert_eq!(err.status, super::super::Status::Error(ErrorKind::Refused), "{p:?}");
        }
    }
}
