//! A reward variant compiled once: the checked program, its CPU plan and the
//! feature columns it reads. Many engines (seeds of a study) share one through an `Arc`.

use rewardlab_dsl::check::{CheckOptions, compile_source};
use rewardlab_dsl::cpu::CompiledProgram;
use rewardlab_dsl::{Diagnostic, FeatureRef, Interval, Program, SourceFile};

/// A compiled reward/advantage program.
#[derive(Clone, Debug)]
pub struct RewardVariant {
    name: String,
    source: String,
    program: CompiledProgram,
    warnings: Vec<Diagnostic>,
}

/// The variant did not compile.
#[derive(Clone, Debug, thiserror::Error)]
#[error(
    "reward variant `{name}` does not compile: {}",
    errors.iter().find(|d| d.is_error()).map_or("", |d| d.message.as_str())
)]
pub struct VariantError {
    /// The variant's name.
    pub name: String,
    /// Every diagnostic, errors and warnings, as the checker sorted them.
    pub errors: Vec<Diagnostic>,
}

impl RewardVariant {
    /// Parses, checks (against the rewards crate's feature schema, with
    /// `group.count()` fixed to `group_size`) and compiles `source`. `params`
    /// override `param` declarations by name; an unknown name is an error.
    pub fn compile(
        name: &str,
        source: &str,
        group_size: usize,
        params: &[(String, f64)],
    ) -> Result<RewardVariant, VariantError> {
        let file = SourceFile::new(name, source);
        let schema = rewardlab_rewards::feature_schema();
        let options = CheckOptions { group_size: Interval::point(group_size as f64), ..CheckOptions::default() };
        let (program, warnings) = compile_source(&file, &schema, &options)
            .map_err(|errors| VariantError { name: name.to_owned(), errors })?;
        let mut compiled = CompiledProgram::new(&program);
        for (param, value) in params {
            if !compiled.set_param(param, *value) {
                return Err(VariantError {
                    name: name.to_owned(),
                    errors: vec![Diagnostic::error(
                        "unknown-param",
                        rewardlab_dsl::Span::new(0, 0),
                        format!("the study overrides param `{param}`, which the reward file does not declare"),
                    )],
                });
            }
        }
        Ok(RewardVariant { name: name.to_owned(), source: source.to_owned(), program: compiled, warnings })
    }

    /// Wraps a program compiled elsewhere (`source` is kept only to tell variants apart in checkpoints).
    pub fn from_program(name: &str, source: &str, program: &Program) -> RewardVariant {
        RewardVariant {
            name: name.to_owned(),
            source: source.to_owned(),
            program: CompiledProgram::new(program),
            warnings: Vec::new(),
        }
    }

    /// The variant's name, as the study or the caller gave it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The reward file's text.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The checker's warnings.
    pub fn warnings(&self) -> &[Diagnostic] {
        &self.warnings
    }

    /// The CPU plan, with the params' values set.
    pub fn compiled(&self) -> &CompiledProgram {
        &self.program
    }

    /// The feature columns the program reads.
    pub fn features(&self) -> &[FeatureRef] {
        &self.program.program().features
    }

    /// A fingerprint of the source text and param values, stored in
    /// checkpoints so a run is never resumed under another reward.
    pub fn fingerprint(&self) -> String {
        let mut text = self.source.clone();
        for p in &self.program.program().params {
            text.push_str(&format!("\n{}={:?}", p.name, p.value));
        }
        format!("{:016x}", super::seed::fnv1a(text.as_bytes()))
    }
}
