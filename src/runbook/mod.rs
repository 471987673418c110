//! Runbooks: versioned YAML documents naming signals, detection, plan and steps, loaded
//! and validated (file:line:column and field path) before anything runs.
//!
//! A runbook is found by path, by name in `--runbook-dir`, `./runbooks/`, or among the
//! runbooks built into the binary, so `recover --runbook stuck-overload` works anywhere.

pub mod action;
mod detection;
mod error;
pub mod expr;
mod find;
mod gaps;
mod limits;
mod load;
mod roles;
pub mod schema;
mod starter;
mod validate;

pub use detection::{detection, Detection, DetectionError};
pub use error::{Diagnostic, RunbookError};
pub use find::{embedded, find, find_with_roles, list, ListedRunbook};
pub use gaps::detection_gaps;
pub use load::{load_file, parse_str, parse_str_with_roles};
pub use starter::starter;

use crate::detect::{DetectorConfig, VerdictKind};
use crate::metrics::signal::SignalSpec;
use crate::plan::PlanConfig;
use action::Action;
use expr::Expr;
use schema::{Inconclusive, Observe};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// A validated runbook: every reference resolved, every number in range.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Runbook {
    pub name: String,
    pub description: String,
    pub owner: Option<String>,
    pub target: String,
    pub when: Vec<VerdictKind>,
    pub params: BTreeMap<String, f64>,
    /// Role -> the PromQL label matchers that select its series (already bound into the
    /// signals' `promql:`; kept to check that each role selects something).
    pub roles: BTreeMap<String, String>,
    pub signals: BTreeMap<String, SignalSpec>,
    pub observe: Observe,
    pub detect: DetectorConfig,
    pub plan: PlanConfig,
    pub checks: BTreeMap<String, Check>,
    pub abort_when: Vec<Expr>,
    pub steps: Vec<Step>,
    pub on_failure: Vec<Step>,
    /// What a run that succeeds leaves on the gate.
    pub handback: schema::Handback,
}

impl Runbook {
    /// The step after the last one that hands the gate back (`spec.handback`). It is not
    /// written in the runbook; the engine runs it, the journal records it and the dry run
    /// shows it like any other step.
    pub fn handback_step(&self) -> Step {
        Step {
            name: schema::HANDBACK_STEP.to_string(),
            action: Action::GateHandback(action::GateHandback {
                mode: self.handback,
            }),
            timeout: None,
            abort_when: Vec::new(),
            on_failure: None,
            note: None,
        }
    }

    /// The main steps, then the hand-back.
    pub fn main_steps(&self) -> Vec<Step> {
        let mut steps = self.steps.clone();
        steps.push(self.handback_step());
        steps
    }

    /// How long to watch before deciding: `observe.span`, else what the detector needs to
    /// be able to say Stuck. The engine and the webhook receiver observe the same window.
    pub fn observe_span(&self) -> Duration {
        let rate_window = crate::util::duration::parse(crate::detect::default_signals::RATE_WINDOW)
            .unwrap_or(Duration::from_secs(5));
        self.observe.span.unwrap_or_else(|| {
            crate::detect::observe::span_needed(&self.detect, rate_window, self.observe.interval)
        })
    }

    /// The runbook as it must judge data sampled every `scrape` (a Prometheus source): grace
    /// and persist stretched to their `*_scrapes` (or refused when they cannot be measured
    /// there), observations and check measurements no closer than one scrape (two passes
    /// on the same data are one piece of evidence), a readmission that settles for at least
    /// one rate window (Prometheus' windows cannot be cut at the ramp's start), a fixed
    /// PromQL range shorter than two scrapes refused as `recover detect` refuses it, and a
    /// window long enough to say Stuck with rates over the rate window
    /// ([`crate::detect::windows::at_scrape`]). Unchanged when the reads are the scrapes.
    pub fn at_resolution(
        &self,
        scrape: Option<Duration>,
    ) -> Result<Runbook, crate::detect::windows::WindowError> {
        use crate::detect::windows;
        let Some(scrape) = scrape.filter(|s| !s.is_zero()) else {
            return Ok(self.clone());
        };
        let at = windows::at_scrape(
            &self.detect,
            &windows::Fields::runbook(),
            &self.signals,
            scrape,
            self.observe.interval,
            self.observe.span,
        )?;
        let mut rb = self.clone();
        rb.observe.span = Some(at.span.max(at.step));
        rb.observe.interval = at.step;
        rb.detect = at.config;
        for check in rb.checks.values_mut() {
            check.interval = check.interval.max(scrape);
        }
        for step in rb.steps.iter_mut().chain(rb.on_failure.iter_mut()) {
            if let Action::GateRamp(ramp) = &mut step.action {
                ramp.settle = Some(ramp.settle().max(at.rate_window));
            }
        }
        Ok(rb)
    }
}

/// A repeated measurement with a verdict, modelled on Argo Rollouts analysis runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Check {
    #[serde(with = "crate::util::duration::serde_human")]
    pub interval: Duration,
    pub count: Option<u32>,
    pub success: Expr,
    pub failure: Option<Expr>,
    /// None: no limit (the check waits until it passes, `count` or the step's timeout).
    pub failure_limit: Option<u32>,
    pub consecutive_successes: u32,
    pub inconclusive: Inconclusive,
    pub inconclusive_limit: u32,
}

/// One step of a runbook.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    pub name: String,
    #[serde(flatten)]
    pub action: Action,
    #[serde(with = "crate::util::duration::serde_human_opt")]
    pub timeout: Option<Duration>,
    pub abort_when: Vec<Expr>,
    pub on_failure: Option<Vec<String>>,
    pub note: Option<String>,
}

impl Step {
    pub fn action_name(&self) -> &'static str {
        use schema::ActionKind as K;
        match &self.action {
            Action::GateLimit(_) => K::GateLimit,
            Action::GateRamp(_) => K::GateRamp,
            Action::BacklogDrain(_) => K::BacklogDrain,
            Action::RestartBatched(_) => K::RestartBatched,
            Action::CacheWarm(_) => K::CacheWarm,
            Action::WaitUntil(_) => K::WaitUntil,
            Action::Notify(_) => K::Notify,
            Action::GateHandback(_) => return action::GATE_HANDBACK,
        }
        .as_str()
    }
}

/// Where a runbook came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", content = "at", rename_all = "snake_case")]
pub enum Origin {
    File(PathBuf),
    Embedded(String),
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::File(p) => write!(f, "{}", p.display()),
            Origin::Embedded(n) => write!(f, "(built in) {n}"),
        }
    }
}

/// A runbook with its source text (kept for the journal, so `resume` uses the same one).
#[derive(Debug, Clone)]
pub struct LoadedRunbook {
    pub runbook: Runbook,
    pub source: String,
    pub origin: Origin,
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    /// A run on Prometheus data reads its windows as `recover detect` does: a fixed range
    /// too short for the scrape interval is refused with the signal named, not read as no
    /// data after the run has begun acting; the shipped runbook passes and observes one
    /// scrape apart.
    #[test]
    fn at_resolution_refuses_a_fixed_range_detect_refuses() {
        let scrape = Duration::from_secs(15);
        let rb = super::find("stuck-overload", &[]).unwrap().runbook;
        let at = rb.at_resolution(Some(scrape)).unwrap();
        assert_eq!(at.observe.interval, scrape);
        let mut broken = rb.clone();
        let goodput = broken.signals.get_mut("goodput").unwrap();
        goodput.promql = Some("sum(rate(recover_demo_service_completions_total[20s]))".into());
        let e = broken.at_resolution(Some(scrape)).unwrap_err().to_string();
        assert!(
            e.contains("spec.signals.goodput.promql: the range [20s]"),
            "{e}"
        );
        assert!(
            broken.at_resolution(None).is_ok(),
            "scraped directly, any range reads"
        );
    }
}
