//! The stuck-state detector: a pure function from a window of signal snapshots to a
//! verdict (Healthy, Triggered, Stuck, SlowReplica, Unknown) with its evidence and the
//! estimates the plan needs (work amplification k, capacity, cold capacity).
//!
//! Why it is careful: acting on a stuck overload destroys queued work on purpose, so the
//! detector says Stuck only when the trigger has been gone for `grace` AND the failure has
//! lasted `persist` without a break, and says Unknown rather than guess when data is
//! missing or stale. A flapping service keeps resetting the failure clock, so it is
//! never Stuck. One replica far slower than its peers is its own verdict, SlowReplica (see
//! [`slow_replica`]): its fix restarts one replica, not all of them.

pub mod classify;
pub mod default_signals;
pub mod estimate;
pub mod history;
pub mod lookback;
pub mod needs;
pub mod observe;
pub mod slow_replica;
mod verdict;
pub mod watch;
pub mod windows;

pub use estimate::Source;
pub use lookback::Lookback;
pub use verdict::{detect_at, detect_with};
pub use watch::{watch, Watch, WatchError, Watched};

use crate::metrics::signal::Snapshot;
use serde::{Deserialize, Serialize};
use std::time::{Duration, SystemTime};

/// Detection settings; the `spec.detect` section of a runbook.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DetectorConfig {
    /// The trigger must have been gone at least this long before "stuck" is said. Keep it
    /// at least one rate window, so the rates judged no longer include the trigger.
    #[serde(with = "crate::util::duration::serde_human")]
    pub grace: Duration,
    /// ... and at least this many scrape intervals of the source (see [`windows`]), so the
    /// same runbook works on 1 s and on 60 s data.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grace_scrapes: Option<u32>,
    /// The failure must have persisted at least this long. Rates are averaged over their
    /// window, so a short failure looks that much longer: keep this well above the
    /// signals' rate window (the built-in signals use 5s).
    #[serde(with = "crate::util::duration::serde_human")]
    pub persist: Duration,
    /// ... and at least this many scrape intervals of the source.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub persist_scrapes: Option<u32>,
    /// Known healthy capacity of one replica, requests/s: the capacity is this times the
    /// replicas ready now (signal `replicas_ready`). Wins over `capacity_per_s`.
    pub capacity_per_replica: Option<f64>,
    /// Known healthy capacity of the whole service, requests/s (else measured: in the
    /// observed window, in the metrics history, or by Little's law).
    pub capacity_per_s: Option<f64>,
    /// Capacity right after a restart = capacity / cold_factor (else measured).
    pub cold_factor: Option<f64>,
    /// Failing when goodput is below this fraction of the offered rate.
    pub min_goodput_ratio: f64,
    /// Failing when the error ratio is above this.
    pub max_error_ratio: f64,
    /// Failing when p99 latency is above this (e.g. the clients' timeout).
    #[serde(with = "crate::util::duration::serde_human_opt")]
    pub latency_limit: Option<Duration>,
    /// Below this offered rate the goodput rule does not apply (an idle service is fine).
    pub min_offered_per_s: f64,
    /// First-attempt demand above this multiple of the baseline is a spike (a trigger).
    pub spike_factor: f64,
    /// A replica whose `replica_service_time` is above this multiple of its peers'
    /// median, alone and for `persist`, is a slow replica (the gate's outlier ejection
    /// uses the same factor by default).
    pub slow_replica_factor: f64,
    /// Baseline first-attempt demand, requests/s (else measured while healthy).
    pub demand_per_s: Option<f64>,
    /// Healthy mean service time (else measured while healthy); used to estimate k.
    #[serde(with = "crate::util::duration::serde_human_opt")]
    pub healthy_service_time: Option<Duration>,
    /// Known work amplification; overrides the estimate.
    pub k: Option<f64>,
    /// Estimates of k above this are capped (wasted-work ratios can explode).
    pub k_max: f64,
    /// A window whose newest snapshot is older than this is stale: Unknown.
    #[serde(with = "crate::util::duration::serde_human")]
    pub stale_after: Duration,
    /// How far back to search the metrics history (a Prometheus source) for the last
    /// healthy period, when the observed window has none.
    #[serde(with = "crate::util::duration::serde_human")]
    pub lookback: Duration,
}

impl Default for DetectorConfig {
    fn default() -> Self {
        DetectorConfig {
            grace: Duration::from_secs(5),
            grace_scrapes: None,
            persist: Duration::from_secs(10),
            persist_scrapes: None,
            capacity_per_replica: None,
            capacity_per_s: None,
            cold_factor: None,
            min_goodput_ratio: 0.5,
            max_error_ratio: 0.5,
            latency_limit: None,
            min_offered_per_s: 0.5,
            spike_factor: 1.5,
            slow_replica_factor: 3.0,
            demand_per_s: None,
            healthy_service_time: None,
            k: None,
            k_max: 20.0,
            stale_after: Duration::from_secs(30),
            lookback: Duration::from_secs(24 * 3600),
        }
    }
}

/// What the detector concluded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictKind {
    Healthy,
    Triggered,
    Stuck,
    /// One replica far slower than its peers while the service keeps up with its load:
    /// not a stuck overload (see [`slow_replica`]).
    SlowReplica,
    /// The default: a verdict nobody computed claims nothing.
    #[default]
    Unknown,
}

impl VerdictKind {
    /// The `recover detect` exit code for this verdict.
    pub fn exit(self) -> crate::exit::Exit {
        use crate::exit::Exit;
        match self {
            VerdictKind::Healthy => Exit::Done,
            VerdictKind::Triggered => Exit::Triggered,
            VerdictKind::Stuck => Exit::Stuck,
            VerdictKind::SlowReplica => Exit::SlowReplica,
            VerdictKind::Unknown => Exit::Unknown,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            VerdictKind::Healthy => "healthy",
            VerdictKind::Triggered => "triggered",
            VerdictKind::Stuck => "stuck",
            VerdictKind::SlowReplica => "slow_replica",
            VerdictKind::Unknown => "unknown",
        }
    }
}

/// One fact behind a verdict.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    pub signal: String,
    pub value: Option<f64>,
    pub note: String,
    /// Since when this has been true (RFC 3339), when the detector knows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// For how long, seconds, up to the newest snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub for_s: Option<f64>,
}

impl Evidence {
    pub fn new(signal: &str, value: Option<f64>, note: impl Into<String>) -> Self {
        Evidence {
            signal: signal.to_string(),
            value,
            note: note.into(),
            since: None,
            for_s: None,
        }
    }

    /// The fact in words, as `recover detect` prints it and a refused run repeats it:
    /// `signal = value: note (for Ns)`, without the value when there is none.
    pub fn describe(&self) -> String {
        let val = self.value.map(|x| format!(" = {x:.3}")).unwrap_or_default();
        let since = self
            .for_s
            .map(|s| format!(" (for {s:.1}s)"))
            .unwrap_or_default();
        format!("{}{val}: {}{since}", self.signal, self.note)
    }

    /// Mark this fact as true since `since`, as of `now`.
    pub fn since(mut self, since: SystemTime, now: SystemTime) -> Self {
        self.since = Some(humantime::format_rfc3339_millis(since).to_string());
        self.for_s = Some(now.duration_since(since).unwrap_or_default().as_secs_f64());
        self
    }
}

/// The verdict with its estimates and evidence.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub verdict: VerdictKind,
    pub k: Option<f64>,
    pub arrival_rate: Option<f64>,
    pub capacity: Option<f64>,
    pub capacity_cold: Option<f64>,
    pub evidence: Vec<Evidence>,
    /// One line a person reads first.
    #[serde(default)]
    pub summary: String,
    /// Where k came from (which signals), when it is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k_from: Option<String>,
    /// Where capacity_cold came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_cold_from: Option<String>,
    /// Where capacity came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_from: Option<String>,
    /// Why k is unknown, when it is (`k` is then null: missing evidence is no number).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k_unknown: Option<String>,
    /// The lowest and highest k candidate considered (see [`estimate::k`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k_range: Option<[f64; 2]>,
    /// Baseline first-attempt demand, req/s, and where it came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub demand: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub demand_from: Option<String>,
    /// Healthy mean service time, seconds, and where it came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthy_service_time: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthy_service_time_from: Option<String>,
    /// What a look back over the metrics history found, when one was made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lookback: Option<Lookback>,
    /// The replica that stands out, when the verdict is SlowReplica.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slow_replica: Option<slow_replica::SlowReplica>,
    /// Which kind of source each estimate has (measured, declared, assumed).
    #[serde(default, skip_serializing_if = "EstimateSources::is_empty")]
    pub sources: EstimateSources,
}

/// The kind of source of each of a verdict's estimates, where it has one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct EstimateSources {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrival_rate: Option<Source>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<Source>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_cold: Option<Source>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k: Option<Source>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub demand: Option<Source>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthy_service_time: Option<Source>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cold_factor: Option<Source>,
}

impl EstimateSources {
    pub fn is_empty(&self) -> bool {
        *self == EstimateSources::default()
    }
}

/// Judge a window of snapshots (oldest first). Pure: no I/O, no clock; "now" is the
/// newest snapshot's time (use [`detect_at`] to also check staleness against a clock).
pub fn detect(window: &[Snapshot], cfg: &DetectorConfig) -> Verdict {
    match window.last() {
        Some(last) => detect_at(window, cfg, last.at),
        None => detect_at(window, cfg, SystemTime::UNIX_EPOCH),
    }
}
