//! The scenarios a user names: the two built-in models of the stuck overload, the five
//! home-feed drills, and YAML scenario files, all resolved to one [`Scenario`] value that
//! `--set`, `--policy`, `--compare` and the runner share.

pub mod breaker;
pub mod bulkhead;
pub mod config_deploy;
pub mod drill;
pub mod file;
pub mod provider_outage;
pub mod retry_layers;
pub mod retry_storm;
pub mod slow_replica;

use super::engine;
use super::error::SimError;
use super::overrides;
use super::params::SystemParams;
use super::policy::Policy;
use super::report::SystemReport;
use crate::plan::Plan;
use drill::{Drill, DrillReport};
use retry_storm::{StormParams, StormReport};
use serde::Serialize;
use std::path::Path;

/// A runnable scenario: the tick model, or the continuous model with an optional plan.
#[derive(Debug, Clone, PartialEq)]
pub enum Scenario {
    Storm {
        name: String,
        params: StormParams,
        seed: Option<u64>,
    },
    System {
        name: String,
        params: Box<SystemParams>,
        plan: Option<Plan>,
        seed: Option<u64>,
    },
    /// One of the home-feed drills.
    Drill {
        name: String,
        drill: Drill,
        seed: Option<u64>,
    },
}

/// The outcome of either model; serialised without a wrapper so both share field names.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Report {
    Storm(StormReport),
    System(SystemReport),
    Drill(Box<DrillReport>),
}

impl Report {
    /// Drills without a recovery to measure (all but `provider-outage`) read false.
    pub fn recovered(&self) -> bool {
        match self {
            Report::Storm(r) => r.recovered,
            Report::System(r) => r.recovered,
            Report::Drill(r) => r.time_to_recover_s().is_some(),
        }
    }

    pub fn time_to_recover_s(&self) -> Option<f64> {
        match self {
            Report::Storm(r) => r.time_to_recover_s,
            Report::System(r) => r.time_to_recover_s,
            Report::Drill(r) => r.time_to_recover_s(),
        }
    }
}

impl Scenario {
    /// A built-in name, or a path to a YAML scenario file.
    pub fn resolve(name_or_path: &str) -> Result<Scenario, SimError> {
        match name_or_path {
            "retry-storm" => Ok(Scenario::Storm {
                name: "retry-storm".into(),
                params: StormParams::default(),
                seed: None,
            }),
            config_deploy::NAME => Ok(Scenario::System {
                name: config_deploy::NAME.into(),
                params: Box::new(config_deploy::params()),
                plan: None,
                seed: None,
            }),
            other => {
                if let Some(drill) = Drill::by_name(other) {
                    return Ok(Scenario::Drill {
                        name: other.into(),
                        drill,
                        seed: None,
                    });
                }
                let path = Path::new(other);
                let looks_like_file =
                    other.ends_with(".yaml") || other.ends_with(".yml") || path.exists();
                if looks_like_file {
                    file::load(path)
                } else {
                    Err(SimError::UnknownScenario(other.to_string()))
                }
            }
        }
    }

    pub fn name(&self) -> &str {
        match self {
            Scenario::Storm { name, .. }
            | Scenario::System { name, .. }
            | Scenario::Drill { name, .. } => name,
        }
    }

    /// The unit of its times: the tick model counts ticks.
    pub fn time_unit(&self) -> &'static str {
        match self {
            Scenario::Storm { .. } => "ticks",
            Scenario::System { .. } | Scenario::Drill { .. } => "s",
        }
    }

    /// The seed a scenario file asked for, if any.
    pub fn file_seed(&self) -> Option<u64> {
        match self {
            Scenario::Storm { seed, .. }
            | Scenario::System { seed, .. }
            | Scenario::Drill { seed, .. } => *seed,
        }
    }

    /// `--set key=value`.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), SimError> {
        match self {
            Scenario::Storm { params, .. } => {
                *params = overrides::apply(params, "retry-storm", key, value)?
            }
            Scenario::System { params, .. } => {
                *params = overrides::apply(params, "config-deploy", key, value)?
            }
            Scenario::Drill { drill, .. } => drill.set(key, value)?,
        }
        Ok(())
    }

    /// `--policy P`: the retry policy of the stuck-overload models; for a drill, its own
    /// `policy` parameter (an error naming the key for a drill without one).
    pub fn set_policy_named(&mut self, p: &str) -> Result<(), SimError> {
        if let Scenario::Drill { drill, .. } = self {
            return drill.set("policy", p).map_err(|e| match e {
                SimError::UnknownParam { model, .. } => SimError::invalid(
                    "policy",
                    format!("--policy: {model} has no retry policy; change it with --set"),
                ),
                other => other,
            });
        }
        self.set_policy(p.parse()?);
        Ok(())
    }

    pub fn set_policy(&mut self, p: Policy) {
        match self {
            Scenario::Storm { params, .. } => params.policy = p,
            Scenario::System { params, .. } => params.set_policy(p),
            Scenario::Drill { .. } => {}
        }
    }

    pub fn validate(&self) -> Result<(), SimError> {
        match self {
            Scenario::Storm { params, .. } => params.validate(),
            Scenario::System { params, plan, .. } => {
                params.validate()?;
                if let Some(plan) = plan {
                    let rates = std::iter::once(plan.admit_rate)
                        .chain(plan.ramp.iter().map(|s| s.rate_per_s));
                    if rates.into_iter().any(|r| !(r.is_finite() && r >= 0.0)) {
                        return Err(SimError::invalid(
                            "plan",
                            "admit_rate and ramp rate_per_s must be finite and 0 or more",
                        ));
                    }
                }
                Ok(())
            }
            Scenario::Drill { drill, .. } => drill.validate(),
        }
    }

    /// Run this scenario but switch to `changed`'s client, server and gate parameters at
    /// `plan_at` ("what if we changed it now, once stuck?"). `None` for the tick model.
    pub fn run_changed_at_plan(&self, changed: &Scenario, seed: u64) -> Option<SystemReport> {
        match (self, changed) {
            (
                Scenario::System {
                    name, params, plan, ..
                },
                Scenario::System { params: q, .. },
            ) => Some(engine::run_with(params, plan.as_ref(), Some(q), seed, name)),
            _ => None,
        }
    }

    /// Run it. Validate first; an invalid scenario runs with clamped values.
    pub fn run(&self, seed: u64) -> Report {
        match self {
            Scenario::Storm { params, .. } => Report::Storm(retry_storm::run(params, seed)),
            Scenario::System {
                name, params, plan, ..
            } => Report::System(engine::run(params, plan.as_ref(), seed, name)),
            Scenario::Drill { drill, .. } => Report::Drill(Box::new(drill.run(seed))),
        }
    }
}
