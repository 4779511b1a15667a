//! A [`MetricSource`] over the Prometheus HTTP API (`/api/v1/query_range`, `/api/v1/query`,
//! `/api/v1/series`, `/api/v1/labels`).
//!
//! Components are the values of one label (`instance` by default; `pod`, `service` or `job`
//! in many set-ups); metrics are metric names. A cutoff keeps samples at or after the
//! detection time out of every answer.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use rca_core::source::{MetricQuery, MetricSample, MetricSource, RecordStream};
use rca_core::{SourceError, TimeRange, Timestamp};
use serde::Deserialize;

/// How to reach and read a Prometheus server.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct PrometheusConfig {
    /// Base URL, e.g. `http://127.0.0.1:9090`.
    pub url: String,
    /// The label whose values are components.
    #[serde(default = "default_component_label")]
    pub component_label: String,
    /// Resolution of range queries, in seconds.
    #[serde(default = "default_step")]
    pub step_seconds: u64,
    /// Request timeout, in seconds.
    #[serde(default = "default_timeout")]
    pub timeout_seconds: u64,
}

fn default_component_label() -> String {
    "instance".into()
}
fn default_step() -> u64 {
    60
}
fn default_timeout() -> u64 {
    30
}

impl PrometheusConfig {
    /// A config for `url` with the defaults.
    pub fn new(url: impl Into<String>) -> Self {
        PrometheusConfig {
            url: url.into(),
            component_label: default_component_label(),
            step_seconds: default_step(),
            timeout_seconds: default_timeout(),
        }
    }
}

/// A Prometheus server as a metric source.
#[derive(Debug, Clone)]
pub struct PrometheusSource {
    config: PrometheusConfig,
    client: reqwest::Client,
    cutoff: Option<Timestamp>,
}

/// Escapes a label value for a PromQL string literal.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The PromQL selector for a metric query.
pub fn selector(query: &MetricQuery, component_label: &str) -> String {
    let mut matchers = Vec::new();
    match &query.metric {
        Some(m) => matchers.push(format!("__name__=\"{}\"", escape(m))),
        None => matchers.push("__name__=~\".+\"".to_string()),
    }
    if let Some(c) = &query.component {
        matchers.push(format!("{component_label}=\"{}\"", escape(c)));
    }
    format!("{{{}}}", matchers.join(","))
}

#[derive(Deserialize)]
struct ApiResponse<T> {
    status: String,
    data: Option<T>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default, rename = "errorType")]
    error_type: Option<String>,
}

#[derive(Deserialize)]
struct MatrixData {
    #[serde(rename = "resultType")]
    result_type: String,
    result: Vec<MatrixSeries>,
}

#[derive(Deserialize)]
struct MatrixSeries {
    metric: BTreeMap<String, String>,
    #[serde(default)]
    values: Vec<(f64, String)>,
    #[serde(default)]
    value: Option<(f64, String)>,
}

fn seconds(t: Timestamp) -> String {
    format!("{:.3}", t.millis() as f64 / 1000.0)
}

/// Turns a `query_range` (matrix) or `query` (vector) answer into samples, skipping values
/// that are not finite numbers.
fn samples_from(
    body: &str,
    component_label: &str,
    range: Option<&TimeRange>,
) -> Result<Vec<MetricSample>, SourceError> {
    let parsed: ApiResponse<MatrixData> =
        serde_json::from_str(body).map_err(|e| SourceError::Malformed {
            location: "prometheus response".into(),
            message: format!("{e}: {}", body.chars().take(200).collect::<String>()),
        })?;
    if parsed.status != "success" {
        return Err(SourceError::InvalidQuery {
            message: format!(
                "prometheus {}: {}",
                parsed.error_type.unwrap_or_default(),
                parsed.error.unwrap_or_default()
            ),
        });
    }
    let data = parsed.data.ok_or_else(|| SourceError::Malformed {
        location: "prometheus response".into(),
        message: "success without data".into(),
    })?;
    if data.result_type != "matrix" && data.result_type != "vector" {
        return Err(SourceError::Malformed {
            location: "prometheus response".into(),
            message: format!("unexpected result type {}", data.result_type),
        });
    }
    let mut out = Vec::new();
    for series in data.result {
        let mut labels = series.metric;
        let metric = labels.remove("__name__").unwrap_or_default();
        let component = labels.get(component_label).cloned().unwrap_or_default();
        let points = series.values.into_iter().chain(series.value);
        for (ts, text) in points {
            let Ok(value) = text.parse::<f64>() else {
                continue;
            };
            if !value.is_finite() {
                continue;
            }
            let timestamp = Timestamp((ts * 1000.0).round() as i64);
            if range.is_some_and(|r| !r.contains(timestamp)) {
                continue;
            }
            out.push(MetricSample {
                timestamp,
                component: component.clone(),
                metric: metric.clone(),
                value,
                labels: labels.clone(),
            });
        }
    }
    out.sort_by(|a, b| {
        (&a.component, &a.metric, a.timestamp).cmp(&(&b.component, &b.metric, b.timestamp))
    });
    Ok(out)
}

impl PrometheusSource {
    /// A source for this server. Building the HTTP client can fail only on a broken TLS
    /// set-up of the machine.
    pub fn new(config: PrometheusConfig) -> Result<Self, SourceError> {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(config.timeout_seconds.max(1)))
            .build()
            .map_err(|e| SourceError::Failed {
                message: format!("cannot build HTTP client: {e}"),
            })?;
        Ok(PrometheusSource {
            config,
            client,
            cutoff: None,
        })
    }

    /// Keeps samples at or after `cutoff` out of every answer.
    pub fn with_cutoff(mut self, cutoff: Timestamp) -> Self {
        self.cutoff = Some(cutoff);
        self
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.config.url.trim_end_matches('/'))
    }

    async fn get(&self, path: &str, params: &[(&str, String)]) -> Result<String, SourceError> {
        let response = self
            .client
            .get(self.url(path))
            .query(params)
            .send()
            .await
            .map_err(|e| SourceError::Unavailable {
                message: format!("prometheus at {}: {e}", self.config.url),
            })?;
        let status = response.status();
        let body = response
            .text()
            .await
            .map_err(|e| SourceError::Unavailable {
                message: format!("prometheus at {}: {e}", self.config.url),
            })?;
        if status.is_server_error() {
            return Err(SourceError::Unavailable {
                message: format!("prometheus answered {status}: {body}"),
            });
        }
        // 4xx bodies carry the API's own error, which `samples_from` reports.
        Ok(body)
    }

    fn clamp(&self, range: &TimeRange) -> TimeRange {
        match self.cutoff {
            Some(c) => range.clamp_end(c),
            None => *range,
        }
    }

    /// Samples of a raw PromQL expression at one instant (for hosts that want more than the
    /// condensed queries; agents use [`MetricSource::samples`]).
    pub async fn instant(
        &self,
        promql: &str,
        at: Timestamp,
    ) -> Result<Vec<MetricSample>, SourceError> {
        let at = match self.cutoff {
            Some(c) if at >= c => c.offset_millis(-1),
            _ => at,
        };
        let body = self
            .get(
                "/api/v1/query",
                &[("query", promql.to_string()), ("time", seconds(at))],
            )
            .await?;
        samples_from(&body, &self.config.component_label, None)
    }

    /// Label names known to the server.
    pub async fn labels(&self) -> Result<Vec<String>, SourceError> {
        let body = self.get("/api/v1/labels", &[]).await?;
        let parsed: ApiResponse<Vec<String>> =
            serde_json::from_str(&body).map_err(|e| SourceError::Malformed {
                location: "prometheus labels".into(),
                message: e.to_string(),
            })?;
        parsed.data.ok_or_else(|| SourceError::InvalidQuery {
            message: parsed.error.unwrap_or_else(|| "no labels".into()),
        })
    }
}

#[async_trait]
impl MetricSource for PrometheusSource {
    async fn samples(
        &self,
        query: &MetricQuery,
    ) -> Result<RecordStream<MetricSample>, SourceError> {
        let range = self.clamp(&query.range);
        if range.is_empty() {
            return Ok(Box::pin(futures::stream::empty()));
        }
        // The API's range is inclusive at both ends; ours is half-open, so stop 1 ms early.
        let params = [
            ("query", selector(query, &self.config.component_label)),
            ("start", seconds(range.start)),
            ("end", seconds(range.end.offset_millis(-1))),
            ("step", format!("{}s", self.config.step_seconds.max(1))),
        ];
        let body = self.get("/api/v1/query_range", &params).await?;
        let samples = samples_from(&body, &self.config.component_label, Some(&range))?;
        Ok(Box::pin(futures::stream::iter(samples.into_iter().map(Ok))))
    }

    async fn series(&self) -> Result<Vec<(String, String)>, SourceError> {
        let mut params = vec![("match[]", "{__name__=~\".+\"}".to_string())];
        if let Some(c) = self.cutoff {
            params.push(("end", seconds(c.offset_millis(-1))));
        }
        let body = self.get("/api/v1/series", &params).await?;
        let parsed: ApiResponse<Vec<BTreeMap<String, String>>> = serde_json::from_str(&body)
            .map_err(|e| SourceError::Malformed {
                location: "prometheus series".into(),
                message: e.to_string(),
            })?;
        let mut out: Vec<(String, String)> = parsed
            .data
            .unwrap_or_default()
            .into_iter()
            .map(|labels| {
                (
                    labels
                        .get(&self.config.component_label)
                        .cloned()
                        .unwrap_or_default(),
                    labels.get("__name__").cloned().unwrap_or_default(),
                )
            })
            .collect();
        out.sort();
        out.dedup();
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_escape_values() {
        let mut q = MetricQuery::range(TimeRange::new(Timestamp(0), Timestamp(1)));
        assert_eq!(selector(&q, "pod"), r#"{__name__=~".+"}"#);
        q.metric = Some("cpu".into());
        q.component = Some(r#"we"ird\pod"#.into());
        assert_eq!(
            selector(&q, "pod"),
            r#"{__name__="cpu",pod="we\"ird\\pod"}"#
        );
    }

    #[test]
    fn parses_matrix_and_errors() {
        let body = r#"{"status":"success","data":{"resultType":"matrix","result":[
            {"metric":{"__name__":"lat","instance":"a","zone":"z1"},"values":[[10,"0.5"],[70,"NaN"],[130,"bad"],[190,"1.5"]]}]}}"#;
        let s = samples_from(body, "instance", None).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].timestamp, Timestamp(10_000));
        assert_eq!(s[1].value, 1.5);
        assert_eq!(s[0].labels["zone"], "z1");
        let range = TimeRange::new(Timestamp(0), Timestamp(100_000));
        assert_eq!(
            samples_from(body, "instance", Some(&range)).unwrap().len(),
            1
        );
        let err = samples_from(
            r#"{"status":"error","errorType":"bad_data","error":"parse error"}"#,
            "instance",
            None,
        )
        .unwrap_err();
        assert!(err.to_string().contains("parse error"));
        assert!(samples_from("<html>", "instance", None).is_err());
    }
}
