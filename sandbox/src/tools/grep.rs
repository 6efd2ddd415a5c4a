//! `grep`: regex search over the tracked regular files of a tree.
//!
//! Files are searched in path order and matches reported in line order, so the output is
//! deterministic: `path:line:text`, one line per matching line, like `git grep -n`. Symlinks are
//! not searched (as in `git grep`); their targets are searched under their own paths.
//!
//! On a zero-disk view the content index (`crate::index`) narrows the files read: the pattern's
//! trigram query, evaluated once over the posting lists, rules out files that cannot match, and the index's sizes and binary flags
//! account for them exactly as reading them would (`searched`, skipped binary and large files),
//! so the output is the same byte for byte. Files without an entry are read and scanned.
//!
//! Then the repository's grep memo (`crate::grep_memo`): a blob this pattern was searched in
//! before, at any commit, replays the lines it matched there instead of being read; a blob that
//! is scanned is recorded for the next grep.

use std::sync::Arc;

use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkMatch};

use super::{ErrorKind, GrepArgs, ToolResult, filter::PathFilter, output::Output};
use crate::{
    Limits,
    deadline::Deadline,
    grep_memo::{BlobMatches, PatternKey, Recorder, line_chars},
    index::{Content, Query},
    tree::{AccessError, EntryKind, Tree},
};

/// Files larger than this are searched in chunks cut at line ends, with a deadline check between
/// chunks, so one large file cannot hold a call past its budget.
const CHUNK_BYTES: usize = 32 << 10;

pub(crate) fn run(tree: &Tree, args: &GrepArgs, limits: &Limits, deadline: Deadline) -> ToolResult {
    let matcher = match build_matcher(args, limits) {
        Ok(matcher) => matcher,
        Err(result) => return result,
    };
    let filter = match args.path.as_deref().map(|p| PathFilter::new(p, limits)).transpose() {
        Ok(filter) => filter,
        Err(result) => return result,
    };
    // No binary detection in the searcher: a file reaches it only once it is known to hold no
    // NUL (the index's or the blob cache's verdict, or the check below), and the searcher's own
    // detection scanned every searched byte for one again (9% of a real study's tool time, perf).
    let mut searcher =
        SearcherBuilder::new().line_number(true).binary_detection(BinaryDetection::none()).bom_sniffing(false).build();
    // The path filter has already narrowed the files; the index narrows them further. Its
    // sizes and binary flags serve every pattern, its trigrams only one with a usable query.
    let indexed = tree.index_entries();
    // The pattern's query, evaluated once over the posting lists: the blobs that cannot match.
    let skip = indexed.as_ref().and_then(|(index, _)| {
        let query = Query::plan(&args.pattern, !args.case_sensitive.unwrap_or(true), limits.regex_nest_limit);
        if query.is_all() { None } else { index.skip_set(&query) }
    });
    let mut skipped = 0usize;
    // The pattern's memo (what it matched in each blob searched before), and what this call
    // scans for it.
    let memo_key = PatternKey {
        pattern: args.pattern.clone(),
        case_insensitive: !args.case_sensitive.unwrap_or(true),
        max_line_chars: limits.max_line_chars,
        max_file_bytes: limits.max_grep_file_bytes,
    };
    let memo = tree.grep_memo().and_then(|(memo, ids)| Some((memo, ids, memo.pattern(&memo_key)?)));
    let mut fresh = Vec::new();
    let mut served = 0usize;
    let reader = tree.reader();
    let mut out = Output::new(limits);
    let mut searched = 0usize;
    let mut candidates = 0usize;
    let mut binary = 0usize;
    let mut large = 0usize;
    let mut missing = 0usize;
    let mut timed_out = false;
    for (i, entry) in tree.files().iter().enumerate() {
        if entry.kind == EntryKind::Symlink || !filter.as_ref().is_none_or(|f| f.matches(&entry.path)) {
            continue;
        }
        candidates += 1;
        if timed_out {
            continue;
        }
        if deadline.expired() {
            timed_out = true;
            continue;
        }
        // Whether the index has seen this blob's bytes and found no NUL among them.
        let mut known_text = false;
        if let Some((_, entries)) = &indexed
            && let Some(indexed) = &entries[i]
        {
            if indexed.size > limits.max_grep_file_bytes {
                large += 1;
                continue;
            }
            match indexed.content {
                Content::Binary => {
                    searched += 1;
                    binary += 1;
                    continue;
                }
                Content::Text { slot, .. } => {
                    if skip.as_ref().is_some_and(|skip| skip.contains(slot)) {
                        searched += 1;
                        skipped += 1;
                        continue;
                    }
                    known_text = true;
                }
                Content::Unindexed => {}
            }
        }
        let blob = memo.as_ref().and_then(|(_, ids, _)| ids[i]);
        if let (Some((_, _, patterns)), Some(id)) = (&memo, blob) {
            let path_chars = entry.path.chars().count();
            // `Some(binary)` when the entry said what the scan would.
            let replayed = patterns.with(&id, |matches| match matches {
                BlobMatches::Binary => Some(true),
                matches => matches.replay(&entry.path, path_chars, &mut out).then_some(false),
            });
            if let Some(Some(is_binary)) = replayed {
                searched += 1;
                served += 1;
                binary += usize::from(is_binary);
                continue;
            }
        }
        let data: Arc<[u8]> = match reader.read_listed(i, entry, limits.max_grep_file_bytes) {
            Ok((data, text)) => {
                known_text |= text;
                data
            }
            Err(AccessError::TooLarge { .. }) => {
                large += 1;
                continue;
            }
            Err(AccessError::MissingObject { .. }) if limits.skip_missing_blobs => {
                missing += 1;
                continue;
            }
            Err(e @ AccessError::MissingObject { .. }) => {
                return ToolResult::error(ErrorKind::MissingObject, format!("grep stopped: {e}"));
            }
            Err(e) => return ToolResult::error(ErrorKind::Io, format!("grep stopped: {e}")),
        };
        searched += 1;
        // Binary files are skipped whole (a NUL anywhere), like `git grep -I`. (`memchr`'s
        // search, not `<[u8]>::contains`: the latter was a visible share of the tools' time.)
        if !known_text && memchr::memchr(0, &data).is_some() {
            binary += 1;
            if let (Some(id), Some(_)) = (blob, &memo) {
                fresh.push((id, BlobMatches::Binary));
            }
            continue;
        }
        let mut recorder = memo.as_ref().and(blob).map(|_| Recorder::new(limits.max_line_chars));
        if !search_file(&mut searcher, &matcher, &entry.path, &data, &mut out, recorder.as_mut(), deadline) {
            timed_out = true;
        } else if let (Some(id), Some(recorder)) = (blob, recorder) {
            fresh.push((id, recorder.finish()));
        }
    }
    if let Some((memo, _, patterns)) = &memo {
        memo.insert(&memo_key, patterns, fresh);
        memo.record_served(served);
    }
    if let (Some((index, _)), Some(_)) = (&indexed, &skip) {
        index.record_grep(skipped);
    }
    if out.lines() == 0 && !timed_out {
        out.note(format!("[no matches in {}]", plural(searched, "file", "files")));
    }
    if binary > 0 {
        out.note(format!("[skipped {}]", plural(binary, "binary file", "binary files")));
    }
    if large > 0 {
        out.note(format!("[skipped {} over {} bytes]", plural(large, "file", "files"), limits.max_grep_file_bytes));
    }
    if missing > 0 {
        out.note(format!("[skipped {} missing from the repository store]", plural(missing, "file", "files")));
    }
    if timed_out {
        out.note(format!(
            "[timeout: grep stopped at its {:.1} s budget after {searched} of {candidates} files; the matches above are partial; narrow the search with the `path` glob filter or a more specific pattern]",
            deadline.budget().as_secs_f64()
        ));
    }
    out.finish(timed_out, |_| {
        "narrow the search with the `path` glob filter (e.g. \"src/**/*.py\") or a more specific pattern".to_owned()
    })
}

fn build_matcher(args: &GrepArgs, limits: &Limits) -> Result<RegexMatcher, ToolResult> {
    if args.pattern.len() > limits.max_pattern_len {
        return Err(ToolResult::error(
            ErrorKind::PatternTooLong,
            format!("grep: the pattern is {} bytes long; the limit is {}", args.pattern.len(), limits.max_pattern_len),
        ));
    }
    if args.pattern.is_empty() {
        return Err(ToolResult::error(ErrorKind::InvalidPattern, "grep: the pattern is empty".to_owned()));
    }
    RegexMatcherBuilder::new()
        .case_insensitive(!args.case_sensitive.unwrap_or(true))
        .size_limit(limits.regex_size_limit)
        .dfa_size_limit(limits.regex_dfa_size_limit)
        .nest_limit(limits.regex_nest_limit)
        .line_terminator(Some(b'\n'))
        .build(&args.pattern)
        .map_err(|e| {
            let message = e.to_string();
            let kind = if message.contains("size limit") || message.contains("nest") {
                ErrorKind::PatternTooComplex
            } else {
                ErrorKind::InvalidPattern
            };
            ToolResult::error(kind, format!("grep: the pattern does not compile: {message}"))
        })
}

/// Searches one file; `false` when the deadline stopped it.
fn search_file(
    searcher: &mut Searcher,
    matcher: &RegexMatcher,
    path: &str,
    data: &[u8],
    out: &mut Output,
    recorder: Option<&mut Recorder>,
    deadline: Deadline,
) -> bool {
    let mut sink = LineSink {
        path,
        path_chars: path.chars().count(),
        out,
        recorder,
        deadline,
        data,
        chunk_start: 0,
        counted: (0, 0),
        matches_since_clock: 0,
        stopped: false,
    };
    let mut start = 0;
    while start < data.len() {
        let end = match data.len() - start > CHUNK_BYTES {
            false => data.len(),
            true => data[start + CHUNK_BYTES..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(data.len(), |i| start + CHUNK_BYTES + i + 1),
        };
        sink.chunk_start = start;
        // The sink never fails; an error here could only come from the searcher's own I/O,
        // which a slice search does not do.
        let _ = searcher.search_slice(matcher, &data[start..end], &mut sink);
        if sink.stopped {
            return false;
        }
        start = end;
        if start < data.len() && deadline.expired() {
            return false;
        }
    }
    true
}

/// The number of `\n` bytes in `data`. Counted in runs of 255 bytes into a `u8`, a loop the
/// compiler turns into wide byte compares; a plain `filter(..).count()` into a `usize` compiled
/// to two bytes per step and was half of `grep::run`'s own time on sympy's large files (perf).
fn count_newlines(data: &[u8]) -> u64 {
    data.chunks(255).map(|run| u64::from(run.iter().map(|&b| u8::from(b == b'\n')).sum::<u8>())).sum()
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

struct LineSink<'a> {
    path: &'a str,
    path_chars: usize,
    out: &'a mut Output,
    /// The grep memo's entry for this file, when it is recorded.
    recorder: Option<&'a mut Recorder>,
    deadline: Deadline,
    /// The whole file, and where in it the chunk being searched starts.
    data: &'a [u8],
    chunk_start: usize,
    /// `(offset, lines)`: the newlines before `offset` are counted. Lines are counted only when
    /// a chunk has a match, so a large file without one is never counted.
    counted: (usize, u64),
    /// Matches since the deadline was last checked, modulo [`MATCHES_PER_CLOCK`].
    matches_since_clock: u32,
    stopped: bool,
}

/// How many matches may pass between two checks of the deadline: a match costs well under a
/// microsecond past the output limit, so a call stops at most a few tens of microseconds late.
const MATCHES_PER_CLOCK: u32 = 64;

impl LineSink<'_> {
    /// The number of lines before the current chunk.
    fn line_base(&mut self) -> u64 {
        let (offset, lines) = self.counted;
        if offset < self.chunk_start {
            self.counted = (self.chunk_start, lines + count_newlines(&self.data[offset..self.chunk_start]));
        }
        self.counted.1
    }
}

impl Sink for LineSink<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _searcher: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        let line = self.line_base() + mat.line_number().unwrap_or(0);
        let bytes = mat.bytes();
        let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
        if self.out.showing() {
            let text = String::from_utf8_lossy(bytes);
            if let Some(recorder) = self.recorder.as_deref_mut() {
                recorder.line(line, text.chars().count(), Some(&text));
            }
            self.out.match_line(self.path, line, &text);
        } else {
            // Past the output limit only the size of what is cut matters: count, don't build.
            // Most lines of code are ASCII, one character a byte, which one wide check tells.
            let text_chars = if bytes.is_ascii() {
                bytes.len()
            } else {
                match std::str::from_utf8(bytes) {
                    Ok(text) => text.chars().count(),
                    Err(_) => String::from_utf8_lossy(bytes).chars().count(),
                }
            };
            if let Some(recorder) = self.recorder.as_deref_mut() {
                let text = recorder.wants_text().then(|| String::from_utf8_lossy(bytes));
                recorder.line(line, text_chars, text.as_deref());
            }
            self.out.count(self.path_chars + line_chars(line, text_chars));
        }
        // Reading the clock at every match was a tenth of a common word's grep (perf, sympy):
        // every `MATCHES_PER_CLOCK`-th match reads it, the first one included.
        if self.matches_since_clock == 0 && self.deadline.expired() {
            self.stopped = true;
            return Ok(false);
        }
        self.matches_since_clock = (self.matches_since_clock + 1) % MATCHES_PER_CLOCK;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::count_newlines;

    #[test]
    fn newlines_are_counted_exactly_across_run_boundaries() {
        for len in [0, 1, 254, 255, 256, 510, 511, 1000] {
            let all = vec![b'\n'; len];
            assert_eq!(count_newlines(&all), len as u64, "{len} newlines");
            let mixed: Vec<u8> = (0..len).map(|i| if i % 3 == 0 { b'\n' } else { b'x' }).collect();
            assert_eq!(count_newlines(&mixed), len.div_ceil(3) as u64, "every third of {len}");
        }
    }
}
