//! Signals: named measurements a runbook defines and the detector and checks consume.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::SystemTime;

/// Well-known signal names the detector and planner understand. A runbook maps each to an
/// expression; other names are allowed for checks.
pub mod names {
    /// Requests per second arriving at the edge (first attempts and retries).
    pub const OFFERED_RATE: &str = "offered_rate";
    /// First attempts per second: the clients' real demand.
    pub const FIRST_ATTEMPT_RATE: &str = "first_attempt_rate";
    /// Useful responses per second (answered in time to a client still waiting).
    pub const GOODPUT: &str = "goodput";
    /// Fraction of attempts that failed (0..1).
    pub const ERROR_RATIO: &str = "error_ratio";
    /// 99th percentile latency, seconds.
    pub const LATENCY_P99: &str = "latency_p99";
    /// Requests queued at the service.
    pub const QUEUE_DEPTH: &str = "queue_depth";
    /// Completions per second at the service, useful plus abandoned.
    pub const WORK_RATE: &str = "work_rate";
    /// Mean service time per request now, seconds.
    pub const SERVICE_TIME: &str = "service_time";
    /// Fraction of the service's caches that are warm (0..1).
    pub const WARM_FRACTION: &str = "warm_fraction";
    /// Replicas not ready.
    pub const REPLICAS_NOT_READY: &str = "replicas_not_ready";
    /// Replicas ready now (capacity per replica times this is the declared capacity).
    pub const REPLICAS_READY: &str = "replicas_ready";
    /// Requests the service works on at once, summed over replicas (its concurrency
    /// limit): with the healthy service time, Little's law gives its capacity.
    pub const CONCURRENCY_LIMIT: &str = "concurrency_limit";
    /// Non-zero while a trigger is still active (restart in progress, spike on).
    pub const TRIGGER_ACTIVE: &str = "trigger_active";
    /// Requests per second the gate rejects.
    pub const GATE_REJECTED_RATE: &str = "gate_rejected_rate";
    /// Requests per second the gate admits.
    pub const GATE_ADMITTED_RATE: &str = "gate_admitted_rate";
    /// Clients currently in a retry loop.
    pub const CLIENTS_RETRYING: &str = "clients_retrying";
    /// The clients' own timeout per attempt, seconds, as they export it (the live view
    /// shows p99 against it; without it, against the runbook's `params.client_timeout_s`).
    pub const CLIENT_TIMEOUT: &str = "client_timeout";
    /// Per replica (see [`super::SignalSpec::per_replica`]): mean work time per request
    /// at that replica, seconds. One replica far above its peers is a slow replica.
    pub const REPLICA_SERVICE_TIME: &str = "replica_service_time";
    /// Replicas the gate has ejected as latency outliers now.
    pub const UPSTREAMS_EJECTED: &str = "upstreams_ejected";
    /// Readmission's view: useful completions/s over the short window.
    pub const GOODPUT_RECENT: &str = "goodput_recent";
    /// Readmission's view: requests/s the gate admits, over the short window.
    pub const GATE_ADMITTED_RECENT: &str = "gate_admitted_recent";
    /// Readmission's view: the gate's p99 of the service's latency over the short window.
    pub const LATENCY_P99_RECENT: &str = "latency_p99_recent";
}

/// How to measure one signal: an expression over scraped `/metrics`, a PromQL query, or
/// both (the source in use picks its own).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignalSpec {
    /// Expression over scraped metrics; grammar in `metrics::scrape::expr`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scrape: Option<String>,
    /// PromQL instant query.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promql: Option<String>,
    /// Human description, shown in evidence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub help: Option<String>,
    /// One value per service replica instead of one number: the scrape source evaluates
    /// `scrape` against each `service` target alone; a `promql` query must return one
    /// series per replica, named by its `pod` label (else `instance`). The readings are
    /// stored as `NAME{REPLICA}` (see [`replica_key`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub per_replica: bool,
}

/// The reading key of per-replica signal `name` for `replica`: `name{replica}`.
pub fn replica_key(name: &str, replica: &str) -> String {
    format!("{name}{{{replica}}}")
}

/// One signal's value now, or why there is none. "No data" is never a zero.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Reading {
    Value {
        value: f64,
    },
    /// The query ran and matched nothing (series absent, target down, not enough history).
    Missing {
        reason: String,
    },
}

impl Reading {
    pub fn value(&self) -> Option<f64> {
        match self {
            Reading::Value { value } if value.is_finite() => Some(*value),
            _ => None,
        }
    }
}

/// Every signal's reading at one instant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    #[serde(with = "crate::util::time::rfc3339")]
    pub at: SystemTime,
    pub readings: BTreeMap<String, Reading>,
}

impl Snapshot {
    pub fn get(&self, name: &str) -> Option<f64> {
        self.readings.get(name).and_then(Reading::value)
    }

    /// Per-replica signal `name`: replica -> value, for the replicas that have one.
    pub fn per_replica(&self, name: &str) -> BTreeMap<String, f64> {
        let prefix = format!("{name}{{");
        self.readings
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .filter_map(|(k, r)| {
                let replica = k[prefix.len()..].strip_suffix('}')?;
                Some((replica.to_string(), r.value()?))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_replica_readings_are_found_by_their_signal_name_only() {
        let mut readings = BTreeMap::new();
        for (k, v) in [("x{r0}", 1.0), ("x{r1}", 2.0), ("x", 9.0), ("xy{r0}", 5.0)] {
            readings.insert(k.to_string(), Reading::Value { value: v });
        }
        readings.insert(
            replica_key("x", "r2"),
            Reading::Missing {
                reason: "no requests".into(),
            },
        );
        let s = Snapshot {
            at: SystemTime::UNIX_EPOCH,
            readings,
        };
        let got: Vec<_> = s.per_replica("x").into_iter().collect();
        assert_eq!(got, vec![("r0".to_string(), 1.0), ("r1".to_string(), 2.0)]);
    }
}
