//! The scrape interval of the data a Prometheus holds, and the rate window that follows
//! from it. A rate needs at least two samples in its window and should survive a missed
//! scrape, so the window is four scrape intervals at least (Grafana's `$__rate_interval`:
//! `max(4 x scrape interval, step + scrape interval)`).
//!
//! Where the interval comes from, in order: given by the operator; the `scrapeInterval`
//! of the active targets the roles select (`/api/v1/targets`), when judging now; the
//! spacing of those targets' `up` samples around the instant judged (history, backfilled
//! data, or a target list that has changed since). The pure parts are here; the queries
//! are in the source.

use super::template::parse_prom_duration;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// How far back the sample spacing is measured.
pub const SPACING_LOOKBACK: Duration = Duration::from_secs(600);

/// The scrape interval and where it was found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScrapeInterval {
    #[serde(rename = "scrape_interval_s", serialize_with = "secs")]
    pub value: Duration,
    #[serde(rename = "scrape_interval_from")]
    pub from: String,
}

fn secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// The rate window for data scraped every `scrape`, read every `step`.
pub fn rate_interval(scrape: Duration, step: Duration) -> Duration {
    (scrape * 4).max(step + scrape)
}

/// One active target from `/api/v1/targets`.
#[derive(Debug, Clone, PartialEq)]
pub struct ActiveTarget {
    pub labels: BTreeMap<String, String>,
    pub scrape_interval: Option<Duration>,
}

#[derive(Deserialize)]
struct TargetsReply {
    data: TargetsData,
}

#[derive(Deserialize)]
struct TargetsData {
    #[serde(default, rename = "activeTargets")]
    active: Vec<RawTarget>,
}

#[derive(Deserialize)]
struct RawTarget {
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default, rename = "scrapeInterval")]
    scrape_interval: Option<String>,
}

/// The active targets of a `/api/v1/targets` reply (Prometheus 2.x).
pub fn parse_targets(body: &str) -> Result<Vec<ActiveTarget>, String> {
    let reply: TargetsReply =
        serde_json::from_str(body).map_err(|e| format!("not a targets reply: {e}"))?;
    Ok(reply
        .data
        .active
        .into_iter()
        .map(|t| ActiveTarget {
            labels: t.labels,
            scrape_interval: t.scrape_interval.as_deref().and_then(parse_prom_duration),
        })
        .collect())
}

/// The scrape interval of the targets whose `job` and `instance` are in `wanted`: the
/// longest among them (a window must fit the slowest). None when a wanted target is not
/// in the list or states no interval.
pub fn interval_of(targets: &[ActiveTarget], wanted: &[(String, String)]) -> Option<Duration> {
    let mut longest = None;
    for (job, instance) in wanted {
        let t = targets.iter().find(|t| {
            t.labels.get("job") == Some(job) && t.labels.get("instance") == Some(instance)
        })?;
        longest = longest.max(Some(t.scrape_interval?));
    }
    longest
}

/// The typical spacing of one series' samples (timestamps in seconds, ascending): the
/// median gap, so a missed scrape or a restart does not count. Snapped to whole seconds
/// when within 2% of one (scrapes jitter by milliseconds).
pub fn spacing(timestamps: &[f64]) -> Option<Duration> {
    let mut gaps: Vec<f64> = timestamps
        .windows(2)
        .map(|w| w[1] - w[0])
        .filter(|g| *g > 0.0)
        .collect();
    if gaps.is_empty() {
        return None;
    }
    gaps.sort_by(f64::total_cmp);
    let median = gaps[gaps.len() / 2];
    let whole = median.round();
    let s = if whole >= 1.0 && (median - whole).abs() <= whole * 0.02 {
        whole
    } else {
        (median * 1000.0).round() / 1000.0
    };
    Some(Duration::from_secs_f64(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn four_scrape_intervals_or_one_step_more() {
        let s = Duration::from_secs;
        assert_eq!(rate_interval(s(15), s(15)), s(60));
        assert_eq!(rate_interval(s(30), s(1)), s(120));
        assert_eq!(rate_interval(s(15), s(60)), s(75));
    }

    #[test]
    fn spacing_is_the_median_gap_snapped_to_seconds() {
        let ts = [0.0, 15.003, 30.001, 45.0, 75.0, 90.002];
        assert_eq!(spacing(&ts), Some(Duration::from_secs(15)));
        assert_eq!(
            spacing(&[0.0, 0.5, 1.0, 1.5]),
            Some(Duration::from_millis(500))
        );
        assert_eq!(spacing(&[10.0]), None);
    }

    #[test]
    fn targets_reply_and_matching() {
        let body = r#"{"status":"success","data":{"activeTargets":[
            {"labels":{"job":"gate","instance":"a:1"},"scrapeInterval":"15s","health":"up"},
            {"labels":{"job":"svc","instance":"b:1"},"scrapeInterval":"1m","health":"up"}],
            "droppedTargets":[]}}"#;
        let t = parse_targets(body).unwrap();
        let want = |j: &str, i: &str| (j.to_string(), i.to_string());
        assert_eq!(
            interval_of(&t, &[want("gate", "a:1"), want("svc", "b:1")]),
            Some(Duration::from_secs(60))
        );
        assert_eq!(interval_of(&t, &[want("gate", "zz")]), None);
        assert!(parse_targets("[]").is_err());
    }
}
