//! The series from before a run, out of Prometheus (`recover report --prometheus URL`), so
//! the timeline starts when the trouble started, not when the run started. The runbook's
//! own signals (its text is in the journal) are read with range queries over `--before`
//! up to the run's start; the onset is the start of the last unbroken stretch of
//! snapshots the detector's rules call failing ([`crate::detect::classify::health`]), the
//! same rules that judged the run.

use super::{Evidence, PostmortemError};
use crate::detect::classify::{health, Health};
use crate::engine::journal::Event;
use crate::metrics::promql::PromqlSource;
use crate::metrics::signal::Snapshot;
use crate::metrics::source::MetricSource;
use std::time::{Duration, SystemTime};

/// How long a Prometheus query may take.
const TIMEOUT: Duration = Duration::from_secs(30);

/// What Prometheus held from before the run.
#[derive(Debug, Clone)]
pub struct Before {
    pub snapshots: Vec<Snapshot>,
    /// When the trouble started; None with the reason in `onset_from`.
    pub onset: Option<SystemTime>,
    pub onset_from: String,
    /// Where the series came from, in words.
    pub from: String,
}

/// Read the `span` before the run from the Prometheus at `url`.
pub async fn before(url: &str, ev: &Evidence, span: Duration) -> Result<Before, PostmortemError> {
    let source = ev.entries.iter().find_map(|e| match &e.event {
        Event::RunStarted { runbook_source, .. } => Some(runbook_source.clone()),
        _ => None,
    });
    let rb = crate::runbook::parse_str("the runbook in the journal", &source.unwrap_or_default())
        .map_err(|e| PostmortemError::Prometheus(format!("the journal's runbook: {e}")))?;
    let start_run = humantime::parse_rfc3339_weak(&ev.report.started_at).map_err(|e| {
        PostmortemError::Prometheus(format!("the run's start {:?}: {e}", ev.report.started_at))
    })?;
    let prom = PromqlSource::new(url, TIMEOUT)
        .map_err(|e| PostmortemError::Prometheus(e.to_string()))?
        .with_roles(rb.roles.clone());
    let step = prom
        .resolution()
        .await
        .map_err(|e| PostmortemError::Prometheus(e.to_string()))?
        .unwrap_or(Duration::from_secs(15));
    let start = start_run
        .checked_sub(span)
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let snapshots = prom
        .history(&rb.signals, start, start_run, step)
        .await
        .map_err(|e| PostmortemError::Prometheus(e.to_string()))?
        .unwrap_or_default();
    let (onset, onset_from) = find_onset(&snapshots, &rb.detect, span);
    Ok(Before {
        from: format!(
            "Prometheus {url}: {} snapshots every {} over the {} before the run",
            snapshots.len(),
            crate::util::duration::format(step),
            crate::util::duration::format(span)
        ),
        snapshots,
        onset,
        onset_from,
    })
}

/// The start of the last unbroken failing stretch up to the end of `snaps`. Pure.
pub fn find_onset(
    snaps: &[Snapshot],
    cfg: &crate::detect::DetectorConfig,
    span: Duration,
) -> (Option<SystemTime>, String) {
    let failing = |s: &Snapshot| matches!(health(s, cfg), Health::Failing(_));
    let Some(last) = snaps.last() else {
        return (None, "Prometheus had no samples before the run".into());
    };
    if !failing(last) {
        return (
            None,
            "the detector's rules did not call the service failing just before the run".into(),
        );
    }
    let stretch = snaps.iter().rev().take_while(|s| failing(s)).count();
    if stretch == snaps.len() {
        return (
            None,
            format!(
                "failing for the whole {} before the run: it started earlier (widen --before)",
                crate::util::duration::format(span)
            ),
        );
    }
    let first = &snaps[snaps.len() - stretch];
    (
        Some(first.at),
        "Prometheus: the first of the snapshots the detector's rules call failing, unbroken up to the run".into(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::signal::Reading;

    fn snap(s: u64, offered: f64, goodput: f64) -> Snapshot {
        Snapshot {
            at: SystemTime::UNIX_EPOCH + Duration::from_secs(s),
            readings: [("offered_rate", offered), ("goodput", goodput)]
                .into_iter()
                .map(|(n, value)| (n.to_string(), Reading::Value { value }))
                .collect(),
        }
    }

    #[test]
    fn the_onset_is_the_start_of_the_last_failing_stretch_or_unknown_with_why() {
        let cfg = crate::detect::DetectorConfig::default();
        let span = Duration::from_secs(60);
        // Healthy, a blip at 15, healthy, then failing from 40 up to the run.
        let s: Vec<Snapshot> = (0..12)
            .map(|i| {
                let failing = i == 3 || i >= 8;
                snap(i * 5, 80.0, if failing { 10.0 } else { 79.0 })
            })
            .collect();
        let (onset, _) = find_onset(&s, &cfg, span);
        assert_eq!(
            onset,
            Some(SystemTime::UNIX_EPOCH + Duration::from_secs(40))
        );
        // Healthy just before the run: no onset, and why.
        let (onset, why) = find_onset(&s[..3], &cfg, span);
        assert!(
            onset.is_none() && why.contains("did not call the service failing"),
            "{why}"
        );
        // Failing for the whole window: earlier than the window.
        let all: Vec<Snapshot> = (0..5).map(|i| snap(i, 80.0, 1.0)).collect();
        let (onset, why) = find_onset(&all, &cfg, span);
        assert!(onset.is_none() && why.contains("widen --before"), "{why}");
        assert!(find_onset(&[], &cfg, span).0.is_none());
    }
}
