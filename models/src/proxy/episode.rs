//! One rollout of the proxy policy: the issue's terms, the call candidates,
//! what the tool results revealed about files, and the sampled units.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use rand_chacha::ChaCha8Rng;
use rewardlab_protocol::paths::{SOURCE_EXTENSIONS, source_extension};
use rewardlab_sandbox::{Entity, GlobArgs, GrepArgs, ReadArgs, Status, ToolCall, ToolResult};

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
    /// `(?:def|class) name\b` for a name of the issue: where it is defined.
    GrepDefinition = 9,
    /// `**/pkg/sub/mod.py` for a dotted module path of the issue (`pkg.sub.mod`).
    GlobModule = 10,
    /// An earlier grep whose output was cut, again over the source files of the repository's
    /// language only (`path = "*.py"`): the source files the cut hid behind changelogs, docs
    /// and tests.
    GrepSource = 11,
    /// `**/*word*` for a prose word of the issue (with [`super::ProxyConfig::word_globs`]):
    /// modules are named after what they do (`cache` → `cacheprovider.py`, `parser` →
    /// `parsing/`), so a file name can answer what a common word's grep output cannot.
    GlobWord = 12,
}

/// Number of [`CallKind`]s.
pub(crate) const CALL_KINDS: usize = 13;

/// A grep that hit at most this many files (complete output) is a rare hit; `rewardlab locate
/// --reach` calls a first-turn call selective by the same bound.
pub const RARE_FILES: usize = 3;

/// Names taken from read results per rollout, at most.
const MAX_RESULT_NAMES: usize = 12;

impl CallKind {
    pub(crate) fn is_grep(self) -> bool {
        (self as usize) <= CallKind::GrepWord as usize
            || matches!(self, CallKind::GrepResultName | CallKind::GrepDefinition | CallKind::GrepSource)
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
    /// Found by a glob of a path or dotted module the issue names (a traceback frame, a path in
    /// prose); with `issue_paths`, whenever its path is one the issue names, however it was found.
    pub by_named_path: bool,
    pub read: bool,
    /// Rarity weights (`1 / (1 + ln(1 + lines the grep hit))`) of the distinct terms whose grep hit it: sum and max.
    pub rarity_sum: f64,
    pub rarity_max: f64,
    /// Hit by a grep whose complete output named at most [`RARE_FILES`] files.
    pub rare_hit: bool,
    /// Names of the issue this file defines (`def name` / `class name` in a grep hit or a read),
    /// lowercase. With [`super::ProxyConfig::top_definitions`], a name some seen file defines at
    /// module level counts only for the files that define it there.
    pub defines: BTreeSet<String>,
    /// Of the issue's names, those this file defines at module level (a `def` or `class` line
    /// without indentation), lowercase; only kept with [`super::ProxyConfig::top_definitions`].
    pub defines_top: BTreeSet<String>,
    /// Hit by a grep of a term of the issue's title.
    pub by_title: bool,
    /// Words of the issue ([`ProxyEpisode::issue_words`]) that its reads showed (with
    /// [`super::ProxyConfig::read_words`]).
    pub read_words: BTreeSet<String>,
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
    /// Per term (index into `terms`): its text lowercase, and whether the path of a seen file
    /// holds it (a call feature; kept up to date as files and terms are added, so a decision
    /// does not lowercase every seen path for every candidate).
    pub(crate) terms_lower: Vec<String>,
    pub(crate) term_in_path: Vec<bool>,
    /// Files in order of discovery.
    pub(crate) seen: Vec<SeenFile>,
    pub(crate) seen_index: HashMap<String, usize>,
    /// The calls of the current turn awaiting results, in call order.
    pub(crate) pending: Vec<Candidate>,
    /// Whether the last observed turn revealed a new file.
    pub(crate) new_files_last_turn: bool,
    pub(crate) units: Vec<Unit>,
    /// Token equivalents generated so far, at most the budget.
    pub(crate) tokens: usize,
    /// A [`ProxyEpisode::spend`] ran past [`super::ProxyConfig::max_completion_tokens`].
    pub(crate) over_budget: bool,
    /// The policy's shape switches.
    pub(crate) config: super::ProxyConfig,
    /// Names the issue mentions (identifier parts, ≥ 3 characters, lowercase), each with where
    /// it first occurs (a [`Term::position`]): "this file defines one", and how early.
    pub(crate) issue_names: HashMap<String, f64>,
    /// Names of the issue's title (lowercase).
    pub(crate) title_names: HashSet<String>,
    /// Rarity weight of each term text whose grep returned, for later call features.
    pub(crate) term_rarity: HashMap<String, f64>,
    /// Term texts whose own grep over the whole tree hit no line: the name is the issue's, not
    /// the repository's (a user's variable, a package the repository does not contain), and a
    /// rarity of 1 would otherwise make it look like the rarest term of all.
    pub(crate) found_nothing: HashSet<String>,
    /// Term texts whose grep over the whole tree was cut at the output limit before it showed a
    /// single line of source code ([`super::features::is_code`]): what the term hits in the code
    /// is all behind the cut (with [`super::ProxyConfig::hidden_source`]).
    pub(crate) hid_source: HashSet<String>,
    /// The paths the issue names, as the path and module globs look for them (`pkg/mod.py`,
    /// `sympy/core/basic.py`): a seen file whose path ends with one is named by the issue.
    pub(crate) named_paths: Vec<String>,
}

impl ProxyEpisode {
    pub(crate) fn new(issue: &str, rng: ChaCha8Rng, temperature: Option<f64>, config: super::ProxyConfig) -> Self {
        let terms = text::extract(issue, &config);
        let mut issue_words = HashSet::new();
        let mut issue_names: HashMap<String, f64> = HashMap::new();
        let mut title_names = HashSet::new();
        for term in &terms {
            for part in text::snake_case(&term.text).split(|c: char| !c.is_ascii_alphanumeric()) {
                if part.len() >= 3 {
                    issue_words.insert(part.to_ascii_lowercase());
                }
            }
            if term.source == Source::Identifier {
                // A name is also a word whole, as a path spells it (`LaTeX` → `latex.py`, which
                // its parts `la`, `te`, `x` are not).
                if term.text.len() >= 3 && term.text.bytes().all(|b| b.is_ascii_alphanumeric()) {
                    issue_words.insert(term.text.to_ascii_lowercase());
                }
                for name in definable_names(&term.text) {
                    // Compared without case: the issue's `LaTeX` is the code's `def latex`.
                    let name = name.to_ascii_lowercase();
                    if term.in_title {
                        title_names.insert(name.clone());
                    }
                    let at = issue_names.entry(name).or_insert(term.position);
                    *at = at.min(term.position);
                }
            }
        }
        let terms_lower: Vec<String> = terms.iter().map(|t| t.text.to_ascii_lowercase()).collect();
        let mut episode = ProxyEpisode {
            rng,
            temperature,
            term_in_path: vec![false; terms.len()],
            terms_lower,
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
            over_budget: false,
            config,
            issue_names,
            title_names,
            term_rarity: HashMap::new(),
            found_nothing: HashSet::new(),
            hid_source: HashSet::new(),
            named_paths: Vec::new(),
        };
        episode.text_candidates = text_candidates(&episode.terms, &config);
        if config.module_paths && config.issue_paths {
            episode.named_paths = named_paths(&episode.text_candidates);
        }
        episode
    }

    /// Candidates not yet called: the issue's, then reads of the most-hit unread files, source
    /// code before the rest (a read shows what a file defines, and the answer is source code).
    pub(crate) fn available(&self, max_reads: usize) -> Vec<Candidate> {
        let mut out: Vec<Candidate> =
            self.text_candidates.iter().filter(|c| !self.used.contains(&key(&c.call))).cloned().collect();
        // `is_code` lowercases the path: once per file, for both the filter and the order.
        let mut unread: Vec<(bool, usize)> = (0..self.seen.len())
            .filter(|&i| !self.seen[i].read)
            .map(|i| (!super::features::is_code(&self.seen[i].path), i))
            .filter(|&(not_code, _)| !(self.config.code_reads && not_code))
            .collect();
        unread.sort_by_key(|&(not_code, i)| (not_code, std::cmp::Reverse(self.seen[i].hits), i));
        for (_, i) in unread {
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

    /// Adds `tokens` to the completion, cut at the generation budget; false (and
    /// [`ProxyEpisode::over_budget`] set) when the budget ran out.
    pub(crate) fn spend(&mut self, tokens: usize) -> bool {
        let budget = self.config.max_completion_tokens;
        self.tokens += tokens;
        if self.tokens > budget {
            self.tokens = budget;
            self.over_budget = true;
        }
        !self.over_budget
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
            let term = candidate.term.map(|t| (t, self.terms[t].in_title));
            match &candidate.call {
                ToolCall::Grep(args) => {
                    self.observe_grep(candidate.kind, term, result);
                    if self.config.source_greps && candidate.kind != CallKind::GrepSource {
                        self.offer_source_grep(candidate, args, result);
                    }
                }
                ToolCall::Glob(_) => {
                    let named = matches!(candidate.kind, CallKind::GlobPath | CallKind::GlobModule);
                    for entity in &result.entities {
                        let file = self.file(entity.path());
                        file.by_glob = true;
                        file.by_named_path |= named;
                    }
                }
                ToolCall::Read(_) => {
                    for entity in &result.entities {
                        self.file(entity.path()).read = true;
                    }
                }
                _ => {}
            }
            if let ToolCall::Read(args) = &candidate.call {
                if let Some(&i) = self.seen_index.get(&args.path) {
                    if self.config.definitions {
                        let defined = self.issue_definitions(&result.output);
                        self.add_definitions(i, defined);
                    }
                    if self.config.read_words {
                        let shown = words_shown(&result.output, &self.issue_words);
                        self.seen[i].read_words.extend(shown);
                    }
                }
                if self.config.mine_result_names {
                    for (name, _) in defined_names(&result.output) {
                        self.add_result_name(name);
                    }
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

    /// One grep's hits: lines, terms, how the file was found, the term's rarity in
    /// the tree (the result says how many lines it hit, cut ones included) and
    /// definitions of the issue's names on the hit lines.
    fn observe_grep(&mut self, kind: CallKind, term: Option<(usize, bool)>, result: &ToolResult) {
        let total_lines = result.entities.len() + cut_lines(&result.output);
        let mut weight = 1.0 / (1.0 + (total_lines as f64).ln_1p());
        if kind == CallKind::GrepSource {
            // A term's rarity is what its grep over the whole tree said; the restricted copy
            // hits fewer lines by construction and would make the term look rarer than it is.
            if let Some(&whole) = term.and_then(|(t, _)| self.term_rarity.get(&self.terms[t].text)) {
                weight = whole;
            }
        }
        let files: HashSet<&str> =
            result.entities.iter().filter(|e| e.line_number().is_some()).map(Entity::path).collect();
        let rare = result.status == Status::Ok && files.len() <= RARE_FILES;
        if let Some((t, _)) = term {
            self.term_rarity.insert(self.terms[t].text.clone(), weight);
            let literal = kind.is_message() || matches!(kind, CallKind::GrepIdentifier | CallKind::GrepWord);
            if literal && total_lines == 0 && result.status == Status::Ok {
                self.found_nothing.insert(self.terms[t].text.clone());
            }
        }
        let term_source = term.map(|(t, _)| self.terms[t].source);
        // Grep output lines are `path:line:text`, one per entity, in entity order.
        let lines: Vec<&str> = result.output.lines().collect();
        for (n, entity) in result.entities.iter().enumerate() {
            let Entity::Line { path, line } = entity else { continue };
            // The output line starts with the entity's wire form, `path:line`.
            let code = lines
                .get(n)
                .and_then(|l| l.strip_prefix(path.as_str()))
                .and_then(|l| l.strip_prefix(':'))
                .and_then(|l| l.strip_prefix(line.to_string().as_str()))
                .and_then(|l| l.strip_prefix(':'));
            let defined = match (self.config.definitions, code) {
                (true, Some(code)) => self.issue_definitions(code),
                _ => Vec::new(),
            };
            let i = self.file_index(path);
            self.add_definitions(i, defined);
            let file = &mut self.seen[i];
            file.hits += 1;
            file.lines.insert(*line);
            file.rare_hit |= rare;
            match kind {
                k if k.is_message() => file.by_message = true,
                CallKind::GrepIdentifier | CallKind::GrepResultName | CallKind::GrepDefinition => {
                    file.by_identifier = true
                }
                // The restricted copy found the file the way its term's own grep would have.
                CallKind::GrepSource => match term_source {
                    Some(Source::Phrase | Source::MessageHead | Source::MessageFull) => file.by_message = true,
                    Some(Source::Identifier | Source::ResultName) => file.by_identifier = true,
                    _ => file.by_word = true,
                },
                _ => file.by_word = true,
            }
            if let Some((t, in_title)) = term {
                file.by_title |= in_title;
                if file.terms.insert(t) {
                    file.rarity_sum += weight;
                    file.rarity_max = file.rarity_max.max(weight);
                }
            }
        }
    }

    /// After a grep whose output was cut at the limit, offers the same grep over the source files
    /// of the repository's language only: `path = "*.EXT"` with the source extension most seen
    /// files have ([`source_extension`]; ties to the first in order). When no seen file has one
    /// yet, nothing, or with [`super::ProxyConfig::hidden_source`] every source extension
    /// (`*.{py,pyi,…}`): the cut may have hidden every source file. Nothing when the grep already
    /// had a path filter or no cut.
    fn offer_source_grep(&mut self, candidate: &Candidate, args: &GrepArgs, result: &ToolResult) {
        if args.path.is_some() || cut_lines(&result.output) == 0 {
            return;
        }
        let hidden = self.config.hidden_source;
        if hidden
            && let Some(t) = candidate.term
            && !result.entities.iter().any(|e| super::features::is_code(e.path()))
        {
            self.hid_source.insert(self.terms[t].text.clone());
        }
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for ext in self.seen.iter().filter_map(|file| source_extension(&file.path)) {
            *counts.entry(ext).or_default() += 1;
        }
        // The most common extension; `max_by_key` keeps the last maximum, so reverse for the first.
        let filter = match counts.iter().rev().max_by_key(|(_, n)| **n) {
            Some((ext, _)) => format!("*.{ext}"),
            None if hidden => any_source_filter(),
            None => return,
        };
        let call = ToolCall::Grep(GrepArgs { path: Some(filter), ..args.clone() });
        let call_key = key(&call);
        if self.used.contains(&call_key) || self.text_candidates.iter().any(|c| key(&c.call) == call_key) {
            return;
        }
        self.text_candidates.push(Candidate { kind: CallKind::GrepSource, call, term: candidate.term, seen: None });
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
        let lower = name.to_ascii_lowercase();
        self.term_in_path.push(self.seen.iter().any(|f| f.path.to_ascii_lowercase().contains(&lower)));
        self.terms_lower.push(lower);
        let term = Some(self.terms.len() - 1);
        self.text_candidates.push(Candidate { kind: CallKind::GrepResultName, call, term, seen: None });
    }

    pub(crate) fn file(&mut self, path: &str) -> &mut SeenFile {
        let i = self.file_index(path);
        &mut self.seen[i]
    }

    /// The index of `path` in [`ProxyEpisode::seen`], adding it when new.
    fn file_index(&mut self, path: &str) -> usize {
        if let Some(&i) = self.seen_index.get(path) {
            return i;
        }
        self.seen_index.insert(path.to_owned(), self.seen.len());
        let lower = path.to_ascii_lowercase();
        for (held, term) in self.term_in_path.iter_mut().zip(&self.terms_lower) {
            *held |= lower.contains(term.as_str());
        }
        let by_named_path = self.named_paths.iter().any(|named| path_ends_with(path, named));
        self.seen.push(SeenFile { path: path.to_owned(), by_named_path, ..SeenFile::default() });
        self.seen.len() - 1
    }

    /// The issue's names that `code` (grep hit lines or a read's output) defines, lowercase,
    /// each with whether a definition of it there is at module level.
    fn issue_definitions(&self, code: &str) -> Vec<(String, bool)> {
        defined_names(code)
            .into_iter()
            .map(|(name, top)| (name.to_ascii_lowercase(), top))
            .filter(|(name, _)| self.issue_names.contains_key(name))
            .collect()
    }

    /// Records that seen file `i` defines the given issue names. With
    /// [`super::ProxyConfig::top_definitions`], a module-level definition takes the name from
    /// the files that only define a method of that name, and a method's definition counts only
    /// while no module-level one of the name has been seen.
    fn add_definitions(&mut self, i: usize, defined: Vec<(String, bool)>) {
        if !self.config.top_definitions {
            self.seen[i].defines.extend(defined.into_iter().map(|(name, _)| name));
            return;
        }
        for (name, top) in defined {
            let defined_at_top = self.seen.iter().any(|f| f.defines_top.contains(&name));
            if top {
                if !defined_at_top {
                    // The name's first module-level definition: its methods stop counting.
                    for file in &mut self.seen {
                        file.defines.remove(&name);
                    }
                }
                self.seen[i].defines_top.insert(name.clone());
                self.seen[i].defines.insert(name);
            } else if !defined_at_top {
                self.seen[i].defines.insert(name);
            }
        }
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

/// The lines of a grep result cut at the output limit, from its closing notice
/// (`[output cut at 4096 characters: 812 more lines (…) not shown; …]`); 0 when complete.
pub(crate) fn cut_lines(output: &str) -> usize {
    let Some(last) = output.lines().last() else { return 0 };
    let Some(rest) = last.strip_prefix("[output cut at ") else { return 0 };
    rest.split_once(": ").and_then(|(_, tail)| tail.split_once(' ')).and_then(|(n, _)| n.parse().ok()).unwrap_or(0)
}

/// The names of an issue identifier that a file could define: every dotted part
/// of three characters or more that is not a dunder (`Session.resolve_redirects`
/// → `Session`, `resolve_redirects`).
pub(crate) fn definable_names(identifier: &str) -> impl Iterator<Item = &str> {
    identifier.split('.').filter(|p| {
        p.len() >= 3
            && !p.starts_with("__")
            && p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            && !p.as_bytes()[0].is_ascii_digit()
    })
}

/// Functions and classes defined in a read's output (`   12\tdef send(self):`),
/// or in grep hit lines, skipping dunders and names shorter than three characters.
fn defined_names(output: &str) -> Vec<(&str, bool)> {
    let mut names: Vec<(&str, bool)> = Vec::new();
    for line in output.lines() {
        let code = line.split_once('\t').map_or(line, |(_, code)| code);
        let top = !code.starts_with(char::is_whitespace);
        let code = code.trim_start();
        let code = code.strip_prefix("async ").unwrap_or(code);
        let Some(rest) = code.strip_prefix("def ").or_else(|| code.strip_prefix("class ")) else { continue };
        let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
        let name = &rest[..end];
        if name.len() < 3 || name.starts_with("__") {
            continue;
        }
        match names.iter_mut().find(|(n, _)| *n == name) {
            Some((_, at_top)) => *at_top |= top,
            None => names.push((name, top)),
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

/// The words of `wanted` that `text` shows: its identifiers whole and their snake-case parts,
/// lowercase (`RetryPolicy` shows `retrypolicy`, `retry` and `policy`).
fn words_shown(text: &str, wanted: &HashSet<String>) -> BTreeSet<String> {
    let mut shown = BTreeSet::new();
    let mut lower = String::new();
    for token in text.split(|c: char| !c.is_ascii_alphanumeric() && c != '_').filter(|t| t.len() >= 3) {
        lower.clear();
        lower.extend(token.chars().map(|c| c.to_ascii_lowercase()));
        if wanted.contains(&lower) {
            shown.insert(lower.clone());
        }
        // A name has parts only where it has `_`s or capitals; without capitals it is its own
        // snake case.
        let capitals = token.bytes().any(|b| b.is_ascii_uppercase());
        if !capitals && !token.contains('_') {
            continue;
        }
        let snake = if capitals { Cow::Owned(text::snake_case(token)) } else { Cow::Borrowed(token) };
        for part in snake.split('_').filter(|p| p.len() >= 3) {
            if wanted.contains(part) {
                shown.insert(part.to_owned());
            }
        }
    }
    shown
}

/// Grep and glob candidates of every term, first occurrence of each call only.
fn text_candidates(terms: &[Term], config: &super::ProxyConfig) -> Vec<Candidate> {
    let mut out = Vec::new();
    let mut keys = HashSet::new();
    for (i, term) in terms.iter().enumerate() {
        let grep = |kind| Candidate {
            kind,
            call: ToolCall::Grep(GrepArgs {
                pattern: text::regex_literal(&term.text),
                path: match kind {
                    CallKind::GrepWord if config.source_word_greps => Some(any_source_filter()),
                    CallKind::GrepIdentifier if config.source_identifier_greps => Some(any_source_filter()),
                    _ => None,
                },
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
            Source::Word if config.word_globs => {
                vec![grep(CallKind::GrepWord), glob(CallKind::GlobWord, format!("**/*{}*", term.text))]
            }
            Source::Word => vec![grep(CallKind::GrepWord)],
            Source::Identifier => {
                let mut made = vec![grep(CallKind::GrepIdentifier)];
                made.extend(identifier_globs(&term.text).into_iter().map(|p| glob(CallKind::GlobIdentifier, p)));
                if config.definitions {
                    // The last dotted part is what the issue is about (`Session.resolve_redirects`),
                    // and a class named on the way is worth finding too.
                    let names: Vec<&str> = definable_names(&term.text).collect();
                    let wanted = names
                        .iter()
                        .enumerate()
                        .filter(|&(k, n)| k + 1 == names.len() || n.as_bytes()[0].is_ascii_uppercase());
                    for (_, name) in wanted {
                        made.push(Candidate {
                            kind: CallKind::GrepDefinition,
                            call: ToolCall::Grep(GrepArgs {
                                pattern: format!("(?:def|class) {}\\b", text::regex_literal(name)),
                                path: None,
                                case_sensitive: None,
                            }),
                            term: Some(i),
                            seen: None,
                        });
                    }
                }
                if config.module_paths {
                    made.extend(module_globs(&term.text).into_iter().map(|p| glob(CallKind::GlobModule, p)));
                }
                made
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

/// A grep path filter for the files of every source extension (`*.{py,pyi,…}`), whatever the
/// repository's language.
fn any_source_filter() -> String {
    format!("*.{{{}}}", SOURCE_EXTENSIONS.join(","))
}

/// The paths the issue's path and module glob candidates look for, without their `**/`.
fn named_paths(candidates: &[Candidate]) -> Vec<String> {
    candidates
        .iter()
        .filter(|c| matches!(c.kind, CallKind::GlobPath | CallKind::GlobModule))
        .filter_map(|c| match &c.call {
            ToolCall::Glob(args) => args.pattern.strip_prefix("**/").filter(|p| !p.is_empty()).map(str::to_owned),
            _ => None,
        })
        .collect()
}

/// `path` is `suffix` or ends with `/suffix` (whole components, as `**/suffix` matches).
fn path_ends_with(path: &str, suffix: &str) -> bool {
    path.strip_suffix(suffix).is_some_and(|rest| rest.is_empty() || rest.ends_with('/'))
}

/// `pkg.sub` → `**/pkg/sub*`; `RetryPolicy` → `**/*retry_policy*`; `max_budget` →
/// `**/*max_budget*`. A name whose snake case has a part of one or two letters is an acronym
/// split at its capitals (`LaTeX` → `la_te_x`), which no file is named after: its lowercase
/// whole (`**/*latex*`) is looked for too.
fn identifier_globs(name: &str) -> Vec<String> {
    if name.contains('.') {
        return vec![format!("**/{}*", name.replace('.', "/"))];
    }
    let snake = text::snake_case(name);
    let mut globs = vec![format!("**/*{snake}*")];
    if snake.contains('_') && !name.contains('_') && snake.split('_').any(|part| part.len() <= 2) {
        globs.push(format!("**/*{}*", name.to_ascii_lowercase()));
    }
    globs
}

/// `sympy.core.basic.Basic` → `**/sympy/core.py`, `**/sympy/core/basic.py`, …: each
/// prefix of two or more lowercase dotted parts as a module file (the
/// attribute after the module is not part of the path), at most three.
fn module_globs(name: &str) -> Vec<String> {
    let parts: Vec<&str> = name.split('.').collect();
    let modules = parts
        .iter()
        .take_while(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'))
        .count();
    (2..=modules).rev().take(3).map(|n| format!("**/{}.py", parts[..n].join("/"))).collect()
}

/// `src/pkg/mod.py` → `**/pkg/mod.py` (the last two components, anywhere in the tree).
fn path_glob(path: &str) -> String {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty() && *p != "." && *p != "..").collect();
    format!("**/{}", parts[parts.len().saturating_sub(2)..].join("/"))
}
