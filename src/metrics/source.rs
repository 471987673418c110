//! The one trait every metric source implements.

use super::signal::{SignalSpec, Snapshot};
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

/// Why a source could not answer at all. Distinct from an empty result, which is a
/// [`super::signal::Reading::Missing`].
#[derive(Debug, thiserror::Error)]
pub enum MetricError {
    #[error("{target}: timed out after {after:?}")]
    Timeout { target: String, after: Duration },
    #[error("{target}: {message}")]
    Fetch { target: String, message: String },
    #[error("signal {signal}: bad expression: {message}")]
    BadExpression { signal: String, message: String },
    #[error("signal {signal}: this source needs a `{needs}` expression")]
    NoExpression { signal: String, needs: &'static str },
    /// The source cannot tell how often its data was scraped, so no rate window follows.
    #[error("cannot tell the scrape interval: {message}; give it with --scrape-interval")]
    NoScrapeInterval { message: String },
    /// A role's matchers select no target: reading it would give zeros, not data.
    #[error("role {role}: no series match up{{{matchers}}}; check the role's matchers (spec.roles.{role}, or --role {role}=MATCHERS) and that Prometheus scrapes its targets")]
    RoleMissing { role: String, matchers: String },
}

/// Reads signals. Implementations keep whatever history they need to compute rates.
#[async_trait::async_trait]
pub trait MetricSource: Send + Sync {
    /// "scrape" or "promql".
    fn kind(&self) -> &'static str;
    /// Read every signal once. A signal that cannot be read is a `Missing` reading in the
    /// snapshot; an error is returned only when the source as a whole is unusable.
    async fn snapshot(
        &self,
        signals: &BTreeMap<String, SignalSpec>,
    ) -> Result<Snapshot, MetricError>;
    /// As [`MetricSource::snapshot`], with every rate window cut at `since`: what the
    /// signals show of the time since then only, as a readmission's check wants after a
    /// drain and a restart its windows would otherwise still cover. A rate with fewer than
    /// two samples since then is missing, so nothing passes on no evidence. Sources whose
    /// windows cannot be cut (Prometheus rates over its own range) answer over their usual
    /// windows; the ramp's `settle` covers those.
    async fn snapshot_since(
        &self,
        signals: &BTreeMap<String, SignalSpec>,
        since: SystemTime,
    ) -> Result<Snapshot, MetricError> {
        let _ = since;
        self.snapshot(signals).await
    }
    /// How often the source's data was sampled (Prometheus' scrape interval), when it is
    /// coarser than the reads: the detection windows must then stretch to it. `None` when
    /// each read is a fresh scrape (the reads set the resolution).
    async fn resolution(&self) -> Result<Option<Duration>, MetricError> {
        Ok(None)
    }
    /// Snapshots every `step` from `start` to `end`, out of the source's stored history;
    /// `None` when the source keeps none (scraping `/metrics` directly sees only now).
    async fn history(
        &self,
        _signals: &BTreeMap<String, SignalSpec>,
        _start: SystemTime,
        _end: SystemTime,
        _step: Duration,
    ) -> Result<Option<Vec<Snapshot>>, MetricError> {
        Ok(None)
    }
}
