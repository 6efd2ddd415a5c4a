//! The batched KV cache of the sampling path.
//!
//! Layout: every row of the batch shares one slot axis. A forward call appends `len` slots to
//! every row; a row that has nothing to add (its prompt is shorter, or it already stopped)
//! fills its slots with padding marked invalid. Three facts make padding harmless:
//! - keys in invalid slots are masked out of every query;
//! - each row's RoPE position counts only its valid slots, so a left-padded prompt gets the
//!   same positions as the unpadded one;
//! - the padding bias is finite, so a padding query that sees only padding gets a finite
//!   softmax instead of NaN (which would poison the values other rows mask out).
//!
//! Storage is preallocated per layer and grown by doubling, so a decode step writes in place
//! (`slice_set`) instead of concatenating the whole cache.

use std::cell::OnceCell;

use candle_core::{DType, Device, Tensor};

use super::rope::Positions;

/// The KV cache of one batch of sequences across all layers, plus per-row bookkeeping.
#[derive(Debug)]
pub struct KvCache {
    pub(crate) layers: Vec<LayerKv>,
    batch: usize,
    /// `valid[row][slot]`: whether the slot holds a real token of that row.
    valid: Vec<Vec<bool>>,
    /// The RoPE position the next valid token of each row gets.
    next_pos: Vec<u32>,
}

impl KvCache {
    /// An empty cache for `batch` rows and `layers` decoder layers.
    pub fn new(batch: usize, layers: usize) -> Self {
        Self::with_capacity(batch, layers, 0)
    }

    /// An empty cache that allocates room for `slots` slots at its first append, so a
    /// generation whose length is known never regrows (regrowing briefly holds old + new).
    pub fn with_capacity(batch: usize, layers: usize, slots: usize) -> Self {
        Self {
            layers: (0..layers).map(|_| LayerKv { kv: None, len: 0, reserve: slots }).collect(),
            batch,
            valid: vec![Vec::new(); batch],
            next_pos: vec![0; batch],
        }
    }

    /// Rows in the batch.
    pub fn batch(&self) -> usize {
        self.batch
    }

    /// Slots used so far (the same for every row).
    pub fn len(&self) -> usize {
        self.valid.first().map_or(0, Vec::len)
    }

    /// Whether nothing has been appended yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Real tokens held for each row.
    pub fn row_tokens(&self) -> &[u32] {
        &self.next_pos
    }

    /// Registers a chunk of `len` slots per row; returns the per-slot RoPE positions
    /// `(batch, len)` and the attention mask for the chunk's queries over all keys.
    pub(crate) fn admit(&mut self, chunk_valid: &[Vec<bool>], device: &Device) -> crate::Result<(Positions, AttnMask)> {
        let len = chunk_valid.first().map_or(0, Vec::len);
        if chunk_valid.len() != self.batch || len == 0 || chunk_valid.iter().any(|r| r.len() != len) {
            return Err(crate::Error::Invalid(format!(
                "chunk validity must be {} non-empty rows of equal length",
                self.batch
            )));
        }
        let base = self.len();
        let keys = base + len;
        let mut positions = Vec::with_capacity(self.batch * len);
        let mut key_bias = Vec::with_capacity(self.batch * keys);
        for (row, chunk) in chunk_valid.iter().enumerate() {
            for &ok in chunk {
                positions.push(self.next_pos[row]);
                if ok {
                    self.next_pos[row] += 1;
                }
            }
            self.valid[row].extend_from_slice(chunk);
            key_bias.extend(self.valid[row].iter().map(|&ok| if ok { 0f32 } else { PAD_BIAS }));
        }
        // Without any padding so far (the common single-prompt case), every row sits at slots
        // = positions: shared RoPE rows and no key bias, which saves a gather and an add.
        if self.valid.iter().all(|row| row.iter().all(|&ok| ok)) {
            return Ok((Positions::Range { start: base, len }, AttnMask::new(len, base, device, None)));
        }
        let positions = Tensor::from_vec(positions, (self.batch, len), device)?;
        Ok((Positions::PerRow(positions), AttnMask::new(len, base, device, Some(key_bias))))
    }
}

/// Added to the scores of padding keys. Finite on purpose: a padding query whose every key is
/// padding then gets a uniform (finite) softmax instead of NaN, and NaN in a padding slot's
/// keys or values would leak into real rows through `0 * NaN`. Against real keys,
/// `exp(-1e9)` is exactly zero in f32.
const PAD_BIAS: f32 = -1e9;

/// The attention masks of one forward call: causal, plus padding keys when any row has some.
///
/// Kept factored, so no `(batch, len, keys)` tensor is materialised, and built lazily: the
/// CPU sampling kernel ([`super::softmax`]) reads the host-side key bias and needs no mask
/// tensor at all, while the generic path builds each tensor once per call on first use.
#[derive(Debug)]
pub(crate) struct AttnMask {
    len: usize,
    base: usize,
    device: Device,
    /// `batch × keys`, row-major: 0 on real keys, [`PAD_BIAS`] on padding; none without padding.
    key_bias: Option<Vec<f32>>,
    causal: OnceCell<Tensor>,
    keys: OnceCell<Option<Tensor>>,
}

impl AttnMask {
    /// Masks for `len` queries that follow `base` earlier slots, with an optional key bias.
    pub(crate) fn new(len: usize, base: usize, device: &Device, key_bias: Option<Vec<f32>>) -> Self {
        Self { len, base, device: device.clone(), key_bias, causal: OnceCell::new(), keys: OnceCell::new() }
    }

    /// `batch × keys` additive bias on padding keys, when any row has padding.
    pub(crate) fn key_bias(&self) -> Option<&[f32]> {
        self.key_bias.as_deref()
    }

    /// `(1, 1, 1, len, keys)`: `-inf` where the key comes after the query.
    pub(crate) fn causal(&self) -> candle_core::Result<&Tensor> {
        if let Some(t) = self.causal.get() {
            return Ok(t);
        }
        let t = causal_mask(self.len, self.base, &self.device)?;
        Ok(self.causal.get_or_init(|| t))
    }

    /// `(batch, 1, 1, 1, keys)`: [`PAD_BIAS`] on padding keys; none without padding.
    pub(crate) fn keys(&self) -> candle_core::Result<Option<&Tensor>> {
        if let Some(t) = self.keys.get() {
            return Ok(t.as_ref());
        }
        let t = match &self.key_bias {
            Some(bias) => {
                let keys = self.base + self.len;
                Some(Tensor::from_slice(bias, (bias.len() / keys, 1, 1, 1, keys), &self.device)?)
            }
            None => None,
        };
        Ok(self.keys.get_or_init(|| t).as_ref())
    }
}

/// The causal mask for `len` queries that follow `base` earlier slots.
fn causal_mask(len: usize, base: usize, device: &Device) -> candle_core::Result<Tensor> {
    let keys = base + len;
    let mask: Vec<f32> =
        (0..len).flat_map(|i| (0..keys).map(move |j| if j <= base + i { 0.0 } else { f32::NEG_INFINITY })).collect();
    Tensor::from_vec(mask, (1, 1, 1, len, keys), device)
}

/// One layer's keys and values: `(batch, kv_heads, capacity, head_dim)`, `len` slots used.
#[derive(Debug)]
pub(crate) struct LayerKv {
    kv: Option<(Tensor, Tensor)>,
    len: usize,
    /// Capacity of the first allocation.
    reserve: usize,
}

impl LayerKv {
    /// Writes the new keys/values after the used slots and returns views of all used slots.
    pub(crate) fn append(&mut self, k: &Tensor, v: &Tensor) -> candle_core::Result<(Tensor, Tensor)> {
        let (b, h, l, d) = k.dims4()?;
        let needed = self.len + l;
        let capacity = self.kv.as_ref().map_or(0, |(k, _)| k.dim(2).unwrap_or(0));
        if needed > capacity {
            let new_cap = needed.max(capacity * 2).max(self.reserve).max(64);
            let grow = |old: Option<&Tensor>, dtype: DType| -> candle_core::Result<Tensor> {
                let fresh = Tensor::zeros((b, h, new_cap, d), dtype, k.device())?;
                if let Some(old) = old {
                    fresh.slice_set(&old.narrow(2, 0, self.len)?.contiguous()?, 2, 0)?;
                }
                Ok(fresh)
            };
            let old = self.kv.take();
            let nk = grow(old.as_ref().map(|(k, _)| k), k.dtype())?;
            let nv = grow(old.as_ref().map(|(_, v)| v), v.dtype())?;
            self.kv = Some((nk, nv));
        }
        let (ck, cv) = self.kv.as_ref().expect("allocated above");
        ck.slice_set(&k.contiguous()?, 2, self.len)?;
        cv.slice_set(&v.contiguous()?, 2, self.len)?;
        self.len = needed;
        Ok((ck.narrow(2, 0, needed)?, cv.narrow(2, 0, needed)?))
    }
}

/// One row's keys and values taken out of a batched [`KvCache`]: only its real tokens, in
/// order, with RoPE already applied at their positions. It joins another batch at the next
/// turn ([`KvCache::from_rows`]), so a multi-turn rollout prefills only what the last turn
/// added (its tool responses and the next turn's template tokens).
#[derive(Debug, Clone)]
pub struct RowCache {
    /// Per layer, keys and values `(1, kv_heads, len, head_dim)`; empty when `len` is 0.
    layers: Vec<(Tensor, Tensor)>,
    len: usize,
}

impl RowCache {
    /// Tokens held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no token is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Keeps the first `len` tokens (a prefix of a sequence is cached exactly by a prefix of
    /// its cache: causal attention never looks ahead).
    pub fn truncate(&mut self, len: usize) -> crate::Result<()> {
        if len >= self.len {
            return Ok(());
        }
        if len == 0 {
            self.layers.clear();
        } else {
            for (k, v) in &mut self.layers {
                *k = k.narrow(2, 0, len)?;
                *v = v.narrow(2, 0, len)?;
            }
        }
        self.len = len;
        Ok(())
    }
}

impl KvCache {
    /// Row `row`'s real tokens, copied out of the batch (padding slots dropped).
    pub fn take_row(&self, row: usize) -> crate::Result<RowCache> {
        let valid = self
            .valid
            .get(row)
            .ok_or_else(|| crate::Error::Invalid(format!("row {row} of a {}-row cache", self.batch)))?;
        let slots: Vec<u32> = (0..valid.len()).filter(|&s| valid[s]).map(|s| s as u32).collect();
        let len = slots.len();
        if len == 0 {
            return Ok(RowCache { layers: Vec::new(), len: 0 });
        }
        let first = slots[0] as usize;
        // The common case, left padding only: the real slots are one run, so a narrow suffices.
        let run = slots[len - 1] as usize + 1 - first == len;
        let mut layers = Vec::with_capacity(self.layers.len());
        for layer in &self.layers {
            let (k, v) = layer.kv.as_ref().ok_or_else(|| crate::Error::Invalid("an empty cache layer".into()))?;
            let pick = |t: &Tensor| -> crate::Result<Tensor> {
                let t = t.narrow(0, row, 1)?;
                Ok(if run {
                    // A copy, never a view: the row must not keep the batch's storage alive.
                    t.narrow(2, first, len)?.force_contiguous()?
                } else {
                    let idx = Tensor::from_slice(&slots, len, t.device())?;
                    t.index_select(&idx, 2)?
                })
            };
            layers.push((pick(k)?, pick(v)?));
        }
        Ok(RowCache { layers, len })
    }

    /// A batch whose rows start from `rows` (`None`: nothing cached), left-padded to the longest,
    /// for `layers` decoder layers, with room for `extra` more slots before regrowing.
    pub fn from_rows(rows: &[Option<RowCache>], layers: usize, extra: usize) -> crate::Result<KvCache> {
        let batch = rows.len();
        let longest = rows.iter().flatten().map(RowCache::len).max().unwrap_or(0);
        let mut cache = KvCache::with_capacity(batch, layers, longest + extra);
        let Some(shape_of) = rows.iter().flatten().find(|r| !r.is_empty()) else {
            return Ok(cache);
        };
        if shape_of.layers.len() != layers || rows.iter().flatten().any(|r| !r.is_empty() && r.layers.len() != layers) {
            return Err(crate::Error::Invalid(format!("a cached row does not have {layers} layers")));
        }
        for (l, layer) in cache.layers.iter_mut().enumerate() {
            let (k0, _) = &shape_of.layers[l];
            let (_, heads, _, dim) = k0.dims4()?;
            let zeros = |slots: usize| Tensor::zeros((1, heads, slots, dim), k0.dtype(), k0.device());
            let mut ks = Vec::with_capacity(batch);
            let mut vs = Vec::with_capacity(batch);
            for row in rows {
                let len = row.as_ref().map_or(0, RowCache::len);
                // Padding first, then the row's tokens, then the free capacity.
                let (mut kp, mut vp) = (Vec::with_capacity(3), Vec::with_capacity(3));
                if len < longest {
                    kp.push(zeros(longest - len)?);
                    vp.push(zeros(longest - len)?);
                }
                if let Some(r) = row.as_ref().filter(|r| !r.is_empty()) {
                    kp.push(r.layers[l].0.clone());
                    vp.push(r.layers[l].1.clone());
                }
                kp.push(zeros(extra.max(1))?);
                vp.push(zeros(extra.max(1))?);
                ks.push(Tensor::cat(&kp, 2)?);
                vs.push(Tensor::cat(&vp, 2)?);
            }
            layer.kv = Some((Tensor::cat(&ks, 0)?, Tensor::cat(&vs, 0)?));
            layer.len = longest;
        }
        for (r, row) in rows.iter().enumerate() {
            let len = row.as_ref().map_or(0, RowCache::len);
            cache.valid[r] = (0..longest).map(|s| s >= longest - len).collect();
            cache.next_pos[r] = len as u32;
        }
        Ok(cache)
    }
}
