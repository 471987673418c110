//! `recover demo config-service`: the victim. A config service with a FIFO queue and no
//! load shedding, that works on requests whose client has left, runs cold after a restart
//! and gets k times more expensive per request while overloaded. Together with retrying
//! clients this makes an overload that outlives its trigger (see [`super::defaults`]).

mod admin_auth;
mod busy;
mod drain;
mod metrics;
pub mod queue;
mod server;

pub use server::serve;

use super::defaults;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Everything `serve` needs; `Default` is the laptop scenario of [`super::defaults`].
#[derive(Debug, Clone, PartialEq)]
pub struct ServiceConfig {
    /// Where `/config`, the admin API and `/metrics` are served.
    pub listen: SocketAddr,
    /// Size of the worker pool (W).
    pub concurrency: usize,
    /// Warm, un-overloaded work per request (T): capacity is about W / T.
    pub service_time: Duration,
    /// Cost multiplier while cold, fading to 1 as the service warms.
    pub cold_factor: f64,
    /// Cost multiplier while overloaded (k).
    pub overload_factor: f64,
    /// Requests served (any kind) until warm.
    pub warm_after_requests: u64,
    /// How long `POST /admin/warm` takes.
    pub warm_duration: Duration,
    /// The clients' timeout, used only to judge overload: the queue is overloaded when it
    /// holds more than the service can serve within this time.
    pub client_timeout: Duration,
    /// After start: not listening for the first half of this, then listening but not
    /// ready (503) for the second half. Models a deploy.
    pub startup_delay: Duration,
    /// Skip queued requests whose `x-deadline-ms` has passed (off: serve them anyway).
    pub honour_deadline: bool,
    /// From `slow_after` on, every request costs this many times more (1: never slow).
    /// Models one bad replica (a noisy neighbour, a bad disk) that still passes its health
    /// checks; `POST /admin/slow` changes it at run time.
    pub slow_factor: f64,
    /// When `slow_factor` starts to apply, from the service's start.
    pub slow_after: Duration,
    /// The token `/admin/*` requires (`Authorization: Bearer`); without one the admin API
    /// is open to anyone who reaches the port, the gate's clients included.
    pub admin_token_file: Option<PathBuf>,
}

impl Default for ServiceConfig {
    fn default() -> Self {
        ServiceConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            concurrency: defaults::SERVICE_CONCURRENCY,
            service_time: defaults::SERVICE_TIME,
            cold_factor: defaults::COLD_FACTOR,
            overload_factor: defaults::OVERLOAD_FACTOR,
            warm_after_requests: defaults::WARM_AFTER_REQUESTS,
            warm_duration: defaults::WARM_DURATION,
            client_timeout: defaults::CLIENT_TIMEOUT,
            startup_delay: Duration::ZERO,
            honour_deadline: false,
            slow_factor: 1.0,
            slow_after: Duration::ZERO,
            admin_token_file: None,
        }
    }
}

impl ServiceConfig {
    /// Refuse numbers that would make the model meaningless, naming the flag.
    pub fn validate(&self) -> Result<(), ServiceError> {
        let bad = |flag: &str, why: &str| Err(ServiceError::Invalid(format!("--{flag}: {why}")));
        if self.concurrency == 0 {
            return bad("concurrency", "must be at least 1");
        }
        if !(self.cold_factor.is_finite() && self.cold_factor >= 1.0) {
            return bad("cold-factor", "must be a number >= 1");
        }
        if !(self.overload_factor.is_finite() && self.overload_factor >= 1.0) {
            return bad("overload-factor", "must be a number >= 1");
        }
        if !valid_slow_factor(self.slow_factor) {
            return bad("slow-factor", "must be a number >= 1 (1: normal speed)");
        }
        if self.client_timeout.is_zero() {
            return bad("client-timeout", "must be more than 0");
        }
        Ok(())
    }
}

/// A slowdown factor the service accepts: finite and at least 1 (1 is normal speed).
pub fn valid_slow_factor(f: f64) -> bool {
    f.is_finite() && f >= 1.0
}

/// Why the service could not run.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("invalid configuration: {0}")]
    Invalid(String),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("server failed: {0}")]
    Serve(std::io::Error),
}
