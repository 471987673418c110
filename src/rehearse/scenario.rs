//! The rehearsal's scenario: the system's numbers (replicas, workers, service costs, the
//! trigger) and the rehearsal's own timings, loadable from YAML (`--scenario FILE`).
//!
//! Why it exists: the default must reproduce the laptop scenario of the demo system, and a
//! team must be able to rehearse its own numbers without touching code. Every field has a
//! default; a file names only what it changes. Unknown fields are refused (a typo must not
//! silently rehearse the default).

use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Duration;

use crate::demo::defaults;
pub use crate::demo::topology::{ServiceSpec, WorkersSpec};
use crate::util::duration::serde_human;

/// Everything a rehearsal needs to know about the system it builds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Scenario {
    pub name: String,
    /// Config-service replicas behind the gate.
    pub replicas: u32,
    pub service: ServiceSpec,
    pub workers: WorkersSpec,
    /// The trigger: how long a restarted replica stays unavailable.
    #[serde(with = "serde_human")]
    pub outage: Duration,
    /// Steady state must hold this long before the trigger fires.
    #[serde(with = "serde_human")]
    pub steady: Duration,
    /// Steady state must hold this long after the runbook for "recovered".
    #[serde(with = "serde_human")]
    pub hold: Duration,
    /// How often the detector and the engine scrape every `/metrics` page: the monitoring
    /// the runbook sees.
    #[serde(with = "serde_human")]
    pub scrape_interval: Duration,
    /// How often the recorder, the rehearsal's outside view, scrapes every page: the
    /// resolution of the measured time to recover and of the bound it is compared with.
    /// Finer than the monitoring, because a time to recover read on a 0.5 s grid is off by
    /// up to 0.5 s, half of a 1 s bound, and a ratio that coarse cannot tell a 1.5x band.
    #[serde(with = "serde_human")]
    pub record_interval: Duration,
    /// Rates and p99 are computed over this window.
    #[serde(with = "serde_human")]
    pub rate_window: Duration,
    /// Give up waiting for the detector to say Stuck after this long past the trigger.
    #[serde(with = "serde_human")]
    pub detect_timeout: Duration,
    /// Give up on the runbook (and steady state) after this long.
    #[serde(with = "serde_human")]
    pub recovery_timeout: Duration,
    /// Each baseline is watched this long after the trigger ended.
    #[serde(with = "serde_human")]
    pub baseline_observe: Duration,
    /// Start detection and the engine only this long after the trigger ended: the
    /// service has been stuck that long before anyone looked (the 3 am case). The
    /// detection window starts then; the scrapes from before stay the metrics history a
    /// Prometheus would have retained, which the detector looks back over for the
    /// healthy reference. Plan inputs come from that, the window and the runbook, not
    /// from what the rehearsal configured. None: watch from before the trigger.
    #[serde(
        default,
        with = "crate::util::duration::serde_human_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub attach_after: Option<Duration>,
    /// Rehearse one slow replica instead of a stuck overload (see
    /// [`super::slow_replica`]); the stuck-overload fields `outage` and `attach_after`
    /// play no part then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slow_replica: Option<SlowReplicaSpec>,
}

/// The slow-replica rehearsal: which replica turns slow, how much, and how the gate
/// balances in the run and in its round-robin baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SlowReplicaSpec {
    /// Index of the replica made slow (0-based; replica-1 is "B").
    pub replica: u32,
    /// Its work costs this many times more (`POST /admin/slow`), from steady state on.
    pub factor: f64,
    /// `recover gate` flags of the run (balancing, outlier ejection).
    pub gate_args: Vec<String>,
    /// `recover gate` flags of the baseline, which has no runbook.
    pub baseline_gate_args: Vec<String>,
    /// p99 is measured over this long: healthy before the slowdown, in the baseline after
    /// it, and after the runbook.
    #[serde(with = "serde_human")]
    pub measure: Duration,
}

impl Default for SlowReplicaSpec {
    fn default() -> Self {
        SlowReplicaSpec {
            replica: 1,
            factor: 5.0,
            gate_args: vec!["--balance".into(), "least-outstanding".into()],
            baseline_gate_args: vec![
                "--balance".into(),
                "round-robin".into(),
                "--no-outlier-ejection".into(),
            ],
            measure: Duration::from_secs(10),
        }
    }
}

impl Default for Scenario {
    fn default() -> Self {
        Scenario {
            name: "laptop".into(),
            replicas: 1,
            service: ServiceSpec::default(),
            workers: WorkersSpec::default(),
            outage: defaults::OUTAGE,
            steady: Duration::from_secs(3),
            hold: Duration::from_secs(8),
            scrape_interval: Duration::from_millis(500),
            record_interval: Duration::from_millis(100),
            rate_window: Duration::from_secs(2),
            detect_timeout: Duration::from_secs(40),
            recovery_timeout: Duration::from_secs(70),
            baseline_observe: Duration::from_secs(30),
            attach_after: None,
            slow_replica: None,
        }
    }
}

/// A scenario file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("{path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    /// serde_yaml's message carries line and column; the path names the field.
    #[error("{path}: field `{field}`: {message}")]
    Parse {
        path: String,
        field: String,
        message: String,
    },
    #[error("{path}: field `{field}`: {message}")]
    Invalid {
        path: String,
        field: &'static str,
        message: String,
    },
}

impl Scenario {
    /// Load a scenario file; fields it omits keep their defaults.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
            path: shown.clone(),
            source,
        })?;
        Self::parse(&text, &shown)
    }

    /// Parse scenario YAML; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Scenario, ScenarioError> {
        let de = serde_yaml::Deserializer::from_str(text);
        let sc: Scenario =
            serde_path_to_error::deserialize(de).map_err(|e| ScenarioError::Parse {
                path: origin.to_string(),
                field: e.path().to_string(),
                message: e.inner().to_string(),
            })?;
        sc.validate(origin)?;
        Ok(sc)
    }

    fn validate(&self, origin: &str) -> Result<(), ScenarioError> {
        let bad = |field: &'static str, message: &str| {
            Err(ScenarioError::Invalid {
                path: origin.to_string(),
                field,
                message: message.to_string(),
            })
        };
        if self.replicas == 0 {
            return bad("replicas", "must be at least 1");
        }
        if self.workers.count == 0 {
            return bad("workers.count", "must be at least 1");
        }
        if self.workers.interval.is_zero() {
            return bad("workers.interval", "must be more than 0s");
        }
        if self.service.concurrency == 0 || self.service.service_time.is_zero() {
            return bad(
                "service",
                "concurrency and service_time must be more than 0",
            );
        }
        if self.scrape_interval < Duration::from_millis(100) {
            return bad("scrape_interval", "must be at least 100ms");
        }
        // The prediction reads steady on the same steps, on the simulator's ticks.
        let tick = crate::simulate::SystemParams::default().tick;
        if self.record_interval < Duration::from_millis(50)
            || self.record_interval > self.scrape_interval
            || !self
                .record_interval
                .as_nanos()
                .is_multiple_of(tick.as_nanos())
        {
            return bad(
                "record_interval",
                &format!(
                    "must be a whole number of {}, at least 50ms and at most scrape_interval",
                    crate::util::duration::format(tick)
                ),
            );
        }
        if self.rate_window < self.scrape_interval {
            return bad("rate_window", "must be at least one scrape_interval");
        }
        if let Some(sr) = &self.slow_replica {
            if sr.replica >= self.replicas || self.replicas < 3 {
                return bad(
                    "slow_replica.replica",
                    "must be the index of one of at least 3 replicas (0-based)",
                );
            }
            if !crate::demo::config_service::valid_slow_factor(sr.factor) {
                return bad("slow_replica.factor", "must be a number >= 1");
            }
            if sr.measure < self.rate_window {
                return bad("slow_replica.measure", "must be at least one rate_window");
            }
        }
        Ok(())
    }

    /// Normal demand, requests/s: every worker polls once per interval.
    pub fn demand_per_s(&self) -> f64 {
        self.workers.count as f64 / self.workers.interval.as_secs_f64()
    }

    /// Warm capacity of all replicas, requests/s.
    pub fn capacity_per_s(&self) -> f64 {
        self.replicas as f64 * self.service.concurrency as f64
            / self.service.service_time.as_secs_f64()
    }

    /// Capacity right after a restart, requests/s.
    pub fn capacity_cold_per_s(&self) -> f64 {
        self.capacity_per_s() / self.service.cold_factor.max(1.0)
    }

    /// The delay before a client's next attempt, when the policy says (fixed or the base
    /// of an exponential policy); 0 when it cannot be read.
    pub fn retry_delay(&self) -> Duration {
        let r = self.workers.retry.as_str();
        let text = if let Some(d) = r.strip_prefix("fixed:") {
            d
        } else if let Some(i) = r.find("base=") {
            r[i + 5..].split(',').next().unwrap_or("")
        } else {
            ""
        };
        crate::util::duration::parse(text).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_file_keeps_defaults_and_names_bad_fields() {
        let sc = Scenario::parse("replicas: 2\nworkers:\n  count: 400\n", "x.yaml").unwrap();
        assert_eq!(sc.replicas, 2);
        assert_eq!(sc.workers.count, 400);
        assert_eq!(sc.workers.interval, defaults::POLL_INTERVAL);
        assert!((sc.capacity_per_s() - 2.0 * defaults::capacity_warm()).abs() < 1e-9);
        assert_eq!(sc.retry_delay(), Duration::from_secs(1));
        let e = Scenario::parse("workers:\n  cuont: 4\n", "x.yaml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("x.yaml") && e.contains("cuont"), "{e}");
        let e = Scenario::parse("outage: 4\n", "x.yaml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("outage") && e.contains("unit"), "{e}");
        let sc = Scenario::parse(
            "attach_after: 60s\nworkers:\n  attempt_header: none\n",
            "x.yaml",
        )
        .unwrap();
        assert_eq!(sc.attach_after, Some(Duration::from_secs(60)));
        assert_eq!(
            sc.workers.attempt_header,
            crate::demo::workers::AttemptHeader::None
        );
        let e = Scenario::parse("replicas: 0\n", "x.yaml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("replicas"), "{e}");
    }

    /// The recorder reads at most as often as the simulator's ticks allow and no coarser
    /// than the monitoring; each bad value names the field and the file.
    #[test]
    fn the_record_interval_is_checked_against_the_monitorings() {
        let sc = Scenario::parse(
            "record_interval: 250ms
",
            "x.yaml",
        )
        .unwrap();
        assert_eq!(sc.record_interval, Duration::from_millis(250));
        assert_eq!(
            Scenario::default().record_interval,
            Duration::from_millis(100)
        );
        for bad in ["40ms", "105ms", "600ms"] {
            let e = Scenario::parse(&format!("record_interval: {bad}\n"), "x.yaml")
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("x.yaml") && e.contains("record_interval"),
                "{bad}: {e}"
            );
        }
        let sc = Scenario::parse("scrape_interval: 1s\nrecord_interval: 1s\n", "x.yaml");
        assert!(sc.is_ok(), "{sc:?}");
    }

    #[test]
    fn the_shipped_slow_replica_scenario_loads_and_bad_sections_name_the_field() {
        let root = env!("CARGO_MANIFEST_DIR");
        let p = Path::new(root).join("examples/scenarios/slow-replica.yaml");
        let sc = Scenario::load(&p).unwrap();
        let sr = sc.slow_replica.as_ref().expect("a slow_replica section");
        assert_eq!((sc.replicas, sr.replica, sr.factor), (4, 1, 5.0));
        assert!((sc.demand_per_s() - 60.0).abs() < 1e-9);
        for (text, field) in [
            (
                "replicas: 4\nslow_replica:\n  replica: 4\n",
                "slow_replica.replica",
            ),
            ("replicas: 2\nslow_replica: {}\n", "slow_replica.replica"),
            (
                "replicas: 4\nslow_replica:\n  factor: 0.5\n",
                "slow_replica.factor",
            ),
            (
                "replicas: 4\nslow_replica:\n  measure: 1s\n",
                "slow_replica.measure",
            ),
        ] {
            let e = Scenario::parse(text, "x.yaml").unwrap_err().to_string();
            assert!(e.contains(field), "{text}: {e}");
        }
    }
}
