//! The runbook document as written (`apiVersion: recover/v1`, `kind: Runbook`). These
//! types mirror the YAML one to one and reject unknown fields, so a typo is an error with a
//! location rather than a silently ignored setting. Action parameters stay an untyped
//! `with:` value here and are read per action in [`super::action`], so that an unknown
//! action is reported on its `action:` line and bad parameters under `with:`.

use crate::detect::{DetectorConfig, VerdictKind};
use crate::metrics::signal::SignalSpec;
use crate::plan::PlanConfig;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

pub const API_VERSION: &str = "recover/v1";
pub const KIND: &str = "Runbook";

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawRunbook {
    pub api_version: String,
    pub kind: String,
    pub metadata: Metadata,
    pub spec: RawSpec,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Metadata {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Who must act if a run leaves the gate limited (written into the gate's note).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSpec {
    /// What the runbook acts on, e.g. `config-service`; platforms map it to their target.
    pub target: String,
    /// Verdicts in which the runbook may run (default: `[stuck]`).
    #[serde(default = "default_when")]
    pub when: Vec<VerdictKind>,
    /// Named numbers conditions can use as `params.NAME` (e.g. the client timeout).
    #[serde(default)]
    pub params: BTreeMap<String, f64>,
    /// Role -> PromQL label matchers (`job="config-service"`), written `$ROLE` in the
    /// signals' `promql:` expressions.
    #[serde(default)]
    pub roles: BTreeMap<String, String>,
    pub signals: BTreeMap<String, SignalSpec>,
    #[serde(default)]
    pub observe: Observe,
    #[serde(default)]
    pub detect: DetectorConfig,
    #[serde(default)]
    pub plan: PlanConfig,
    #[serde(default)]
    pub checks: BTreeMap<String, RawCheck>,
    /// Conditions checked throughout the run; any true aborts it (on_failure runs).
    #[serde(default)]
    pub abort_when: Vec<String>,
    pub steps: Vec<RawStep>,
    #[serde(default)]
    pub on_failure: Vec<RawStep>,
    /// What a run that succeeds leaves on the gate (default: `restore`).
    #[serde(default)]
    pub handback: Handback,
}

/// What a run that succeeds leaves on the gate after its last step. A limit nobody
/// remembers outlives the incident, so the default gives the gate back as the run found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Handback {
    /// Restore the limit the gate had before the run's first gate action.
    #[default]
    Restore,
    /// Keep the last limit the run set, with its step's review deadline.
    Hold,
}

/// The name of the step that hands the gate back: reserved, no runbook step may take it.
pub const HANDBACK_STEP: &str = "handback";

fn default_when() -> Vec<VerdictKind> {
    vec![VerdictKind::Stuck]
}

/// How the engine watches before deciding: a snapshot every `interval` for `span`
/// (default: what the detector needs to say "stuck", see `detect::observe::span_needed`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Observe {
    #[serde(with = "crate::util::duration::serde_human")]
    pub interval: Duration,
    #[serde(
        with = "crate::util::duration::serde_human_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub span: Option<Duration>,
}

impl Default for Observe {
    fn default() -> Self {
        Observe {
            interval: Duration::from_secs(1),
            span: None,
        }
    }
}

/// What to do when a check cannot be evaluated (a signal has no data).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Inconclusive {
    /// Hold: keep measuring without counting a success; fail after `inconclusive_limit`.
    #[default]
    Pause,
    /// Fail the check at once.
    Fail,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCheck {
    #[serde(
        default = "default_interval",
        with = "crate::util::duration::serde_human"
    )]
    pub interval: Duration,
    /// Give up after this many measurements without passing (None: only the step timeout).
    #[serde(default)]
    pub count: Option<u32>,
    pub success: String,
    /// A measurement that is not a success counts as a failure only if this holds
    /// (default: any non-success is a failure).
    #[serde(default)]
    pub failure: Option<String>,
    /// Failed measurements allowed; past them the check fails (default: no limit, so the
    /// check waits until it passes, `count` runs out or the step times out).
    #[serde(default)]
    pub failure_limit: Option<u32>,
    #[serde(default = "one")]
    pub consecutive_successes: u32,
    #[serde(default)]
    pub inconclusive: Inconclusive,
    #[serde(default = "default_inconclusive_limit")]
    pub inconclusive_limit: u32,
}

fn default_interval() -> Duration {
    Duration::from_secs(1)
}
fn one() -> u32 {
    1
}
fn default_inconclusive_limit() -> u32 {
    10
}

/// One step as written; `with` is read by the action named in `action`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawStep {
    pub name: String,
    pub action: ActionKind,
    #[serde(default)]
    pub with: serde_yaml::Value,
    #[serde(default, with = "crate::util::duration::serde_human_opt")]
    pub timeout: Option<Duration>,
    /// Conditions checked while the step runs; any true aborts the run.
    #[serde(default)]
    pub abort_when: Vec<String>,
    /// Which `spec.on_failure` steps to run if this step fails (default: all of them).
    #[serde(default)]
    pub on_failure: Option<Vec<String>>,
    /// What this step destroys or risks, recorded in the journal and shown in dry runs.
    #[serde(default)]
    pub note: Option<String>,
}

/// The actions a step can take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ActionKind {
    #[serde(rename = "gate.limit")]
    GateLimit,
    #[serde(rename = "gate.ramp")]
    GateRamp,
    #[serde(rename = "backlog.drain")]
    BacklogDrain,
    #[serde(rename = "restart.batched")]
    RestartBatched,
    #[serde(rename = "cache.warm")]
    CacheWarm,
    #[serde(rename = "wait.until")]
    WaitUntil,
    #[serde(rename = "notify")]
    Notify,
}

impl ActionKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ActionKind::GateLimit => "gate.limit",
            ActionKind::GateRamp => "gate.ramp",
            ActionKind::BacklogDrain => "backlog.drain",
            ActionKind::RestartBatched => "restart.batched",
            ActionKind::CacheWarm => "cache.warm",
            ActionKind::WaitUntil => "wait.until",
            ActionKind::Notify => "notify",
        }
    }
}
