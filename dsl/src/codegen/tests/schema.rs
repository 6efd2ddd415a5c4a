//! Feature values for the generated-code tests, inside the ranges the
//! test schema (`crate::testing::schema`) declares.

/// A value of feature `key` for row `i`: exactly representable in `f32`
/// (a multiple of 1/8, or an integer), inside the feature's declared range,
/// with repeats so that groups have ties and constant stretches.
pub(super) fn value(key: &str, i: usize, salt: u64) -> f64 {
    let h = (i as u64 ^ salt).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40;
    let name = key.split('(').next().unwrap_or(key);
    match name {
        "cost" => (h % 17) as f64 / 2.0,
        "moves" | "size" => (h % 40) as f64,
        "steps" => 1.0 + (h % 4) as f64,
        "ok" | "cut" => (h % 2) as f64,
        "x" => (h % 33) as f64 / 4.0 - 4.0,
        _ => (h % 9) as f64 / 8.0,
    }
}
