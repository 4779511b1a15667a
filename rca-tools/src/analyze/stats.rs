//! Robust statistics used by the analyzers: median, MAD, robust z-scores, a two-proportion
//! test and a mean-shift change point.

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

/// Two-proportion z statistic: how surprising `b` of `nb` is given `a` of `na` (positive when
/// the share grew). Add-one smoothing keeps empty counts finite.
pub fn proportion_z(a: f64, na: f64, b: f64, nb: f64) -> f64 {
    let pa = a / (na + 1.0);
    let pb = b / (nb + 1.0);
    let pooled = (a + b + 1.0) / (na + nb + 2.0);
    let var = pooled * (1.0 - pooled) * (1.0 / (na + 1.0) + 1.0 / (nb + 1.0));
    if var <= 0.0 {
        return 0.0;
    }
    (pb - pa) / var.sqrt()
}

/// Two-proportion z that also allows for drift: the baseline comes in two parts (`(hits,
/// trials)` each), and the difference between their shares counts as extra variance, so an
/// event whose share already wandered within the baseline (a data-dependent branch, a
/// changing request mix) needs a larger change to surprise; `drift_weight` scales that extra
/// variance (0: a plain pooled two-proportion z). Positive when the current share
/// `cur_hits / cur_trials` grew.
pub fn drifting_proportion_z(
    parts: [(f64, f64); 2],
    cur_hits: f64,
    cur_trials: f64,
    drift_weight: f64,
) -> f64 {
    let (a, na) = (parts[0].0 + parts[1].0, parts[0].1 + parts[1].1);
    let pa = a / (na + 1.0);
    let pb = cur_hits / (cur_trials + 1.0);
    let pooled = (a + cur_hits + 1.0) / (na + cur_trials + 2.0);
    let binomial = pooled * (1.0 - pooled) * (1.0 / (na + 1.0) + 1.0 / (cur_trials + 1.0));
    let share = |(h, n): (f64, f64)| (n > 0.0).then(|| h / n);
    let drift = match (share(parts[0]), share(parts[1])) {
        (Some(p1), Some(p2)) => drift_weight * (p1 - p2).powi(2) / 2.0,
        _ => 0.0,
    };
    let var = binomial + drift;
    if var <= 0.0 {
        return 0.0;
    }
    (pb - pa) / var.sqrt()
}

/// Poisson surprise of observing `observed` events when `expected` were due (positive for
/// more), with a unit floor on the variance.
pub fn poisson_z(observed: f64, expected: f64) -> f64 {
    (observed - expected) / (expected.max(1.0)).sqrt()
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
    let n = series.len();
    let min_segment = min_segment.max(1);
    if n < 2 * min_segment {
        return None;
    }
    let mut prefix = vec![0.0; n + 1];
    let mut prefix_sq = vec![0.0; n + 1];
    for (i, x) in series.iter().enumerate() {
        prefix[i + 1] = prefix[i] + x;
        prefix_sq[i + 1] = prefix_sq[i] + x * x;
    }
    let mut best: Option<ChangePoint> = None;
    for k in min_segment..=(n - min_segment) {
        let (nl, nr) = (k as f64, (n - k) as f64);
        let (sl, sr) = (prefix[k], prefix[n] - prefix[k]);
        let (ql, qr) = (prefix_sq[k], prefix_sq[n] - prefix_sq[k]);
        let (ml, mr) = (sl / nl, sr / nr);
        let ssq = (ql - nl * ml * ml).max(0.0) + (qr - nr * mr * mr).max(0.0);
        let sd = (ssq / n as f64)
            .sqrt()
            .max(1e-9 * (ml.abs() + mr.abs()).max(1e-12));
        let strength = (mr - ml).abs() / sd * (nl * nr / n as f64).sqrt();
        if best.is_none_or(|b| strength > b.strength) {
            best = Some(ChangePoint {
                index: k,
                shift: mr - ml,
                strength,
            });
        }
    }
    best.filter(|b| b.strength.is_finite() && b.shift != 0.0)
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
    fn proportions_and_counts() {
        assert!(proportion_z(10.0, 100.0, 50.0, 100.0) > 5.0);
        assert!(proportion_z(50.0, 100.0, 10.0, 100.0) < -5.0);
        assert!(proportion_z(10.0, 100.0, 10.0, 100.0).abs() < 0.1);
        assert!(poisson_z(30.0, 5.0) > 10.0);
        let steady = drifting_proportion_z([(50.0, 100.0), (50.0, 100.0)], 10.0, 100.0, 1.0);
        let wandering = drifting_proportion_z([(80.0, 100.0), (20.0, 100.0)], 10.0, 100.0, 1.0);
        assert!(steady < -5.0 && wandering > -2.0, "{steady} {wandering}");
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
    }
}
