//! The alert of the full job: what a monitoring system's SLO rule at the entry point would
//! say, computed from the spans alone (never from a fault list).

use std::collections::BTreeMap;

use rca_core::Timestamp;
use rca_core::source::Span;
use serde::Serialize;

use crate::ALERT_LOOK_BACK_MILLIS;

/// The alert of the full job: where it fired and what it says.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EntryAlert {
    /// The entry point: the component the most traces start at.
    pub entry_point: String,
    /// The alert text: the entry point and its symptom.
    pub summary: String,
}

/// An error-rate alert needs the rate to rise by this much (absolute) over the look-back.
pub const ERROR_RATE_RISE: f64 = 0.02;
/// A latency alert needs the median duration to grow by this factor over the look-back.
pub const LATENCY_FACTOR: f64 = 1.2;

fn median(mut v: Vec<u64>) -> Option<u64> {
    v.sort_unstable();
    v.get(v.len() / 2).copied()
}

/// The alert a monitoring system's entry-point SLO rule would raise at `detected_at`: the
/// entry point is the component where the most traces start (spans without a parent in the
/// data); over the alert's look-back ([`ALERT_LOOK_BACK_MILLIS`]) against the rest of the
/// window, its error rate rose by [`ERROR_RATE_RISE`] or, else, its median duration by
/// [`LATENCY_FACTOR`]; when neither did, the alert says the SLO burns without naming a
/// symptom. `None` without spans. It reads only telemetry, never the fault list.
pub fn entry_alert(spans: &[Span], detected_at: Timestamp) -> Option<EntryAlert> {
    let ids: std::collections::BTreeSet<&str> = spans.iter().map(|s| s.span_id.as_str()).collect();
    let is_root = |s: &&Span| {
        s.parent_id
            .as_deref()
            .is_none_or(|p| p.is_empty() || !ids.contains(p))
    };
    let mut starts: BTreeMap<&str, usize> = BTreeMap::new();
    for s in spans.iter().filter(is_root) {
        *starts.entry(s.component.as_str()).or_default() += 1;
    }
    let entry = starts
        .iter()
        .max_by_key(|(c, n)| (**n, std::cmp::Reverse(**c)))?
        .0
        .to_string();
    let since = detected_at.offset_millis(-ALERT_LOOK_BACK_MILLIS);
    let (recent, before): (Vec<&Span>, Vec<&Span>) = spans
        .iter()
        .filter(is_root)
        .filter(|s| s.component == entry && s.start <= detected_at)
        .partition(|s| s.start >= since);
    let rate = |v: &[&Span]| v.iter().filter(|s| s.error).count() as f64 / v.len().max(1) as f64;
    let p50 = |v: &[&Span]| median(v.iter().map(|s| s.duration_us).collect());
    let symptom = if !recent.is_empty() && rate(&recent) >= rate(&before) + ERROR_RATE_RISE {
        format!(
            "error rate up from {:.1}% to {:.1}%",
            rate(&before) * 100.0,
            rate(&recent) * 100.0
        )
    } else {
        match (p50(&before), p50(&recent)) {
            (Some(b), Some(r)) if b > 0 && r as f64 >= b as f64 * LATENCY_FACTOR => format!(
                "median latency up from {:.0} ms to {:.0} ms",
                b as f64 / 1000.0,
                r as f64 / 1000.0
            ),
            _ => "SLO burn rate high".to_string(),
        }
    };
    Some(EntryAlert {
        summary: format!("SLO alert at the entry point {entry}: {symptom}"),
        entry_point: entry,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(
        id: &str,
        parent: Option<&str>,
        component: &str,
        at: i64,
        ms: u64,
        error: bool,
    ) -> Span {
        Span {
            trace_id: id.into(),
            span_id: id.into(),
            parent_id: parent.map(str::to_string).map(Into::into),
            component: component.into(),
            operation: "op".into(),
            start: Timestamp(at),
            duration_us: ms * 1000,
            error,
            attributes: Default::default(),
        }
    }

    #[test]
    fn the_alert_fires_at_the_entry_point_with_its_symptom() {
        let now = 20 * 60_000;
        let mut spans = Vec::new();
        for i in 0..40 {
            let at = i * 30_000;
            let recent = at >= now - ALERT_LOOK_BACK_MILLIS;
            let id = format!("g{i}");
            spans.push(span(
                &id,
                None,
                "gateway",
                at,
                if recent { 300 } else { 100 },
                false,
            ));
            spans.push(span(&format!("c{i}"), Some(&id), "orders", at, 50, recent));
        }
        let alert = entry_alert(&spans, Timestamp(now)).unwrap();
        assert_eq!(alert.entry_point, "gateway");
        assert_eq!(
            alert.summary,
            "SLO alert at the entry point gateway: median latency up from 100 ms to 300 ms"
        );
        assert!(
            !alert.summary.contains("orders"),
            "the alert does not name the pod"
        );
        for s in spans.iter_mut().filter(|s| s.component == "gateway") {
            s.error = s.start.0 >= now - ALERT_LOOK_BACK_MILLIS;
        }
        let alert = entry_alert(&spans, Timestamp(now)).unwrap();
        assert!(
            alert.summary.ends_with("error rate up from 0.0% to 100.0%"),
            "{alert:?}"
        );
        assert_eq!(entry_alert(&[], Timestamp(now)), None);
    }
}
