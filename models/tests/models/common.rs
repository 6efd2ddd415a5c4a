//! Helpers: tiny checkpoints in temp dirs, tensor comparison.

use std::path::Path;

use rewardlab_models::qwen3::Qwen3Config;
use rewardlab_models::tiny::{tiny_config, write_checkpoint_with};
use rewardlab_models::{DType, Device, LoraConfig, Qwen3Model, Tensor};

/// A temp dir holding a tiny checkpoint of `cfg` in `shards` files.
pub fn checkpoint(cfg: &Qwen3Config, shards: usize, seed: u64) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    write_checkpoint_with(dir.path(), seed, cfg, shards).expect("tiny checkpoint");
    dir
}

pub fn tiny() -> tempfile::TempDir {
    checkpoint(&tiny_config(), 1, 3)
}

pub fn load(dir: &Path, lora: Option<&LoraConfig>) -> Qwen3Model {
    Qwen3Model::load(dir, DType::F32, &Device::Cpu, lora).expect("load tiny model")
}

/// Largest absolute difference between two same-shaped tensors.
pub fn max_diff(a: &Tensor, b: &Tensor) -> f32 {
    assert_eq!(a.dims(), b.dims(), "shapes differ");
    (a - b)
        .expect("sub")
        .abs()
        .expect("abs")
        .flatten_all()
        .expect("flatten")
        .max(0)
        .expect("max")
        .to_scalar::<f32>()
        .expect("scalar")
}

/// Largest absolute value.
pub fn max_abs(a: &Tensor) -> f32 {
    a.abs().expect("abs").flatten_all().expect("flatten").max(0).expect("max").to_scalar::<f32>().expect("scalar")
}

pub fn ids(rows: &[Vec<u32>]) -> Tensor {
    let len = rows[0].len();
    let flat: Vec<u32> = rows.iter().flatten().copied().collect();
    Tensor::from_vec(flat, (rows.len(), len), &Device::Cpu).expect("ids")
}

/// Deterministic pseudo-random token ids below `vocab`.
pub fn tokens(n: usize, seed: u32, vocab: u32) -> Vec<u32> {
    (0..n as u32).map(|i| (i.wrapping_mul(2654435761).wrapping_add(seed * 97)) % vocab).collect()
}
