//! The default numbers of the laptop scenario, in one place, so the CLI defaults, the
//! rehearsal, the tests and the docs (docs/design/arithmetic.md) all reason with the same
//! system.
//!
//! The arithmetic (C = capacity in requests per second):
//!
//! ```text
//! warm capacity        C_warm = W / T           = 4 / 40 ms            = 100 req/s
//! cold capacity        C_cold = C_warm / f      = 100 / 2              = 50 req/s
//! overloaded, warm     C_warm / k               = 100 / 2              = 50 req/s
//! overloaded, cold     C_cold / k               = 50 / 2               = 25 req/s
//! demand               D = N / interval         = 160 / 8 s            = 20 req/s (20% of C_warm)
//! retry loop           R = N / (timeout + 1 s)  = 160 / 2 s            = 80 req/s
//! overload threshold   queue > C_now * timeout  = 100 (warm), 50 (cold)
//! outage of 5 s        D * 5 s                  = 100 workers caught in the 1 s retry loop
//! ```
//!
//! - Healthy: D = 20 req/s against 100 req/s, the queue stays near empty.
//! - Trigger: an outage of O seconds catches D * O workers (100 for 5 s) retrying every
//!   second on fast errors. The service comes back cold (50 req/s) and gets those 100
//!   retries plus the demand within its first second: the queue passes the cold threshold
//!   (50), overload doubles the cost of every request (25 req/s while cold), latency passes
//!   the 1 s timeout. The trigger needs D * O > C_cold * (timeout + 1 s) = 100.
//! - Stuck: once every worker is in the loop, R = 80 req/s is BELOW warm capacity (a
//!   service whose cost per request stayed the same would drain its queue by itself) but
//!   above the overloaded capacity (50 warm, 25 cold): the queue grows by 30 req/s or more,
//!   every request waits past the timeout, nearly all work is abandoned. It stays stuck
//!   only because k > 1.
//! - Plain restart: backlog gone, but the service is cold and every worker is in the retry
//!   loop; the reconnecting burst (up to 160 in a second) passes the cold threshold (50)
//!   at once: stuck again.
//! - Gate admitting 80% of the arriving rate: 0.8 * 80 = 64 req/s > 50: still stuck.
//! - Gate admitting C_cold / k = 25 req/s: below even the cold overloaded capacity, and
//!   above demand (20), so the fleet fits through once the backlog is gone. The backlog
//!   itself drains only at (50 - 25) req/s once warm, so a long-stuck service also needs
//!   `POST /admin/drain` (the runbook's step 2) to recover within seconds.
//! - Retry budget 10% with exp-jitter: retries stop once the budget (16 tokens) is spent,
//!   so the fleet offers about D = 20 req/s when the service returns: no overload.

use std::time::Duration;

/// Worker pool size of the service (W).
pub const SERVICE_CONCURRENCY: usize = 4;
/// Warm, un-overloaded work per request (T).
pub const SERVICE_TIME: Duration = Duration::from_millis(40);
/// Cost multiplier right after start, fading linearly to 1 as the service warms (f).
pub const COLD_FACTOR: f64 = 2.0;
/// Cost multiplier while overloaded (k).
pub const OVERLOAD_FACTOR: f64 = 2.0;
/// Requests served (useful or abandoned) until fully warm.
pub const WARM_AFTER_REQUESTS: u64 = 300;
/// How long `POST /admin/warm` takes to warm the caches.
pub const WARM_DURATION: Duration = Duration::from_millis(500);
/// The client timeout the service judges overload against; equal to the workers' timeout.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(1);

/// Number of pollers (N).
pub const WORKERS: usize = 160;
/// Poll interval of each worker.
pub const POLL_INTERVAL: Duration = Duration::from_secs(8);
/// The fixed retry delay of the default (no jitter) policy.
pub const RETRY_DELAY: Duration = Duration::from_secs(1);
/// The default retry policy, as the `--retry` flag spells it.
pub const RETRY_POLICY: &str = "fixed:1s";
/// The trigger: how long the service is unavailable when it is restarted.
pub const OUTAGE: Duration = Duration::from_secs(5);

/// C_warm = W / T, in requests per second.
pub fn capacity_warm() -> f64 {
    SERVICE_CONCURRENCY as f64 / SERVICE_TIME.as_secs_f64()
}

/// C_cold = C_warm / f.
pub fn capacity_cold() -> f64 {
    capacity_warm() / COLD_FACTOR
}

/// First-attempt demand D = N / interval.
pub fn demand() -> f64 {
    WORKERS as f64 / POLL_INTERVAL.as_secs_f64()
}

/// Offered rate when every worker cycles through timeout + retry delay.
pub fn retry_loop_rate() -> f64 {
    WORKERS as f64 / (CLIENT_TIMEOUT + RETRY_DELAY).as_secs_f64()
}

/// The rate a gate must admit to get the service out: C_cold / k.
pub fn recovery_rate() -> f64 {
    capacity_cold() / OVERLOAD_FACTOR
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The scenario's claims hold for the chosen numbers (they are what the docs say).
    #[test]
    fn default_numbers_make_a_metastable_system() {
        let (cw, d, r) = (capacity_warm(), demand(), retry_loop_rate());
        assert!(d <= 0.3 * cw, "demand {d} above 30% of warm capacity {cw}");
        assert!(r < cw, "without k the service would not stay stuck");
        assert!(
            0.8 * r > cw / OVERLOAD_FACTOR,
            "shedding 20% must not suffice"
        );
        assert!(
            recovery_rate() > d,
            "the recovery rate must let the demand through"
        );
        assert!(recovery_rate() < cw / OVERLOAD_FACTOR);
    }
}
