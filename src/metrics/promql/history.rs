//! Reading signals over time: the queries with the rate window filled in, and a whole
//! detection window from `query_range` at once (history, not waiting).

use super::{interval, queries, template, to_metric_error, PromqlSource};
use crate::metrics::signal::{Reading, SignalSpec, Snapshot};
use crate::metrics::source::MetricError;
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

impl PromqlSource {
    /// The signals' queries with `$__rate_interval` filled in for a window read every
    /// `step` (the scrape interval is found first if any query needs it).
    pub(super) async fn bound_queries(
        &self,
        signals: &BTreeMap<String, SignalSpec>,
        step: Option<Duration>,
        at: Option<SystemTime>,
    ) -> Result<Vec<(String, String)>, MetricError> {
        let raw = queries(signals)?;
        let mut window = None;
        if raw.iter().any(|(_, q)| template::uses_rate_interval(q)) {
            let s = self.scrape_interval(at).await?.value;
            window = Some(interval::rate_interval(s, step.unwrap_or(s)));
        }
        raw.into_iter()
            .map(|(name, q)| {
                let bound = match window {
                    Some(w) => template::bind_rate_interval(q, w),
                    None => Ok(q.to_string()),
                };
                bound
                    .map(|b| (name.clone(), b))
                    .map_err(|e| MetricError::BadExpression {
                        signal: name.clone(),
                        message: e.to_string(),
                    })
            })
            .collect()
    }

    /// A detection window from history: one snapshot every `step` over `span` up to `end`.
    /// A signal without a point at an instant is `Missing` there.
    pub async fn window(
        &self,
        signals: &BTreeMap<String, SignalSpec>,
        end: SystemTime,
        span: Duration,
        step: Duration,
    ) -> Result<Vec<Snapshot>, MetricError> {
        let bound = self.bound_queries(signals, Some(step), Some(end)).await?;
        let start = end.checked_sub(span).unwrap_or(UNIX_EPOCH);
        let step_ms = step.as_millis().max(1) as u64;
        let count = (span.as_millis() as u64 / step_ms) + 1;
        let times: Vec<SystemTime> = (0..count)
            .map(|i| start + Duration::from_millis(i * step_ms))
            .collect();
        let mut snaps: Vec<Snapshot> = times
            .iter()
            .map(|&at| Snapshot {
                at,
                readings: BTreeMap::new(),
            })
            .collect();
        for (name, query) in &bound {
            // A range query sums the series: a per-replica signal has no history here
            // (the slow-replica rule judges what is observed live).
            if signals.get(name).is_some_and(|s| s.per_replica) {
                continue;
            }
            let points = self
                .query_range(query, start, end, step)
                .await
                .map_err(|e| to_metric_error(name, e))?;
            let by_ms: BTreeMap<u128, f64> = points
                .iter()
                .map(|(t, v)| {
                    (
                        t.duration_since(UNIX_EPOCH).unwrap_or_default().as_millis(),
                        *v,
                    )
                })
                .collect();
            for s in snaps.iter_mut() {
                let ms =
                    s.at.duration_since(UNIX_EPOCH)
                        .unwrap_or_default()
                        .as_millis();
                // Prometheus aligns points to the requested times; allow rounding slack.
                let near = by_ms
                    .range(ms.saturating_sub(5)..=ms + 5)
                    .next()
                    .map(|(_, v)| *v);
                let reading = match near {
                    Some(v) if !v.is_nan() => Reading::Value { value: v },
                    Some(_) => Reading::Missing {
                        reason: format!("{query:?} returned NaN"),
                    },
                    None => Reading::Missing {
                        reason: format!("{query:?} had no data at this instant"),
                    },
                };
                s.readings.insert(name.clone(), reading);
            }
        }
        Ok(snaps)
    }
}
