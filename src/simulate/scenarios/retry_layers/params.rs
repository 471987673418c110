//! The parameters of `retry-layers`, flat so that `--set key=value` reaches every one.
//! Defaults are the drill.

use crate::simulate::error::SimError;
use crate::simulate::kernel::arrivals::Arrivals;
use crate::simulate::model::Params;
use crate::util::duration::serde_human;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The scenario's name.
pub const NAME: &str = "retry-layers";

/// Why the store's calls fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Failures {
    /// Each call fails with probability `failure_rate`, whatever the load.
    Fixed,
    /// The store fails because it is overloaded: one queue served in order at
    /// `store_capacity_per_s`, stalled during the trigger (the first cause: it accepts
    /// calls and answers none). A call answered later than `attempt_timeout` after it was
    /// made has failed, its caller gone; the store does its work all the same, as it does
    /// not know, and every call behind it waits for that work.
    Load,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetryLayersParams {
    /// Requests per second entering the app.
    pub rate_per_s: f64,
    pub arrivals: Arrivals,
    /// Retries of the app's call to the API.
    pub app_retries: u32,
    /// Retries of the API's call to the downstream.
    pub api_retries: u32,
    /// Retries of the downstream's call to its store.
    pub downstream_retries: u32,
    pub failures: Failures,
    /// Fixed: share of the store's calls that fail (1: everything failing).
    pub failure_rate: f64,
    /// Load: calls per second the store works through.
    pub store_capacity_per_s: f64,
    /// Load: the store stalls from `trigger_from` to `trigger_to`.
    #[serde(with = "serde_human")]
    pub trigger_from: Duration,
    #[serde(with = "serde_human")]
    pub trigger_to: Duration,
    /// A retry budget per layer: every success adds this many tokens, a retry costs one
    /// (none: retry whenever allowed).
    pub retry_budget: Option<f64>,
    /// Each layer's bucket size, and its level at the start.
    pub budget_tokens: f64,
    /// Seconds of traffic simulated (the loads are per second over them).
    pub seconds: u32,
    /// The top caller's deadline, each attempt's timeout, and the wait before a retry.
    #[serde(with = "serde_human")]
    pub deadline: Duration,
    #[serde(with = "serde_human")]
    pub attempt_timeout: Duration,
    #[serde(with = "serde_human")]
    pub retry_wait: Duration,
    /// How long an attempt takes when it is answered (the healthy latency).
    #[serde(with = "serde_human")]
    pub answer_latency: Duration,
}

impl Default for RetryLayersParams {
    fn default() -> Self {
        RetryLayersParams {
            rate_per_s: 3000.0,
            arrivals: Arrivals::Paced,
            app_retries: 2,
            api_retries: 3,
            downstream_retries: 3,
            failures: Failures::Fixed,
            failure_rate: 1.0,
            store_capacity_per_s: 6000.0,
            trigger_from: Duration::from_secs(2),
            trigger_to: Duration::from_secs(3),
            retry_budget: None,
            budget_tokens: 100.0,
            seconds: 10,
            deadline: Duration::from_millis(400),
            attempt_timeout: Duration::from_millis(250),
            retry_wait: Duration::from_millis(100),
            answer_latency: Duration::from_millis(100),
        }
    }
}

impl Params for RetryLayersParams {
    const NAME: &'static str = NAME;

    fn validate(&self) -> Result<(), SimError> {
        let bad = |k: &'static str, why: &str| Err(SimError::invalid(k, why));
        if !(self.rate_per_s >= 1.0 && self.rate_per_s <= 1e6) {
            return bad("rate_per_s", "must be between 1 and 1000000");
        }
        for (k, v) in [
            ("app_retries", self.app_retries),
            ("api_retries", self.api_retries),
            ("downstream_retries", self.downstream_retries),
        ] {
            if v > 10 {
                return bad(k, "must be at most 10");
            }
        }
        if !(0.0..=1.0).contains(&self.failure_rate) {
            return bad("failure_rate", "must be between 0 and 1");
        }
        if !(self.store_capacity_per_s >= 1.0 && self.store_capacity_per_s <= 1e9) {
            return bad("store_capacity_per_s", "must be between 1 and 1000000000");
        }
        if self.trigger_to < self.trigger_from {
            return bad("trigger_to", "must not be before trigger_from");
        }
        if self
            .retry_budget
            .is_some_and(|b| !(b.is_finite() && b >= 0.0))
        {
            return bad("retry_budget", "must be 0 or more (or null for none)");
        }
        if !(self.budget_tokens.is_finite() && self.budget_tokens >= 0.0) {
            return bad("budget_tokens", "must be 0 or more");
        }
        if !(1..=600).contains(&self.seconds) {
            return bad("seconds", "must be between 1 and 600");
        }
        let calls = self.rate_per_s
            * f64::from(self.seconds)
            * f64::from(
                (self.app_retries + 1) * (self.api_retries + 1) * (self.downstream_retries + 1),
            );
        if calls > 5e7 {
            return bad(
                "seconds",
                "rate x seconds x the retries' product must be at most 5e7 calls",
            );
        }
        if self.attempt_timeout.is_zero() {
            return bad("attempt_timeout", "must be more than 0");
        }
        Ok(())
    }
}
