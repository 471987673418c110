//! Runs the detector over the recorded series until it says Stuck, and measures when.
//!
//! Why it exists: the rehearsal must show that detection works on the real system and
//! how long after the trigger ended it took; the verdict's estimates (k, arrival, cold
//! capacity) feed the plan the runbook executes.
//!
//! The detector sees signal snapshots built from the recorder's samples
//! ([`snapshot_of`]), named as in `metrics::signal::names`, so detection and the timeline
//! read the same numbers.

use super::recorder::{Clock, Recorder};
use super::series::Sample;
use crate::detect::{detect, DetectorConfig, Verdict, VerdictKind};
use crate::metrics::signal::{names, Reading, Snapshot};
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

/// When the detector said Stuck, and what it said.
#[derive(Debug, Clone)]
pub struct Detection {
    /// Rehearsal clock, seconds.
    pub at_s: f64,
    pub verdict: Verdict,
}

/// The detector never said Stuck in time.
#[derive(Debug, thiserror::Error)]
#[error("the detector did not say stuck within {waited:?} (last verdict {last:?}: {evidence})")]
pub struct NotDetected {
    pub waited: Duration,
    pub last: Option<VerdictKind>,
    pub evidence: String,
}

/// Signal snapshot of one sample. `trigger_active` is known to the rehearsal, which fires
/// the trigger itself; `replicas` is how many replicas should be up.
pub fn snapshot_of(s: &Sample, at: SystemTime, trigger_active: bool, replicas: u32) -> Snapshot {
    let mut readings = BTreeMap::new();
    let mut put = |name: &str, v: Option<f64>| {
        let r = match v {
            Some(value) if value.is_finite() => Reading::Value { value },
            _ => Reading::Missing {
                reason: "no data in the recorder's window".into(),
            },
        };
        readings.insert(name.to_string(), r);
    };
    put(names::OFFERED_RATE, s.offered_per_s);
    put(names::FIRST_ATTEMPT_RATE, s.first_attempt_per_s);
    put(names::GOODPUT, s.goodput_per_s);
    put(names::LATENCY_P99, s.p99_latency_s);
    put(names::QUEUE_DEPTH, s.queue_depth);
    put(names::WORK_RATE, s.work_per_s);
    put(names::GATE_ADMITTED_RATE, s.admitted_per_s);
    put(names::GATE_REJECTED_RATE, s.rejected_per_s);
    put(names::CLIENTS_RETRYING, s.workers_retrying);
    put(
        names::REPLICAS_NOT_READY,
        Some(replicas.saturating_sub(s.services_up) as f64),
    );
    put(
        names::TRIGGER_ACTIVE,
        Some(if trigger_active { 1.0 } else { 0.0 }),
    );
    let error_ratio = match (s.goodput_per_s, s.admitted_per_s.or(s.offered_per_s)) {
        (Some(g), Some(a)) if a > 0.0 => Some((1.0 - g / a).clamp(0.0, 1.0)),
        _ => None,
    };
    put(names::ERROR_RATIO, error_ratio);
    Snapshot { at, readings }
}

/// Map rehearsal-clock seconds to wall time for snapshots (the detector reasons with
/// `SystemTime`s).
fn wall(clock_now_s: f64, t_s: f64) -> SystemTime {
    let now = SystemTime::now();
    let back = Duration::from_secs_f64((clock_now_s - t_s).max(0.0));
    now.checked_sub(back).unwrap_or(now)
}

/// Poll the detector once per new sample until Stuck or `timeout`. `trigger_end_s` marks
/// when the trigger was over (snapshots before it say `trigger_active = 1`).
pub async fn wait_stuck(
    recorder: &Recorder,
    clock: Clock,
    cfg: &DetectorConfig,
    trigger_end_s: f64,
    replicas: u32,
    window_s: f64,
    timeout: Duration,
) -> Result<Detection, NotDetected> {
    let start = clock.now_s();
    let mut seen = recorder.len();
    let mut last: Option<Verdict> = None;
    while clock.now_s() - start < timeout.as_secs_f64() {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if recorder.len() == seen {
            continue;
        }
        seen = recorder.len();
        let now_s = clock.now_s();
        let window: Vec<Snapshot> = recorder
            .samples_since(now_s - window_s)
            .iter()
            .map(|s| snapshot_of(s, wall(now_s, s.t_s), s.t_s < trigger_end_s, replicas))
            .collect();
        let v = detect(&window, cfg);
        if v.verdict == VerdictKind::Stuck {
            return Ok(Detection {
                at_s: now_s,
                verdict: v,
            });
        }
        last = Some(v);
    }
    Err(NotDetected {
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
