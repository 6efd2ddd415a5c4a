//! The limits every tool call runs under, with the seed's defaults.

use std::time::Duration;

/// Hard limits on tool calls. `Limits::default()` follows seed 000 (CodeGrep §2.3): output cut
/// at 4096 characters, grep/glob 10 s, read 5 s, 64 calls in flight, 8 calls per turn; to
/// these the sandbox adds a 64 MiB result cache.
#[derive(Clone, Debug, PartialEq)]
pub struct Limits {
    /// Output longer than this many characters (Unicode scalar values) is cut, and a closing
    /// line says how much was cut; the closing line counts towards the limit.
    pub max_output_chars: usize,
    /// A single output line (a grep match or a read line) longer than this is shortened.
    pub max_line_chars: usize,
    /// Budget of one `grep` call, from the moment it starts running.
    pub grep_timeout: Duration,
    /// Budget of one `glob` call.
    pub glob_timeout: Duration,
    /// Budget of one `read` call.
    pub read_timeout: Duration,
    /// Tool calls running at once across every rollout sharing a [`Sandbox`](crate::Sandbox).
    pub max_concurrent_calls: usize,
    /// Calls honoured per turn; later calls of the turn get an error response.
    pub max_calls_per_turn: usize,
    /// `read` refuses files larger than this many bytes.
    pub max_read_bytes: u64,
    /// `grep` skips (and reports) files larger than this many bytes.
    pub max_grep_file_bytes: u64,
    /// Longest accepted regex or glob pattern, in bytes.
    pub max_pattern_len: usize,
    /// Bound on the compiled regex program (`RegexMatcherBuilder::size_limit`).
    pub regex_size_limit: usize,
    /// Bound on the lazy DFA's cache (`RegexMatcherBuilder::dfa_size_limit`).
    pub regex_dfa_size_limit: usize,
    /// Bound on the nesting depth of a regex (`RegexMatcherBuilder::nest_limit`).
    pub regex_nest_limit: u32,
    /// Symlinks followed while resolving one path before it is refused as a loop.
    pub max_symlink_hops: u32,
    /// Budget of the [`Sandbox`](crate::Sandbox)'s result cache, in bytes; 0 turns it off. An
    /// entry is charged its output, its entities' paths, its key (repository name and the call's
    /// JSON) and a fixed overhead per entry and per entity; the least recently used entries are
    /// evicted to stay within the budget. 64 MiB holds a few thousand full (4096-character)
    /// results. Results that depend on load or the store's state (timeouts, missing objects,
    /// I/O and internal errors) are never cached.
    pub result_cache_bytes: usize,
    /// `grep` skips a file whose blob is missing from the object store (an incomplete clone, a
    /// snapshot without its largest files) and says how many it skipped, as it does for files
    /// over [`Limits::max_grep_file_bytes`]; off (the default), such a grep fails with
    /// `missing_object`. A `read` of such a file fails either way. A grep that skipped files is
    /// an ordinary result and is cached as one (its notice says what it skipped): the store is
    /// taken not to gain or lose objects under a study.
    pub skip_missing_blobs: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_output_chars: 4096,
            max_line_chars: 512,
            grep_timeout: Duration::from_secs(10),
            glob_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(5),
            max_concurrent_calls: 64,
            max_calls_per_turn: rewardlab_protocol::MAX_CALLS_PER_TURN,
            max_read_bytes: 1 << 20,
            max_grep_file_bytes: 8 << 20,
            max_pattern_len: 1024,
            regex_size_limit: 1 << 20,
            regex_dfa_size_limit: 4 << 20,
            regex_nest_limit: 32,
            max_symlink_hops: 40,
            result_cache_bytes: 64 << 20,
            skip_missing_blobs: false,
        }
    }
}
