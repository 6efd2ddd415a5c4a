//! Episodes outside training: one rollout per task under the evaluation
//! sampling, as the evaluate phase runs them, for a trained policy used as a
//! retriever (`rewardlab locate`).

use rewardlab_models::agent::Policy;
use rewardlab_rewards::rollout::Rollout;
use rewardlab_sandbox::Sandbox;

use super::config::EngineConfig;
use super::error::{EngineError, Phase};
use super::rollout::{EpisodeSpec, TurnLimits, run_batch, tool_runtime};
use super::seed::{Stream, derive};
use super::tasks::EngineTask;

/// The episodes of [`run_episodes`], one per task, in task order.
#[derive(Debug)]
pub struct Episodes<E> {
    /// Each episode's record (calls, the entities they returned, the answer, the target).
    pub rollouts: Vec<Rollout>,
    /// The policy's own episodes as they finished (for a policy's diagnostics, such as the
    /// proxy's answer ranking).
    pub episodes: Vec<E>,
}

/// One rollout per task of `tasks`, in order, under `config`'s evaluation
/// sampling (greedy unless configured otherwise) and turn limits, with tool
/// calls on `sandbox`. Seeds come from (`config.seed`, task index), so the
/// same inputs give the same rollouts. Errors are reported as step 0 of the
/// evaluate phase.
pub fn run_episodes<P: Policy>(
    policy: &P,
    sandbox: &Sandbox,
    tasks: &[EngineTask],
    config: &EngineConfig,
) -> Result<Episodes<P::Episode>, EngineError> {
    let runtime = tool_runtime(config.runtime_threads, sandbox, "rewardlab-episodes")?;
    let specs: Vec<EpisodeSpec<'_>> = tasks
        .iter()
        .enumerate()
        .map(|(i, task)| EpisodeSpec {
            task,
            group: format!("{}#{i}", task.id),
            seed: derive(config.seed, Stream::Eval, &[0, i as u64]),
        })
        .collect();
    let limits = TurnLimits { max_turns: config.max_turns, max_calls_per_turn: config.max_calls_per_turn };
    let batch =
        run_batch(policy, sandbox, &runtime, &specs, config.eval_sampling.sampling(), limits, 0, Phase::Evaluate)?;
    Ok(Episodes { rollouts: batch.records, episodes: batch.episodes })
}
