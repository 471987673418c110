//! Alertmanager's webhook payload (version 4), parsed strictly enough that a malformed
//! body is refused with the field it got wrong, and loosely enough that fields Alertmanager
//! adds in later releases do not break the receiver. Read in two passes over the body's
//! bytes, one alert at a time: [`check`] the whole notification first (nothing is acted on
//! for a payload refused halfway), then [`each_alert`]; the alerts are never all held at
//! once (a 22.9 MB notification of 86,000 alerts was 90 MB as one value).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Labels or annotations.
pub type KV = BTreeMap<String, String>;

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

/// What a checked notification tells besides its alerts.
#[derive(Debug, Clone, PartialEq)]
pub struct Checked {
    pub group_key: String,
    pub status: AlertStatus,
    /// How many alerts it holds (at least one).
    pub alerts: usize,
}

/// One webhook notification (a group of alerts sharing `groupLabels`) as [`check`] reads
/// it: every field, the alerts checked one by one.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Head {
    version: String,
    group_key: String,
    #[serde(default)]
    #[allow(dead_code)]
    truncated_alerts: u64,
    status: AlertStatus,
    #[allow(dead_code)]
    receiver: String,
    #[serde(default)]
    #[allow(dead_code)]
    group_labels: KV,
    #[serde(default)]
    #[allow(dead_code)]
    common_labels: KV,
    #[serde(default)]
    #[allow(dead_code)]
    common_annotations: KV,
    #[serde(default, rename = "externalURL")]
    #[allow(dead_code)]
    external_url: String,
    alerts: CheckedAlerts,
}

/// The alerts array, read one alert at a time: counted and checked, none kept.
struct CheckedAlerts {
    count: usize,
    /// The first alert with an empty required field: (index, field).
    first_bad: Option<(usize, &'static str)>,
}

impl<'de> Deserialize<'de> for CheckedAlerts {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut out = CheckedAlerts {
            count: 0,
            first_bad: None,
        };
        d.deserialize_seq(EachAlert(|a: Alert| {
            let bad = if a.fingerprint.trim().is_empty() {
                Some("fingerprint")
            } else if a.labels.is_empty() {
                Some("labels")
            } else {
                None
            };
            if let (None, Some(field)) = (out.first_bad, bad) {
                out.first_bad = Some((out.count, field));
            }
            out.count += 1;
        }))?;
        Ok(out)
    }
}

/// Calls its function on each alert of a JSON array as it is read.
struct EachAlert<F>(F);

impl<'de, F: FnMut(Alert)> serde::de::Visitor<'de> for EachAlert<F> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an array of alerts")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        while let Some(a) = seq.next_element::<Alert>()? {
            (self.0)(a);
        }
        Ok(())
    }
}

impl<'de, F: FnMut(Alert)> serde::de::DeserializeSeed<'de> for EachAlert<F> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

/// The top-level object, skipping all but `alerts`, whose alerts go to the function.
struct AlertsOf<F>(F);

impl<'de, F: FnMut(Alert)> serde::de::Visitor<'de> for AlertsOf<F> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a webhook notification")
    }

    fn visit_map<M: serde::de::MapAccess<'de>>(mut self, mut map: M) -> Result<(), M::Error> {
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if key == "alerts" {
                map.next_value_seed(EachAlert(&mut self.0))?;
            } else {
                map.next_value::<serde::de::IgnoredAny>()?;
            }
        }
        Ok(())
    }
}

/// Check a webhook body whole, without keeping its alerts: each is read, checked and
/// dropped, so a large notification is held once (its bytes), not again as a tree.
pub fn check(body: &[u8]) -> Result<Checked, PayloadError> {
    let de = &mut serde_json::Deserializer::from_slice(body);
    let head: Head = serde_path_to_error::deserialize(de).map_err(|e| {
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
    if head.version != "4" {
        return Err(err(
            "version".into(),
            "only Alertmanager webhook version 4 is understood",
        ));
    }
    if head.alerts.count == 0 {
        return Err(err("alerts".into(), "no alerts in the notification"));
    }
    if let Some((i, field)) = head.alerts.first_bad {
        return Err(err(format!("alerts[{i}].{field}"), "must not be empty"));
    }
    Ok(Checked {
        group_key: head.group_key,
        status: head.status,
        alerts: head.alerts.count,
    })
}

/// Each alert of a body [`check`] accepted, in order, read one at a time.
pub fn each_alert(body: &[u8], f: impl FnMut(Alert)) -> Result<(), PayloadError> {
    let de = &mut serde_json::Deserializer::from_slice(body);
    serde::Deserializer::deserialize_map(de, AlertsOf(f)).map_err(|e| PayloadError {
        field: "body".into(),
        message: e.to_string(),
    })
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

    fn alerts(body: &str) -> Vec<Alert> {
        let mut out = Vec::new();
        each_alert(body.as_bytes(), |a| out.push(a)).unwrap();
        out
    }

    #[test]
    fn parses_firing_and_ignores_unknown_fields() {
        let b = body("firing", "abc");
        let c = check(b.as_bytes()).unwrap();
        assert_eq!((c.status, c.alerts), (AlertStatus::Firing, 1));
        let a = alerts(&b);
        assert_eq!(a[0].alertname(), "X");
        assert_eq!(a[0].fingerprint, "abc");
    }

    #[test]
    fn every_alert_is_read_in_order_wherever_the_array_is() {
        let b = r#"{"alerts":[{"status":"firing","labels":{"a":"1"},"fingerprint":"f1"},
            {"status":"resolved","labels":{"a":"2"},"fingerprint":"f2"}],"version":"4",
            "groupKey":"g","status":"firing","receiver":"r","extra":{"alerts":[]}}"#;
        assert_eq!(check(b.as_bytes()).unwrap().alerts, 2);
        let fps: Vec<String> = alerts(b).into_iter().map(|a| a.fingerprint).collect();
        assert_eq!(fps, ["f1", "f2"]);
        let twice = b.replace(r#""version""#, r#""alerts":[],"version""#);
        assert!(check(twice.as_bytes()).is_err(), "a second alerts array");
    }

    #[test]
    fn names_the_bad_field() {
        let parse = |b: &[u8]| check(b);
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
        let second_bad = body("firing", "a").replace(
            r#""futureField": 1"#,
            r#""futureField": 1, "x": [{"fingerprint": ""}]"#,
        );
        assert!(
            parse(second_bad.as_bytes()).is_ok(),
            "only alerts are alerts"
        );
    }
}
