//! What a look back over the metrics history found: the last healthy period and what was
//! measured in it. Its own module, below both the look back that finds it
//! ([`super::lookback`], which measures with the estimator) and the estimator and verdict
//! that read it, so neither imports the other.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The last healthy period found, with what was measured in it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HealthyPeriod {
    /// RFC 3339, first and last healthy snapshot.
    pub from: String,
    pub to: String,
    /// Seconds before the end of the history that the period ended.
    pub ended_ago_s: f64,
    pub snapshots: usize,
    /// Highest work rate (else goodput) in the period, req/s: a lower bound on capacity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<f64>,
    /// Mean service time over the period's warm scrapes (warm throughout their rate
    /// window, `estimate::warm_throughout`), seconds: a cold service is healthy
    /// and slower.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_time: Option<f64>,
    /// The cold factor the period's calm cold scrapes show against that service time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cold_factor: Option<f64>,
    /// How the cold factor was measured, or why it was not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cold_factor_from: Option<String>,
    /// Mean first-attempt rate in the period, req/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub demand: Option<f64>,
}

impl HealthyPeriod {
    /// "2026-11-30T01:00:00Z .. 2026-11-30T02:10:00Z (metrics history)", for evidence.
    pub fn range(&self) -> String {
        format!("{} .. {} (metrics history)", self.from, self.to)
    }
}

/// The highest value of a signal in the history, and when.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Peak {
    pub value: f64,
    pub at: String,
}

/// What a look back over the history found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lookback {
    #[serde(with = "crate::util::duration::serde_human")]
    pub span: Duration,
    #[serde(with = "crate::util::duration::serde_human")]
    pub step: Duration,
    /// Snapshots with at least one value.
    pub points: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthy: Option<HealthyPeriod>,
    /// Evidence for an operator asked for a number: the best the service did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_goodput: Option<Peak>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_work: Option<Peak>,
    /// What was found, in words.
    pub note: String,
}
