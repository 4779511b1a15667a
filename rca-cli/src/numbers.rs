//! Value parsers for numeric flags: a count of zero, a NaN or a negative weight is refused by
//! name when the command line is read, instead of being clamped or accepted quietly.

use clap::builder::{RangedU64ValueParser, TypedValueParser};

/// A count that must be at least 1 (`--threads`, `--seeds`, `--window`).
pub(crate) fn at_least_one() -> impl TypedValueParser<Value = usize> {
    RangedU64ValueParser::<usize>::new().range(1..)
}

/// A `u64` count that must be at least 1.
pub(crate) fn at_least_one_u64() -> impl TypedValueParser<Value = u64> {
    RangedU64ValueParser::<u64>::new().range(1..)
}

fn finite(text: &str) -> Result<f64, String> {
    let v: f64 = text
        .trim()
        .parse()
        .map_err(|e| format!("{text:?} is not a number: {e}"))?;
    if v.is_finite() {
        Ok(v)
    } else {
        Err(format!("{text:?} is not a finite number"))
    }
}

/// A finite number above zero (a decay constant).
pub(crate) fn positive(text: &str) -> Result<f64, String> {
    let v = finite(text)?;
    if v > 0.0 {
        Ok(v)
    } else {
        Err(format!("{v} is not above zero"))
    }
}

/// A finite number of zero or more (a weight).
pub(crate) fn non_negative(text: &str) -> Result<f64, String> {
    let v = finite(text)?;
    if v >= 0.0 {
        Ok(v)
    } else {
        Err(format!("{v} is negative"))
    }
}

/// A probability, in `[0, 1]`.
pub(crate) fn probability(text: &str) -> Result<f64, String> {
    let v = finite(text)?;
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("{v} is not a probability (0 to 1)"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_what_would_be_clamped_or_meaningless() {
        assert_eq!(positive("0.5"), Ok(0.5));
        for bad in ["NaN", "inf", "-1", "0", "x"] {
            assert!(positive(bad).is_err(), "{bad}");
        }
        assert_eq!(non_negative("0"), Ok(0.0));
        assert!(non_negative("NaN").is_err() && non_negative("-0.1").is_err());
        assert_eq!(probability("1"), Ok(1.0));
        assert!(probability("1.5").is_err() && probability("NaN").is_err());
    }
}
