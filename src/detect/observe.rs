//! Collect a detection window by reading a source repeatedly, and look back over the
//! source's history when the window is not enough. The detector is pure; this is the I/O
//! in front of it, which [`super::watch`] puts together.

use super::lookback::{self, Lookback};
use super::{detect_with, DetectorConfig, Evidence, Source, Verdict};
use crate::metrics::signal::{SignalSpec, Snapshot};
use crate::metrics::source::{MetricError, MetricSource};
use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime};

/// At most this many snapshots per look back: a day at 1.5-minute steps; Prometheus
/// refuses range queries of more than 11,000 points.
pub const LOOKBACK_POINTS: u32 = 1000;

/// Read `signals` every `interval` for `span` (at least two reads). `on_snapshot` sees
/// each snapshot as it arrives (for progress lines).
pub async fn observe(
    source: &dyn MetricSource,
    signals: &BTreeMap<String, SignalSpec>,
    span: Duration,
    interval: Duration,
    mut on_snapshot: impl FnMut(&Snapshot),
) -> Result<Vec<Snapshot>, MetricError> {
    let start = Instant::now();
    let mut window = Vec::new();
    loop {
        let tick = Instant::now();
        let snap = source.snapshot(signals).await?;
        on_snapshot(&snap);
        window.push(snap);
        if start.elapsed() >= span && window.len() >= 2 {
            return Ok(window);
        }
        tokio::time::sleep(interval.saturating_sub(tick.elapsed())).await;
    }
}

/// The window ending now: out of the source's stored history at once when it keeps one
/// (Prometheus: minutes of 15-60 s scrapes need not be waited out at 3 am), else observed
/// live with [`observe`]. `on_snapshot` sees each live snapshot.
pub async fn recent_window(
    source: &dyn MetricSource,
    signals: &BTreeMap<String, SignalSpec>,
    span: Duration,
    interval: Duration,
    on_snapshot: impl FnMut(&Snapshot),
) -> Result<Vec<Snapshot>, MetricError> {
    let end = SystemTime::now();
    if let Some(history) = source
        .history(signals, end - span, end, interval)
        .await?
        .filter(|w| w.len() >= 2)
    {
        return Ok(history);
    }
    observe(source, signals, span, interval, on_snapshot).await
}

/// How long to observe so the detector can say Stuck: the longer of grace and persist,
/// plus the rate window (the first rates need that much history) and one interval.
pub fn span_needed(
    cfg: &super::DetectorConfig,
    rate_window: Duration,
    interval: Duration,
) -> Duration {
    cfg.grace.max(cfg.persist) + rate_window + interval
}

/// Read the last `cfg.lookback` of the source's history and find its last healthy
/// period. A source without history gives a [`Lookback`] that says so.
pub async fn look_back(
    source: &dyn MetricSource,
    signals: &BTreeMap<String, SignalSpec>,
    cfg: &DetectorConfig,
    end: SystemTime,
) -> Result<Lookback, MetricError> {
    let span = cfg.lookback;
    let step = (span / LOOKBACK_POINTS).max(Duration::from_secs(1));
    let start = end.checked_sub(span).unwrap_or(SystemTime::UNIX_EPOCH);
    Ok(match source.history(signals, start, end, step).await? {
        Some(history) => lookback::find(&history, cfg, span, step),
        None => Lookback {
            span,
            step,
            points: 0,
            healthy: None,
            peak_goodput: None,
            peak_work: None,
            note: format!(
                "no metrics history to look back in: the {} source reads /metrics as it is now (a Prometheus source can look back)",
                source.kind()
            ),
        },
    })
}

/// True when the window left an input the history could give (capacity, the healthy
/// service time, the demand baseline) unknown, or left the healthy reference (capacity,
/// the healthy service time, the cold factor) to a declaration: the history is measured
/// evidence and comes before a declaration, which is often stale.
pub fn needs_history(v: &Verdict) -> bool {
    let declared = |s: Option<Source>| s == Some(Source::Declared);
    v.capacity.is_none()
        || v.healthy_service_time.is_none()
        || v.demand.is_none()
        || declared(v.sources.capacity)
        || declared(v.sources.healthy_service_time)
        || declared(v.sources.cold_factor)
}

/// Judge `window`; when it leaves inputs the history could give unknown, look back and
/// judge again with what the history's last healthy period says. A history that cannot
/// be read is evidence, not an error: the window's verdict stands.
pub async fn judge(
    source: &dyn MetricSource,
    signals: &BTreeMap<String, SignalSpec>,
    cfg: &DetectorConfig,
    window: &[Snapshot],
    now: SystemTime,
) -> Verdict {
    judge_looking_back(source, signals, cfg, window, now)
        .await
        .0
}

/// [`judge`], with what the look back found (`None` when the window alone gave every
/// input, or the history could not be read).
pub async fn judge_looking_back(
    source: &dyn MetricSource,
    signals: &BTreeMap<String, SignalSpec>,
    cfg: &DetectorConfig,
    window: &[Snapshot],
    now: SystemTime,
) -> (Verdict, Option<Lookback>) {
    match lookback_if_needed(source, signals, cfg, window, now).await {
        Ok(lb) => (detect_with(window, cfg, lb.as_ref(), now), lb),
        Err(e) => {
            let mut v = detect_with(window, cfg, None, now);
            v.evidence.push(Evidence::new(
                "lookback",
                None,
                format!("could not read the metrics history: {e}"),
            ));
            (v, None)
        }
    }
}

/// The look back [`judge`] makes: `None` when the window alone gives every input.
pub async fn lookback_if_needed(
    source: &dyn MetricSource,
    signals: &BTreeMap<String, SignalSpec>,
    cfg: &DetectorConfig,
    window: &[Snapshot],
    now: SystemTime,
) -> Result<Option<Lookback>, MetricError> {
    if !needs_history(&detect_with(window, cfg, None, now)) {
        return Ok(None);
    }
    look_back(source, signals, cfg, now).await.map(Some)
}
