//! Alertmanager's webhook payload (version 4), parsed strictly enough that a malformed
//! body is refused with the field it got wrong, and loosely enough that fields Alertmanager
//! adds in later releases do not break the receiver.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Labels or annotations.
pub type KV = BTreeMap<String, String>;

/// One webhook notification: a group of alerts sharing `groupLabels`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookPayload {
    pub version: String,
    pub group_key: String,
    #[serde(default)]
    pub truncated_alerts: u64,
    pub status: AlertStatus,
    pub receiver: String,
    #[serde(default)]
    pub group_labels: KV,
    #[serde(default)]
    pub common_labels: KV,
    #[serde(default)]
    pub common_annotations: KV,
    #[serde(default, rename = "externalURL")]
    pub external_url: String,
    pub alerts: Vec<Alert>,
}

/// `firing` or `resolved`; anything else is a malformed payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AlertStatus {
    Firing,
    Resolved,
}

impl AlertStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            AlertStatus::Firing => "firing",
            AlertStatus::Resolved => "resolved",
        }
    }
}

/// One alert of a group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Alert {
    pub status: AlertStatus,
    pub labels: KV,
    #[serde(default)]
    pub annotations: KV,
    #[serde(default)]
    pub starts_at: String,
    #[serde(default)]
    pub ends_at: String,
    #[serde(default, rename = "generatorURL")]
    pub generator_url: String,
    pub fingerprint: String,
}

impl Alert {
    pub fn alertname(&self) -> &str {
        self.labels.get("alertname").map_or("", String::as_str)
    }
}

/// A payload refused, naming the field (JSON path) that is wrong.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct PayloadError {
    pub field: String,
    pub message: String,
}

/// serde reports a missing field at its parent; name the field itself.
fn with_missing_field(path: String, message: &str) -> String {
    let missing = message
        .strip_prefix("missing field `")
        .and_then(|m| m.split('`').next());
    match missing {
        Some(name) if path == "." => name.to_string(),
        Some(name) => format!("{path}.{name}"),
        None => path,
    }
}

/// Parse and check a webhook body.
pub fn parse(body: &[u8]) -> Result<WebhookPayload, PayloadError> {
    let de = &mut serde_json::Deserializer::from_slice(body);
    let p: WebhookPayload = serde_path_to_error::deserialize(de).map_err(|e| {
        let field = e.path().to_string();
        let inner = e.into_inner();
        // Broken JSON is the body's fault, wherever the parser happened to be.
        let whole_body = inner.is_syntax() || inner.is_eof() || field == "?";
        let message = inner.to_string();
        let field = if whole_body {
            "body".into()
        } else {
            with_missing_field(field, &message)
        };
        PayloadError { field, message }
    })?;
    let err = |field: String, message: &str| PayloadError {
        field,
        message: message.to_string(),
    };
    if p.version != "4" {
        return Err(err(
            "version".into(),
            "only Alertmanager webhook version 4 is understood",
        ));
    }
    if p.alerts.is_empty() {
        return Err(err("alerts".into(), "no alerts in the notification"));
    }
    for (i, a) in p.alerts.iter().enumerate() {
        if a.fingerprint.trim().is_empty() {
            return Err(err(format!("alerts[{i}].fingerprint"), "must not be empty"));
        }
        if a.labels.is_empty() {
            return Err(err(format!("alerts[{i}].labels"), "must not be empty"));
        }
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(status: &str, fp: &str) -> String {
        format!(
            r#"{{"version":"4","groupKey":"{{}}:{{alertname=\"X\"}}","status":"{status}","receiver":"recover",
            "groupLabels":{{"alertname":"X"}},"commonLabels":{{}},"commonAnnotations":{{}},"externalURL":"http://am",
            "alerts":[{{"status":"{status}","labels":{{"alertname":"X"}},"annotations":{{}},
            "startsAt":"2026-01-01T00:00:00Z","endsAt":"0001-01-01T00:00:00Z","generatorURL":"http://p","fingerprint":"{fp}"}}],
            "futureField": 1}}"#
        )
    }

    #[test]
    fn parses_firing_and_ignores_unknown_fields() {
        let p = parse(body("firing", "abc").as_bytes()).unwrap();
        assert_eq!(p.status, AlertStatus::Firing);
        assert_eq!(p.alerts[0].alertname(), "X");
        assert_eq!(p.alerts[0].fingerprint, "abc");
    }

    #[test]
    fn names_the_bad_field() {
        let e = parse(body("burning", "abc").as_bytes()).unwrap_err();
        assert_eq!(e.field, "status");
        let e = parse(body("firing", "").as_bytes()).unwrap_err();
        assert_eq!(e.field, "alerts[0].fingerprint");
        let e = parse(
            body("firing", "a")
                .replace(r#""version":"4""#, r#""version":"3""#)
                .as_bytes(),
        )
        .unwrap_err();
        assert_eq!(e.field, "version");
        let e = parse(b"{not json").unwrap_err();
        assert_eq!(e.field, "body");
        let e = parse(br#"{"version":"4"}"#).unwrap_err();
        assert_eq!(e.field, "groupKey");
        let no_labels =
            body("firing", "a").replace(r#""labels":{"alertname":"X"}"#, r#""labels":7"#);
        assert_eq!(
            parse(no_labels.as_bytes()).unwrap_err().field,
            "alerts[0].labels"
        );
    }
}
