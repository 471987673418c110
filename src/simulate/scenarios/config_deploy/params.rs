//! The parameters of the continuous-time model (clients, server, gate, trigger, procedure),
//! with the worked example as defaults. One flat struct, so `--set key=value` and
//! scenario files use the same names, and validation names the key at fault.

use super::readmission::Readmission;
use crate::plan::Plan;
use crate::retry::{RetryKind, RetryPolicy};
use crate::simulate::error::SimError;
use crate::simulate::model::Params;
use crate::util::duration::{serde_human, serde_human_opt};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The scenario's name.
pub const NAME: &str = "config-deploy";

/// Everything the `config-deploy` style model needs. Defaults are the worked example:
/// 500 workers polling every 30 s, 200 req/s without shedding, 2 s timeout, 1 s fixed retry
/// forever without jitter, a 20 s outage (a deploy), overload factor 4.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SystemParams {
    // --- clients (the demo workers) ---
    /// Number of clients (workers), each polling once per interval.
    pub clients: u32,
    /// Time between a finished poll and the next one.
    #[serde(with = "serde_human")]
    pub interval: Duration,
    /// A client abandons an attempt not answered within this.
    #[serde(with = "serde_human")]
    pub timeout: Duration,
    /// Wait before a retry (the base delay when backing off).
    #[serde(with = "serde_human")]
    pub retry_delay: Duration,
    /// Double the retry delay after every failed attempt of the same poll.
    pub backoff: bool,
    /// Cap on the backed-off delay.
    #[serde(with = "serde_human")]
    pub retry_max_delay: Duration,
    /// Full jitter: wait random() x the delay (backed off or not), anywhere from 0 up to it.
    pub jitter: bool,
    /// Attempts per poll before giving up; 0 retries forever.
    pub max_attempts: u32,
    /// Fleet-wide retry budget: every first attempt earns this many retry tokens (pool
    /// capped at ratio x clients, starting full); a retry spends one; none means unlimited.
    pub retry_budget: Option<f64>,

    // --- server (the demo config service) ---
    /// Healthy, warm capacity in requests per second.
    pub capacity: f64,
    /// Reject at once what cannot be served within the client timeout (instead of queueing).
    pub shedding: bool,
    /// Work multiplier while the queue holds more than can be served within the timeout.
    pub overload_factor: f64,
    /// Capacity right after a restart, as a fraction of healthy capacity.
    pub cold_factor: f64,
    /// Time for a restarted server to warm from cold to full capacity (linear).
    #[serde(with = "serde_human")]
    pub warmup: Duration,
    /// Warm after this many completions since the restart instead of over `warmup` (the
    /// demo service warms with its work, abandoned work included); 0 warms by time.
    pub warm_after_requests: u64,
    /// The server starts cold, as a freshly started process does (the demo service):
    /// from the first tick it warms as after a restart; false starts it warm.
    pub cold_start: bool,
    /// Skip (at no cost) queued requests whose client has already given up.
    pub honour_deadline: bool,
    /// Requests worked on at once (every replica's slots, as the demo service's pool):
    /// each takes concurrency / capacity seconds of work (times the cold and overload
    /// multipliers, fixed when it is taken off the queue) and is answered at its end. None
    /// answers a request as soon as its work is paid, without a service time of its own.
    pub concurrency: Option<u32>,
    /// Replicas the pool stands for: its queue and slots spread evenly over them, as a
    /// balancer keeping them level spreads them. The pool serves as one; a drain that
    /// keeps the answerable requests decides replica by replica, as each real one does.
    pub replicas: u32,

    // --- gate (the admission gate before the server) ---
    /// Admitted requests per second; none means unlimited.
    pub gate_rate: Option<f64>,
    /// Burst of the gate's token bucket.
    pub gate_burst: u32,
    /// Requests admitted and not yet finished, at most; none means unlimited.
    pub gate_max_in_flight: Option<u32>,

    // --- trigger ---
    /// When the outage (a deploy restart) starts.
    #[serde(with = "serde_human")]
    pub outage_at: Duration,
    /// How long the server refuses connections; it returns cold. 0s means no outage.
    #[serde(with = "serde_human")]
    pub outage: Duration,
    /// When the load spike starts.
    #[serde(with = "serde_human")]
    pub spike_at: Duration,
    /// How long clients poll `spike_factor` times as often. 0s means no spike.
    #[serde(with = "serde_human")]
    pub spike: Duration,
    pub spike_factor: f64,

    // --- recovery procedure (only when a plan is given) ---
    /// When the procedure starts (the gate closes to the plan's admit rate, queue drained).
    #[serde(with = "serde_human")]
    pub plan_at: Duration,
    /// Restart the server as part of the procedure, as the runbook does (it comes back
    /// cold, without downtime: batches behind the gate); false only drains the queue.
    pub plan_restart: bool,
    /// How long the admit rate is held before the first ramp step (or before opening the
    /// gate when the plan has no ramp); none uses the first step's hold, else 10s.
    #[serde(with = "serde_human_opt")]
    pub plan_admit_hold: Option<Duration>,
    /// The procedure warms the server's caches this long after its restart (a runbook's
    /// `cache.warm`), to full capacity; none leaves it to warm by itself.
    #[serde(with = "serde_human_opt")]
    pub plan_warm: Option<Duration>,

    // --- run ---
    /// Simulated time.
    #[serde(with = "serde_human")]
    pub duration: Duration,
    /// Time resolution; events are rounded to ticks.
    #[serde(with = "serde_human")]
    pub tick: Duration,
    /// With it, the run counts as recovered only once at most this fraction of the clients
    /// is in a retry loop, as a rehearsal's steady state requires (`rehearse::verify`): a
    /// client whose queued request a drain answered with an error is failing until its
    /// retry is answered, though it sent nothing that failed after the drain. None: failed
    /// attempts alone decide.
    #[serde(default)]
    pub settled_retrying_max: Option<f64>,
    /// Failure-free time required at the end before the run counts as recovered.
    #[serde(with = "serde_human")]
    pub settle_window: Duration,
    /// The step the time to recover is read in: the final failure-free stretch begins at
    /// the first step boundary after the last failed attempt was sent. A rehearsal judges
    /// steady state at its scrape interval, so a prediction for one reads in that step;
    /// in whole seconds, a 3 s recovery one second off is already 33% off.
    #[serde(with = "serde_human")]
    pub recovery_step: Duration,
    /// Where the steps fall: `recovery_phase + k * recovery_step` after the procedure's
    /// start (less than the step). A rehearsal's scrape ticks fall where its recorder's
    /// clock put them, not on the runbook's first action; its prediction is read on ticks
    /// of the same phase.
    #[serde(with = "serde_human")]
    pub recovery_phase: Duration,

    /// A recovery plan whose procedure starts at `plan_at` (a scenario file's `plan:`).
    #[serde(skip)]
    pub plan: Option<Plan>,
    /// The engine's readmission the procedure follows (the runbook's `gate.ramp` step and
    /// check, the plan's inputs); none: [`Readmission::for_plan`].
    #[serde(skip)]
    pub plan_readmission: Option<Readmission>,
}

impl Default for SystemParams {
    fn default() -> Self {
        SystemParams {
            clients: 500,
            interval: Duration::from_secs(30),
            timeout: Duration::from_secs(2),
            retry_delay: Duration::from_secs(1),
            backoff: false,
            retry_max_delay: Duration::from_secs(30),
            jitter: false,
            max_attempts: 0,
            retry_budget: None,
            capacity: 200.0,
            shedding: false,
            overload_factor: 4.0,
            cold_factor: 0.5,
            warmup: Duration::from_secs(30),
            warm_after_requests: 0,
            cold_start: false,
            honour_deadline: false,
            concurrency: None,
            replicas: 1,
            gate_rate: None,
            gate_burst: 20,
            gate_max_in_flight: None,
            outage_at: Duration::from_secs(10),
            outage: Duration::from_secs(20),
            spike_at: Duration::ZERO,
            spike: Duration::ZERO,
            spike_factor: 1.0,
            plan_at: Duration::from_secs(60),
            plan_restart: true,
            plan_admit_hold: None,
            plan_warm: None,
            duration: Duration::from_secs(300),
            tick: Duration::from_millis(10),
            settled_retrying_max: None,
            settle_window: Duration::from_secs(30),
            recovery_step: Duration::from_secs(1),
            recovery_phase: Duration::ZERO,
            plan: None,
            plan_readmission: None,
        }
    }
}

impl SystemParams {
    /// Apply a kind of retry policy: it sets the two switches `backoff` and `jitter`.
    pub fn set_retry(&mut self, kind: RetryKind) {
        (self.backoff, self.jitter) = match kind {
            RetryKind::Fixed => (false, false),
            RetryKind::Exponential => (true, false),
            RetryKind::FullJitter => (true, true),
        };
    }

    /// The clients' retry policy: `retry_delay`, doubled up to `retry_max_delay` with
    /// `backoff`, times random() with `jitter`.
    pub fn retry_policy(&self) -> RetryPolicy {
        let kind = match (self.backoff, self.jitter) {
            (false, false) => RetryKind::Fixed,
            (true, false) => RetryKind::Exponential,
            (_, true) => RetryKind::FullJitter,
        };
        let max = if self.backoff {
            self.retry_max_delay
        } else {
            self.retry_delay
        };
        RetryPolicy::new(kind, self.retry_delay, max)
    }

    /// When the trigger is over (the later of outage end and spike end; 0 without one).
    pub fn trigger_end(&self) -> Duration {
        let outage = if self.outage.is_zero() {
            Duration::ZERO
        } else {
            self.outage_at + self.outage
        };
        let spike = if self.spike.is_zero() {
            Duration::ZERO
        } else {
            self.spike_at + self.spike
        };
        outage.max(spike)
    }
}

fn positive(key: &'static str, v: f64) -> Result<(), SimError> {
    if v > 0.0 && v.is_finite() {
        Ok(())
    } else {
        Err(SimError::invalid(key, "must be a positive number"))
    }
}

impl Params for SystemParams {
    const NAME: &'static str = NAME;

    /// Refuse values the model cannot run, naming the key.
    fn validate(&self) -> Result<(), SimError> {
        let tick = self.tick;
        if tick < Duration::from_micros(100) || tick > Duration::from_secs(1) {
            return Err(SimError::invalid("tick", "must be between 100us and 1s"));
        }
        if !Duration::from_secs(1)
            .as_nanos()
            .is_multiple_of(tick.as_nanos())
        {
            return Err(SimError::invalid(
                "tick",
                "must divide one second evenly (like 10ms)",
            ));
        }
        let step = self.recovery_step;
        if step < tick
            || step > Duration::from_secs(3600)
            || !step.as_nanos().is_multiple_of(tick.as_nanos())
        {
            return Err(SimError::invalid(
                "recovery_step",
                "must be a whole number of ticks, at most 1h",
            ));
        }
        let phase = self.recovery_phase;
        if phase >= step || !phase.as_nanos().is_multiple_of(tick.as_nanos()) {
            return Err(SimError::invalid(
                "recovery_phase",
                "must be a whole number of ticks, less than recovery_step",
            ));
        }
        if self.clients == 0 || self.clients > 10_000_000 {
            return Err(SimError::invalid(
                "clients",
                "must be between 1 and 10000000",
            ));
        }
        for (key, d) in [
            ("interval", self.interval),
            ("timeout", self.timeout),
            ("retry_delay", self.retry_delay),
        ] {
            if d < tick {
                return Err(SimError::invalid(key, "must be at least one tick"));
            }
            if d > Duration::from_secs(24 * 3600) {
                return Err(SimError::invalid(key, "must be at most 24h"));
            }
        }
        if self.retry_max_delay > Duration::from_secs(24 * 3600) {
            return Err(SimError::invalid("retry_max_delay", "must be at most 24h"));
        }
        if self.duration < tick || self.duration > Duration::from_secs(7 * 24 * 3600) {
            return Err(SimError::invalid(
                "duration",
                "must be between one tick and 7 days",
            ));
        }
        if self.duration.as_secs_f64() / tick.as_secs_f64() > 1e8 {
            return Err(SimError::invalid(
                "duration",
                "more than 10^8 ticks; raise tick",
            ));
        }
        // The clock's wheel holds one bucket per tick of the longest delay.
        let slowest_interval = self.interval.as_secs_f64() / self.spike_factor.clamp(1e-3, 1.0);
        let longest = [
            ("interval", slowest_interval),
            ("timeout", self.timeout.as_secs_f64()),
            ("retry_delay", self.retry_delay.as_secs_f64()),
            ("retry_max_delay", self.retry_max_delay.as_secs_f64()),
        ];
        for (key, secs) in longest {
            if secs / tick.as_secs_f64() > 2e6 {
                return Err(SimError::invalid(
                    key,
                    "spans more than 2,000,000 ticks; raise tick",
                ));
            }
        }
        positive("capacity", self.capacity)?;
        if self.concurrency == Some(0) {
            return Err(SimError::invalid("concurrency", "must be at least 1"));
        }
        if self.replicas == 0 {
            return Err(SimError::invalid("replicas", "must be at least 1"));
        }
        if !(self.overload_factor >= 1.0 && self.overload_factor.is_finite()) {
            return Err(SimError::invalid("overload_factor", "must be at least 1"));
        }
        if !(self.cold_factor > 0.0 && self.cold_factor <= 1.0) {
            return Err(SimError::invalid("cold_factor", "must be in (0, 1]"));
        }
        if !(self.spike_factor > 0.0 && self.spike_factor.is_finite()) {
            return Err(SimError::invalid("spike_factor", "must be positive"));
        }
        if let Some(b) = self.retry_budget {
            if !(b >= 0.0 && b.is_finite()) {
                return Err(SimError::invalid("retry_budget", "must be 0 or more"));
            }
        }
        if let Some(r) = self.gate_rate {
            if !(r >= 0.0 && r.is_finite()) {
                return Err(SimError::invalid("gate_rate", "must be 0 or more"));
            }
        }
        Ok(())
    }
}
