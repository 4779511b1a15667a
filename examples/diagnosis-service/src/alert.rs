//! The Alertmanager webhook payload (version 4), as documented in the Alertmanager
//! configuration reference (`webhook_config`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The payload version this service reads.
pub const WEBHOOK_VERSION: &str = "4";

/// One webhook notification: a group of alerts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookPayload {
    /// The payload format version (`"4"`).
    pub version: String,
    /// Alertmanager's key for the group.
    #[serde(default)]
    pub group_key: String,
    /// How many alerts were truncated away by `max_alerts`.
    #[serde(default)]
    pub truncated_alerts: u64,
    /// `firing` or `resolved`, for the group.
    pub status: String,
    /// The receiver's name.
    #[serde(default)]
    pub receiver: String,
    /// Labels the group is keyed on.
    #[serde(default)]
    pub group_labels: BTreeMap<String, String>,
    /// Labels every alert of the group shares.
    #[serde(default)]
    pub common_labels: BTreeMap<String, String>,
    /// Annotations every alert of the group shares.
    #[serde(default)]
    pub common_annotations: BTreeMap<String, String>,
    /// Alertmanager's own URL.
    #[serde(default, rename = "externalURL")]
    pub external_url: String,
    /// The alerts.
    pub alerts: Vec<Alert>,
}

/// One alert of a notification.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Alert {
    /// `firing` or `resolved`.
    pub status: String,
    /// Identifying labels (`alertname`, `severity`, the component label, ...).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Descriptive annotations (`summary`, `description`, ...).
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// When the alert started firing (RFC 3339).
    pub starts_at: String,
    /// When it resolved (RFC 3339; `0001-01-01T00:00:00Z` while firing).
    #[serde(default)]
    pub ends_at: String,
    /// The URL of the rule that fired.
    #[serde(default, rename = "generatorURL")]
    pub generator_url: String,
    /// Alertmanager's fingerprint of the label set.
    #[serde(default)]
    pub fingerprint: String,
}

impl Alert {
    /// Whether the alert is firing.
    pub fn is_firing(&self) -> bool {
        self.status == "firing"
    }

    /// The alert's name, or `alert` when it has none.
    pub fn name(&self) -> &str {
        self.labels
            .get("alertname")
            .map(String::as_str)
            .unwrap_or("alert")
    }
}

/// Why a payload was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PayloadError {
    /// Not JSON, or not the shape of a webhook payload.
    #[error("the body is not an Alertmanager webhook payload: {0}")]
    Malformed(String),
    /// A payload version this service does not read.
    #[error(
        "webhook payload version {found:?} is not supported; this service reads version \"{WEBHOOK_VERSION}\""
    )]
    Version {
        /// The version sent.
        found: String,
    },
    /// The payload carries no alerts.
    #[error("the payload carries no alerts")]
    NoAlerts,
}

impl WebhookPayload {
    /// Whether the group has resolved (every alert of it is resolved).
    pub fn is_resolved(&self) -> bool {
        self.status == "resolved"
    }

    /// The groups this notification reports, each as a notification of its own: with a
    /// `groupKey` (as Alertmanager always sends) the notification is one group; without one (a
    /// hand-written payload) every alert is a group of its own.
    pub fn groups(&self) -> Vec<WebhookPayload> {
        if !self.group_key.is_empty() {
            return vec![self.clone()];
        }
        // The envelope is copied once without its alerts, then once per alert: linear in
        // the payload, not in alerts times payload.
        let envelope = self.clone_envelope();
        self.alerts
            .iter()
            .map(|alert| {
                let mut one = envelope.clone();
                one.status = alert.status.clone();
                one.alerts = vec![alert.clone()];
                one
            })
            .collect()
    }

    /// Everything but the alerts.
    fn clone_envelope(&self) -> WebhookPayload {
        WebhookPayload {
            version: self.version.clone(),
            group_key: self.group_key.clone(),
            truncated_alerts: self.truncated_alerts,
            status: self.status.clone(),
            receiver: self.receiver.clone(),
            group_labels: self.group_labels.clone(),
            common_labels: self.common_labels.clone(),
            common_annotations: self.common_annotations.clone(),
            external_url: self.external_url.clone(),
            alerts: Vec::new(),
        }
    }

    /// Parses and validates a request body.
    pub fn parse(body: &[u8]) -> Result<WebhookPayload, PayloadError> {
        let payload: WebhookPayload =
            serde_json::from_slice(body).map_err(|e| PayloadError::Malformed(e.to_string()))?;
        if payload.version != WEBHOOK_VERSION {
            return Err(PayloadError::Version {
                found: payload.version,
            });
        }
        if payload.alerts.is_empty() {
            return Err(PayloadError::NoAlerts);
        }
        Ok(payload)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A notification in the shape Alertmanager documents for `webhook_config`.
    pub(crate) const SAMPLE: &str = r#"{
      "version": "4",
      "groupKey": "{}:{alertname=\"HighLatency\"}",
      "truncatedAlerts": 0,
      "status": "firing",
      "receiver": "rca",
      "groupLabels": {"alertname": "HighLatency"},
      "commonLabels": {"alertname": "HighLatency", "severity": "page"},
      "commonAnnotations": {},
      "externalURL": "http://alertmanager:9093",
      "alerts": [
        {
          "status": "firing",
          "labels": {"alertname": "HighLatency", "service": "web", "severity": "page"},
          "annotations": {"summary": "p99 above 2 s"},
          "startsAt": "2024-05-01T10:15:00Z",
          "endsAt": "0001-01-01T00:00:00Z",
          "generatorURL": "http://prometheus:9090/graph?g0.expr=up",
          "fingerprint": "c3a1f0e2b7d4a915"
        },
        {
          "status": "resolved",
          "labels": {"alertname": "HighLatency", "service": "db"},
          "annotations": {},
          "startsAt": "2024-05-01T09:00:00Z",
          "endsAt": "2024-05-01T09:05:00Z",
          "generatorURL": "",
          "fingerprint": "0b1c"
        }
      ]
    }"#;

    #[test]
    fn reads_the_documented_shape() {
        let p = WebhookPayload::parse(SAMPLE.as_bytes()).unwrap();
        assert_eq!(p.alerts.len(), 2);
        assert!(p.alerts[0].is_firing() && !p.alerts[1].is_firing());
        assert_eq!(p.alerts[0].name(), "HighLatency");
        assert_eq!(p.external_url, "http://alertmanager:9093");
        assert_eq!(p.alerts[0].fingerprint, "c3a1f0e2b7d4a915");
        // Alertmanager's notification is one group; without a group key each alert is one.
        assert_eq!(p.groups(), vec![p.clone()]);
        let mut bare = p.clone();
        bare.group_key.clear();
        let groups = bare.groups();
        assert_eq!(groups.len(), 2);
        assert!(!groups[0].is_resolved() && groups[1].is_resolved());
        assert_eq!(groups[1].alerts, vec![p.alerts[1].clone()]);
    }

    #[test]
    fn refuses_bad_payloads_clearly() {
        assert!(matches!(
            WebhookPayload::parse(b"{not json"),
            Err(PayloadError::Malformed(_))
        ));
        let v3 = SAMPLE.replace("\"version\": \"4\"", "\"version\": \"3\"");
        let err = WebhookPayload::parse(v3.as_bytes()).unwrap_err();
        assert!(err.to_string().contains("\"3\""), "{err}");
        let none = r#"{"version":"4","status":"firing","alerts":[]}"#;
        assert_eq!(
            WebhookPayload::parse(none.as_bytes()),
            Err(PayloadError::NoAlerts)
        );
    }
}
