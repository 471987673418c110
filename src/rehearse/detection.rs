//! Feeds the runbook's signals to the detector for the whole rehearsal and waits until it
//! says Stuck, measuring when.
//!
//! Why it exists: the rehearsal must show that detection works on the real system, with
//! the runbook's own signal definitions read through the shared scrape source and judged
//! by [`crate::detect::watch`] (the path the engine, serve and `recover detect` take), and
//! how long after the trigger ended it took. The feed starts before the trigger so the
//! detector sees the healthy baseline; it is a metric source whose history is what it has
//! recorded, so each judgement reads its window out of it at once. Attached late, the
//! detector's window starts at the attach, and the recorded scrapes from before it stay
//! the history a look back reads, as a Prometheus retaining its scrapes would give it.

use super::recorder::Clock;
use crate::detect::windows::Fields;
use crate::detect::{watch, DetectorConfig, Verdict, VerdictKind, Watch};
use crate::metrics::signal::{SignalSpec, Snapshot};
use crate::metrics::source::{MetricError, MetricSource};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use tokio_util::sync::CancellationToken;

/// Snapshots of the runbook's signals, taken every interval in the background.
pub struct SignalFeed {
    snaps: Arc<Mutex<Vec<Snapshot>>>,
    signals: BTreeMap<String, SignalSpec>,
    interval: Duration,
    /// When the detector attached, if late: its window starts there.
    attached: Option<SystemTime>,
    cancel: CancellationToken,
}

impl SignalFeed {
    pub fn start(
        source: Arc<dyn MetricSource>,
        signals: BTreeMap<String, SignalSpec>,
        interval: Duration,
    ) -> Self {
        Self::start_retaining(source, signals, interval, Vec::new(), None)
    }

    /// A feed for a detector attaching now, reading through `source`, that keeps what
    /// `earlier` recorded as its history (the scrapes a Prometheus would have retained).
    pub fn attach(
        earlier: &SignalFeed,
        source: Arc<dyn MetricSource>,
        signals: BTreeMap<String, SignalSpec>,
        interval: Duration,
    ) -> Self {
        let retained = earlier
            .snaps
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        Self::start_retaining(source, signals, interval, retained, Some(SystemTime::now()))
    }

    fn start_retaining(
        source: Arc<dyn MetricSource>,
        signals: BTreeMap<String, SignalSpec>,
        interval: Duration,
        retained: Vec<Snapshot>,
        attached: Option<SystemTime>,
    ) -> Self {
        let snaps = Arc::new(Mutex::new(retained));
        let cancel = CancellationToken::new();
        let (s, c, read) = (snaps.clone(), cancel.clone(), signals.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = c.cancelled() => return,
                    _ = tick.tick() => {}
                }
                match source.snapshot(&read).await {
                    Ok(snap) => s.lock().unwrap_or_else(|e| e.into_inner()).push(snap),
                    Err(e) => tracing::warn!("signal feed: {e}"),
                }
            }
        });
        SignalFeed {
            snaps,
            signals,
            interval,
            attached,
            cancel,
        }
    }

    /// The detector's window ending at `now`: [`WINDOW`], from the attach at the latest.
    fn window_span(&self, now: SystemTime) -> Duration {
        match self.attached {
            Some(at) => WINDOW.min(now.duration_since(at).unwrap_or_default()),
            None => WINDOW,
        }
    }

    /// The snapshots taken from `start` to `end`, oldest first.
    fn between(&self, start: SystemTime, end: SystemTime) -> Vec<Snapshot> {
        self.snaps
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|s| s.at >= start && s.at <= end)
            .cloned()
            .collect()
    }

    pub fn len(&self) -> usize {
        self.snaps.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The feed as a source: its history is what it has recorded; a live read is the latest
/// snapshot it took (it reads for itself every interval).
#[async_trait::async_trait]
impl MetricSource for SignalFeed {
    fn kind(&self) -> &'static str {
        "rehearsal feed"
    }

    async fn snapshot(&self, _: &BTreeMap<String, SignalSpec>) -> Result<Snapshot, MetricError> {
        let latest = self
            .snaps
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .last()
            .cloned();
        latest.ok_or_else(|| MetricError::Fetch {
            target: self.kind().into(),
            message: "no snapshot taken yet".into(),
        })
    }

    async fn history(
        &self,
        _: &BTreeMap<String, SignalSpec>,
        start: SystemTime,
        end: SystemTime,
        _: Duration,
    ) -> Result<Option<Vec<Snapshot>>, MetricError> {
        Ok(Some(self.between(start, end)))
    }
}

impl Drop for SignalFeed {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// When the detector said Stuck, and what it said.
#[derive(Debug, Clone)]
pub struct Detection {
    /// Rehearsal clock, seconds.
    pub at_s: f64,
    pub verdict: Verdict,
}

/// The detector never said Stuck in time.
#[derive(Debug, thiserror::Error)]
#[error("the detector did not say {want} within {waited:?} (last verdict {last:?}: {evidence})")]
pub struct NotDetected {
    pub want: &'static str,
    pub waited: Duration,
    pub last: Option<VerdictKind>,
    pub evidence: String,
}

/// How far back the detector looks: enough for the healthy baseline before the trigger,
/// the trigger, and the persist window.
pub const WINDOW: Duration = Duration::from_secs(60);

/// Judge each new snapshot until Stuck or `timeout`.
pub async fn wait_stuck(
    feed: &SignalFeed,
    clock: Clock,
    cfg: &DetectorConfig,
    timeout: Duration,
) -> Result<Detection, NotDetected> {
    wait_for(feed, clock, cfg, timeout, VerdictKind::Stuck).await
}

/// Judge the feed's window on every new snapshot until the verdict is `want`.
pub async fn wait_for(
    feed: &SignalFeed,
    clock: Clock,
    cfg: &DetectorConfig,
    timeout: Duration,
    want: VerdictKind,
) -> Result<Detection, NotDetected> {
    let fields = Fields::runbook();
    // The feed's window ending now, out of what it recorded (never waited for), looking
    // back over all it recorded where the window leaves the healthy reference unknown or
    // to a declaration (`detect::observe::needs_history`).
    let now = || {
        let at = SystemTime::now();
        Watch {
            signals: &feed.signals,
            config: cfg,
            fields: &fields,
            interval: feed.interval,
            span: Some(feed.window_span(at)),
            at: Some(at),
            scrape: None,
            look_back: true,
        }
    };
    let start = clock.now_s();
    let mut seen = feed.len();
    let mut last: Option<Verdict> = None;
    while clock.now_s() - start < timeout.as_secs_f64() {
        tokio::time::sleep(Duration::from_millis(50)).await;
        if feed.len() == seen {
            continue;
        }
        seen = feed.len();
        let v = match watch(feed, &now(), |_| {}).await {
            Ok(watched) => watched.verdict,
            Err(e) => {
                tracing::warn!("rehearsal detection: {e}");
                continue;
            }
        };
        if v.verdict == want {
            return Ok(Detection {
                at_s: clock.now_s(),
                verdict: v,
            });
        }
        last = Some(v);
    }
    Err(NotDetected {
        want: want.as_str(),
        waited: timeout,
        last: last.as_ref().map(|v| v.verdict),
        evidence: last
            .map(|v| {
                v.evidence
                    .iter()
                    .map(|e| format!("{} {:?}: {}", e.signal, e.value, e.note))
                    .collect::<Vec<_>>()
                    .join("; ")
            })
            .unwrap_or_default(),
    })
}
