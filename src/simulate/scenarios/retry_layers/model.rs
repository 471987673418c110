//! The calls of `retry-layers`, drawn one by one through the layers with each layer's
//! token bucket, and the deadline arithmetic.

use super::params::RetryLayersParams;
use crate::simulate::kernel::rng::SplitMix64;
use serde::Serialize;
use std::time::Duration;

/// One layer's token bucket.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    cap: f64,
    per_success: f64,
}

impl Bucket {
    fn success(&mut self) {
        self.tokens = (self.tokens + self.per_success).min(self.cap);
    }

    /// Spend a token for a retry if one is there.
    fn retry(&mut self) -> bool {
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

struct Sim<'a> {
    p: &'a RetryLayersParams,
    rng: SplitMix64,
    /// Calls received per layer (index into LAYERS).
    received: [u64; 4],
    buckets: Option<[Bucket; 3]>,
}

impl Sim<'_> {
    /// One call received by `layer`; true if it succeeded.
    fn call(&mut self, layer: usize) -> bool {
        self.received[layer] += 1;
        if layer == 3 {
            return self.rng.unit() >= self.p.failure_rate;
        }
        let retries = [
            self.p.app_retries,
            self.p.api_retries,
            self.p.downstream_retries,
        ][layer];
        for attempt in 0..=retries {
            if attempt > 0 {
                let allowed = match &mut self.buckets {
                    Some(b) => b[layer].retry(),
                    None => true,
                };
                if !allowed {
                    return false;
                }
            }
            if self.call(layer + 1) {
                if let Some(b) = &mut self.buckets {
                    b[layer].success();
                }
                return true;
            }
        }
        false
    }
}

/// The load on each layer and what got through.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Loads {
    /// Calls per second received by app, API, downstream, store.
    pub per_s: [f64; 4],
    /// Store calls per request entering the app.
    pub amplification: f64,
    /// Share of the app's requests that succeeded.
    pub success: f64,
}

pub fn loads(p: &RetryLayersParams, seed: u64) -> Loads {
    let per_success = p.retry_budget.unwrap_or(0.0);
    let bucket = Bucket {
        tokens: p.budget_tokens,
        cap: p.budget_tokens,
        per_success,
    };
    let mut sim = Sim {
        p,
        rng: SplitMix64::new(seed),
        received: [0; 4],
        buckets: p.retry_budget.map(|_| [bucket; 3]),
    };
    let n = (p.rate_per_s * f64::from(p.seconds)).round() as u64;
    let ok = (0..n).filter(|_| sim.call(0)).count() as u64;
    let secs = f64::from(p.seconds);
    Loads {
        per_s: sim.received.map(|r| r as f64 / secs),
        amplification: sim.received[3] as f64 / n.max(1) as f64,
        success: ok as f64 / n.max(1) as f64,
    }
}

/// One attempt of the top caller against its deadline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AttemptTiming {
    pub attempt: u32,
    pub starts_ms: f64,
    /// Time left before the deadline when it starts (negative: after it).
    pub left_ms: f64,
    /// It can be answered before the deadline.
    pub fits: bool,
}

/// The top caller's attempts against its deadline, when every attempt before the last
/// times out: attempt k starts at (k-1) x (timeout + wait).
pub fn deadline(p: &RetryLayersParams) -> Vec<AttemptTiming> {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let step = ms(p.attempt_timeout) + ms(p.retry_wait);
    (0..=p.app_retries)
        .map(|k| {
            let starts = f64::from(k) * step;
            let left = ms(p.deadline) - starts;
            AttemptTiming {
                attempt: k + 1,
                starts_ms: starts,
                left_ms: left,
                fits: left >= ms(p.answer_latency),
            }
        })
        .collect()
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RetryLayersReport {
    pub scenario: &'static str,
    pub seed: u64,
    pub rate_per_s: f64,
    pub retries: [u32; 3],
    pub failure_rate: f64,
    pub retry_budget: Option<f64>,
    pub loads: Loads,
    /// Calls per second per layer if every attempt failed and nothing limited retries:
    /// the product of the attempts above it.
    pub worst_case_per_s: [f64; 4],
    pub deadline_ms: f64,
    pub attempt_timeout_ms: f64,
    pub retry_wait_ms: f64,
    pub answer_latency_ms: f64,
    pub attempts: Vec<AttemptTiming>,
    /// A retry can be answered inside the deadline.
    pub retries_fit: bool,
}

pub fn run(p: &RetryLayersParams, seed: u64) -> RetryLayersReport {
    let tries = [
        p.app_retries + 1,
        p.api_retries + 1,
        p.downstream_retries + 1,
    ]
    .map(f64::from);
    let attempts = deadline(p);
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    RetryLayersReport {
        scenario: "retry-layers",
        seed,
        rate_per_s: p.rate_per_s,
        retries: [p.app_retries, p.api_retries, p.downstream_retries],
        failure_rate: p.failure_rate,
        retry_budget: p.retry_budget,
        loads: loads(p, seed),
        worst_case_per_s: [
            p.rate_per_s,
            p.rate_per_s * tries[0],
            p.rate_per_s * tries[0] * tries[1],
            p.rate_per_s * tries[0] * tries[1] * tries[2],
        ],
        deadline_ms: ms(p.deadline),
        attempt_timeout_ms: ms(p.attempt_timeout),
        retry_wait_ms: ms(p.retry_wait),
        answer_latency_ms: ms(p.answer_latency),
        retries_fit: attempts.iter().skip(1).any(|a| a.fits),
        attempts,
    }
}
