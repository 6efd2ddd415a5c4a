//! A unified-diff parser (git's flavour and plain `---`/`+++` diffs), and the
//! retrieval targets a patch implies: the files it touches and the pre-image
//! line ranges of its changes.
//!
//! Handled: new and deleted files, renames and copies (with or without
//! content changes), mode-only changes, binary patches (`Binary files ...
//! differ` and `GIT binary patch` blocks, whose data is skipped),
//! `\ No newline at end of file`, CRLF line endings, and C-quoted paths
//! (`"a/caf\303\251.py"`). Text before the first file (a mail header or commit
//! message) is ignored.
//!
//! Targets, decided:
//! - the target file of a change is its pre-image path (the path a retriever
//!   sees at the base commit); an added file has none, so its new path is used
//!   (it matches the patch's `diff --git` header either way);
//! - a hunk's target range spans its changed pre-image lines: removed lines,
//!   and for an insertion the pre-image line it follows (line 1 for an
//!   insertion at the top). Context lines are not part of it;
//! - a deleted file's range is the whole file; an added or binary file has no range.

use crate::metrics::LineRange;

/// What happened to a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChangeKind {
    /// The file's content or mode changed in place.
    Modified,
    /// The file is new (`new file mode`, or a pre-image of `/dev/null`).
    Added,
    /// The file was removed (`deleted file mode`, or a post-image of `/dev/null`).
    Deleted,
    /// The file moved, with or without content changes.
    Renamed,
    /// The file was copied from `old_path`, with or without content changes.
    Copied,
}

/// One file's part of a patch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilePatch {
    /// Pre-image path, `None` for an added file.
    pub old_path: Option<String>,
    /// Post-image path, `None` for a deleted file.
    pub new_path: Option<String>,
    /// What happened to the file.
    pub kind: ChangeKind,
    /// The patch marks the file binary; it then has no hunks.
    pub binary: bool,
    /// The text hunks in patch order; empty for a binary, mode-only or pure rename change.
    pub hunks: Vec<Hunk>,
}

/// One `@@ -a,b +c,d @@` hunk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hunk {
    /// `a`: the first pre-image line, 1-based; when `old_len` is 0, the line the hunk follows
    /// (0 at the top of the file).
    pub old_start: u32,
    /// `b`: pre-image lines the hunk spans (1 when the header omits it).
    pub old_len: u32,
    /// `c`: the first post-image line, 1-based; when `new_len` is 0, the line the hunk follows
    /// (0 at the top of the file).
    pub new_start: u32,
    /// `d`: post-image lines the hunk spans (1 when the header omits it).
    pub new_len: u32,
    /// The kind of each body line, in order (`\ No newline` markers excluded).
    pub lines: Vec<LineKind>,
}

/// A hunk body line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineKind {
    /// A line both images share (` `).
    Context,
    /// A pre-image line the patch removes (`-`).
    Removed,
    /// A post-image line the patch adds (`+`).
    Added,
}

/// A patch that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("patch line {line}: {message}")]
pub struct DiffError {
    /// 1-based line of the patch text.
    pub line: usize,
    /// What is wrong there.
    pub message: String,
}

/// Files and pre-image line ranges a patch touches.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PatchTargets {
    /// Distinct, in patch order.
    pub files: Vec<String>,
    /// Each file's changed pre-image ranges, in patch and hunk order.
    pub line_ranges: Vec<LineRange>,
}

impl FilePatch {
    /// The path a retriever should name: the pre-image path, or the new path of an added file.
    pub fn target_path(&self) -> &str {
        self.old_path.as_deref().or(self.new_path.as_deref()).expect("a file patch has at least one path")
    }

    /// Pre-image line ranges of this file's changes (see the module docs).
    pub fn pre_image_ranges(&self) -> Vec<LineRange> {
        let Some(path) = &self.old_path else {
            return Vec::new();
        };
        if self.binary {
            return Vec::new();
        }
        if self.kind == ChangeKind::Deleted {
            let len: u32 = self.hunks.iter().map(|h| h.old_start.saturating_sub(1) + h.old_len).max().unwrap_or(0);
            return if len > 0 { vec![LineRange::new(path.clone(), 1, len)] } else { Vec::new() };
        }
        self.hunks.iter().filter_map(|h| h.pre_image_span().map(|(a, b)| LineRange::new(path.clone(), a, b))).collect()
    }
}

impl Hunk {
    /// First and last changed pre-image line, or `None` for a hunk that changes nothing.
    pub fn pre_image_span(&self) -> Option<(u32, u32)> {
        let mut old = self.old_start; // the pre-image line number of the next old line
        let mut lo = u32::MAX;
        let mut hi = 0u32;
        let mut note = |n: u32| {
            lo = lo.min(n);
            hi = hi.max(n);
        };
        for kind in &self.lines {
            match kind {
                LineKind::Context => old += 1,
                LineKind::Removed => {
                    note(old);
                    old += 1;
                }
                // An insertion follows pre-image line `old - 1`; at the top of the file, anchor to line 1.
                LineKind::Added => note(old.saturating_sub(1).max(1)),
            }
        }
        (hi > 0).then_some((lo, hi))
    }
}

/// Parses a whole patch into its files.
pub fn parse_patch(text: &str) -> Result<Vec<FilePatch>, DiffError> {
    let lines: Vec<&str> = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)).collect();
    let mut files = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if let Some(rest) = line.strip_prefix("diff --git ") {
            let (patch, next) = parse_git_file(&lines, i, rest)?;
            files.push(patch);
            i = next;
        } else if line.starts_with("--- ") && lines.get(i + 1).is_some_and(|l| l.starts_with("+++ ")) {
            let mut patch = FilePatch {
                old_path: None,
                new_path: None,
                kind: ChangeKind::Modified,
                binary: false,
                hunks: Vec::new(),
            };
            let next = parse_body(&lines, i, &mut patch, true)?;
            if patch.old_path.is_none() && patch.new_path.is_none() {
                return Err(DiffError { line: i + 1, message: "both sides are /dev/null".into() });
            }
            files.push(patch);
            i = next;
        } else {
            i += 1;
        }
    }
    Ok(files)
}

/// The target files and pre-image ranges of a patch.
pub fn patch_targets(text: &str) -> Result<PatchTargets, DiffError> {
    Ok(targets_of(&parse_patch(text)?))
}

/// The target files and pre-image ranges of parsed file patches.
pub fn targets_of(files: &[FilePatch]) -> PatchTargets {
    let mut out = PatchTargets::default();
    for f in files {
        let path = f.target_path().to_string();
        if !out.files.contains(&path) {
            out.files.push(path);
        }
        out.line_ranges.extend(f.pre_image_ranges());
    }
    out
}

fn parse_git_file(lines: &[&str], start: usize, header: &str) -> Result<(FilePatch, usize), DiffError> {
    let err = |message: String| DiffError { line: start + 1, message };
    let (a, b) =
        split_git_header(header).ok_or_else(|| err(format!("cannot read the paths of `diff --git {header}`")))?;
    let mut patch = FilePatch {
        old_path: Some(strip_prefix(&a, "a/")),
        new_path: Some(strip_prefix(&b, "b/")),
        kind: ChangeKind::Modified,
        binary: false,
        hunks: Vec::new(),
    };
    let mut i = start + 1;
    while i < lines.len() {
        let line = lines[i];
        if line.starts_with("diff --git ") || line.starts_with("@@ ") || line.starts_with("--- ") {
            break;
        }
        if line.starts_with("new file mode") {
            patch.kind = ChangeKind::Added;
        } else if line.starts_with("deleted file mode") {
            patch.kind = ChangeKind::Deleted;
        } else if let Some(p) = line.strip_prefix("rename from ") {
            patch.kind = ChangeKind::Renamed;
            patch.old_path = Some(unquote(p));
        } else if let Some(p) = line.strip_prefix("rename to ") {
            patch.new_path = Some(unquote(p));
        } else if let Some(p) = line.strip_prefix("copy from ") {
            patch.kind = ChangeKind::Copied;
            patch.old_path = Some(unquote(p));
        } else if let Some(p) = line.strip_prefix("copy to ") {
            patch.new_path = Some(unquote(p));
        } else if line.starts_with("Binary files ") {
            patch.binary = true;
        } else if line == "GIT binary patch" {
            patch.binary = true;
            // Skip the base85 literal/delta blocks up to the next file.
            while i + 1 < lines.len() && !lines[i + 1].starts_with("diff --git ") {
                i += 1;
            }
        }
        i += 1;
    }
    if i < lines.len() && !lines[i].starts_with("diff --git ") {
        i = parse_body(lines, i, &mut patch, false)?;
    }
    match patch.kind {
        ChangeKind::Added => patch.old_path = None,
        ChangeKind::Deleted => patch.new_path = None,
        _ => {}
    }
    Ok((patch, i))
}

/// Parses optional `---`/`+++` lines and the hunks after them. Returns the index after the body.
fn parse_body(lines: &[&str], mut i: usize, patch: &mut FilePatch, plain: bool) -> Result<usize, DiffError> {
    if let Some(p) = lines[i].strip_prefix("--- ") {
        let next = lines.get(i + 1).and_then(|l| l.strip_prefix("+++ "));
        let Some(q) = next else {
            return Err(DiffError { line: i + 2, message: "`---` line is not followed by `+++`".into() });
        };
        let old = side_path(p, "a/");
        let new = side_path(q, "b/");
        if plain || old.is_some() {
            patch.old_path = old.clone();
        }
        if plain || new.is_some() {
            patch.new_path = new.clone();
        }
        match (old, new) {
            (None, Some(_)) => patch.kind = ChangeKind::Added,
            (Some(_), None) => patch.kind = ChangeKind::Deleted,
            _ => {}
        }
        i += 2;
    }
    while i < lines.len() {
        let line = lines[i];
        if !line.starts_with("@@ ") {
            break;
        }
        let (hunk, next) = parse_hunk(lines, i)?;
        patch.hunks.push(hunk);
        i = next;
    }
    Ok(i)
}

fn parse_hunk(lines: &[&str], start: usize) -> Result<(Hunk, usize), DiffError> {
    let header = lines[start];
    let bad = || DiffError { line: start + 1, message: format!("malformed hunk header `{header}`") };
    let body = header.strip_prefix("@@ -").ok_or_else(bad)?;
    let (ranges, _) = body.split_once(" @@").ok_or_else(bad)?;
    let (old, new) = ranges.split_once(" +").ok_or_else(bad)?;
    let (old_start, old_len) = parse_range(old).ok_or_else(bad)?;
    let (new_start, new_len) = parse_range(new).ok_or_else(bad)?;
    let mut hunk = Hunk { old_start, old_len, new_start, new_len, lines: Vec::new() };
    let (mut old_left, mut new_left) = (old_len, new_len);
    let mut i = start + 1;
    while old_left > 0 || new_left > 0 {
        let Some(&line) = lines.get(i) else {
            return Err(DiffError {
                line: i,
                message: format!("hunk `{header}` ends early: {old_left} old and {new_left} new lines missing"),
            });
        };
        let kind = match line.as_bytes().first() {
            // Some tools strip the single space of an empty context line.
            Some(b' ') | None => LineKind::Context,
            Some(b'-') => LineKind::Removed,
            Some(b'+') => LineKind::Added,
            Some(b'\\') => {
                i += 1;
                continue;
            }
            Some(_) => {
                return Err(DiffError {
                    line: i + 1,
                    message: format!("hunk `{header}` ends early: {old_left} old and {new_left} new lines missing"),
                });
            }
        };
        let (takes_old, takes_new) = match kind {
            LineKind::Context => (true, true),
            LineKind::Removed => (true, false),
            LineKind::Added => (false, true),
        };
        if (takes_old && old_left == 0) || (takes_new && new_left == 0) {
            return Err(DiffError { line: i + 1, message: format!("hunk `{header}` has more lines than it declares") });
        }
        old_left -= u32::from(takes_old);
        new_left -= u32::from(takes_new);
        hunk.lines.push(kind);
        i += 1;
    }
    // A trailing `\ No newline at end of file` belongs to this hunk.
    while lines.get(i).is_some_and(|l| l.starts_with('\\')) {
        i += 1;
    }
    Ok((hunk, i))
}

fn parse_range(s: &str) -> Option<(u32, u32)> {
    let digits = |t: &str| (!t.is_empty() && t.bytes().all(|b| b.is_ascii_digit())).then(|| t.parse().ok()).flatten();
    match s.split_once(',') {
        Some((a, b)) => Some((digits(a)?, digits(b)?)),
        None => Some((digits(s)?, 1)),
    }
}

/// A `---`/`+++` path: `/dev/null` is no file; a timestamp after a tab is dropped.
fn side_path(text: &str, prefix: &str) -> Option<String> {
    let text = if text.starts_with('"') { text } else { text.split('\t').next().unwrap_or(text) };
    let path = unquote(text);
    (path != "/dev/null").then(|| strip_prefix(&path, prefix))
}

fn strip_prefix(path: &str, prefix: &str) -> String {
    path.strip_prefix(prefix).unwrap_or(path).to_string()
}

/// Splits the `a/X b/Y` of a `diff --git` header. Quoted sides are read as
/// such; otherwise, as git does, the split is taken where both halves name the
/// same path (the common case, which also survives spaces in names), falling
/// back to the first ` b/`.
fn split_git_header(h: &str) -> Option<(String, String)> {
    if h.starts_with('"') {
        let end = quoted_end(h)?;
        let (a, rest) = h.split_at(end);
        return Some((unquote(a), unquote(rest.trim_start())));
    }
    if let Some(pos) = h.find(" \"") {
        return Some((h[..pos].to_string(), unquote(&h[pos + 1..])));
    }
    if h.len() % 2 == 1 {
        let mid = h.len() / 2;
        let (a, b) = (&h[..mid], &h[mid + 1..]);
        if h.as_bytes()[mid] == b' ' && a.get(2..) == b.get(2..) {
            return Some((a.to_string(), b.to_string()));
        }
    }
    let pos = h.find(" b/")?;
    Some((h[..pos].to_string(), h[pos + 1..].to_string()))
}

/// Byte index just after the closing quote of a C-quoted string at the start of `s`.
fn quoted_end(s: &str) -> Option<usize> {
    let bytes = s.as_bytes();
    let mut i = 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

/// Undoes git's C-style quoting (`"a/caf\303\251.py"`); unquoted text is returned as is.
fn unquote(s: &str) -> String {
    let Some(inner) = s.strip_prefix('"').and_then(|t| t.strip_suffix('"')) else {
        return s.to_string();
    };
    let bytes = inner.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'\\' || i + 1 == bytes.len() {
            out.push(bytes[i]);
            i += 1;
            continue;
        }
        let c = bytes[i + 1];
        i += 2;
        match c {
            b'n' => out.push(b'\n'),
            b't' => out.push(b'\t'),
            b'r' => out.push(b'\r'),
            b'a' => out.push(7),
            b'b' => out.push(8),
            b'f' => out.push(12),
            b'v' => out.push(11),
            b'0'..=b'7' => {
                let mut v = u32::from(c - b'0');
                let mut k = 0;
                while k < 2 && i < bytes.len() && (b'0'..=b'7').contains(&bytes[i]) {
                    v = v * 8 + u32::from(bytes[i] - b'0');
                    i += 1;
                    k += 1;
                }
                out.push((v & 0xff) as u8);
            }
            other => out.push(other),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lr(path: &str, a: u32, b: u32) -> LineRange {
        LineRange::new(path, a, b)
    }

    #[test]
    fn modified_file_ranges_skip_context() {
        let patch = "diff --git a/m.py b/m.py\nindex 1..2 100644\n--- a/m.py\n+++ b/m.py\n@@ -10,6 +10,7 @@ def f():\n ctx\n ctx\n-old\n+new\n+new2\n ctx\n ctx\n";
        let t = patch_targets(patch).expect("parses");
        assert_eq!(t.files, vec!["m.py"]);
        assert_eq!(t.line_ranges, vec![lr("m.py", 12, 12)]);
    }

    #[test]
    fn pure_insertions_anchor_to_the_previous_line() {
        let patch = "--- a/m.py\n+++ b/m.py\n@@ -4,2 +4,3 @@\n a\n+b\n c\n@@ -0,0 +1 @@\n+top\n";
        // The second hunk is malformed for a non-empty file, but an insertion at the top anchors to line 1.
        let t = patch_targets(patch).expect("parses");
        assert_eq!(t.line_ranges, vec![lr("m.py", 4, 4), lr("m.py", 1, 1)]);
    }

    #[test]
    fn new_deleted_renamed_and_binary_files() {
        let patch = "\
From: someone
Subject: a commit message that is ignored

diff --git a/new.py b/new.py
new file mode 100644
index 0000000..1111111
--- /dev/null
+++ b/new.py
@@ -0,0 +1,2 @@
+a
+b
diff --git a/gone.py b/gone.py
deleted file mode 100644
index 1111111..0000000
--- a/gone.py
+++ /dev/null
@@ -1,3 +0,0 @@
-a
-b
-c
diff --git a/old name.py b/new name.py
similarity index 90%
rename from old name.py
rename to new name.py
index 1..2 100644
--- a/old name.py
+++ b/new name.py
@@ -1,2 +1,2 @@
-x
+y
 z
diff --git a/pure.py b/moved.py
similarity index 100%
rename from pure.py
rename to moved.py
diff --git a/logo.png b/logo.png
index 1..2 100644
Binary files a/logo.png and b/logo.png differ
diff --git a/icon.bin b/icon.bin
new file mode 100644
index 0000000..3333333
GIT binary patch
literal 12
TcmZ?wbhEHbWMp7u5C8xG

literal 0
HcmV?d00001

diff --git a/mode.sh b/mode.sh
old mode 100644
new mode 100755
";
        let files = parse_patch(patch).expect("parses");
        let kinds: Vec<(ChangeKind, bool, Option<&str>, Option<&str>)> =
            files.iter().map(|f| (f.kind, f.binary, f.old_path.as_deref(), f.new_path.as_deref())).collect();
        assert_eq!(
            kinds,
            vec![
                (ChangeKind::Added, false, None, Some("new.py")),
                (ChangeKind::Deleted, false, Some("gone.py"), None),
                (ChangeKind::Renamed, false, Some("old name.py"), Some("new name.py")),
                (ChangeKind::Renamed, false, Some("pure.py"), Some("moved.py")),
                (ChangeKind::Modified, true, Some("logo.png"), Some("logo.png")),
                (ChangeKind::Added, true, None, Some("icon.bin")),
                (ChangeKind::Modified, false, Some("mode.sh"), Some("mode.sh")),
            ]
        );
        let t = targets_of(&files);
        assert_eq!(t.files, vec!["new.py", "gone.py", "old name.py", "pure.py", "logo.png", "icon.bin", "mode.sh"]);
        assert_eq!(t.line_ranges, vec![lr("gone.py", 1, 3), lr("old name.py", 1, 1)]);
    }

    #[test]
    fn no_newline_markers_and_crlf() {
        let patch = "diff --git a/a.txt b/a.txt\r\n--- a/a.txt\r\n+++ b/a.txt\r\n@@ -1,2 +1,2 @@\r\n a\r\n-b\r\n\\ No newline at end of file\r\n+c\r\n\\ No newline at end of file\r\ndiff --git a/b.txt b/b.txt\r\n--- a/b.txt\r\n+++ b/b.txt\r\n@@ -3 +3 @@\r\n-x\r\n+y\r\n";
        let files = parse_patch(patch).expect("parses");
        assert_eq!(files.len(), 2);
        assert_eq!(files[0].hunks[0].lines, vec![LineKind::Context, LineKind::Removed, LineKind::Added]);
        let t = targets_of(&files);
        assert_eq!(t.line_ranges, vec![lr("a.txt", 2, 2), lr("b.txt", 3, 3)]);
    }

    #[test]
    fn quoted_paths() {
        let patch = "diff --git \"a/caf\\303\\251 x.py\" \"b/caf\\303\\251 x.py\"\n--- \"a/caf\\303\\251 x.py\"\n+++ \"b/caf\\303\\251 x.py\"\n@@ -1 +1 @@\n-a\n+b\n";
        let t = patch_targets(patch).expect("parses");
        assert_eq!(t.files, vec!["café x.py"]);
    }

    #[test]
    fn truncated_hunks_are_errors() {
        let patch = "--- a/m.py\n+++ b/m.py\n@@ -1,3 +1,3 @@\n a\n-b\n";
        let err = parse_patch(patch).expect_err("short hunk");
        assert!(err.message.contains("ends early"), "{err}");
        let err = parse_patch("--- a/m.py\n+++ b/m.py\n@@ -x +1 @@\n").expect_err("bad header");
        assert_eq!(err.to_string(), "patch line 3: malformed hunk header `@@ -x +1 @@`");
    }
}
