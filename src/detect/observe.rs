//! Collect a detection window by reading a source repeatedly. The detector is pure; this
//! is the I/O loop in front of it (used by `recover detect` and the engine).

use crate::metrics::signal::{SignalSpec, Snapshot};
use crate::metrics::source::{MetricError, MetricSource};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

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

/// How long to observe so the detector can say Stuck: the longer of grace and persist,
/// plus the rate window (the first rates need that much history) and one interval.
pub fn span_needed(
    cfg: &super::DetectorConfig,
    rate_window: Duration,
    interval: Duration,
) -> Duration {
    cfg.grace.max(cfg.persist) + rate_window + interval
}
