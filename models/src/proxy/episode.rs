//! One rollout of the proxy policy: the issue's terms, the call candidates,
//! what the tool results revealed about files, and the sampled units.

use std::collections::{BTreeSet, HashMap, HashSet};

use rand_chacha::ChaCha8Rng;
use rewardlab_sandbox::{Entity, GlobArgs, GrepArgs, ReadArgs, ToolCall, ToolResult};

use super::loglinear::Unit;
use super::text::{self, Source, Term};

/// Which tool a candidate calls and where its argument came from: the
/// one-hot "tool × source" feature of a call decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum CallKind {
    GrepPhrase = 0,
    GrepMessageHead = 1,
    GrepMessageFull = 2,
    GrepIdentifier = 3,
    GrepWord = 4,
    GlobIdentifier = 5,
    GlobPath = 6,
    ReadSeen = 7,
    /// `name\(` for a function or class defined in a read file: its definition and callers.
    GrepResultName = 8,
}

/// Number of [`CallKind`]s.
pub(crate) const CALL_KINDS: usize = 9;

/// Names taken from read results per rollout, at most.
const MAX_RESULT_NAMES: usize = 12;

impl CallKind {
    pub(crate) fn is_grep(self) -> bool {
        (self as usize) <= CallKind::GrepWord as usize || self == CallKind::GrepResultName
    }

    pub(crate) fn is_message(self) -> bool {
        matches!(self, CallKind::GrepPhrase | CallKind::GrepMessageHead | CallKind::GrepMessageFull)
    }
}

/// A call the policy may make, built from a term of the issue or a seen file.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Candidate {
    pub kind: CallKind,
    pub call: ToolCall,
    /// The issue term behind it (index into [`ProxyEpisode::terms`]), if any.
    pub term: Option<usize>,
    /// The seen file it reads (index into [`ProxyEpisode::seen`]), if any.
    pub seen: Option<usize>,
}

/// What the results said about one file.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct SeenFile {
    pub path: String,
    /// Grep lines that hit it.
    pub hits: usize,
    /// Lines hit by grep, ascending.
    pub lines: BTreeSet<u64>,
    /// Issue terms whose grep hit it.
    pub terms: BTreeSet<usize>,
    pub by_message: bool,
    pub by_identifier: bool,
    pub by_word: bool,
    pub by_glob: bool,
    pub read: bool,
}

/// One rollout of [`super::ProxyPolicy`].
#[derive(Clone, Debug)]
pub struct ProxyEpisode {
    pub(crate) rng: ChaCha8Rng,
    /// `None` when greedy.
    pub(crate) temperature: Option<f64>,
    pub(crate) terms: Vec<Term>,
    /// Lowercase words and identifier parts of the issue, for "file name matches the issue".
    pub(crate) issue_words: HashSet<String>,
    /// Candidates built from the issue's terms, in term order.
    pub(crate) text_candidates: Vec<Candidate>,
    /// Calls already made (as JSON), so no call repeats within a rollout.
    pub(crate) used: HashSet<String>,
    /// Calls made per term text (grep and glob of one term count together).
    pub(crate) calls_per_term: HashMap<String, usize>,
    /// Files in order of discovery.
    pub(crate) seen: Vec<SeenFile>,
    pub(crate) seen_index: HashMap<String, usize>,
    /// The calls of the current turn awaiting results, in call order.
    pub(crate) pending: Vec<Candidate>,
    /// Whether the last observed turn revealed a new file.
    pub(crate) new_files_last_turn: bool,
    pub(crate) units: Vec<Unit>,
    pub(crate) tokens: usize,
    /// Offer names defined in read files as grep candidates ([`super::ProxyConfig::mine_result_names`]).
    pub(crate) mine_result_names: bool,
}

impl ProxyEpisode {
    pub(crate) fn new(issue: &str, rng: ChaCha8Rng, temperature: Option<f64>, mine_result_names: bool) -> Self {
        let terms = text::extract(issue);
        let mut issue_words = HashSet::new();
        for term in &terms {
            for part in text::snake_case(&term.text).split(|c: char| !c.is_ascii_alphanumeric()) {
                if part.len() >= 3 {
                    issue_words.insert(part.to_ascii_lowercase());
                }
            }
        }
        let mut episode = ProxyEpisode {
            rng,
            temperature,
            terms,
            issue_words,
            text_candidates: Vec::new(),
            used: HashSet::new(),
            calls_per_term: HashMap::new(),
            seen: Vec::new(),
            seen_index: HashMap::new(),
            pending: Vec::new(),
            new_files_last_turn: false,
            units: Vec::new(),
            tokens: 0,
            mine_result_names,
        };
        episode.text_candidates = text_candidates(&episode.terms);
        episode
    }

    /// Candidates not yet called: the issue's, then reads of the most-hit unread files.
    pub(crate) fn available(&self, max_reads: usize) -> Vec<Candidate> {
        let mut out: Vec<Candidate> =
            self.text_candidates.iter().filter(|c| !self.used.contains(&key(&c.call))).cloned().collect();
        let mut unread: Vec<usize> = (0..self.seen.len()).filter(|&i| !self.seen[i].read).collect();
        unread.sort_by_key(|&i| (std::cmp::Reverse(self.seen[i].hits), i));
        for i in unread {
            if out.iter().filter(|c| c.kind == CallKind::ReadSeen).count() >= max_reads {
                break;
            }
            let call = read_call(&self.seen[i]);
            if !self.used.contains(&key(&call)) {
                out.push(Candidate { kind: CallKind::ReadSeen, call, term: None, seen: Some(i) });
            }
        }
        out
    }

    /// Records that `candidate` is called this turn.
    pub(crate) fn mark_called(&mut self, candidate: &Candidate) {
        self.used.insert(key(&candidate.call));
        if let Some(t) = candidate.term {
            *self.calls_per_term.entry(self.terms[t].text.clone()).or_default() += 1;
        }
    }

    /// Folds the results of the pending calls into the seen files.
    pub(crate) fn observe(&mut self, results: &[ToolResult]) {
        let before = self.seen.len();
        let pending = std::mem::take(&mut self.pending);
        for (candidate, result) in pending.iter().zip(results) {
            if result.is_error() {
                continue;
            }
            for entity in &result.entities {
                match &candidate.call {
                    ToolCall::Grep(_) => {
                        let Entity::Line { path, line } = entity else { continue };
                        let file = self.file(path);
                        file.hits += 1;
                        file.lines.insert(*line);
                        match candidate.kind {
                            k if k.is_message() => file.by_message = true,
                            CallKind::GrepIdentifier | CallKind::GrepResultName => file.by_identifier = true,
                            _ => file.by_word = true,
                        }
                        if let Some(t) = candidate.term {
                            file.terms.insert(t);
                        }
                    }
                    ToolCall::Glob(_) => self.file(entity.path()).by_glob = true,
                    ToolCall::Read(_) => {
                        self.file(entity.path()).read = true;
                    }
                    _ => {}
                }
            }
            if let ToolCall::Read(_) = &candidate.call
                && self.mine_result_names
            {
                for name in defined_names(&result.output) {
                    self.add_result_name(name);
                }
            }
            // A read that showed nothing (an empty file) still counts as read.
            if let (ToolCall::Read(args), Some(i)) = (&candidate.call, candidate.seen)
                && self.seen.get(i).is_some_and(|f| f.path == args.path)
            {
                self.seen[i].read = true;
            }
        }
        self.new_files_last_turn = self.seen.len() > before;
    }

    /// Offers `name\(` as a grep candidate, once per name, up to [`MAX_RESULT_NAMES`].
    fn add_result_name(&mut self, name: &str) {
        let from_results = self.terms.iter().filter(|t| t.source == Source::ResultName).count();
        if from_results >= MAX_RESULT_NAMES
            || self.terms.iter().any(|t| t.source == Source::ResultName && t.text == name)
        {
            return;
        }
        let call = ToolCall::Grep(GrepArgs {
            pattern: format!("{}\\(", text::regex_literal(name)),
            path: None,
            case_sensitive: None,
        });
        let call_key = key(&call);
        if self.used.contains(&call_key) || self.text_candidates.iter().any(|c| key(&c.call) == call_key) {
            return;
        }
        self.terms.push(Term {
            source: Source::ResultName,
            text: name.to_owned(),
            position: 1.0,
            count: 1,
            in_traceback: false,
            in_code: true,
            in_title: false,
        });
        let term = Some(self.terms.len() - 1);
        self.text_candidates.push(Candidate { kind: CallKind::GrepResultName, call, term, seen: None });
    }

    fn file(&mut self, path: &str) -> &mut SeenFile {
        let i = match self.seen_index.get(path) {
            Some(&i) => i,
            None => {
                self.seen_index.insert(path.to_owned(), self.seen.len());
                self.seen.push(SeenFile { path: path.to_owned(), ..SeenFile::default() });
                self.seen.len() - 1
            }
        };
        &mut self.seen[i]
    }

    /// Seen files in answer order: most grep hits first, then most distinct terms, then discovery.
    pub(crate) fn ranked_files(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.seen.len()).collect();
        order.sort_by_key(|&i| (std::cmp::Reverse(self.seen[i].hits), std::cmp::Reverse(self.seen[i].terms.len()), i));
        order
    }
}

/// The identity of a call, for "no duplicate calls".
fn key(call: &ToolCall) -> String {
    call.to_json().to_string()
}

/// Functions and classes defined in a read's output (`   12\tdef send(self):`),
/// skipping dunders and names shorter than three characters.
fn defined_names(output: &str) -> Vec<&str> {
    let mut names = Vec::new();
    for line in output.lines() {
        let code = line.split_once('\t').map_or(line, |(_, code)| code).trim_start();
        let Some(rest) = code.strip_prefix("def ").or_else(|| code.strip_prefix("class ")) else { continue };
        let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
        let name = &rest[..end];
        if name.len() >= 3 && !name.starts_with("__") && !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

/// Reading a seen file: around its hits when it has some (±20 lines), else from the top.
fn read_call(file: &SeenFile) -> ToolCall {
    let (start, end) = match (file.lines.first(), file.lines.last()) {
        (Some(&first), Some(&last)) => (Some(first.saturating_sub(20).max(1)), Some(last + 20)),
        _ => (None, None),
    };
    ToolCall::Read(ReadArgs { path: file.path.clone(), start, end })
}

/// Grep and glob candidates of every term, first occurrence of each call only.
fn text_candidates(terms: &[Term]) -> Vec<Candidate> {
    let mut out = Vec::new();
    let mut keys = HashSet::new();
    for (i, term) in terms.iter().enumerate() {
        let grep = |kind| Candidate {
            kind,
            call: ToolCall::Grep(GrepArgs {
                pattern: text::regex_literal(&term.text),
                path: None,
                case_sensitive: None,
            }),
            term: Some(i),
            seen: None,
        };
        let glob = |kind, pattern: String| Candidate {
            kind,
            call: ToolCall::Glob(GlobArgs { pattern }),
            term: Some(i),
            seen: None,
        };
        let made = match term.source {
            Source::Phrase => vec![grep(CallKind::GrepPhrase)],
            Source::MessageHead => vec![grep(CallKind::GrepMessageHead)],
            Source::MessageFull => vec![grep(CallKind::GrepMessageFull)],
            Source::Word => vec![grep(CallKind::GrepWord)],
            Source::Identifier => {
                vec![grep(CallKind::GrepIdentifier), glob(CallKind::GlobIdentifier, identifier_glob(&term.text))]
            }
            Source::Path => vec![glob(CallKind::GlobPath, path_glob(&term.text))],
            // Names from results are added as they are read, never from the issue.
            Source::ResultName => Vec::new(),
        };
        for candidate in made {
            if keys.insert(key(&candidate.call)) {
                out.push(candidate);
            }
        }
    }
    out
}

/// `pkg.sub` → `**/pkg/sub*`; `RetryPolicy` → `**/*retry_policy*`; `max_budget` → `**/*max_budget*`.
fn identifier_glob(name: &str) -> String {
    if name.contains('.') {
        format!("**/{}*", name.replace('.', "/"))
    } else {
        format!("**/*{}*", text::snake_case(name))
    }
}

/// `src/pkg/mod.py` → `**/pkg/mod.py` (the last two components, anywhere in the tree).
fn path_glob(path: &str) -> String {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty() && *p != "." && *p != "..").collect();
    format!("**/{}", parts[parts.len().saturating_sub(2)..].join("/"))
}
