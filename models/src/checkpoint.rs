//! Hugging Face safetensors checkpoints: one file or shards listed by
//! `model.safetensors.index.json`, memory-mapped, read into candle tensors on demand.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use candle_core::safetensors::Load;
use candle_core::{DType, Device, Shape, Tensor};
use memmap2::Mmap;
use safetensors::SafeTensors;
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// The index file of a sharded checkpoint.
pub const INDEX_FILE: &str = "model.safetensors.index.json";
/// The single-file checkpoint name.
pub const SINGLE_FILE: &str = "model.safetensors";

/// `model.safetensors.index.json`: which shard holds each tensor.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShardIndex {
    /// Free-form metadata such as `total_size`; kept as written, read by nothing here.
    #[serde(default)]
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// Tensor name → the shard's file name, relative to the checkpoint directory.
    pub weight_map: BTreeMap<String, String>,
}

/// A checkpoint's safetensors files, memory-mapped; tensors are copied out only when asked.
#[derive(Debug)]
pub struct ShardedSafetensors {
    shards: Vec<(PathBuf, Mmap)>,
    /// Tensor name → index into `shards`.
    location: HashMap<String, usize>,
}

impl ShardedSafetensors {
    /// Opens `dir/model.safetensors.index.json` and its shards, or else `dir/model.safetensors`.
    pub fn open(dir: &Path) -> Result<Self> {
        let index_path = dir.join(INDEX_FILE);
        if index_path.exists() {
            let text = std::fs::read_to_string(&index_path).map_err(Error::io(&index_path))?;
            let index: ShardIndex = serde_json::from_str(&text).map_err(Error::json(&index_path))?;
            let mut files: Vec<&String> = index.weight_map.values().collect();
            files.sort();
            files.dedup();
            let mut shards = Vec::with_capacity(files.len());
            let mut shard_of = HashMap::new();
            for file in files {
                shard_of.insert(file.clone(), shards.len());
                shards.push(map(&dir.join(file))?);
            }
            let mut location = HashMap::with_capacity(index.weight_map.len());
            for (name, file) in &index.weight_map {
                let shard = shard_of[file];
                let (path, data) = &shards[shard];
                let st = SafeTensors::deserialize(data).map_err(st_err(path))?;
                if st.tensor(name).is_err() {
                    return Err(Error::Checkpoint {
                        path: path.clone(),
                        message: format!("index places {name} here but the shard lacks it"),
                    });
                }
                location.insert(name.clone(), shard);
            }
            Ok(Self { shards, location })
        } else {
            let path = dir.join(SINGLE_FILE);
            let (path, data) = map(&path)?;
            let st = SafeTensors::deserialize(&data).map_err(st_err(&path))?;
            let location = st.names().into_iter().map(|n| (n.to_owned(), 0)).collect();
            Ok(Self { shards: vec![(path, data)], location })
        }
    }

    /// Number of files backing the checkpoint.
    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    /// Every tensor name.
    pub fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.location.keys().map(String::as_str).collect();
        names.sort_unstable();
        names
    }

    /// Copies tensor `name` out of the mapping onto `device` in its stored dtype.
    pub fn load(&self, name: &str, device: &Device) -> Result<Tensor> {
        let shard = *self.location.get(name).ok_or_else(|| Error::Checkpoint {
            path: self.shards.first().map(|s| s.0.clone()).unwrap_or_default(),
            message: format!("no tensor named {name}"),
        })?;
        let (path, data) = &self.shards[shard];
        // Re-parsing the header per tensor keeps the struct free of self-borrows; headers are
        // small next to the tensors they describe.
        let st = SafeTensors::deserialize(data).map_err(st_err(path))?;
        let view = st.tensor(name).map_err(st_err(path))?;
        Ok(view.load(device)?)
    }
}

impl candle_nn::var_builder::SimpleBackend for ShardedSafetensors {
    fn get(&self, s: Shape, name: &str, _: candle_nn::Init, dtype: DType, dev: &Device) -> candle_core::Result<Tensor> {
        let t = self.get_unchecked(name, dtype, dev)?;
        if t.shape() != &s {
            return Err(candle_core::Error::UnexpectedShape {
                msg: format!("shape mismatch for {name}"),
                expected: s,
                got: t.shape().clone(),
            });
        }
        Ok(t)
    }

    fn get_unchecked(&self, name: &str, dtype: DType, dev: &Device) -> candle_core::Result<Tensor> {
        self.load(name, dev).map_err(|e| candle_core::Error::Msg(e.to_string()))?.to_dtype(dtype)
    }

    fn contains_tensor(&self, name: &str) -> bool {
        self.location.contains_key(name)
    }
}

/// Writes `tensors` as `dir/model.safetensors`, or, with `shards > 1`, as
/// `model-0000i-of-0000n.safetensors` files plus the index (tensors dealt out in name order,
/// balanced by bytes).
pub fn write_checkpoint(dir: &Path, tensors: &BTreeMap<String, Tensor>, shards: usize) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(Error::io(dir))?;
    if shards <= 1 {
        let path = dir.join(SINGLE_FILE);
        return save(&path, tensors.iter());
    }
    let total: usize = tensors.values().map(bytes_of).sum();
    let per_shard = total.div_ceil(shards).max(1);
    let mut groups: Vec<Vec<(&String, &Tensor)>> = vec![Vec::new()];
    let mut filled = 0;
    for (name, t) in tensors {
        if filled >= per_shard && groups.len() < shards {
            groups.push(Vec::new());
            filled = 0;
        }
        groups.last_mut().expect("never empty").push((name, t));
        filled += bytes_of(t);
    }
    let n = groups.len();
    let mut index = ShardIndex { metadata: serde_json::Map::new(), weight_map: BTreeMap::new() };
    index.metadata.insert("total_size".to_owned(), serde_json::Value::from(total as u64));
    for (i, group) in groups.into_iter().enumerate() {
        let file = format!("model-{:05}-of-{n:05}.safetensors", i + 1);
        for (name, _) in &group {
            index.weight_map.insert((*name).clone(), file.clone());
        }
        save(&dir.join(&file), group.into_iter())?;
    }
    let index_path = dir.join(INDEX_FILE);
    let text = serde_json::to_string_pretty(&index).map_err(Error::json(&index_path))?;
    std::fs::write(&index_path, text).map_err(Error::io(&index_path))
}

/// Writes named tensors to one safetensors file.
pub(crate) fn save<'a>(path: &Path, tensors: impl Iterator<Item = (&'a String, &'a Tensor)>) -> Result<()> {
    let owned: Vec<(String, Tensor)> = tensors.map(|(n, t)| Ok((n.clone(), t.contiguous()?))).collect::<Result<_>>()?;
    safetensors::serialize_to_file(owned, None, path).map_err(st_err(path))
}

fn bytes_of(t: &Tensor) -> usize {
    t.elem_count() * t.dtype().size_in_bytes()
}

fn map(path: &Path) -> Result<(PathBuf, Mmap)> {
    let file = std::fs::File::open(path).map_err(Error::io(path))?;
    // SAFETY: the mapping is read-only; as with every mmap'd checkpoint loader, the file must
    // not be truncated or rewritten while the model is being loaded.
    let data = unsafe { Mmap::map(&file) }.map_err(Error::io(path))?;
    Ok((path.to_path_buf(), data))
}

fn st_err(path: &Path) -> impl FnOnce(safetensors::SafeTensorError) -> Error {
    let path = path.to_path_buf();
    move |source| Error::Safetensors { path, source }
}
