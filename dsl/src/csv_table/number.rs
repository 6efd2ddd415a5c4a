//! Writing `f64`s as text fast, in exactly the format `f64`'s `Display`
//! writes (the format the output CSVs have always had): the shortest digits
//! that read back to the same value, never an exponent (`1e-7` is
//! `0.0000001`), no trailing `.0` (`1.0` is `1`), and `NaN`, `inf`, `-inf`.
//!
//! The digits come from `zmij` (Schubfach), several times faster than
//! `core::fmt`'s Grisu/Dragon with its formatter machinery. Both choose the
//! shortest digits that round-trip and, among those, the closest to the
//! exact value; they differ only on an exact tie (the exact value halfway
//! between two shortest candidates: `4089123483709.15625`), which `core`
//! breaks upwards and `zmij` to even. A tie needs the exact decimal value to
//! have one significant digit more than the shortest form, which is cheap to
//! test, and those rare values go through `core::fmt`. [`write_f64`] then
//! lays the digits out as `Display` does. The tests check it against
//! `format!("{}")` on many values.

/// Appends `value` to `out` as `format!("{value}")` would.
pub fn write_f64(out: &mut Vec<u8>, value: f64) {
    if !value.is_finite() {
        out.extend_from_slice(match (value.is_nan(), value > 0.0) {
            (true, _) => b"NaN",
            (false, true) => b"inf",
            (false, false) => b"-inf",
        });
        return;
    }
    let mut buffer = zmij::Buffer::new();
    let text = buffer.format_finite(value).as_bytes();
    if may_tie(value, significant_digits(text)) {
        use std::io::Write as _;
        let _ = write!(out, "{value}");
        return;
    }
    let Some(e) = text.iter().position(|&b| b == b'e') else {
        // Plain notation: `Display` drops a `.0` fraction.
        out.extend_from_slice(text.strip_suffix(b".0").unwrap_or(text));
        return;
    };
    let (mantissa, exponent) = (&text[..e], &text[e + 1..]);
    let (negative, mantissa) = match mantissa.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, mantissa),
    };
    let exponent: i32 = std::str::from_utf8(exponent).ok().and_then(|s| s.parse().ok()).unwrap_or(0);
    let mut digits = [0u8; 20];
    let mut n = 0;
    for &b in mantissa {
        if b.is_ascii_digit() && n < digits.len() {
            digits[n] = b;
            n += 1;
        }
    }
    let digits = &digits[..n];
    if negative {
        out.push(b'-');
    }
    // The mantissa is `d.ddd`: the decimal point sits after `point` digits.
    let point = exponent + 1;
    if point <= 0 {
        out.extend_from_slice(b"0.");
        out.extend(std::iter::repeat_n(b'0', point.unsigned_abs() as usize));
        out.extend_from_slice(digits);
    } else if point as usize >= digits.len() {
        out.extend_from_slice(digits);
        out.extend(std::iter::repeat_n(b'0', point as usize - digits.len()));
    } else {
        let (int, frac) = digits.split_at(point as usize);
        out.extend_from_slice(int);
        out.push(b'.');
        out.extend_from_slice(frac);
    }
}

/// Significant digits of a formatted number (`-0.00120e-5` has 2).
fn significant_digits(text: &[u8]) -> usize {
    // Called once per number written: the mantissa's digits from the first
    // nonzero one to the last, found from both ends (no allocation, and no
    // branch per digit in between), less the point if it lies between them.
    let mantissa = &text[..text.iter().position(|&b| b == b'e').unwrap_or(text.len())];
    let nonzero = |b: &u8| matches!(b, b'1'..=b'9');
    let (Some(first), Some(last)) = (mantissa.iter().position(nonzero), mantissa.iter().rposition(nonzero)) else {
        return 0;
    };
    let span = &mantissa[first..=last];
    span.len() - usize::from(span.contains(&b'.'))
}

/// Whether the exact decimal value of a finite `value` may have `shortest + 1`
/// significant digits (trailing zeros dropped), the condition for a tie.
/// True for every value of 2^127 or more, whose expansion is not computed.
fn may_tie(value: f64, shortest: usize) -> bool {
    if value == 0.0 {
        return false;
    }
    let bits = value.abs().to_bits();
    let (exp, frac) = ((bits >> 52) as i32, bits & ((1 << 52) - 1));
    let (mut m, mut k) = if exp == 0 { (frac, -1074) } else { (frac | (1 << 52), exp - 1075) };
    let zeros = m.trailing_zeros();
    m >>= zeros;
    k += zeros as i32;
    // value = m * 2^k with m odd.
    let mut exact: u128 = if k < 0 {
        // m * 2^k = m * 5^-k / 10^-k: the digits are m * 5^-k's.
        if k < -27 {
            // 5^28 alone has 20 digits: more than any shortest form plus one.
            return false;
        }
        u128::from(m) * 5u128.pow(k.unsigned_abs())
    } else {
        if k > 127 - (64 - m.leading_zeros() as i32) {
            return true;
        }
        u128::from(m) << k
    };
    while exact.is_multiple_of(10) {
        exact /= 10;
    }
    exact.ilog10() as usize + 1 == shortest + 1
}

#[cfg(test)]
mod tests {
    use super::write_f64;
    use rand::{Rng, SeedableRng};

    fn text(v: f64) -> String {
        let mut out = Vec::new();
        write_f64(&mut out, v);
        String::from_utf8(out).expect("ascii")
    }

    #[test]
    fn matches_display_on_special_and_edge_values() {
        let values = [
            0.0,
            -0.0,
            1.0,
            -1.0,
            0.5,
            0.1,
            1.0 / 3.0,
            2.0 / 3.0,
            1e-7,
            1.5e-7,
            123456.0,
            1e15,
            1e16,
            1e17,
            1.2345e21,
            1e22,
            1e300,
            f64::MAX,
            f64::MIN_POSITIVE,
            5e-324,
            -2.5e-10,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            0.0001,
            0.00001,
            9007199254740993.0,
            // An exact tie between two shortest forms (4089123483709.15625, written as a sum so
            // the literal stays within what clippy accepts; both parts and the sum are exact).
            4089123483709.0 + 0.15625,
            0.3,
        ];
        for v in values {
            assert_eq!(text(v), format!("{v}"), "bits {:#x}", v.to_bits());
        }
    }

    #[test]
    fn significant_digits_ignore_sign_point_exponent_and_outer_zeros() {
        use super::significant_digits;
        for (text, n) in [("-0.00120e-5", 2), ("0.0", 0), ("100", 1), ("1.0203e300", 5), ("7", 1), ("0.5", 1)] {
            assert_eq!(significant_digits(text.as_bytes()), n, "{text}");
        }
    }

    #[test]
    fn matches_display_on_random_values() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        for _ in 0..200_000 {
            let v = match rng.random_range(0..3) {
                0 => f64::from_bits(rng.random()),
                1 => rng.random_range(-1.0..1.0),
                _ => rng.random_range(0..10_000) as f64 / 8.0,
            };
            assert_eq!(text(v), format!("{v}"), "bits {:#x}", v.to_bits());
        }
    }
}
