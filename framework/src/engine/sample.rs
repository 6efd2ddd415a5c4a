//! The rollout phase of a step: draw P training prompts from the data cursor
//! and run P × G seeded episodes through the sandbox ([`super::rollout`]).

use std::collections::HashSet;

use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use rewardlab_models::agent::{Policy, Sampling};

use super::Engine;
use super::error::{EngineError, Phase};
use super::rollout::{EpisodeSpec, RolloutBatch, TurnLimits, run_batch};
use super::seed::{Stream, derive};

impl<P: Policy> Engine<P> {
    /// Runs step `step_no`'s training rollouts: P prompts × G episodes, each
    /// seeded from (seed, step, prompt slot, rollout), in spec order.
    pub(super) fn sample(&mut self, step_no: usize) -> Result<RolloutBatch<P::Episode>, EngineError> {
        let prompts = self.next_prompts();
        let c = &self.config;
        let tasks = self.tasks.clone();
        let all = tasks.tasks();
        let mut ids = HashSet::new();
        let mut specs = Vec::with_capacity(prompts.len() * c.group_size);
        for (slot, &t) in prompts.iter().enumerate() {
            let task = &all[t];
            // A task drawn twice in one step (at an epoch boundary) gets its own group.
            let group = if ids.insert(task.id.as_str()) { task.id.clone() } else { format!("{}#{slot}", task.id) };
            for g in 0..c.group_size {
                let seed = derive(c.seed, Stream::Rollout, &[self.step as u64, slot as u64, g as u64]);
                specs.push(EpisodeSpec { task, group: group.clone(), seed });
            }
        }
        let limits = TurnLimits { max_turns: c.max_turns, max_calls_per_turn: c.max_calls_per_turn };
        let sampling = Sampling::Sample { temperature: c.temperature };
        run_batch(&self.policy, &self.sandbox, &self.runtime, &specs, sampling, limits, step_no, Phase::Rollout)
    }

    /// The next P training tasks (indices into the task list).
    fn next_prompts(&mut self) -> Vec<usize> {
        let train = self.tasks.train().to_vec();
        let len = train.len() as u64;
        let mut out = Vec::with_capacity(self.config.prompts_per_step);
        for k in 0..self.config.prompts_per_step as u64 {
            let n = self.cursor + k;
            let epoch = n / len;
            if self.epoch_order.as_ref().is_none_or(|(e, _)| *e != epoch) {
                let mut order = train.clone();
                order.shuffle(&mut ChaCha8Rng::seed_from_u64(derive(self.config.seed, Stream::Data, &[epoch])));
                self.epoch_order = Some((epoch, order));
            }
            let (_, order) = self.epoch_order.as_ref().expect("set just above");
            out.push(order[(n % len) as usize]);
        }
        self.cursor += self.config.prompts_per_step as u64;
        out
    }
}
