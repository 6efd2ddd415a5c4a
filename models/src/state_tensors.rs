//! The binary part of a policy checkpoint: named f32 arrays in one safetensors file.
//!
//! A policy's [`PolicyState`](crate::agent::PolicyState) moves its large arrays (LoRA adapters,
//! AdamW moments) out as [`StateTensor`]s; the engine writes them here beside the JSON of the
//! rest. Safetensors stores the raw little-endian bytes, so every f32 comes back bit for bit,
//! and the file is a fifth of the size of the same values as JSON bit patterns (4 bytes per
//! value instead of a decimal `u32` and a comma).

use std::path::Path;

use safetensors::tensor::{Dtype, SafeTensors, TensorView};

use crate::{Error, Result};

/// One named f32 array of a checkpoint, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct StateTensor {
    /// A name unique within the checkpoint (`<module>.lora_A`, `<module>.lora_A.exp_avg`, ...).
    pub name: String,
    /// The array's dimensions; their product is `data.len()`.
    pub shape: Vec<usize>,
    /// The values.
    pub data: Vec<f32>,
}

/// Writes `tensors` to `path` as one safetensors file (names must be unique).
pub fn write_state_tensors(path: &Path, tensors: &[StateTensor]) -> Result<()> {
    let bytes: Vec<Vec<u8>> = tensors.iter().map(|t| t.data.iter().flat_map(|x| x.to_le_bytes()).collect()).collect();
    let mut views = Vec::with_capacity(tensors.len());
    for (t, data) in tensors.iter().zip(&bytes) {
        let view = TensorView::new(Dtype::F32, t.shape.clone(), data)
            .map_err(|source| Error::Safetensors { path: path.to_owned(), source })?;
        views.push((t.name.clone(), view));
    }
    safetensors::serialize_to_file(views, None, path)
        .map_err(|source| Error::Safetensors { path: path.to_owned(), source })
}

/// Reads every tensor of a file [`write_state_tensors`] wrote, in name order.
pub fn read_state_tensors(path: &Path) -> Result<Vec<StateTensor>> {
    let bytes = std::fs::read(path).map_err(Error::io(path))?;
    let file =
        SafeTensors::deserialize(&bytes).map_err(|source| Error::Safetensors { path: path.to_owned(), source })?;
    let mut out = Vec::with_capacity(file.len());
    for (name, view) in file.tensors() {
        if view.dtype() != Dtype::F32 {
            return Err(Error::Checkpoint {
                path: path.to_owned(),
                message: format!("{name} is {:?}; policy state tensors are f32", view.dtype()),
            });
        }
        let data = view.data().chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
        out.push(StateTensor { name, shape: view.shape().to_vec(), data });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensors_round_trip_bit_for_bit_including_nan_payloads_and_signed_zero() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state.safetensors");
        let odd = [f32::from_bits(0x7fc0_1234), -0.0, f32::MIN_POSITIVE / 3.0, 1.0 / 3.0, f32::INFINITY, -7.5];
        let tensors = vec![
            StateTensor { name: "b".into(), shape: vec![2, 3], data: odd.to_vec() },
            StateTensor { name: "a".into(), shape: vec![1], data: vec![2.5] },
        ];
        write_state_tensors(&path, &tensors).expect("write");
        let back = read_state_tensors(&path).expect("read");
        assert_eq!(back.len(), 2);
        assert_eq!(
            (back[0].name.as_str(), back[0].shape.as_slice(), back[0].data.as_slice()),
            ("a", &[1][..], &[2.5][..])
        );
        assert_eq!(back[1].shape, [2, 3]);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&back[1].data), bits(&odd));
    }

    #[test]
    fn a_shape_that_does_not_fit_the_data_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("bad.safetensors");
        let bad = [StateTensor { name: "x".into(), shape: vec![4], data: vec![1.0; 3] }];
        assert!(matches!(write_state_tensors(&path, &bad), Err(Error::Safetensors { .. })));
        std::fs::write(&path, b"not a safetensors file").expect("write");
        assert!(matches!(read_state_tensors(&path), Err(Error::Safetensors { .. })));
    }
}
