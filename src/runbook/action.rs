//! Each action's parameters (the `with:` block of a step), typed and validated. Quantities
//! may be numbers or expressions over the plan (`plan.admit_rate * 0.5`), so a runbook
//! states its procedure once and the numbers come from the measured plan at run time.

use super::expr::{Expr, Type};
use crate::gate::limit::Fill;
use serde::{Deserialize, Deserializer, Serialize};
use std::time::Duration;

/// A number given directly or computed from `plan.*` / `params.*` at run time.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(transparent)]
pub struct Quantity(pub Expr);

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Num(f64),
            Text(String),
        }
        let raw = Raw::deserialize(d).map_err(|_| {
            serde::de::Error::custom(
                "expected a number or an expression like `plan.admit_rate * 0.5`",
            )
        })?;
        match raw {
            Raw::Num(v) => Ok(Quantity(Expr::number(v))),
            Raw::Text(s) => {
                let e = Expr::parse(&s).map_err(serde::de::Error::custom)?;
                if e.type_of() != Ok(Type::Number) {
                    return Err(serde::de::Error::custom(format!(
                        "{s:?} is a condition; a number is needed here"
                    )));
                }
                Ok(Quantity(e))
            }
        }
    }
}

/// How many replicas to restart at once: a count (`2`) or a share of all (`"25%"`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum BatchSize {
    Count(u32),
    Percent(f64),
}

impl BatchSize {
    /// Replicas per batch out of `total`: at least one, at most all.
    pub fn per_batch(self, total: usize) -> usize {
        let n = match self {
            BatchSize::Count(c) => c as usize,
            BatchSize::Percent(p) => ((total as f64) * p / 100.0).ceil() as usize,
        };
        n.clamp(1, total.max(1))
    }
}

impl<'de> Deserialize<'de> for BatchSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Count(i64),
            Text(String),
        }
        match Raw::deserialize(d)
            .map_err(|_| D::Error::custom("expected a count like 2 or a percentage like \"25%\""))?
        {
            Raw::Count(c) if c >= 1 && c <= u32::MAX as i64 => Ok(BatchSize::Count(c as u32)),
            Raw::Count(c) => Err(D::Error::custom(format!(
                "batch count {c} must be at least 1"
            ))),
            Raw::Text(s) => {
                let pct = s
                    .trim()
                    .strip_suffix('%')
                    .and_then(|n| n.trim().parse::<f64>().ok())
                    .ok_or_else(|| {
                        D::Error::custom(format!("bad percentage {s:?}; write it like \"25%\""))
                    })?;
                if !(pct > 0.0 && pct <= 100.0) {
                    return Err(D::Error::custom(format!(
                        "percentage {s:?} must be more than 0% and at most 100%"
                    )));
                }
                Ok(BatchSize::Percent(pct))
            }
        }
    }
}

fn plan_admit_rate() -> Quantity {
    Quantity(Expr::parse("plan.admit_rate").expect("constant expression"))
}
fn plan_step_factor() -> Quantity {
    Quantity(Expr::parse("plan.step_factor").expect("constant expression"))
}

/// `gate.limit`: set the gate's limit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateLimit {
    /// Admitted requests/s, or the string `unlimited`.
    pub rate: RateSetting,
    #[serde(default)]
    pub burst: Option<u32>,
    #[serde(default)]
    pub max_in_flight: Option<Quantity>,
    /// Why the limit is set and who must act; the engine adds the run id and deadline.
    #[serde(default)]
    pub note: Option<String>,
    /// How long this limit may stand unattended; required when it blocks everything.
    #[serde(default, with = "crate::util::duration::serde_human_opt")]
    pub deadline: Option<Duration>,
    /// Put the limit in shadow: the gate decides every request by it and counts what it
    /// would refuse, refusing nothing (what the shed would do to today's traffic).
    #[serde(default)]
    pub shadow: bool,
    /// How the new limit's bucket starts (`full`: its burst passes at once, then the rate
    /// holds). Default: carried, at most what the old limit had left, none after no limit.
    #[serde(default, skip_serializing_if = "Fill::is_carried")]
    pub fill: Fill,
}

/// A rate or no rate limit at all.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum RateSetting {
    Unlimited,
    Rate(Quantity),
}

impl<'de> Deserialize<'de> for RateSetting {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = serde_yaml::Value::deserialize(d)?;
        if v.as_str() == Some("unlimited") {
            return Ok(RateSetting::Unlimited);
        }
        Quantity::deserialize(v)
            .map(RateSetting::Rate)
            .map_err(serde::de::Error::custom)
    }
}

/// `gate.ramp`: raise the rate step by step, checking between steps, until the gate no
/// longer rejects anything.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateRamp {
    #[serde(default = "plan_admit_rate")]
    pub from: Quantity,
    #[serde(default = "plan_step_factor")]
    pub factor: Quantity,
    /// A fixed wait at each rate before its check (default none: each rate stands until
    /// the check has its `consecutive_successes`).
    #[serde(default, with = "crate::util::duration::serde_human_opt")]
    pub hold: Option<Duration>,
    /// How long after the ramp starts only its check's passes count, failures not: the
    /// signals' rate windows still show the drain and restart before it (default 5s, the
    /// built-in signals' window; none when the step sets a `hold`).
    #[serde(default, with = "crate::util::duration::serde_human_opt")]
    pub settle: Option<Duration>,
    /// Name of a check in `spec.checks` that must pass at each step.
    pub check: String,
    /// Relapses tolerated (step back and hold) before the ramp fails.
    #[serde(default = "three")]
    pub max_relapses: u32,
    /// Holds at the last rate while the gate still rejects, before the ramp leaves the
    /// limit there instead of lifting it.
    #[serde(default = "three")]
    pub ceiling_holds: u32,
    /// Signal whose value is the gate's rejected rate; the limit is lifted once it is
    /// (next to) zero.
    #[serde(default = "rejected_signal")]
    pub rejected_signal: String,
    #[serde(default)]
    pub burst: Option<u32>,
    #[serde(default)]
    pub note: Option<String>,
}

/// How long after the readmission starts only successes of its check count, when the step
/// names no `settle`: the built-in signals rate over 5 s windows, so for that long a source
/// that cannot cut them at the ramp's start still shows the drain and the restart.
pub const DEFAULT_RAMP_SETTLE: Duration = Duration::from_secs(5);

impl GateRamp {
    /// How long only the check's passes count: as the step says; else none after a fixed
    /// hold (it already let the windows move on), else [`DEFAULT_RAMP_SETTLE`].
    pub fn settle(&self) -> Duration {
        self.settle.unwrap_or(if self.hold.is_some() {
            Duration::ZERO
        } else {
            DEFAULT_RAMP_SETTLE
        })
    }
}

fn three() -> u32 {
    3
}
fn rejected_signal() -> String {
    crate::metrics::signal::names::GATE_REJECTED_RATE.to_string()
}

/// `backlog.drain`: drop every replica's queued work, or all but what each replica still
/// answers in time (`keep: answerable`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct BacklogDrain {
    /// What each replica keeps of its queue (default `none`: drop it all).
    #[serde(default)]
    pub keep: DrainKeep,
}

/// What a drain keeps of the queue: a `backlog.drain` step's `keep`, sent to each replica as
/// `POST /admin/drain?keep=...` (no `keep` keeps nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DrainKeep {
    /// Drop every queued request.
    #[default]
    None,
    /// Keep the youngest queued requests the replica still answers before their clients'
    /// deadlines (`platform::admin::answerable`); drop the rest: those whose clients have given up or
    /// will have before their turn. Their clients are answered at once instead of failing
    /// and coming back a retry delay later, all together.
    Answerable,
}

impl DrainKeep {
    pub fn as_str(self) -> &'static str {
        match self {
            DrainKeep::None => "none",
            DrainKeep::Answerable => "answerable",
        }
    }
}

/// `restart.batched`: restart replicas a batch at a time, each batch ready before the next.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RestartBatched {
    pub batch: BatchSize,
    #[serde(default = "sixty", with = "crate::util::duration::serde_human")]
    pub ready_timeout: Duration,
    /// Pause between batches.
    #[serde(default, with = "crate::util::duration::serde_human")]
    pub pause: Duration,
    /// Which replicas: `all` (default), or `slow`, the one the detector named in a
    /// slow-replica verdict (the runbook's `when` must include `slow_replica`).
    #[serde(default)]
    pub replicas: ReplicaSelect,
    /// `always` (default) restarts whatever `replicas` selects; `needed` restarts only
    /// what the evidence says a drain cannot fix (decided by the engine at the step).
    #[serde(default)]
    pub when: RestartWhen,
}

/// When a `restart.batched` step restarts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RestartWhen {
    #[default]
    Always,
    /// Only where a drain does not suffice: a replica not ready, one named slow, one not
    /// drained, or a gate admitting as much as the service answers warm.
    Needed,
}

/// The replicas a restart acts on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplicaSelect {
    #[default]
    All,
    /// The replica of the run's slow-replica verdict, and no other.
    Slow,
}

fn sixty() -> Duration {
    Duration::from_secs(60)
}

/// `cache.warm`: ask every replica to warm, then wait until the warm signal passes a
/// threshold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheWarm {
    #[serde(default = "warm_signal")]
    pub signal: String,
    pub threshold: f64,
    #[serde(default = "default_poll", with = "crate::util::duration::serde_human")]
    pub poll: Duration,
}

fn warm_signal() -> String {
    crate::metrics::signal::names::WARM_FRACTION.to_string()
}
fn default_poll() -> Duration {
    Duration::from_secs(1)
}

/// `wait.until`: run a check until it passes or fails.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WaitUntil {
    pub check: String,
}

/// `notify`: tell people (log line, platform event, run report).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Notify {
    pub message: String,
}

/// The hand-back after the last step (never written in a runbook: `spec.handback`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GateHandback {
    pub mode: super::schema::Handback,
}

/// How the hand-back step's action is named in reports and the journal.
pub const GATE_HANDBACK: &str = "gate.handback";

/// A step's action with its typed parameters.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action {
    GateLimit(GateLimit),
    GateRamp(GateRamp),
    BacklogDrain(BacklogDrain),
    RestartBatched(RestartBatched),
    CacheWarm(CacheWarm),
    WaitUntil(WaitUntil),
    Notify(Notify),
    GateHandback(GateHandback),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_sizes() {
        let b: BatchSize = serde_yaml::from_str("\"25%\"").unwrap();
        assert_eq!(b.per_batch(6), 2);
        assert_eq!(BatchSize::Count(10).per_batch(3), 3);
        assert!(serde_yaml::from_str::<BatchSize>("\"150%\"").is_err());
        assert!(serde_yaml::from_str::<BatchSize>("0").is_err());
        assert!(serde_yaml::from_str::<BatchSize>("\"half\"").is_err());
    }

    #[test]
    fn quantities() {
        let q: Quantity = serde_yaml::from_str("plan.admit_rate * 0.5").unwrap();
        assert_eq!(q.0.source, "plan.admit_rate * 0.5");
        let q: Quantity = serde_yaml::from_str("12.5").unwrap();
        assert_eq!(q.0.eval(&|_| None), super::super::expr::Value::Number(12.5));
        assert!(serde_yaml::from_str::<Quantity>("goodput > 1").is_err());
    }
}
