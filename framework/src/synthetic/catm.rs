//! CATM-like relevance weights for auxiliary files (seed 000, §2.4).
//!
//! CATM scores a file a past agent read by the length `l` of the reasoning
//! that followed the read: `w̃ = 1 − exp(−ln2 · l / β)` with `β` the median
//! length, normalised by the mean of `w̃` so that `E[w] ≈ 1`, and keeps the
//! files with `w ≥ 0.15`. Here the reasoning lengths are simulated from the
//! file's role (a base class needs more thought than a glance at a sibling),
//! so the weights have the same shape as mined ones.

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use rewardlab_rewards::catm::weights::{Median, catm_weights_with};

use super::AuxRole;

/// Files below this weight are dropped (noise reads).
pub const MIN_WEIGHT: f64 = 0.15;
/// Weights are capped here; a saturating score normalised to mean 1 rarely
/// exceeds it.
pub const MAX_WEIGHT: f64 = 2.0;

/// A file an imagined agent read while solving a task, before weighting.
#[derive(Clone, Debug)]
pub(crate) struct Read {
    pub task: usize,
    pub path: String,
    pub role: AuxRole,
    /// Simulated post-read reasoning length in tokens.
    pub length: f64,
}

/// Simulates the reasoning length that follows reading a file of `role`.
pub(crate) fn simulated_length(rng: &mut ChaCha8Rng, role: AuxRole) -> f64 {
    let typical = match role {
        AuxRole::BaseClass => 520.0,
        AuxRole::Caller => 420.0,
        AuxRole::Test => 300.0,
        AuxRole::Collaborator => 200.0,
        // Glances at files that turned out not to matter.
        AuxRole::Noise => 15.0,
    };
    // A log-normal spread: exp of a sum of uniforms is close enough.
    let z: f64 = (0..4).map(|_| rng.random_range(-1.0..1.0)).sum::<f64>() * 0.35;
    typical * z.exp()
}

/// Weights for `reads`, in order: CATM's weights ([`catm_weights_with`]: the saturating score of
/// the length relative to the median, normalised to mean 1 over all reads), capped at
/// [`MAX_WEIGHT`].
///
/// The median is the upper middle value ([`Median::Upper`]), the convention these tasks were
/// generated with; the usual median would change the weights of every even-sized read list and
/// so the generated tasks. Simulated lengths are at least 15·e^-1.4 ≈ 3.7 tokens, so the median
/// and the mean raw score are always positive and the formula is the rewards' exactly.
pub(crate) fn weights(reads: &[Read]) -> Vec<f64> {
    let lengths: Vec<f64> = reads.iter().map(|r| r.length).collect();
    catm_weights_with(&lengths, Median::Upper).into_iter().map(|w| w.min(MAX_WEIGHT)).collect()
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    fn read(length: f64) -> Read {
        Read { task: 0, path: String::new(), role: AuxRole::Caller, length }
    }

    #[test]
    fn weights_have_mean_one_before_capping_and_grow_with_length() {
        let reads: Vec<Read> = [10.0, 100.0, 200.0, 300.0, 400.0].into_iter().map(read).collect();
        let w = weights(&reads);
        let mean = w.iter().sum::<f64>() / w.len() as f64;
        assert!((mean - 1.0).abs() < 1e-9, "mean {mean}");
        assert!(w.windows(2).all(|p| p[0] < p[1]), "{w:?}");
        // The median read (200) scores exactly half of saturation before
        // normalising by the mean raw score.
        let raw: Vec<f64> = [10.0, 100.0, 200.0, 300.0, 400.0]
            .iter()
            .map(|l: &f64| 1.0 - (-std::f64::consts::LN_2 * l / 200.0).exp())
            .collect();
        let raw_mean = raw.iter().sum::<f64>() / raw.len() as f64;
        assert!((w[2] - 0.5 / raw_mean).abs() < 1e-9, "{} vs {}", w[2], 0.5 / raw_mean);
    }

    #[test]
    fn noise_reads_fall_below_the_threshold() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut reads = Vec::new();
        for role in [AuxRole::Caller, AuxRole::Test, AuxRole::BaseClass, AuxRole::Noise] {
            // Fewer misreads than real reads, as in a task's read list.
            for _ in 0..if role == AuxRole::Noise { 30 } else { 50 } {
                reads.push(Read { task: 0, path: String::new(), role, length: simulated_length(&mut rng, role) });
            }
        }
        let w = weights(&reads);
        let noise_kept = reads.iter().zip(&w).filter(|(r, w)| r.role == AuxRole::Noise && **w >= MIN_WEIGHT).count();
        let callers_kept = reads.iter().zip(&w).filter(|(r, w)| r.role == AuxRole::Caller && **w >= MIN_WEIGHT).count();
        assert!(noise_kept < 10, "{noise_kept} noise reads kept");
        assert_eq!(callers_kept, 50);
        assert!(w.iter().all(|w| *w <= MAX_WEIGHT && *w > 0.0));
    }
}
