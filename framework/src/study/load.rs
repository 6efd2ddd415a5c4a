//! Loading a study file: TOML → [`StudyFile`] → every variant's reward program
//! checked → [`Study`] with its expanded runs. Nothing runs before this
//! succeeds; every problem is reported at once as structured diagnostics
//! ([`StudyDiagnostics`]: the DSL's [`Diagnostic`]s grouped by the file they
//! point into, the study file for TOML errors and inline formulas and reward
//! files for theirs), which the caller renders like the DSL's own
//! (`file:line:col`, source line, carets).
//!
//! The library reads no file: the caller hands over the study's text and a
//! function that reads the reward files it names.

use std::collections::{BTreeMap, HashSet};
use std::ops::Range;
use std::path::{Path, PathBuf};

use rewardlab_dsl::check::{CheckOptions, compile_source};
use rewardlab_dsl::cpu::CompiledProgram;
use rewardlab_dsl::diag::render_all;
use rewardlab_dsl::{Diagnostic, Interval, SourceFile, Span};
use toml::Spanned;

use super::spec::{
    AlertSpec, CommitsSpec, GridSpec, PolicySpec, SandboxSpec, StudyFile, SummarySpec, TaskSpec, VariantSpec,
};
use super::synth::{Synth, string_content_start};
use crate::engine::{EngineConfig, LossConfig};
use rewardlab_models::proxy::ProxyConfig;

/// A checked study, ready to run.
#[derive(Clone, Debug)]
pub struct Study {
    /// The study's name (the file's `name`, or its stem): results go to `results/<name>/`.
    pub name: String,
    /// The study file's path, as the caller gave it; relative paths inside it are resolved
    /// against its directory.
    pub path: PathBuf,
    /// Free text from the file; empty when it has none.
    pub description: String,
    /// The training sources, paths resolved against the study file's directory.
    pub tasks: Vec<TaskSpec>,
    /// The evaluation source (every task held out), paths resolved likewise.
    pub eval: Option<TaskSpec>,
    /// The policy every run trains; a Qwen3 `model` path is resolved against the study file's
    /// directory.
    pub policy: PolicySpec,
    /// The engine's settings; `seed` is replaced per run.
    pub training: EngineConfig,
    /// How the summary judges variants.
    pub summary: SummarySpec,
    /// The sandbox's memory per repository.
    pub sandbox: SandboxSpec,
    /// How many seed indices each variant runs at (`0..seeds`); at least 1.
    pub seeds: usize,
    /// The seed of seed index 0; index `i` runs with `base_seed + i`.
    pub base_seed: u64,
    /// Every variant, declared ones first, then the grid's; names are unique.
    pub variants: Vec<Variant>,
    /// Warnings (empty when none).
    pub warnings: StudyDiagnostics,
}

/// One variant's reward program, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct Variant {
    /// The variant's name, unique in the study and safe as a directory name (letters, digits,
    /// `-`, `_`, `.`, `+`, `=`).
    pub name: String,
    /// Where the source came from: the reward file's path, or `STUDY.toml#name`.
    pub origin: String,
    /// The program text (a reward file's, or synthesised from inline formulas),
    /// followed by the study's `[[alerts]]` as `alert` lines when it has any.
    pub source: String,
    /// `param` overrides to apply when compiling `source` (reward files only;
    /// inline params are declarations inside `source`).
    pub params: Vec<(String, f64)>,
    /// The proxy policy's settings for this variant when its `policy` table changes the
    /// study's (`None`: the study's `[policy]`).
    pub proxy: Option<ProxyConfig>,
    /// The loss settings for this variant when its `loss` table changes the study's
    /// `[training.loss]` (`None`: the study's): an ablation of the objective (e.g. the
    /// aggregation) beside the reward variants, on the same seeds.
    pub loss: Option<LossConfig>,
}

#[cfg(test)]
impl Variant {
    /// A variant named `name` of the inline program `source`, with the study's settings.
    pub(crate) fn inline(name: &str, source: &str) -> Variant {
        Variant {
            name: name.into(),
            origin: name.into(),
            source: source.into(),
            params: Vec::new(),
            proxy: None,
            loss: None,
        }
    }
}

/// One training run: a variant at a seed index. Common random numbers: `seed`
/// depends on `seed_index` alone, so every variant sees the same task order
/// and sampling streams at the same index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunSpec {
    /// Index into [`Study::variants`].
    pub variant: usize,
    /// That variant's name.
    pub variant_name: String,
    /// The seed index, in `0..Study::seeds`.
    pub seed_index: usize,
    /// The run's seed, `base_seed + seed_index`.
    pub seed: u64,
    /// The run's directory relative to the study's results directory.
    pub dir: PathBuf,
}

/// Why a study cannot run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StudyError {
    /// Errors (and any warnings) of the TOML, the variants and the reward
    /// files; [`StudyDiagnostics::render`] draws them.
    #[error("the study has {} error(s)", diagnostics.error_count())]
    Invalid {
        /// Every finding, errors and warnings alike.
        diagnostics: StudyDiagnostics,
    },
}

/// A study's diagnostics, grouped by the file they point into: the study file
/// first, then each reward file it names, in path order.
#[derive(Clone, Debug, Default)]
pub struct StudyDiagnostics {
    /// One entry per file with findings; files without any are left out.
    pub files: Vec<FileDiagnostics>,
}

/// The diagnostics of one file, in the order they are shown.
#[derive(Clone, Debug)]
pub struct FileDiagnostics {
    /// The file as it was checked (its display name and text, for line and
    /// column lookup).
    pub file: SourceFile,
    /// The file's findings: the study file's in source order, a reward file's as its
    /// checker reported them.
    pub diagnostics: Vec<Diagnostic>,
}

impl StudyDiagnostics {
    /// Whether there is nothing to report.
    pub fn is_empty(&self) -> bool {
        self.files.iter().all(|f| f.diagnostics.is_empty())
    }

    /// How many diagnostics are errors.
    pub fn error_count(&self) -> usize {
        self.iter().filter(|(_, d)| d.is_error()).count()
    }

    /// Every diagnostic with the file it points into, in display order.
    pub fn iter(&self) -> impl Iterator<Item = (&SourceFile, &Diagnostic)> {
        self.files.iter().flat_map(|f| f.diagnostics.iter().map(move |d| (&f.file, d)))
    }

    /// The text a terminal shows: each diagnostic as `file:line:col:
    /// severity[code]: message`, its source line, carets, help and notes
    /// (the DSL's renderer).
    pub fn render(&self) -> String {
        self.files.iter().filter(|f| !f.diagnostics.is_empty()).map(|f| render_all(&f.file, &f.diagnostics)).collect()
    }
}

impl Study {
    /// Every run, variant-major, seeds ascending.
    pub fn runs(&self) -> Vec<RunSpec> {
        let mut runs = Vec::with_capacity(self.variants.len() * self.seeds);
        for (v, variant) in self.variants.iter().enumerate() {
            for seed_index in 0..self.seeds {
                runs.push(RunSpec {
                    variant: v,
                    variant_name: variant.name.clone(),
                    seed_index,
                    seed: self.base_seed + seed_index as u64,
                    dir: run_dir(&variant.name, seed_index),
                });
            }
        }
        runs
    }

    /// The engine settings of one run.
    /// A run's engine settings: the study's, with the run's seed, keeping only
    /// the latest checkpoint (the runner resumes from nothing older).
    pub fn engine_config(&self, run: &RunSpec) -> EngineConfig {
        let loss = self.variants.get(run.variant).and_then(|v| v.loss).unwrap_or(self.training.loss);
        EngineConfig { seed: run.seed, keep_only_latest_checkpoint: true, loss, ..self.training.clone() }
    }
}

/// Checkpoints per run when the study file does not set `training.checkpoint_every`.
pub const DEFAULT_CHECKPOINTS_PER_RUN: usize = 20;

/// The study default of `checkpoint_every`: about [`DEFAULT_CHECKPOINTS_PER_RUN`]
/// checkpoints per run, so a killed study loses at most 5% of a run. (The
/// engine's own default, every 50 steps, suits long runs; a study's proxy runs
/// are often shorter than that, and would then only checkpoint at the end.)
pub fn default_checkpoint_every(total_steps: usize) -> usize {
    total_steps.div_ceil(DEFAULT_CHECKPOINTS_PER_RUN).max(1)
}

/// `base` with the keys of `table` replaced (a variant's override of a study setting), read back
/// through the settings' own deserializer so unknown keys and bad values are refused; the
/// error is the deserializer's message.
fn overridden<T: serde::Serialize + serde::de::DeserializeOwned>(base: &T, table: &toml::Table) -> Result<T, String> {
    let mut settings = toml::Table::try_from(base).map_err(|e| e.to_string())?;
    settings.extend(table.clone());
    settings.try_into::<T>().map_err(|e| e.to_string().trim().to_owned())
}

/// `runs/<variant>/seed-NNN`.
pub fn run_dir(variant: &str, seed_index: usize) -> PathBuf {
    Path::new("runs").join(variant).join(format!("seed-{seed_index:03}"))
}

/// Reads a file a study names (a reward file), given its path.
pub type ReadFile<'a> = &'a dyn Fn(&Path) -> std::io::Result<String>;

/// Checks a study given its text: `path` names it in diagnostics and anchors
/// its relative paths; `read_file` reads the reward files its variants name.
pub fn parse_study(path: &Path, text: &str, read_file: ReadFile<'_>) -> Result<Study, StudyError> {
    let file = SourceFile::new(path.display().to_string(), text);
    let spec = match StudyFile::parse(text) {
        Ok(spec) => spec,
        Err(e) => {
            let span = e.span().map_or(Span::new(0, 0), |r| Span::new(r.start, r.end));
            let diag = Diagnostic::error("study-toml", span, e.message().to_string());
            let diagnostics = StudyDiagnostics { files: vec![FileDiagnostics { file, diagnostics: vec![diag] }] };
            return Err(StudyError::Invalid { diagnostics });
        }
    };
    let base = path.parent().unwrap_or(Path::new("")).to_owned();
    let no_functions = matches!(spec.policy, PolicySpec::Proxy(_));
    let mut ck = Checker {
        file: &file,
        base: &base,
        read_file,
        study_diags: Vec::new(),
        reward_files: BTreeMap::new(),
        no_functions,
        alerts: Vec::new(),
    };
    let study = ck.study(path, spec);
    let has_errors = ck.has_errors();
    let diagnostics = ck.diagnostics();
    match study {
        Some(study) if !has_errors => Ok(Study { warnings: diagnostics, ..study }),
        _ => Err(StudyError::Invalid { diagnostics }),
    }
}

struct Checker<'a> {
    file: &'a SourceFile,
    base: &'a Path,
    read_file: ReadFile<'a>,
    study_diags: Vec<Diagnostic>,
    /// Diagnostics of referenced reward files, by path.
    reward_files: BTreeMap<PathBuf, (SourceFile, Vec<Diagnostic>)>,
    /// The policy answers with files and line ranges only (the proxy), so
    /// function-level features have nothing to score.
    no_functions: bool,
    /// The study's `[[alerts]]`, appended to every variant's program.
    alerts: Vec<AlertSpec>,
}

fn span_of<T>(s: &Spanned<T>) -> Range<usize> {
    s.span()
}

fn sp(r: Range<usize>) -> Span {
    Span::new(r.start, r.end)
}

impl Checker<'_> {
    fn error(&mut self, span: Range<usize>, message: impl Into<String>) {
        self.study_diags.push(Diagnostic::error("study", sp(span), message));
    }

    /// Function-level features under a policy that never names functions
    /// would fail every run at its first step: refused here instead.
    fn check_levels(&mut self, name: &str, program: &rewardlab_dsl::hir::Program, at: Range<usize>) {
        if !self.no_functions {
            return;
        }
        let func: Vec<&str> =
            program.features.iter().filter(|f| f.level.as_deref() == Some("func")).map(|f| f.key.as_str()).collect();
        if !func.is_empty() {
            self.error(
                at,
                format!(
                    "variant `{name}` reads {}: the proxy policy answers with files and line ranges, never \
                     functions, so function-level features cannot be computed; use the `file` or `lr` level",
                    func.join(", ")
                ),
            );
        }
    }

    fn has_errors(&self) -> bool {
        self.study_diags.iter().chain(self.reward_files.values().flat_map(|(_, d)| d)).any(Diagnostic::is_error)
    }

    /// The findings, each once, the study file's in source order; files
    /// without findings are left out.
    fn diagnostics(&mut self) -> StudyDiagnostics {
        // Grid variants repeat formulas: say each finding once.
        let mut seen = HashSet::new();
        self.study_diags.retain(|d| seen.insert((d.span, d.code, d.message.clone())));
        self.study_diags.sort_by_key(|d| (d.span.range().start, std::cmp::Reverse(d.severity)));
        let study = (self.file.clone(), std::mem::take(&mut self.study_diags));
        let files = std::iter::once(study)
            .chain(std::mem::take(&mut self.reward_files).into_values())
            .filter(|(_, diagnostics)| !diagnostics.is_empty())
            .map(|(file, diagnostics)| FileDiagnostics { file, diagnostics })
            .collect();
        StudyDiagnostics { files }
    }

    fn study(&mut self, path: &Path, spec: StudyFile) -> Option<Study> {
        let name = match &spec.name {
            Some(n) => {
                if !safe_name(n.get_ref()) {
                    self.error(
                        span_of(n),
                        "a study name must be non-empty and use only letters, digits, `-`, `_`, `.`",
                    );
                }
                n.get_ref().clone()
            }
            None => path.file_stem().map_or_else(|| "study".to_string(), |s| s.to_string_lossy().into_owned()),
        };
        if *spec.seeds.get_ref() == 0 {
            self.error(span_of(&spec.seeds), "`seeds` must be at least 1");
        }
        let mut training = match &spec.training {
            Some(t) => {
                let config = t.get_ref().clone();
                if config.seed != EngineConfig::default().seed {
                    self.error(span_of(t), "`training.seed` is set per run from the seed index; use `base_seed`");
                }
                if let Err(message) = config.validate() {
                    self.error(span_of(t), format!("invalid training settings: {message}"));
                }
                config
            }
            None => EngineConfig::default(),
        };
        if spec.checkpoint_every.is_none() {
            training.checkpoint_every = default_checkpoint_every(training.total_steps);
        }
        let summary = spec.summary.clone();
        if !(0.0..=1.0).contains(&summary.precision_gate) {
            self.error(0..0, format!("summary.precision_gate must be in [0, 1], got {}", summary.precision_gate));
        }
        let options =
            CheckOptions { group_size: Interval::point(training.group_size as f64), ..CheckOptions::default() };
        self.alerts = spec.alerts.clone();
        if self.alerts.iter().any(|a| a.steps.as_ref().is_some_and(|s| *s.get_ref() == 0)) {
            let at = self.alerts.iter().filter_map(|a| a.steps.as_ref()).find(|s| *s.get_ref() == 0).map(span_of);
            self.error(at.unwrap_or(0..0), "`steps` of an alert must be at least 1");
        }

        let mut variants = Vec::new();
        let mut names: BTreeMap<String, Range<usize>> = BTreeMap::new();
        for v in &spec.variants {
            let at = span_of(&v.name);
            if let Some(variant) = self.named_variant(v, &options) {
                self.add(&mut variants, &mut names, variant, at);
            }
        }
        if let Some(grid) = &spec.grid {
            for (variant, at) in self.grid(grid, &options) {
                self.add(&mut variants, &mut names, variant, at);
            }
        }
        if variants.is_empty() && !self.has_errors() {
            self.error(0..0, "the study declares no variant: add `[[variants]]` or a `[grid]`");
        }
        let tasks: Vec<TaskSpec> = spec.tasks.into_iter().map(|t| resolve_tasks(t, self.base)).collect();
        let eval = spec.eval.map(|t| resolve_tasks(t, self.base));
        self.check_sources(&tasks, eval.as_ref());
        let policy = match spec.policy {
            PolicySpec::Qwen3(mut q) => {
                q.model = self.base.join(&q.model);
                PolicySpec::Qwen3(q)
            }
            p => p,
        };
        if let Some(reference) = &summary.reference
            && !variants.is_empty()
            && !variants.iter().any(|v| &v.name == reference)
        {
            let names: Vec<&str> = variants.iter().map(|v| v.name.as_str()).collect();
            self.error(
                0..0,
                format!(
                    "summary.reference `{reference}` is not a variant of the study (variants: {})",
                    names.join(", ")
                ),
            );
        }
        self.policy_overrides(&spec.variants, &policy, &mut variants);
        self.loss_overrides(&spec.variants, &training.loss, &mut variants);
        Some(Study {
            name,
            path: path.to_owned(),
            description: spec.description,
            tasks,
            eval,
            policy,
            training,
            summary,
            sandbox: spec.sandbox,
            seeds: *spec.seeds.get_ref(),
            base_seed: spec.base_seed,
            variants,
            warnings: StudyDiagnostics::default(),
        })
    }

    /// Applies each variant's `policy` table to the study's proxy settings.
    fn policy_overrides(&mut self, specs: &[VariantSpec], policy: &PolicySpec, variants: &mut [Variant]) {
        for spec in specs {
            let Some(table) = &spec.policy else { continue };
            let name = spec.name.get_ref();
            let PolicySpec::Proxy(base) = policy else {
                self.error(
                    span_of(table),
                    format!("variant `{name}`: `policy` overrides apply to the proxy policy only"),
                );
                continue;
            };
            if let Some(config) = self.variant_override(name, "proxy policy", base, table)
                && let Some(variant) = variants.iter_mut().find(|v| v.name == *name)
            {
                variant.proxy = Some(config);
            }
        }
    }

    /// Applies each variant's `loss` table over the study's `[training.loss]`.
    fn loss_overrides(&mut self, specs: &[VariantSpec], base: &LossConfig, variants: &mut [Variant]) {
        for spec in specs {
            let Some(table) = &spec.loss else { continue };
            let name = spec.name.get_ref();
            if let Some(loss) = self.variant_override(name, "loss", base, table)
                && let Some(variant) = variants.iter_mut().find(|v| v.name == *name)
            {
                variant.loss = Some(loss);
            }
        }
    }

    /// Variant `name`'s override `table` over the study's `base` settings, or `None` once the
    /// error is reported (`what` names the settings in it: `proxy policy`, `loss`).
    fn variant_override<T: serde::Serialize + serde::de::DeserializeOwned>(
        &mut self,
        name: &str,
        what: &str,
        base: &T,
        table: &Spanned<toml::Table>,
    ) -> Option<T> {
        overridden(base, table.get_ref())
            .map_err(|message| {
                self.error(span_of(table), format!("variant `{name}`: invalid {what} settings: {message}"))
            })
            .ok()
    }

    /// The task sources' own rules: fractions in [0, 1], no split beside an
    /// evaluation source, readable dates, at most one synthetic source.
    fn check_sources(&mut self, tasks: &[TaskSpec], eval: Option<&TaskSpec>) {
        if tasks.is_empty() {
            self.error(0..0, "the study declares no training source: add a `[tasks]` table or `[[tasks]]` tables");
        }
        let named = tasks.iter().enumerate().map(|(i, t)| {
            let name = if tasks.len() == 1 { "tasks".to_owned() } else { format!("tasks[{i}]") };
            (name, t)
        });
        let mut synthetic = 0;
        for (name, source) in named.chain(eval.map(|e| ("eval".to_owned(), e))) {
            if let Some(fraction) = source.held_out_setting() {
                if !(0.0..=1.0).contains(&fraction) {
                    self.error(0..0, format!("{name}.held_out_fraction must be in [0, 1], got {fraction}"));
                } else if eval.is_some() {
                    let why = if name == "eval" {
                        "every task of the evaluation source is held out"
                    } else {
                        "with an `[eval]` source every training task trains"
                    };
                    self.error(0..0, format!("{name}.held_out_fraction has no effect: {why}; remove it"));
                }
            }
            if let TaskSpec::Commits(c) = source
                && let Err(message) = c.options()
            {
                self.error(0..0, format!("{name}.{message}"));
            }
            synthetic += usize::from(matches!(source, TaskSpec::Synthetic { .. }));
        }
        if synthetic > 1 {
            self.error(0..0, "a study may have one synthetic source (its repository is `<study>/data/repo.git`)");
        }
    }

    fn add(
        &mut self,
        variants: &mut Vec<Variant>,
        names: &mut BTreeMap<String, Range<usize>>,
        variant: Variant,
        at: Range<usize>,
    ) {
        if !safe_name(&variant.name) {
            self.error(
                at,
                format!("variant name `{}` must use only letters, digits, `-`, `_`, `.`, `+`, `=`", variant.name),
            );
            return;
        }
        if names.contains_key(&variant.name) {
            self.error(at, format!("a variant named `{}` is declared twice", variant.name));
            return;
        }
        names.insert(variant.name.clone(), at);
        variants.push(variant);
    }

    fn named_variant(&mut self, v: &VariantSpec, options: &CheckOptions) -> Option<Variant> {
        let name = v.name.get_ref().clone();
        let at = span_of(&v.name);
        let inline = [("reward", &v.reward), ("adv", &v.adv), ("advantage", &v.advantage)];
        let has_inline = inline.iter().any(|(_, f)| f.is_some());
        match &v.file {
            Some(file) if has_inline => {
                self.error(
                    span_of(file),
                    format!("variant `{name}` has both a reward `file` and inline formulas; choose one"),
                );
                None
            }
            Some(file) => self.file_variant(&name, file, &v.params, options),
            None if v.reward.is_none() => {
                self.error(at, format!("variant `{name}` needs a reward: `file = \"...\"` or `reward = '...'`"));
                None
            }
            None => {
                let params: Vec<(&str, f64, Range<usize>)> =
                    v.params.iter().map(|(k, x)| (k.as_str(), *x.get_ref(), span_of(x))).collect();
                let formulas: Vec<(&str, &Spanned<String>)> =
                    inline.iter().filter_map(|(k, f)| f.as_ref().map(|f| (*k, f))).collect();
                self.inline_variant(name, at, &params, &formulas, options)
            }
        }
    }

    fn file_variant(
        &mut self,
        name: &str,
        file: &Spanned<PathBuf>,
        params: &BTreeMap<String, Spanned<f64>>,
        options: &CheckOptions,
    ) -> Option<Variant> {
        let path = self.base.join(file.get_ref());
        let text = match (self.read_file)(&path) {
            Ok(t) => t,
            Err(e) => {
                self.error(span_of(file), format!("cannot read reward file {}: {e}", path.display()));
                return None;
            }
        };
        let source = SourceFile::new(path.display().to_string(), text.clone());
        let schema = rewardlab_rewards::feature_schema();
        let result = compile_source(&source, &schema, options);
        let (ok, diags) = match result {
            Ok((program, warnings)) => (Some(program), warnings),
            Err(diags) => (None, diags),
        };
        if !self.reward_files.contains_key(&path) {
            self.reward_files.insert(path.clone(), (source, diags));
        }
        let program = ok?;
        self.check_levels(name, &program, span_of(file));
        let text = self.append_alerts(name, text, span_of(file), options)?;
        let mut compiled = CompiledProgram::new(&program);
        let mut overrides = Vec::new();
        for (param, value) in params {
            if compiled.set_param(param, *value.get_ref()) {
                overrides.push((param.clone(), *value.get_ref()));
            } else {
                self.error(span_of(value), format!("{} declares no param `{param}`", path.display()));
            }
        }
        Some(Variant {
            name: name.to_owned(),
            origin: path.display().to_string(),
            source: text,
            params: overrides,
            proxy: None,
            loss: None,
        })
    }

    /// Synthesises `param` lines and `reward`/`adv`/`advantage` lines, checks
    /// the program and maps its diagnostics back into the study file.
    fn inline_variant(
        &mut self,
        name: String,
        at: Range<usize>,
        params: &[(&str, f64, Range<usize>)],
        formulas: &[(&str, &Spanned<String>)],
        options: &CheckOptions,
    ) -> Option<Variant> {
        let mut synth = Synth::default();
        for (param, value, span) in params {
            synth.push_for(&format!("param {param} = {value:?}\n"), span.clone());
        }
        let mut ok = true;
        for (output, formula) in formulas {
            let value = formula.get_ref();
            match string_content_start(self.file.text(), span_of(formula), value) {
                Ok(start) => {
                    synth.push_glue(&format!("{output} = "));
                    synth.push_exact(value, start);
                    synth.push_glue("\n");
                }
                Err(message) => {
                    self.error(span_of(formula), message);
                    ok = false;
                }
            }
        }
        if !self.synth_alerts(&mut synth) {
            ok = false;
        }
        if !ok {
            return None;
        }
        let source = SourceFile::new(format!("{}#{name}", self.file.name()), synth.text.clone());
        let schema = rewardlab_rewards::feature_schema();
        let (program, diags) = match compile_source(&source, &schema, options) {
            Ok((program, warnings)) => {
                self.check_levels(&name, &program, at.clone());
                (true, warnings)
            }
            Err(diags) => (false, diags),
        };
        for mut d in diags {
            d.span = synth.map(d.span, at.clone());
            d.notes.insert(0, format!("in variant `{name}`"));
            self.study_diags.push(d);
        }
        program.then(|| Variant {
            name: name.clone(),
            origin: source.name().to_string(),
            source: synth.text,
            params: Vec::new(),
            proxy: None,
            loss: None,
        })
    }

    /// Appends the study's alerts to `synth` as `alert` lines mapped to
    /// their formulas in the study file; false when a formula cannot be mapped.
    fn synth_alerts(&mut self, synth: &mut Synth) -> bool {
        let mut ok = true;
        for alert in self.alerts.clone() {
            let value = alert.when.get_ref();
            match string_content_start(self.file.text(), span_of(&alert.when), value) {
                Ok(start) => {
                    synth.push_glue("alert ");
                    synth.push_exact(value, start);
                    if let Some(steps) = &alert.steps {
                        synth.push_for(&format!(" for {} steps", steps.get_ref()), span_of(steps));
                    }
                    synth.push_for(
                        &format!(" : {}\n", rewardlab_dsl::printer::quote(alert.message.get_ref())),
                        span_of(&alert.message),
                    );
                }
                Err(message) => {
                    self.error(span_of(&alert.when), message);
                    ok = false;
                }
            }
        }
        ok
    }

    /// A reward file's text with the study's alerts appended, checked; their
    /// diagnostics point into the study file. `None` after an error.
    fn append_alerts(&mut self, name: &str, text: String, at: Range<usize>, options: &CheckOptions) -> Option<String> {
        if self.alerts.is_empty() {
            return Some(text);
        }
        let mut synth = Synth::default();
        let mut combined = text;
        if !combined.is_empty() && !combined.ends_with('\n') {
            combined.push('\n');
        }
        let offset = combined.len();
        if !self.synth_alerts(&mut synth) {
            return None;
        }
        combined.push_str(&synth.text);
        let source = SourceFile::new(format!("{}#{name}", self.file.name()), combined.clone());
        let schema = rewardlab_rewards::feature_schema();
        let (ok, diags) = match compile_source(&source, &schema, options) {
            Ok((_, warnings)) => (true, warnings),
            Err(diags) => (false, diags),
        };
        let mut failed = !ok;
        // The file's own findings were reported when it was checked alone.
        for mut d in diags.into_iter().filter(|d| d.span.range().start >= offset) {
            failed |= d.is_error();
            let r = d.span.range();
            let local = Span::new(r.start - offset, r.end.saturating_sub(offset));
            d.span = synth.map(local, at.clone());
            d.notes.insert(0, format!("in the study's alerts, for variant `{name}`"));
            self.study_diags.push(d);
        }
        (!failed).then_some(combined)
    }

    fn grid(&mut self, grid: &GridSpec, options: &CheckOptions) -> Vec<(Variant, Range<usize>)> {
        if grid.reward.is_empty() {
            self.error(0..0, "`[grid]` needs at least one `reward` choice");
            return Vec::new();
        }
        for (param, values) in &grid.params {
            if values.get_ref().is_empty() {
                self.error(span_of(values), format!("grid param `{param}` has no values"));
                return Vec::new();
            }
        }
        // Each axis is a list of (name part, formula or param value); an empty
        // formula axis contributes one "absent" choice.
        type Choice<'g> = (Option<&'g str>, Option<&'g Spanned<String>>);
        fn axis(m: &BTreeMap<String, Spanned<String>>) -> Vec<Choice<'_>> {
            if m.is_empty() { vec![(None, None)] } else { m.iter().map(|(k, f)| (Some(k.as_str()), Some(f))).collect() }
        }
        // One pick of a combination: its name part, a formula or a param value.
        type Pick<'g> = (Option<String>, Option<(&'g str, &'g Spanned<String>)>, Option<(&'g str, f64, Range<usize>)>);
        let mut combos: Vec<Vec<Pick<'_>>> = vec![Vec::new()];
        for (output, m) in [("reward", &grid.reward), ("adv", &grid.adv), ("advantage", &grid.advantage)] {
            let choices = axis(m);
            combos = combos
                .into_iter()
                .flat_map(|c| {
                    choices.iter().map(move |(k, f)| {
                        let mut c = c.clone();
                        c.push((k.map(str::to_owned), f.map(|f| (output, f)), None));
                        c
                    })
                })
                .collect();
        }
        for (param, values) in &grid.params {
            let span = span_of(values);
            combos = combos
                .into_iter()
                .flat_map(|c| {
                    let span = span.clone();
                    values.get_ref().iter().map(move |&x| {
                        let mut c = c.clone();
                        c.push((Some(format!("{param}={x}")), None, Some((param.as_str(), x, span.clone()))));
                        c
                    })
                })
                .collect();
        }
        let mut out = Vec::new();
        for combo in combos {
            let name = combo.iter().filter_map(|(n, _, _)| n.clone()).collect::<Vec<_>>().join("+");
            let formulas: Vec<(&str, &Spanned<String>)> = combo.iter().filter_map(|(_, f, _)| *f).collect();
            let params: Vec<(&str, f64, Range<usize>)> = combo.iter().filter_map(|(_, _, p)| p.clone()).collect();
            let at = formulas.first().map_or(0..0, |(_, f)| span_of(f));
            if let Some(v) = self.inline_variant(name, at.clone(), &params, &formulas, options) {
                out.push((v, at));
            }
        }
        out
    }
}

fn safe_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '+' | '='))
}

fn resolve_tasks(tasks: TaskSpec, base: &Path) -> TaskSpec {
    match tasks {
        TaskSpec::Swebench { path, repos, seed, held_out_fraction } => {
            TaskSpec::Swebench { path: base.join(path), repos: base.join(repos), seed, held_out_fraction }
        }
        TaskSpec::Commits(c) => TaskSpec::Commits(Box::new(CommitsSpec { repo: base.join(&c.repo), ..*c })),
        t => t,
    }
}
