//! `recover simulate`: seeded, deterministic models for what-if questions ("if I change
//! only one thing, which one?") and for checking a plan's shed and ramp before acting on a
//! real system. Output is byte for byte stable for a seed: the PRNG is our own.
//!
//! One [`kernel`] (clock, arrivals, PRNG, recorder) under every scenario; one trait
//! ([`model::Model`]) every scenario is behind; the [`registry`] lists them. Generic over
//! the trait: [`scenario`] (a scenario of any model, with `--set`, `--policy`, a run and
//! its report), [`compare`] (the alternatives over 20 seeds, median and range), [`file`]
//! (scenario files). [`plot`] and [`text`] are toolkits that know no scenario.

pub mod compare;
pub mod error;
pub mod file;
pub mod kernel;
pub mod model;
pub mod overrides;
pub mod plot;
pub mod registry;
pub mod scenario;
pub mod scenarios;
pub mod text;

pub use compare::{Comparison, Seeds};
pub use error::SimError;
pub use registry::resolve;
pub use scenario::{Report, Scenario};
pub use scenarios::config_deploy::check::{check_plan, run_system, PlanCheck};
pub use scenarios::config_deploy::from_plan;
pub use scenarios::config_deploy::params::SystemParams;
pub use scenarios::config_deploy::readmission::Readmission;
pub use scenarios::config_deploy::report::{Second, SystemReport, Totals};
pub use scenarios::retry_storm::{StormParams, StormReport, StormTick};

/// The seed used when none is given.
pub const DEFAULT_SEED: u64 = 1;
