//! The stuck-state detector: a pure function from a window of signal snapshots to a
//! verdict (Healthy, Triggered, Stuck, Unknown) with its evidence and the estimates the
//! plan needs (work amplification k, capacity, cold capacity).
//!
//! CONTRACT (lead): `detect`, `DetectorConfig`, `Verdict` and `VerdictKind` are what the
//! engine, the rehearsal and the webhook receiver call. Fields may be added; keep these.

use crate::metrics::signal::Snapshot;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Detection settings; the `spec.detect` section of a runbook.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DetectorConfig {
    /// The trigger must have been gone at least this long before "stuck" is said.
    #[serde(with = "crate::util::duration::serde_human")]
    pub grace: Duration,
    /// The failure must have persisted at least this long.
    #[serde(with = "crate::util::duration::serde_human")]
    pub persist: Duration,
    /// Known healthy capacity, requests/s (else measured in the last healthy window).
    pub capacity_per_s: Option<f64>,
    /// Capacity right after a restart = capacity / cold_factor (else measured).
    pub cold_factor: Option<f64>,
}

impl Default for DetectorConfig {
    fn default() -> Self {
        DetectorConfig {
            grace: Duration::from_secs(5),
            persist: Duration::from_secs(10),
            capacity_per_s: None,
            cold_factor: None,
        }
    }
}

/// What the detector concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictKind {
    Healthy,
    Triggered,
    Stuck,
    Unknown,
}

/// One fact behind a verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    pub signal: String,
    pub value: Option<f64>,
    pub note: String,
}

/// The verdict with its estimates and evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub verdict: VerdictKind,
    pub k: Option<f64>,
    pub arrival_rate: Option<f64>,
    pub capacity: Option<f64>,
    pub capacity_cold: Option<f64>,
    pub evidence: Vec<Evidence>,
}

/// Judge a window of snapshots (oldest first). Pure: no I/O, no clock.
pub fn detect(window: &[Snapshot], _cfg: &DetectorConfig) -> Verdict {
    // Placeholder until issue 4 lands: never claims more than it knows.
    let _ = window;
    Verdict {
        verdict: VerdictKind::Unknown,
        k: None,
        arrival_rate: None,
        capacity: None,
        capacity_cold: None,
        evidence: vec![],
    }
}
