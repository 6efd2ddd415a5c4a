//! The `warm_start` setting of a Qwen3 policy in a study file.
//!
//! `warm_start = "sft"` takes every default; a table sets them one by one:
//! `warm_start = { kind = "sft", rho_f = 0.5, rho_e = 0.5, epochs = 2, lr = 1e-4 }`.

use std::fmt;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

/// What kind of warm start runs before GRPO.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum WarmStartKind {
    /// Supervised fine-tuning on scripted-searcher trajectories kept by seed 002's joint filter.
    #[default]
    Sft,
}

/// Settings of the SFT warm start.
///
/// Seed 002 (FuseSearch) keeps a teacher trajectory only when its F1 ≥ ρ_F and its tool
/// efficiency e ≥ ρ_e, but the summary we work from gives no values. The defaults are ours:
/// 0.5 for both, and 4 trajectories per task (the seed's ~24K candidates for ~6K queries).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WarmStartSpec {
    /// Which warm start to run; SFT is the only one.
    pub kind: WarmStartKind,
    /// ρ_F: keep a trajectory only when its file-level F1 is at least this.
    pub rho_f: f64,
    /// ρ_e: keep a trajectory only when its tool efficiency `e` is at least this.
    pub rho_e: f64,
    /// Passes over the kept trajectories.
    pub epochs: usize,
    /// AdamW learning rate on the LoRA adapters.
    pub lr: f64,
    /// Scripted trajectories drawn per task, each with its own seed.
    pub samples_per_task: usize,
    /// Trajectories per optimiser step.
    pub batch_size: usize,
    /// Use at most this many training tasks (all when absent).
    pub max_tasks: Option<usize>,
    /// Drop kept trajectories longer than this many tokens (the model's context length always
    /// bounds them).
    pub max_tokens: Option<usize>,
    /// Per-layer gradient checkpointing in the SFT backward pass (a 14B model needs it).
    pub gradient_checkpointing: bool,
}

impl Default for WarmStartSpec {
    fn default() -> Self {
        WarmStartSpec {
            kind: WarmStartKind::Sft,
            rho_f: 0.5,
            rho_e: 0.5,
            epochs: 2,
            lr: 1e-4,
            samples_per_task: 4,
            batch_size: 4,
            max_tasks: None,
            max_tokens: None,
            gradient_checkpointing: false,
        }
    }
}

impl WarmStartSpec {
    /// Checks the ranges: thresholds in [0, 1], a positive finite learning rate, and at least
    /// one epoch, sample and sequence per batch.
    pub fn validate(&self) -> Result<(), String> {
        for (name, rho) in [("rho_f", self.rho_f), ("rho_e", self.rho_e)] {
            if !(0.0..=1.0).contains(&rho) {
                return Err(format!("{name} must be in [0, 1], got {rho}"));
            }
        }
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return Err(format!("lr must be positive and finite, got {}", self.lr));
        }
        for (name, n) in
            [("epochs", self.epochs), ("samples_per_task", self.samples_per_task), ("batch_size", self.batch_size)]
        {
            if n == 0 {
                return Err(format!("{name} must be at least 1"));
            }
        }
        if self.max_tasks == Some(0) || self.max_tokens == Some(0) {
            return Err("max_tasks and max_tokens must be at least 1".to_owned());
        }
        Ok(())
    }
}

/// The table form, every key optional.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Table {
    kind: Option<WarmStartKind>,
    rho_f: Option<f64>,
    rho_e: Option<f64>,
    epochs: Option<usize>,
    lr: Option<f64>,
    samples_per_task: Option<usize>,
    batch_size: Option<usize>,
    max_tasks: Option<usize>,
    max_tokens: Option<usize>,
    gradient_checkpointing: Option<bool>,
}

impl<'de> Deserialize<'de> for WarmStartSpec {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SpecVisitor;

        impl<'de> Visitor<'de> for SpecVisitor {
            type Value = WarmStartSpec;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("\"sft\" or a table such as { kind = \"sft\", rho_f = 0.5, rho_e = 0.5 }")
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<WarmStartSpec, E> {
                match v {
                    "sft" => Ok(WarmStartSpec::default()),
                    other => Err(E::unknown_variant(other, &["sft"])),
                }
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<WarmStartSpec, A::Error> {
                let t = Table::deserialize(de::value::MapAccessDeserializer::new(map))?;
                let d = WarmStartSpec::default();
                let spec = WarmStartSpec {
                    kind: t.kind.unwrap_or(d.kind),
                    rho_f: t.rho_f.unwrap_or(d.rho_f),
                    rho_e: t.rho_e.unwrap_or(d.rho_e),
                    epochs: t.epochs.unwrap_or(d.epochs),
                    lr: t.lr.unwrap_or(d.lr),
                    samples_per_task: t.samples_per_task.unwrap_or(d.samples_per_task),
                    batch_size: t.batch_size.unwrap_or(d.batch_size),
                    max_tasks: t.max_tasks.or(d.max_tasks),
                    max_tokens: t.max_tokens.or(d.max_tokens),
                    gradient_checkpointing: t.gradient_checkpointing.unwrap_or(d.gradient_checkpointing),
                };
                spec.validate().map_err(de::Error::custom)?;
                Ok(spec)
            }
        }

        deserializer.deserialize_any(SpecVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    struct Holder {
        warm_start: WarmStartSpec,
    }

    fn parse(text: &str) -> Result<WarmStartSpec, String> {
        toml::from_str::<Holder>(text).map(|h| h.warm_start).map_err(|e| e.to_string())
    }

    #[test]
    fn a_string_or_a_table_with_defaults_filled_in() {
        assert_eq!(parse(r#"warm_start = "sft""#), Ok(WarmStartSpec::default()));
        let spec =
            parse(r#"warm_start = { kind = "sft", rho_f = 0.6, rho_e = 0.4, epochs = 3, lr = 2e-4 }"#).expect("table");
        assert_eq!(spec, WarmStartSpec { rho_f: 0.6, rho_e: 0.4, epochs: 3, lr: 2e-4, ..WarmStartSpec::default() });
        assert_eq!(parse("warm_start = { max_tasks = 5 }").expect("kind defaults").max_tasks, Some(5));
    }

    #[test]
    fn bad_settings_are_refused_with_the_reason() {
        let unknown = parse(r#"warm_start = "dpo""#).expect_err("unknown kind");
        assert!(unknown.contains("dpo") && unknown.contains("sft"), "{unknown}");
        let typo = parse("warm_start = { rho = 0.5 }").expect_err("unknown key");
        assert!(typo.contains("rho"), "{typo}");
        let range = parse("warm_start = { rho_e = 1.5 }").expect_err("out of range");
        assert!(range.contains("rho_e must be in [0, 1]"), "{range}");
        assert!(parse("warm_start = { epochs = 0 }").is_err());
        assert!(parse("warm_start = { lr = -1.0 }").is_err());
    }
}
