//! The filters of commit mining that need no repository: which paths count
//! as source (extensions, the built-in test/doc/vendor rule, user globs),
//! which messages are trivial, how a pull request's merge or squash message
//! reads, and dates given as text.
//!
//! Globs follow git's pathspec `glob` magic: `*` and `?` stay within one
//! path component and `**` spans any number of them, so `doc/**` is
//! everything under `doc/` and `**/tests/**` is every `tests` directory at
//! any depth (the tests check this against `git diff -- ':(glob)...'`).

use globset::{Glob, GlobBuilder, GlobSet, GlobSetBuilder};

/// Directories whose files are tests.
const TEST_DIRS: [&str; 4] = ["test", "tests", "testing", "__tests__"];

/// Is the path a test, doc or vendored file (never a target under the built-in rule)?
pub fn is_excluded_path(path: &str) -> bool {
    let dirs = [
        "spec",
        "specs",
        "doc",
        "docs",
        "documentation",
        "examples",
        "vendor",
        "vendored",
        "third_party",
        "third-party",
        "thirdparty",
        "node_modules",
        "external",
        "extern",
        "_vendor",
        "benchmarks",
    ];
    is_test_path(path) || {
        let lower = path.to_ascii_lowercase();
        let (parents, stem) = parents_and_stem(&lower);
        parents.iter().any(|c| dirs.contains(c)) || stem == "setup"
    }
}

/// Is the path a test file: in a test directory (`test`, `tests`, `testing`) or named as one
/// (`test_x.py`, `x_test.go`, `x.spec.ts`, `conftest.py`), the test half of
/// [`is_excluded_path`].
pub fn is_test_path(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    let (parents, stem) = parents_and_stem(&lower);
    parents.iter().any(|c| TEST_DIRS.contains(c))
        || stem.starts_with("test_")
        || stem.ends_with("_test")
        || stem.ends_with("_tests")
        || stem.ends_with(".test")
        || stem.ends_with(".spec")
        || stem == "conftest"
}

/// A path's directories and its file name without the last extension.
fn parents_and_stem(path: &str) -> (Vec<&str>, &str) {
    let mut components: Vec<&str> = path.split('/').collect();
    let name = components.pop().unwrap_or("");
    (components, name.rsplit_once('.').map_or(name, |(s, _)| s))
}

/// Trivial messages: too few words, or a subject that names routine upkeep.
pub fn is_trivial_message(message: &str, min_words: usize) -> bool {
    if message.split_whitespace().count() < min_words {
        return true;
    }
    let subject = message.lines().next().unwrap_or("").trim().to_ascii_lowercase();
    let prefixes = [
        "merge ",
        "revert ",
        "bump ",
        "release ",
        "version ",
        "wip",
        "fixup!",
        "squash!",
        "typo",
        "fix typo",
        "format",
        "reformat",
        "lint",
        "style:",
        "chore",
        "update changelog",
        "update readme",
    ];
    prefixes.iter().any(|p| subject.starts_with(p))
}

/// A glob that does not compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("path glob `{glob}`: {message}")]
pub struct GlobError {
    /// The glob as written (the whole list, comma-separated, when the set failed to build).
    pub glob: String,
    /// What the glob compiler said was wrong.
    pub message: String,
}

/// Which changed paths may be targets: a source extension, not removed by
/// the built-in rule (when on), matching an include glob (when any are given)
/// and no exclude glob.
#[derive(Clone, Debug)]
pub struct PathFilter {
    extensions: Vec<String>,
    builtin_excludes: bool,
    include: Option<GlobSet>,
    exclude: GlobSet,
}

impl PathFilter {
    /// Compiles the globs; `extensions` are without the dot, compared case-insensitively.
    pub fn new(
        extensions: &[String],
        builtin_excludes: bool,
        include: &[String],
        exclude: &[String],
    ) -> Result<PathFilter, GlobError> {
        let include = if include.is_empty() { None } else { Some(glob_set(include)?) };
        Ok(PathFilter {
            extensions: extensions.iter().map(|e| e.to_ascii_lowercase()).collect(),
            builtin_excludes,
            include,
            exclude: glob_set(exclude)?,
        })
    }

    /// Does the file name of `path` have one of the source extensions?
    pub fn has_source_extension(&self, path: &str) -> bool {
        let name = path.rsplit('/').next().unwrap_or(path);
        name.rsplit_once('.').is_some_and(|(_, ext)| self.extensions.contains(&ext.to_ascii_lowercase()))
    }

    /// May `path` be a target?
    pub fn accepts(&self, path: &str) -> bool {
        if !self.has_source_extension(path) {
            return false;
        }
        if self.builtin_excludes && is_excluded_path(path) {
            return false;
        }
        if let Some(include) = &self.include
            && !include.is_match(path)
        {
            return false;
        }
        !self.exclude.is_match(path)
    }
}

fn glob_set(globs: &[String]) -> Result<GlobSet, GlobError> {
    let mut builder = GlobSetBuilder::new();
    for text in globs {
        builder.add(compile(text)?);
    }
    builder.build().map_err(|e| GlobError { glob: globs.join(", "), message: e.to_string() })
}

fn compile(text: &str) -> Result<Glob, GlobError> {
    GlobBuilder::new(text)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(|e| GlobError { glob: text.to_string(), message: e.kind().to_string() })
}

/// A pull request read from a commit message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PullRequestMessage {
    /// The pull request's number, `N` in `#N`.
    pub number: u64,
    /// The issue text: the title, then the body after a blank line when there is one.
    pub text: String,
}

/// GitHub's merge message: `Merge pull request #N from user/branch`, then
/// the title and the body. `None` for any other message, and for a merge
/// message with no title (nothing to use as an issue).
pub fn merge_pull_request(message: &str) -> Option<PullRequestMessage> {
    let (subject, rest) = message.split_once('\n').unwrap_or((message, ""));
    let tail = subject.trim().strip_prefix("Merge pull request #")?;
    let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
    let number = tail[..digits].parse().ok()?;
    if !tail[digits..].starts_with(" from ") {
        return None;
    }
    let text = rest.trim();
    (!text.is_empty()).then(|| PullRequestMessage { number, text: text.to_string() })
}

/// A squash merge: a subject `Title (#N)`; the issue text is the title
/// without the suffix and the body after it.
pub fn squash_pull_request(message: &str) -> Option<PullRequestMessage> {
    let (subject, rest) = message.split_once('\n').unwrap_or((message, ""));
    let subject = subject.trim_end();
    let inner = subject.strip_suffix(')')?;
    let open = inner.rfind("(#")?;
    let number = inner[open + 2..].parse().ok()?;
    let title = inner[..open].trim_end();
    if title.is_empty() {
        return None;
    }
    let body = rest.trim();
    let text = if body.is_empty() { title.to_string() } else { format!("{title}\n\n{body}") };
    Some(PullRequestMessage { number, text })
}

/// Seconds since the Unix epoch of a date given as `YYYY-MM-DD` (midnight
/// UTC), `YYYY-MM-DDTHH:MM:SS` with an optional `Z` (UTC), or plain
/// seconds (`@1700000000` or `1700000000`). `None` when it reads as none of these.
pub fn parse_time(text: &str) -> Option<i64> {
    let text = text.trim();
    let digits = text.strip_prefix('@').unwrap_or(text);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) && !text.contains('-') {
        return digits.parse().ok();
    }
    let (date, clock) = match text.split_once(['T', ' ']) {
        Some((d, c)) => (d, Some(c.strip_suffix('Z').unwrap_or(c))),
        None => (text, None),
    };
    let mut parts = date.split('-');
    let year: i64 = parts.next()?.parse().ok()?;
    let month: u32 = parts.next()?.parse().ok()?;
    let day: u32 = parts.next()?.parse().ok()?;
    if parts.next().is_some() || !(1..=12).contains(&month) || !(1..=days_in_month(year, month)).contains(&day) {
        return None;
    }
    let mut seconds = days_from_civil(year, month, day) * 86_400;
    if let Some(clock) = clock {
        let fields: Vec<&str> = clock.split(':').collect();
        let [h, m, s] = fields[..] else { return None };
        let (h, m, s): (i64, i64, i64) = (h.parse().ok()?, m.parse().ok()?, s.parse().ok()?);
        if !(0..24).contains(&h) || !(0..60).contains(&m) || !(0..61).contains(&s) {
            return None;
        }
        seconds += h * 3600 + m * 60 + s;
    }
    Some(seconds)
}

fn days_in_month(year: i64, month: u32) -> u32 {
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(include: &[&str], exclude: &[&str]) -> PathFilter {
        let owned = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        PathFilter::new(&owned(&["py"]), false, &owned(include), &owned(exclude)).expect("globs compile")
    }

    #[test]
    fn path_filters() {
        assert!(is_excluded_path("tests/test_x.py"));
        assert!(is_excluded_path("pkg/test_x.py"));
        assert!(is_excluded_path("pkg/x_test.go"));
        assert!(is_excluded_path("web/app.spec.ts"));
        assert!(is_excluded_path("vendor/lib/a.go"));
        assert!(is_excluded_path("docs/conf.py"));
        assert!(is_excluded_path("pkg/testing/x.py"));
        assert!(!is_excluded_path("src/contest.py"));
        for test in ["tests/test_x.py", "pkg/test_x.py", "pkg/x_test.go", "web/app.spec.ts", "pkg/testing/x.py"] {
            assert!(is_test_path(test), "{test}");
        }
        for other in ["docs/conf.py", "vendor/lib/a.go", "src/contest.py", "setup.py", "pkg/latest.py"] {
            assert!(!is_test_path(other), "{other}");
        }
        let builtin = PathFilter::new(&["py".to_string()], true, &[], &[]).expect("no globs");
        assert!(builtin.accepts("src/a.py"));
        assert!(builtin.accepts("src/A.PY"));
        assert!(!builtin.accepts("README.md"));
        assert!(!builtin.accepts("Makefile"));
        assert!(!builtin.accepts("tests/a.py"));
    }

    #[test]
    fn globs_span_components_only_with_double_stars() {
        let f = filter(&[], &["**/tests/**", "doc/**"]);
        assert!(!f.accepts("tests/a.py"));
        assert!(!f.accepts("pkg/sub/tests/a.py"));
        assert!(!f.accepts("doc/x/conf.py"));
        assert!(f.accepts("pkg/doc/conf.py"), "`doc/**` is anchored at the top");
        assert!(f.accepts("pkg/tests.py"));
        let f = filter(&["pkg/*.py"], &[]);
        assert!(f.accepts("pkg/a.py"));
        assert!(!f.accepts("pkg/sub/a.py"), "`*` stays within one component");
        let err = PathFilter::new(&[], false, &["a/[".to_string()], &[]).expect_err("unclosed class");
        assert_eq!(err.glob, "a/[");
    }

    #[test]
    fn trivial_messages() {
        assert!(is_trivial_message("fix", 4));
        assert!(is_trivial_message("Merge branch 'x' into main now", 4));
        assert!(is_trivial_message("Bump version to 1.2.3 for release", 4));
        assert!(!is_trivial_message("Handle empty headers in the request parser", 4));
    }

    #[test]
    fn pull_request_messages() {
        let merge = "Merge pull request #7 from alice/fix-parse\n\nFix parsing of empty headers\n\nLonger body.";
        assert_eq!(
            merge_pull_request(merge),
            Some(PullRequestMessage { number: 7, text: "Fix parsing of empty headers\n\nLonger body.".into() })
        );
        assert_eq!(merge_pull_request("Merge pull request #7 from alice/x"), None, "no title");
        assert_eq!(merge_pull_request("Merge pull request #x from a/b\n\nT"), None);
        assert_eq!(merge_pull_request("Merge branch 'main' into x\n\nT"), None);
        assert_eq!(
            squash_pull_request("Speed up the lexer (#12)\n\n* one\n* two\n"),
            Some(PullRequestMessage { number: 12, text: "Speed up the lexer\n\n* one\n* two".into() })
        );
        assert_eq!(squash_pull_request("Speed up the lexer (#12)").map(|p| p.text), Some("Speed up the lexer".into()));
        assert_eq!(squash_pull_request("Speed up the lexer (see #12)"), None);
        assert_eq!(squash_pull_request("(#12)"), None);
    }

    #[test]
    fn times() {
        assert_eq!(parse_time("1970-01-01"), Some(0));
        assert_eq!(parse_time("2000-03-01"), Some(951_868_800));
        assert_eq!(parse_time("2024-02-29T12:30:00Z"), Some(1_709_209_800));
        assert_eq!(parse_time("@1700000000"), Some(1_700_000_000));
        assert_eq!(parse_time("1700000000"), Some(1_700_000_000));
        assert_eq!(parse_time("2023-02-29"), None);
        assert_eq!(parse_time("yesterday"), None);
    }
}
