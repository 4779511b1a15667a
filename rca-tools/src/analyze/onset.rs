//! When did the problem begin? An alert fires some time after a fault, so the detection time
//! alone does not say where normal behaviour ended. [`OnsetDetector`] finds the moment most
//! of the changing series of all modalities changed at: every series (a KPI of a component;
//! a component's request count, error count and latency per time bin; a component's log
//! volume and error-level volume per bin) gets its mean-shift profile (the t-like strength of
//! every split, [`stats::change_profile`]), kept only at splits whose change lasts to the end
//! (a bump that ended is not the onset); series whose strongest split is significant vote with
//! their profile scaled to their own maximum, each modality with one voice (the mean of its
//! voting series); the onset is the time with the most vote.
//!
//! Nothing is fitted to a system: a series counts by its own variability, event series are
//! binned over the span their modality covers (a modality with no data before some time is
//! missing there, not quiet), and the bin width follows from that span.

use std::collections::BTreeMap;

use rca_core::source::{Level, LogRecord, MetricSample, Span};
use rca_core::{TimeRange, Timestamp};
use serde::{Deserialize, Serialize};

use super::stats;

/// Finds the onset of an incident across metrics, spans and logs.
#[derive(Debug, Clone, PartialEq)]
pub struct OnsetDetector {
    /// The width of the time bins an event modality (spans, logs) is counted in, in
    /// milliseconds: a width in time, so the onset's resolution does not depend on how long
    /// a window the host hands over (a fixed count of bins put the onset about one and a
    /// half bins early: a minute on a 30-minute window, five on two hours).
    pub bin_millis: i64,
    /// At most this many bins: a longer span gets wider bins.
    pub max_bins: usize,
    /// Whether volumes vote (a component's spans and log lines per bin). Without them only
    /// behaviour votes: the share of a component's spans that fail and of its lines that are
    /// warnings or errors, and its spans' mean log-duration. Volumes move with the workload
    /// and its mix, which change without any fault (and change at a splice of two stretches
    /// of normal traffic); shares and durations per request do not.
    pub volumes: bool,
    /// The strength (t-like statistic of the best split) a series needs to vote.
    pub min_strength: f64,
    /// Values a series needs before its first candidate split (what "normal" is estimated
    /// from).
    pub min_before: usize,
    /// Where on the main peak of the vote the onset is placed: the earliest time from which
    /// the vote stays at or above this share of its peak up to the peak (1.0: the peak
    /// itself). The vote rises as series start to change and peaks where most have, which is
    /// later than where the problem began.
    pub leading_edge: f64,
}

impl Default for OnsetDetector {
    fn default() -> Self {
        OnsetDetector {
            bin_millis: 10_000,
            max_bins: 720,
            volumes: VOLUMES,
            min_strength: 4.0,
            min_before: 3,
            leading_edge: 0.5,
        }
    }
}

/// The estimated onset.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct OnsetEstimate {
    /// When the problem began (the first instant of the first changed bin or sample).
    pub at: Timestamp,
    /// How many series voted (their strongest split was significant).
    pub voting: usize,
    /// How many series were examined.
    pub series: usize,
    /// The vote at `at` as a share of the most it could be (1.0: every voting series of every
    /// modality changes most strongly exactly there). Each modality has one voice, the mean of
    /// its voting series' profiles.
    pub agreement: f64,
}

/// The default of [`OnsetDetector::volumes`].
const VOLUMES: bool = false;

/// A gap between two records of a modality this many times its mean gap is a break in its
/// coverage (the collector was off, or the data set keeps only some minutes): only the stretch
/// after the last break is binned.
const BREAK_GAPS: f64 = 100.0;

/// One series: sample times and values, time ordered.
struct Series {
    /// Which modality it comes from (each modality has one voice).
    modality: u8,
    times: Vec<Timestamp>,
    values: Vec<f64>,
}

/// The modality tags of [`Series::modality`].
const METRICS: u8 = 0;
const SPANS: u8 = 1;
const LOGS: u8 = 2;

/// Keeps the strength of a split only when the change lasts: the last half of the values
/// after it must lie on the same side of the mean before it, at least half as far as the
/// mean after it does. A bump that ended before the alert is not where the problem began.
fn persistent(profile: &mut [f64], values: &[f64]) {
    let n = values.len();
    let mut prefix = vec![0.0; n + 1];
    for (i, x) in values.iter().enumerate() {
        prefix[i + 1] = prefix[i] + x;
    }
    let mean = |a: usize, b: usize| (prefix[b] - prefix[a]) / (b - a) as f64;
    for (k, p) in profile.iter_mut().enumerate() {
        if *p <= 0.0 || k == 0 || k >= n {
            continue;
        }
        let before = mean(0, k);
        let shift = mean(k, n) - before;
        let tail = (n - k).div_ceil(2);
        let late = mean(n - tail, n) - before;
        if late * shift <= 0.0 || late.abs() < 0.5 * shift.abs() {
            *p = 0.0;
        }
    }
}

impl OnsetDetector {
    /// The onset within `window` (only records inside it are read), or `None` when no series
    /// changes significantly.
    pub fn detect(
        &self,
        window: TimeRange,
        metrics: &[MetricSample],
        spans: &[Span],
        logs: &[LogRecord],
    ) -> Option<OnsetEstimate> {
        let mut all = metric_series(window, metrics);
        all.extend(self.span_series(window, spans));
        all.extend(self.log_series(window, logs));
        let mut profiles: Vec<(u8, &[Timestamp], Vec<f64>)> = Vec::new();
        for s in &all {
            let floor = stats::resolution(&s.values) / 12f64.sqrt();
            let mut profile = stats::change_profile(&s.values, self.min_before.max(1), 1, floor);
            persistent(&mut profile, &s.values);
            let peak = profile.iter().cloned().fold(0.0, f64::max);
            if peak >= self.min_strength && peak.is_finite() {
                let scaled = profile.iter().map(|p| p / peak).collect();
                profiles.push((s.modality, &s.times, scaled));
            }
        }
        if profiles.is_empty() {
            return None;
        }
        // Each modality has one voice: its voting series' mean profile.
        let mut voters = [0usize; 3];
        for (m, _, _) in &profiles {
            voters[usize::from(*m)] += 1;
        }
        // Candidate onsets: every time a split can fall at.
        let mut candidates: Vec<Timestamp> = profiles
            .iter()
            .flat_map(|(_, times, _)| times.iter().copied())
            .collect();
        candidates.sort();
        candidates.dedup();
        let mut votes: Vec<(Timestamp, f64)> = Vec::with_capacity(candidates.len());
        for t in candidates {
            let vote: f64 = profiles
                .iter()
                .map(|(m, times, profile)| {
                    // The split whose first value after the change is the first at or after `t`.
                    let k = times.partition_point(|x| *x < t);
                    profile.get(k).copied().unwrap_or(0.0) / voters[usize::from(*m)] as f64
                })
                .sum();
            votes.push((t, vote));
        }
        let mut peak = 0;
        for (i, (_, v)) in votes.iter().enumerate() {
            if *v > votes[peak].1 + 1e-12 {
                peak = i;
            }
        }
        let floor = votes.get(peak)?.1 * self.leading_edge.clamp(0.0, 1.0);
        let mut start = peak;
        while start > 0 && votes[start - 1].1 >= floor {
            start -= 1;
        }
        let (at, vote) = votes[start];
        let modalities = voters.iter().filter(|v| **v > 0).count().max(1);
        Some(OnsetEstimate {
            at,
            voting: profiles.len(),
            series: all.len(),
            agreement: vote / modalities as f64,
        })
    }

    /// The bins of an event modality: the last stretch of `window` it covers without a
    /// break (a gap far longer than its mean gap between records), cut into bins of
    /// `bin_millis` (wider when that would make more than `max_bins`; at least two bins).
    fn bins(&self, window: TimeRange, times: impl Iterator<Item = Timestamp>) -> Option<Bins> {
        let mut times: Vec<i64> = times
            .filter(|t| window.contains(*t))
            .map(|t| t.millis())
            .collect();
        times.sort_unstable();
        // Distinct times: more records at the same instants (more traffic) are the same
        // coverage, so they must not make an ordinary gap look like a break.
        times.dedup();
        let (&first, &last) = (times.first()?, times.last()?);
        // The mean gap (records arrive in bursts, so the median gap can be zero).
        let typical = ((last - first) as f64 / (times.len().max(2) - 1) as f64).max(1.0);
        let lo = times
            .windows(2)
            .rev()
            .find(|w| (w[1] - w[0]) as f64 > BREAK_GAPS * typical)
            .map_or(first, |w| w[1]);
        let span = last - lo + 1;
        let ceil = |a: i64, b: i64| (a + b - 1) / b;
        let max_bins = self.max_bins.max(2) as i64;
        let width = self
            .bin_millis
            .max(1)
            .max(ceil(span, max_bins))
            .min((span / 2).max(1));
        let n = usize::try_from(ceil(span, width)).unwrap_or(2).max(2);
        Some(Bins {
            start: Timestamp(lo),
            width,
            count: n,
        })
    }

    fn span_series(&self, window: TimeRange, spans: &[Span]) -> Vec<Series> {
        let Some(bins) = self.bins(window, spans.iter().map(|s| s.start)) else {
            return Vec::new();
        };
        // Per component and bin: calls, errors, summed log-duration.
        let mut per: BTreeMap<&str, Vec<(f64, f64, f64)>> = BTreeMap::new();
        let mut covered = vec![false; bins.count];
        for s in spans.iter().filter(|s| window.contains(s.start)) {
            let Some(b) = bins.index(s.start) else {
                continue;
            };
            covered[b] = true;
            let row = per
                .entry(s.component.as_str())
                .or_insert_with(|| vec![(0.0, 0.0, 0.0); bins.count]);
            row[b].0 += 1.0;
            row[b].1 += f64::from(u8::from(s.error));
            row[b].2 += (s.duration_us as f64 + 1.0).ln();
        }
        let mut out = Vec::new();
        for row in per.values() {
            let at = |b: usize, v: f64| covered[b].then_some(v);
            if self.volumes {
                out.push(bins.series(SPANS, row.iter().enumerate().map(|(b, r)| at(b, r.0))));
            }
            out.push(bins.series(SPANS, row.iter().map(|r| (r.0 > 0.0).then(|| r.1 / r.0))));
            out.push(bins.series(SPANS, row.iter().map(|r| (r.0 > 0.0).then(|| r.2 / r.0))));
        }
        out
    }

    fn log_series(&self, window: TimeRange, logs: &[LogRecord]) -> Vec<Series> {
        let Some(bins) = self.bins(window, logs.iter().map(|r| r.timestamp)) else {
            return Vec::new();
        };
        let mut per: BTreeMap<&str, Vec<(f64, f64)>> = BTreeMap::new();
        let mut covered = vec![false; bins.count];
        for r in logs.iter().filter(|r| window.contains(r.timestamp)) {
            let Some(b) = bins.index(r.timestamp) else {
                continue;
            };
            covered[b] = true;
            let row = per
                .entry(r.component.as_str())
                .or_insert_with(|| vec![(0.0, 0.0); bins.count]);
            row[b].0 += 1.0;
            if r.level.is_some_and(|l| l >= Level::Warning) {
                row[b].1 += 1.0;
            }
        }
        let mut out = Vec::new();
        for row in per.values() {
            let at = |b: usize, v: f64| covered[b].then_some(v);
            if self.volumes {
                out.push(bins.series(LOGS, row.iter().enumerate().map(|(b, r)| at(b, r.0))));
            }
            out.push(bins.series(LOGS, row.iter().map(|r| (r.0 > 0.0).then(|| r.1 / r.0))));
        }
        out
    }
}

/// Equal time bins over the span one modality covers.
struct Bins {
    start: Timestamp,
    width: i64,
    count: usize,
}

impl Bins {
    /// The bin of `t`, or `None` before the first bin.
    fn index(&self, t: Timestamp) -> Option<usize> {
        let offset = t.millis() - self.start.millis();
        (offset >= 0).then(|| ((offset / self.width) as usize).min(self.count - 1))
    }

    /// The series of one row; bins without a value (`None`) are left out.
    fn series(&self, modality: u8, values: impl Iterator<Item = Option<f64>>) -> Series {
        let mut times = Vec::new();
        let mut vs = Vec::new();
        for (i, v) in values.enumerate() {
            if let Some(v) = v {
                times.push(self.start.offset_millis(i as i64 * self.width));
                vs.push(v);
            }
        }
        Series {
            modality,
            times,
            values: vs,
        }
    }
}

/// One series per component and KPI, from the samples inside `window`.
fn metric_series(window: TimeRange, metrics: &[MetricSample]) -> Vec<Series> {
    let mut per: BTreeMap<(&str, &str), Vec<(Timestamp, f64)>> = BTreeMap::new();
    for m in metrics
        .iter()
        .filter(|m| window.contains(m.timestamp) && m.value.is_finite())
    {
        per.entry((m.component.as_str(), m.metric.as_str()))
            .or_default()
            .push((m.timestamp, m.value));
    }
    per.into_values()
        .map(|mut points| {
            points.sort_by_key(|p| p.0);
            Series {
                modality: METRICS,
                times: points.iter().map(|p| p.0).collect(),
                values: points.iter().map(|p| p.1).collect(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: i64 = 60_000;

    fn sample(minute: i64, component: &str, value: f64) -> MetricSample {
        MetricSample {
            timestamp: Timestamp(minute * MIN),
            component: component.into(),
            metric: "cpu".into(),
            value,
            labels: BTreeMap::new(),
        }
    }

    #[test]
    fn finds_the_minute_most_series_change_at() {
        let mut metrics = Vec::new();
        for minute in 0..30 {
            let wiggle = ((minute * 7) % 5) as f64;
            // `a` changes at minute 20, `b` follows at 22, `c` never changes.
            metrics.push(sample(
                minute,
                "a",
                if minute >= 20 { 90.0 } else { 20.0 + wiggle },
            ));
            metrics.push(sample(
                minute,
                "b",
                if minute >= 22 { 70.0 } else { 30.0 + wiggle },
            ));
            metrics.push(sample(minute, "c", 10.0 + wiggle));
            metrics.push(sample(
                minute,
                "d",
                if minute >= 20 { 5.0 } else { 40.0 + wiggle },
            ));
        }
        let window = TimeRange::new(Timestamp(0), Timestamp(30 * MIN));
        let onset = OnsetDetector::default()
            .detect(window, &metrics, &[], &[])
            .unwrap();
        assert_eq!(onset.at, Timestamp(20 * MIN));
        assert_eq!(onset.series, 4);
        assert_eq!(onset.voting, 3);
        // Outside the window nothing is read: a window ending before the change finds none.
        let before = TimeRange::new(Timestamp(0), Timestamp(19 * MIN));
        assert!(
            OnsetDetector::default()
                .detect(before, &metrics, &[], &[])
                .is_none()
        );
    }

    #[test]
    fn spans_locate_the_onset_finer_than_the_metric_samples() {
        let mut spans = Vec::new();
        // Two minutes of calls every second; from second 75 on, `db` answers slowly.
        for s in 0..120i64 {
            for (k, c) in ["web", "db"].iter().enumerate() {
                let slow = *c == "db" && s >= 75;
                spans.push(Span {
                    trace_id: format!("t{s}").into(),
                    span_id: format!("s{s}-{k}").into(),
                    parent_id: None,
                    component: (*c).into(),
                    operation: "call".into(),
                    start: Timestamp(s * 1000),
                    duration_us: if slow {
                        900_000
                    } else {
                        20_000 + (s % 7) as u64 * 500
                    },
                    error: false,
                    attributes: Default::default(),
                });
            }
        }
        let window = TimeRange::new(Timestamp(0), Timestamp(120_000));
        let onset = OnsetDetector::default()
            .detect(window, &[], &spans, &[])
            .unwrap();
        // Bins are 10 s wide: the onset lands in the bin holding second 75.
        assert!((70_000..=75_000).contains(&onset.at.millis()), "{onset:?}");
    }

    /// Calls every second for `minutes`; `db` slows down 60 s before the end.
    fn slowing_calls(minutes: i64) -> Vec<Span> {
        let end = minutes * 60;
        (0..end)
            .flat_map(|s| {
                ["web", "db"]
                    .into_iter()
                    .enumerate()
                    .map(move |(k, c)| Span {
                        trace_id: format!("t{s}").into(),
                        span_id: format!("s{s}-{k}").into(),
                        parent_id: None,
                        component: c.into(),
                        operation: "call".into(),
                        start: Timestamp(s * 1000),
                        duration_us: if c == "db" && s >= end - 60 {
                            900_000
                        } else {
                            20_000 + (s % 7) as u64 * 500
                        },
                        error: false,
                        attributes: Default::default(),
                    })
            })
            .collect()
    }

    #[test]
    fn the_onset_error_does_not_grow_with_the_window() {
        for minutes in [30, 120] {
            let spans = slowing_calls(minutes);
            let end = minutes * 60_000;
            let onset = OnsetDetector::default()
                .detect(
                    TimeRange::new(Timestamp(0), Timestamp(end)),
                    &[],
                    &spans,
                    &[],
                )
                .unwrap();
            let error = (end - 60_000 - onset.at.millis()).abs();
            assert!(error <= 10_000, "{minutes} min: {onset:?}");
        }
    }

    #[test]
    fn replicated_traffic_has_the_same_onset() {
        // Thirty minutes of calls with a short lull early on; the same calls copied
        // (more traffic at the same instants) must not turn the lull into a break.
        let base: Vec<Span> = slowing_calls(30)
            .into_iter()
            .filter(|s| !(300_000..306_000).contains(&s.start.millis()))
            .collect();
        let window = TimeRange::new(Timestamp(0), Timestamp(30 * MIN));
        let onset = |copies: usize| {
            let spans: Vec<Span> = (0..copies)
                .flat_map(|c| {
                    base.iter().map(move |s| Span {
                        trace_id: format!("{}-{c}", s.trace_id).into(),
                        span_id: format!("{}-{c}", s.span_id).into(),
                        ..s.clone()
                    })
                })
                .collect();
            OnsetDetector::default()
                .detect(window, &[], &spans, &[])
                .unwrap()
                .at
        };
        let one = onset(1);
        assert_eq!(onset(50), one);
        assert!((one.millis() - (29 * MIN)).abs() <= 10_000, "{one:?}");
    }

    #[test]
    fn only_the_last_stretch_of_an_event_modality_is_binned() {
        // A quiet minute long ago, a break, then two minutes in which errors start at 90 s.
        let mut logs = Vec::new();
        let line = |s: i64, level: Level| LogRecord {
            timestamp: Timestamp(s * 1000),
            component: "web".into(),
            level: Some(level),
            message: "x".into(),
            attributes: Default::default(),
        };
        for s in 0..60 {
            logs.push(line(s, Level::Info));
        }
        for s in 1000..1120 {
            logs.push(line(s, if s >= 1090 { Level::Error } else { Level::Info }));
        }
        let window = TimeRange::new(Timestamp(0), Timestamp(1_120_000));
        let onset = OnsetDetector::default()
            .detect(window, &[], &[], &logs)
            .unwrap();
        // The leading edge of the vote lies a few 4 s bins before the first error.
        assert!(
            (1_070_000..=1_090_000).contains(&onset.at.millis()),
            "{onset:?}"
        );
        let peak = OnsetDetector {
            leading_edge: 1.0,
            ..OnsetDetector::default()
        }
        .detect(window, &[], &[], &logs)
        .unwrap();
        assert!(
            (1_086_000..=1_090_000).contains(&peak.at.millis()),
            "{peak:?}"
        );
    }

    #[test]
    fn a_modality_missing_early_is_not_a_change() {
        // Logs exist only from minute 10; their volume is steady: no onset at minute 10.
        let logs: Vec<LogRecord> = (600..1200)
            .map(|s| LogRecord {
                timestamp: Timestamp(s * 1000),
                component: "web".into(),
                level: Some(Level::Info),
                message: "served".into(),
                attributes: Default::default(),
            })
            .collect();
        let window = TimeRange::new(Timestamp(0), Timestamp(20 * MIN));
        assert!(
            OnsetDetector::default()
                .detect(window, &[], &[], &logs)
                .is_none()
        );
    }
}
