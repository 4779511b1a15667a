//! How much something changed, and whether the records show it beyond chance: the two
//! questions every analyzer answers before it reports a finding, kept apart.
//!
//! A z statistic of a difference grows with the square root of the number of records, so a
//! modality with many records (spans, log lines) would outrank one with few (metric samples)
//! for the same change, and the same incident at ten times the traffic would rank
//! differently. Findings are therefore scored by an **effect size**, which does not grow with
//! the number of records, and a **significance** test decides only whether a change is
//! reported at all:
//!
//! - a share (an error rate, how often one event follows another): Cohen's `h`, the difference
//!   of the arcsine-square-root transformed shares, in units of [`SHARE_UNIT`]; significance
//!   from Fisher's exact test when counts are small, the pooled two-proportion test when they
//!   are not (without smoothing that would invent a change: 340 of 340 against 6 of 6 is no
//!   change);
//! - a distribution (span durations): significance from the Mann-Whitney rank test, or from
//!   Welch's t on the logarithms when that says more (a handful of spans shifted by orders of
//!   magnitude, where ranks alone cannot reach significance), so no fixed least count is
//!   needed.
//!
//! A change seen in few records is trusted less: a share's score is the lower confidence bound
//! of its effect (`|h|` less the reporting level times its standard error, which the arcsine
//! transform makes `sqrt(1/n1 + 1/n2)`), which approaches the effect itself as the records
//! grow; a duration's effect is scaled by its significance until that reaches
//! [`FULL_CONFIDENCE`] times the reporting level ([`confident`]).
//!
//! A share that wanders on its own (a branch that depends on the request's data, a changing
//! request mix) is judged against its own wandering: [`ShareSpread`] cuts the baseline's
//! occurrences, in time order, into [`BASELINE_CHUNKS`] runs of equal count, and the spread of
//! the share across them (on the same arcsine scale as the effect) is the unit the effect is
//! measured in ([`ShareChange::score_against`]), never less than [`SHARE_UNIT`]. The same
//! traffic replicated gives the same runs and so the same spread.

use std::collections::HashMap;

/// The unit of a share's effect size (Cohen's `h`, in radians): a score of 1 is a change of
/// a tenth of a radian (from 0 to 0.25%, or from 50% to 55%); a share that drops from always
/// to never scores `pi / SHARE_UNIT`, about 31.
pub const SHARE_UNIT: f64 = 0.1;

/// How many runs of equal count the baseline's occurrences are cut into to measure how much a
/// share wanders on its own.
pub const BASELINE_CHUNKS: usize = 6;

/// A change's score reaches its full effect size once its significance is this many times
/// the reporting level; below that it is scaled down in proportion.
pub const FULL_CONFIDENCE: f64 = 2.0;

/// How a share moved between a baseline and a current window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ShareChange {
    /// The baseline share.
    pub before: f64,
    /// The current share.
    pub after: f64,
    /// Cohen's `h` (positive when the share grew), in radians: `2 asin(sqrt(after)) -
    /// 2 asin(sqrt(before))`.
    pub effect: f64,
    /// How far the change lies beyond chance, as a one-sided normal quantile (positive when
    /// the share grew, negative when it fell; 0 when the counts cannot tell).
    pub significance: f64,
    /// The standard error of `effect`: `sqrt(1/n_baseline + 1/n_current)` (the arcsine
    /// transform makes it independent of the shares).
    pub standard_error: f64,
}

impl ShareChange {
    /// The change of `cur_hits` of `cur_trials` against `base_hits` of `base_trials`.
    pub fn new(base_hits: f64, base_trials: f64, cur_hits: f64, cur_trials: f64) -> Self {
        let share = |h: f64, n: f64| {
            if n > 0.0 {
                (h / n).clamp(0.0, 1.0)
            } else {
                0.0
            }
        };
        let (before, after) = (share(base_hits, base_trials), share(cur_hits, cur_trials));
        let effect = 2.0 * after.sqrt().asin() - 2.0 * before.sqrt().asin();
        let significance = if base_trials <= 0.0 || cur_trials <= 0.0 || effect == 0.0 {
            0.0
        } else {
            share_significance(
                base_hits.round() as u64,
                base_trials.round() as u64,
                cur_hits.round() as u64,
                cur_trials.round() as u64,
            )
        };
        let standard_error = if base_trials > 0.0 && cur_trials > 0.0 {
            (1.0 / base_trials + 1.0 / cur_trials).sqrt()
        } else {
            f64::INFINITY
        };
        ShareChange {
            before,
            after,
            effect,
            significance,
            standard_error,
        }
    }

    /// The effect in score units ([`SHARE_UNIT`]), signed, as its lower confidence bound at
    /// `level` (see [`score_against`](Self::score_against)).
    pub fn score(&self, level: f64) -> f64 {
        self.score_against(0.0, level)
    }

    /// As [`score`](Self::score), in units of `spread` (the baseline's own wandering of the
    /// share, on the effect's arcsine scale; see [`ShareSpread`]) when that exceeds
    /// [`SHARE_UNIT`].
    ///
    /// The effect counted is its lower confidence bound at `level`: `|h| - level x standard
    /// error`, so a change seen in a handful of records counts for what it surely is, and
    /// the same change in many records for nearly all of it (the bound approaches the effect
    /// as the records grow). Below zero, or when the significance test does not reach
    /// `level`, the score is 0.
    pub fn score_against(&self, spread: f64, level: f64) -> f64 {
        if self.significance * self.effect.signum() < level.max(f64::MIN_POSITIVE) {
            return 0.0;
        }
        let sure = (self.effect.abs() - level.max(0.0) * self.standard_error).max(0.0);
        sure.copysign(self.effect) / spread.max(SHARE_UNIT)
    }
}

/// How much the shares of outcomes wander within a baseline: the occurrences of one thing
/// (an event, a component's log lines), in time order, each with its outcome (what followed
/// it, which template it was); cut into runs of equal count, the standard deviation across
/// runs of each outcome's share, on the arcsine scale (`2 asin(sqrt(p))`).
#[derive(Debug, Clone, Default)]
pub struct ShareSpread {
    spread: HashMap<usize, f64>,
}

impl ShareSpread {
    /// The spreads of the outcomes in `outcomes` (time order), cut into `chunks` runs (fewer
    /// when there are fewer than two occurrences a run; none below two runs).
    pub fn new(outcomes: &[usize], chunks: usize) -> Self {
        let runs = chunks.min(outcomes.len() / 2);
        if runs < 2 {
            return ShareSpread::default();
        }
        let mut counts: Vec<HashMap<usize, usize>> = vec![HashMap::new(); runs];
        let mut sizes = vec![0usize; runs];
        for (i, o) in outcomes.iter().enumerate() {
            let run = i * runs / outcomes.len();
            *counts[run].entry(*o).or_default() += 1;
            sizes[run] += 1;
        }
        let mut kinds: Vec<usize> = counts.iter().flat_map(|c| c.keys().copied()).collect();
        kinds.sort_unstable();
        kinds.dedup();
        let spread = kinds
            .into_iter()
            .map(|k| {
                let xs: Vec<f64> = counts
                    .iter()
                    .zip(&sizes)
                    .map(|(c, n)| {
                        let p = c.get(&k).copied().unwrap_or(0) as f64 / (*n).max(1) as f64;
                        2.0 * p.sqrt().asin()
                    })
                    .collect();
                (
                    k,
                    super::stats::std_dev(&xs) * (runs as f64 / (runs - 1) as f64).sqrt(),
                )
            })
            .collect();
        ShareSpread { spread }
    }

    /// The spread of `outcome`'s share (0 when it never occurred in the baseline's runs or
    /// there were too few occurrences to tell).
    pub fn of(&self, outcome: usize) -> f64 {
        self.spread.get(&outcome).copied().unwrap_or(0.0)
    }
}

/// `effect` (signed) scaled by how sure the records are of it: 0 when `significance` (of the
/// same sign) is below `level`, in full from [`FULL_CONFIDENCE`] times `level`, in between
/// in proportion.
pub fn confident(effect: f64, significance: f64, level: f64) -> f64 {
    if effect == 0.0 || significance * effect.signum() < level.max(f64::MIN_POSITIVE) {
        return 0.0;
    }
    let full = FULL_CONFIDENCE * level.max(f64::MIN_POSITIVE);
    effect * (significance.abs() / full).min(1.0)
}

/// One-sided significance of a change of share, signed as the change: Fisher's exact test
/// while any expected cell count is below 10, the pooled two-proportion z otherwise.
fn share_significance(a: u64, na: u64, b: u64, nb: u64) -> f64 {
    let (a, b) = (a.min(na), b.min(nb));
    let grew = (b as f64) * (na as f64) > (a as f64) * (nb as f64);
    let total = na + nb;
    let hits = a + b;
    let expected_min = [
        hits as f64 * na as f64,
        hits as f64 * nb as f64,
        (total - hits) as f64 * na as f64,
        (total - hits) as f64 * nb as f64,
    ]
    .into_iter()
    .fold(f64::INFINITY, f64::min)
        / total as f64;
    let z = if expected_min < 10.0 {
        // P(current hits at least as far from the pooled expectation, in the direction of
        // the change), under the hypergeometric law of the current window's hits.
        let p = hypergeometric_tail(total, hits, nb, b, grew);
        normal_quantile_upper(p)
    } else {
        let (pa, pb) = (a as f64 / na as f64, b as f64 / nb as f64);
        let pooled = hits as f64 / total as f64;
        let var = pooled * (1.0 - pooled) * (1.0 / na as f64 + 1.0 / nb as f64);
        if var <= 0.0 {
            0.0
        } else {
            ((pb - pa) / var.sqrt()).abs()
        }
    };
    if grew { z } else { -z }
}

/// P(X >= k) (upper) or P(X <= k) (lower) for X hypergeometric: `draws` drawn from
/// `population` holding `successes`.
fn hypergeometric_tail(population: u64, successes: u64, draws: u64, k: u64, upper: bool) -> f64 {
    let lo = draws.saturating_sub(population - successes);
    let hi = successes.min(draws);
    let ln_choose = |n: u64, r: u64| ln_factorial(n) - ln_factorial(r) - ln_factorial(n - r);
    let ln_total = ln_choose(population, draws);
    let term = |x: u64| {
        (ln_choose(successes, x) + ln_choose(population - successes, draws - x) - ln_total).exp()
    };
    let range: Box<dyn Iterator<Item = u64>> = if upper {
        Box::new(k.max(lo)..=hi)
    } else {
        Box::new(lo..=k.min(hi))
    };
    range.map(term).sum::<f64>().clamp(0.0, 1.0)
}

/// `ln(n!)`: from a table up to 256, Stirling's series beyond.
fn ln_factorial(n: u64) -> f64 {
    static TABLE: std::sync::OnceLock<Vec<f64>> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut t = vec![0.0; 256];
        for i in 2..256 {
            t[i] = t[i - 1] + (i as f64).ln();
        }
        t
    });
    if let Some(v) = usize::try_from(n).ok().and_then(|i| table.get(i)) {
        return *v;
    }
    let x = n as f64;
    x * x.ln() - x + 0.5 * (2.0 * std::f64::consts::PI * x).ln() + 1.0 / (12.0 * x)
        - 1.0 / (360.0 * x.powi(3))
}

/// The z whose upper tail holds probability `p` (0 for `p >= 0.5`, capped at 37 for tiny or
/// zero `p`). Acklam's rational approximation, refined by one Halley step.
pub fn normal_quantile_upper(p: f64) -> f64 {
    if p.is_nan() || p >= 0.5 {
        return 0.0;
    }
    if p <= 1e-300 {
        return 37.0;
    }
    // Lower-tail quantile of p, negated.
    let q = p;
    let a = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    let b = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    let c = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    let d = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    let x = if q < 0.02425 {
        let r = (-2.0 * q.ln()).sqrt();
        (((((c[0] * r + c[1]) * r + c[2]) * r + c[3]) * r + c[4]) * r + c[5])
            / ((((d[0] * r + d[1]) * r + d[2]) * r + d[3]) * r + 1.0)
    } else {
        let r = q - 0.5;
        let s = r * r;
        (((((a[0] * s + a[1]) * s + a[2]) * s + a[3]) * s + a[4]) * s + a[5]) * r
            / (((((b[0] * s + b[1]) * s + b[2]) * s + b[3]) * s + b[4]) * s + 1.0)
    };
    (-x).clamp(0.0, 37.0)
}

/// The one-sided Mann-Whitney rank statistic of `current` against `baseline`, as a z
/// (positive when current values tend to be larger), with the tie correction. 0 when either
/// side is empty.
pub fn rank_shift(baseline: &[f64], current: &[f64]) -> f64 {
    let (n1, n2) = (baseline.len(), current.len());
    if n1 == 0 || n2 == 0 {
        return 0.0;
    }
    let mut all: Vec<(f64, bool)> = baseline
        .iter()
        .map(|x| (*x, false))
        .chain(current.iter().map(|x| (*x, true)))
        .filter(|(x, _)| !x.is_nan())
        .collect();
    all.sort_by(|a, b| a.0.total_cmp(&b.0));
    let n = all.len() as f64;
    let mut rank_sum = 0.0;
    let mut ties = 0.0;
    let mut i = 0;
    while i < all.len() {
        let mut j = i;
        while j + 1 < all.len() && all[j + 1].0 == all[i].0 {
            j += 1;
        }
        let rank = (i + j) as f64 / 2.0 + 1.0;
        let t = (j - i + 1) as f64;
        ties += t * t * t - t;
        rank_sum += rank * all[i..=j].iter().filter(|(_, cur)| *cur).count() as f64;
        i = j + 1;
    }
    let (n1, n2) = (n1 as f64, n2 as f64);
    let u = rank_sum - n2 * (n2 + 1.0) / 2.0;
    let mean = n1 * n2 / 2.0;
    let var = n1 * n2 / 12.0 * ((n + 1.0) - ties / (n * (n - 1.0)).max(1.0));
    if var <= 0.0 {
        return 0.0;
    }
    // Continuity correction towards the mean.
    let d = u - mean;
    (d - 0.5 * d.signum()) / var.sqrt()
}

/// How far `current` lies above (positive) or below `baseline` on a logarithmic scale, as a
/// one-sided z: Welch's t of `ln(1 + x)`, turned into a normal quantile by Wallace's
/// approximation for its degrees of freedom. 0 when either side has fewer than two values or
/// neither varies.
pub fn log_shift(baseline: &[f64], current: &[f64]) -> f64 {
    let logs = |v: &[f64]| -> Vec<f64> {
        v.iter()
            .filter(|x| x.is_finite())
            .map(|x| x.max(0.0).ln_1p())
            .collect()
    };
    let (b, c) = (logs(baseline), logs(current));
    if b.len() < 2 || c.len() < 2 {
        return 0.0;
    }
    let moments = |v: &[f64]| {
        let n = v.len() as f64;
        let mean = v.iter().sum::<f64>() / n;
        let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
        (n, mean, var)
    };
    let ((nb, mb, vb), (nc, mc, vc)) = (moments(&b), moments(&c));
    let (sb, sc) = (vb / nb, vc / nc);
    let se2 = sb + sc;
    if se2 <= 0.0 {
        return 0.0;
    }
    let t = (mc - mb) / se2.sqrt();
    let df = se2 * se2 / (sb * sb / (nb - 1.0) + sc * sc / (nc - 1.0)).max(f64::MIN_POSITIVE);
    let z = (1.0 - 1.0 / (4.0 * df)).max(0.0) * (df * (t * t / df).ln_1p()).sqrt();
    z.copysign(t)
}

/// The significance of a shift of durations: the rank test's, or the log-scale t's when that
/// is further from zero in the same direction.
pub fn duration_shift(baseline: &[f64], current: &[f64]) -> f64 {
    let rank = rank_shift(baseline, current);
    let log = log_shift(baseline, current);
    if log.abs() > rank.abs() && (log.signum() == rank.signum() || rank == 0.0) {
        log
    } else {
        rank
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_share_is_no_change_whatever_the_counts() {
        let c = ShareChange::new(340.0, 340.0, 6.0, 6.0);
        assert_eq!(c.effect, 0.0);
        assert_eq!(c.significance, 0.0);
        assert_eq!(c.score(3.0), 0.0);
    }

    #[test]
    fn effect_is_independent_of_counts_and_significance_is_not() {
        let small = ShareChange::new(9.0, 10.0, 1.0, 10.0);
        let large = ShareChange::new(900.0, 1000.0, 100.0, 1000.0);
        assert!((small.effect - large.effect).abs() < 1e-12);
        assert!(small.effect < -1.5);
        assert!(
            small.significance < -2.0 && small.significance > -5.0,
            "{small:?}"
        );
        assert!(large.significance < -20.0, "{large:?}");
        // The score is the effect's lower confidence bound: nearly all of it in many records,
        // much less in few.
        let full = large.effect.abs() / SHARE_UNIT;
        assert!(
            (large.score(3.0).abs() - full).abs() < 0.1 * full,
            "{}",
            large.score(3.0)
        );
        assert!(small.score(3.0).abs() < 0.6 * large.score(3.0).abs());
        // Replication: ten times the records, the score moves by less than a tenth.
        let x10 = ShareChange::new(9000.0, 10000.0, 1000.0, 10000.0);
        assert!((x10.score(3.0) - large.score(3.0)).abs() < 0.1 * large.score(3.0).abs());
        // 340 of 340 against 6 of 6 scores nothing.
        assert_eq!(ShareChange::new(340.0, 340.0, 6.0, 6.0).score(2.33), 0.0);
    }

    #[test]
    fn a_large_change_in_few_records_is_significant_and_a_small_one_is_not() {
        // Fisher's exact test: 0 of 12 errors, then 8 of 8.
        let c = ShareChange::new(0.0, 12.0, 8.0, 8.0);
        assert!(c.significance > 4.0, "{c:?}");
        // 1 of 4 then 2 of 4: nothing to go on.
        assert!(ShareChange::new(1.0, 4.0, 2.0, 4.0).significance < 1.0);
    }

    #[test]
    fn the_normal_quantile_matches_known_values() {
        for (p, z) in [
            (0.5, 0.0),
            (0.158_655_25, 1.0),
            (0.001_349_9, 3.0),
            (2.866_5e-7, 5.0),
        ] {
            assert!((normal_quantile_upper(p) - z).abs() < 1e-3, "{p} {z}");
        }
        assert_eq!(normal_quantile_upper(0.9), 0.0);
        assert_eq!(normal_quantile_upper(0.0), 37.0);
        let exact: f64 = (2..=300u64).map(|i| (i as f64).ln()).sum();
        assert!((ln_factorial(300) - exact).abs() < 1e-6);
    }

    #[test]
    fn ranks_find_a_shift_in_a_handful_of_spans() {
        let base = [10.0, 11.0, 12.0, 10.5];
        let slow = [3000.0, 20_000.0, 5000.0, 8000.0, 4000.0, 9000.0];
        assert!(
            rank_shift(&base, &slow) > 2.3,
            "{}",
            rank_shift(&base, &slow)
        );
        assert!(rank_shift(&slow, &base) < -2.3);
        let same = [10.0, 11.0, 12.0, 10.5, 11.5];
        assert!(rank_shift(&base, &same).abs() < 1.0);
        assert_eq!(rank_shift(&[], &same), 0.0);
        assert_eq!(rank_shift(&[1.0; 5], &[1.0; 5]), 0.0);
    }

    #[test]
    fn a_share_that_wanders_in_its_baseline_is_judged_against_its_wandering() {
        // Outcome 1 follows steadily in half the cases of one baseline and wanders from
        // always to never in another.
        let steady: Vec<usize> = (0..60).map(|i| i % 2).collect();
        let wandering: Vec<usize> = (0..60).map(|i| usize::from((i / 10) % 2 == 0)).collect();
        let (s, w) = (
            ShareSpread::new(&steady, BASELINE_CHUNKS),
            ShareSpread::new(&wandering, BASELINE_CHUNKS),
        );
        assert_eq!(s.of(1), 0.0);
        assert!(w.of(1) > 1.0, "{}", w.of(1));
        let change = ShareChange::new(30.0, 60.0, 40.0, 40.0);
        let (firm, loose) = (
            change.score_against(s.of(1), 3.0),
            change.score_against(w.of(1), 3.0),
        );
        assert!((firm - change.score(3.0)).abs() < 1e-12);
        assert!(loose < firm / 5.0, "{loose} {firm}");
        // Replicated occurrences (each one ten times, in place) wander the same.
        let replicated: Vec<usize> = wandering.iter().flat_map(|o| [*o; 10]).collect();
        let r = ShareSpread::new(&replicated, BASELINE_CHUNKS);
        assert!((r.of(1) - w.of(1)).abs() < 1e-12);
        assert_eq!(ShareSpread::new(&[1, 0, 1], BASELINE_CHUNKS).of(1), 0.0);
    }

    #[test]
    fn orders_of_magnitude_in_three_spans_are_significant() {
        let base = [10_000.0, 11_000.0, 9_500.0];
        let slow = [3e6, 2e7, 7e6, 1.2e7, 4e6, 1.5e7];
        assert!(rank_shift(&base, &slow) < 2.33);
        assert!(log_shift(&base, &slow) > 4.0, "{}", log_shift(&base, &slow));
        assert_eq!(duration_shift(&base, &slow), log_shift(&base, &slow));
        // A small shift in noisy values is not.
        let a = [10.0, 30.0, 12.0, 25.0];
        let b = [14.0, 28.0, 11.0, 33.0];
        assert!(duration_shift(&a, &b).abs() < 1.5);
        assert_eq!(log_shift(&[1.0], &b), 0.0);
    }

    #[test]
    fn confidence_scales_a_barely_significant_change() {
        assert_eq!(confident(10.0, 2.0, 3.0), 0.0);
        assert_eq!(confident(10.0, -9.0, 3.0), 0.0);
        assert!((confident(10.0, 4.5, 3.0) - 7.5).abs() < 1e-12);
        assert_eq!(confident(-10.0, -6.0, 3.0), -10.0);
    }
}
