//! The score phase of a step: rollout features → the variant's compiled
//! reward program (CPU plan or GPU kernels) → `reward`, `adv`, `advantage`
//! back in rollout order, plus the summary columns the metrics report.

use std::time::Instant;

use rewardlab_dsl::gpu::GpuError;
use rewardlab_dsl::{EvalOptions, FeatureTable, NonFinite};
use rewardlab_models::agent::Policy;
use rewardlab_rewards::rollout::Rollout;
use rewardlab_rewards::{FeatureOptions, SummaryColumns, feature_table};

use super::Engine;
use super::error::EngineError;

/// What scoring a batch produced, every column in rollout order.
pub(super) struct Scores {
    pub reward: Vec<f64>,
    pub adv: Vec<f64>,
    pub advantage: Vec<f64>,
    /// Share of groups whose rewards are all equal.
    pub zero_std_groups: f64,
    pub summary: SummaryColumns,
    /// The feature table the program read (rows grouped), for the alerts.
    pub table: FeatureTable,
    /// Wall seconds of the phase.
    pub seconds: f64,
}

/// The data source the engine's feature errors name.
pub(super) fn feature_options() -> FeatureOptions {
    FeatureOptions { source: "the GRPO engine".into(), ..FeatureOptions::default() }
}

impl<P: Policy> Engine<P> {
    /// Scores step `step_no`'s rollouts. Every group must have exactly G rows
    /// (`EvalOptions::group_size`), and a non-finite value is an error.
    pub(super) fn score(&self, records: &[Rollout], step_no: usize) -> Result<Scores, EngineError> {
        let start = Instant::now();
        let c = &self.config;
        let table = feature_table(self.variant.features(), records, &feature_options())
            .map_err(|source| EngineError::Features { step: step_no, source: Box::new(source) })?;
        let eval_options = EvalOptions { group_size: Some(c.group_size), non_finite: NonFinite::Error };
        let reward_error = |source| EngineError::Reward {
            step: step_no,
            variant: self.variant.name().to_owned(),
            source: Box::new(source),
        };
        let outputs = match &self.gpu {
            None => self.variant.compiled().eval(&table.table, &eval_options).map_err(reward_error)?,
            Some(gpu) => gpu.eval(&table.table, &eval_options).map_err(|e| match e {
                GpuError::Eval(source) => reward_error(source),
                other => EngineError::RewardDevice { source: Box::new(other) },
            })?,
        };
        // The table groups rows; put the outputs back in rollout order.
        let n = records.len();
        let (mut reward, mut adv, mut advantage) = (vec![0.0; n], vec![0.0; n], vec![0.0; n]);
        for (row, &i) in table.order.iter().enumerate() {
            reward[i] = outputs.reward[row];
            adv[i] = outputs.adv[row];
            advantage[i] = outputs.advantage[row];
        }
        let groups = table.table.groups();
        let zero_std = (0..groups)
            .filter(|&g| {
                let rows = &outputs.reward[table.table.group_rows(g)];
                rows.iter().all(|&r| r == rows[0])
            })
            .count();
        let summary = self.summarise(records, step_no)?;
        Ok(Scores {
            reward,
            adv,
            advantage,
            zero_std_groups: zero_std as f64 / groups.max(1) as f64,
            summary,
            table: table.table,
            seconds: start.elapsed().as_secs_f64(),
        })
    }

    /// The summary features of every rollout, in rollout order (the columns the
    /// schema's roles resolved in [`Engine::new`]).
    pub(super) fn summarise(&self, records: &[Rollout], step: usize) -> Result<SummaryColumns, EngineError> {
        self.summary
            .columns(records, &feature_options())
            .map_err(|source| EngineError::Features { step, source: Box::new(source) })
    }
}
