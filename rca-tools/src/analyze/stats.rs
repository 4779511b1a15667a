//! Robust statistics used by the analyzers: median, MAD, robust z-scores and a mean-shift
//! change point (effect sizes and significance tests: [`super::effect`]).

/// The median of the values (0 for none). NaNs are ignored.
pub fn median(values: &[f64]) -> f64 {
    quantile(values, 0.5)
}

/// The `q`-quantile (0..=1, linear interpolation) of the values (0 for none). NaNs are ignored.
pub fn quantile(values: &[f64], q: f64) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let pos = q.clamp(0.0, 1.0) * (v.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    let frac = pos - lo as f64;
    v[lo] + (v[hi] - v[lo]) * frac
}

/// The median absolute deviation from the median.
pub fn mad(values: &[f64]) -> f64 {
    let m = median(values);
    let dev: Vec<f64> = values.iter().map(|x| (x - m).abs()).collect();
    median(&dev)
}

/// The population standard deviation (0 for fewer than two values).
pub fn std_dev(values: &[f64]) -> f64 {
    if values.len() < 2 {
        return 0.0;
    }
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    (values.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / values.len() as f64).sqrt()
}

/// A baseline summarised for robust z-scores.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RobustBaseline {
    /// The baseline median.
    pub median: f64,
    /// The spread used as the unit: the largest of 1.4826 x MAD, half the standard deviation,
    /// `relative_floor` x |median| and `absolute_floor`, so a flat baseline does not make
    /// every small wiggle infinitely surprising.
    pub scale: f64,
}

impl RobustBaseline {
    /// Summarises baseline values with the given floors.
    pub fn new(values: &[f64], relative_floor: f64, absolute_floor: f64) -> Self {
        let median = median(values);
        let scale = (1.4826 * mad(values))
            .max(0.5 * std_dev(values))
            .max(relative_floor * median.abs())
            .max(absolute_floor)
            .max(f64::MIN_POSITIVE);
        RobustBaseline { median, scale }
    }

    /// How many units `x` lies above (positive) or below (negative) the baseline median.
    pub fn z(&self, x: f64) -> f64 {
        (x - self.median) / self.scale
    }
}

/// A change point in a series: the split that best separates two means.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChangePoint {
    /// Index of the first value after the change.
    pub index: usize,
    /// Mean after minus mean before.
    pub shift: f64,
    /// The shift in units of the pooled standard deviation, scaled by the segment sizes
    /// (a t-like statistic).
    pub strength: f64,
}

/// Finds the single mean-shift change point of a series (at least `min_segment` values on each
/// side), or `None` for a series too short or constant.
pub fn change_point(series: &[f64], min_segment: usize) -> Option<ChangePoint> {
    let min_segment = min_segment.max(1);
    let profile = change_profile(series, min_segment, min_segment, 0.0);
    let (index, strength) = profile
        .iter()
        .copied()
        .enumerate()
        .filter(|(_, s)| *s > 0.0)
        .fold(None::<(usize, f64)>, |best, (k, s)| match best {
            Some((_, b)) if b >= s => best,
            _ => Some((k, s)),
        })?;
    let (left, right) = series.split_at(index);
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let shift = mean(right) - mean(left);
    (strength.is_finite() && shift != 0.0).then_some(ChangePoint {
        index,
        shift,
        strength,
    })
}

/// The mean-shift strength of every split of a series: entry `k` is the t-like statistic of
/// the split with values `..k` before and `k..` after (0 where fewer than `min_before` values
/// precede or `min_after` follow). The standard deviation is the pooled one within the two
/// segments, at least `floor`.
pub fn change_profile(series: &[f64], min_before: usize, min_after: usize, floor: f64) -> Vec<f64> {
    let n = series.len();
    let mut out = vec![0.0; n];
    let (min_before, min_after) = (min_before.max(1), min_after.max(1));
    if n < min_before + min_after {
        return out;
    }
    let mut prefix = vec![0.0; n + 1];
    let mut prefix_sq = vec![0.0; n + 1];
    for (i, x) in series.iter().enumerate() {
        prefix[i + 1] = prefix[i] + x;
        prefix_sq[i + 1] = prefix_sq[i] + x * x;
    }
    for (k, slot) in out
        .iter_mut()
        .enumerate()
        .take(n - min_after + 1)
        .skip(min_before)
    {
        let (nl, nr) = (k as f64, (n - k) as f64);
        let (sl, sr) = (prefix[k], prefix[n] - prefix[k]);
        let (ql, qr) = (prefix_sq[k], prefix_sq[n] - prefix_sq[k]);
        let (ml, mr) = (sl / nl, sr / nr);
        let ssq = (ql - nl * ml * ml).max(0.0) + (qr - nr * mr * mr).max(0.0);
        let sd = (ssq / n as f64)
            .sqrt()
            .max(floor)
            .max(1e-9 * (ml.abs() + mr.abs()).max(1e-12));
        let strength = (mr - ml).abs() / sd * (nl * nr / n as f64).sqrt();
        *slot = if strength.is_finite() { strength } else { 0.0 };
    }
    out
}

/// The resolution of a series: the smallest positive gap between two of its distinct values
/// (0 for a constant series). Quantisation to steps `q` adds noise of standard deviation
/// `q / sqrt(12)`, the least variability a series of such values can be trusted to have.
pub fn resolution(series: &[f64]) -> f64 {
    let mut v: Vec<f64> = series.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    let gap = v
        .windows(2)
        .map(|w| w[1] - w[0])
        .filter(|d| *d > 0.0)
        .fold(f64::INFINITY, f64::min);
    if gap.is_finite() { gap } else { 0.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_quantiles() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[]), 0.0);
        assert_eq!(quantile(&[1.0, 2.0, 3.0, 4.0], 0.5), 2.5);
        assert_eq!(mad(&[1.0, 1.0, 2.0, 2.0, 4.0]), 1.0);
    }

    #[test]
    fn robust_z_has_a_floor() {
        let flat = RobustBaseline::new(&[5.0; 10], 0.05, 0.0);
        assert!((flat.scale - 0.25).abs() < 1e-12);
        assert!((flat.z(10.0) - 20.0).abs() < 1e-9);
        let noisy = RobustBaseline::new(&[1.0, 9.0, 1.0, 9.0], 0.0, 0.0);
        assert!(noisy.z(9.0) < 2.0);
    }

    #[test]
    fn finds_a_mean_shift() {
        let mut s = vec![1.0, 1.1, 0.9, 1.0, 1.05, 0.95];
        s.extend([5.0, 5.1, 4.9]);
        let cp = change_point(&s, 2).unwrap();
        assert_eq!(cp.index, 6);
        assert!(cp.shift > 3.0 && cp.strength > 10.0);
        assert!(change_point(&[1.0; 8], 2).is_none());
        assert!(change_point(&[1.0], 1).is_none());
        // The profile: strongest at the split, zero where a segment would be too short.
        let p = change_profile(&s, 3, 1, 0.0);
        assert_eq!(p.len(), s.len());
        assert_eq!(&p[..3], &[0.0; 3]);
        assert!(p[6] > p[5] && p[6] > p[7] && p[8] > 0.0);
        // A floor tames a step in an otherwise constant series.
        let step = [0.0, 0.0, 0.0, 0.0, 0.0, 1.0];
        assert!(change_profile(&step, 3, 1, 0.0)[5] > 1e6);
        let floored = change_profile(&step, 3, 1, resolution(&step) / 12f64.sqrt())[5];
        assert!(floored > 3.0 && floored < 3.5, "{floored}");
        assert_eq!(resolution(&[2.0, 2.0]), 0.0);
        assert_eq!(resolution(&[1.0, 4.0, 2.0]), 1.0);
    }
}
