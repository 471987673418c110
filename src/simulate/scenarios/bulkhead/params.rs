//! The parameters of `bulkhead`, flat so that `--set key=value` reaches every one.
//! Defaults are the drill: 150 home loads/s per instance fanning out to five downstreams,
//! an unrelated search endpoint beside them, recommendations slowing to its 2 s timeout
//! while every other call keeps its own 150 ms timeout. The latencies are chosen so that
//! every call fits that timeout with room (at most 1.5 times its mean: 120 ms for posts),
//! which leaves the drill's separate pools 30% in use at 150 loads/s (in flight = rate x
//! latency: 12 of posts' 40), recommendations' 75% (45 of 60).

use crate::simulate::error::SimError;
use crate::simulate::model::Params;
use crate::util::duration::serde_human;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The scenario's name.
pub const NAME: &str = "bulkhead";

/// How the instance's outgoing connections are pooled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Design {
    /// One pool for every downstream and for search; a call waits for a free connection.
    Shared,
    /// A pool per downstream (and one for search).
    Separate,
}

/// The downstreams, in the order their parameters are listed.
pub const DOWNSTREAMS: [&str; 6] = [
    "posts",
    "profile",
    "ads",
    "notifications",
    "recommendations",
    "search",
];
pub const RECOMMENDATIONS: usize = 4;
pub const SEARCH: usize = 5;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BulkheadParams {
    pub home_rate_per_s: f64,
    /// Requests per second to the unrelated search endpoint, each one call to search.
    pub search_rate_per_s: f64,
    #[serde(with = "serde_human")]
    pub duration: Duration,
    /// From this moment recommendations answers only after `recommendations_slow_latency`.
    #[serde(with = "serde_human")]
    pub slow_at: Duration,
    #[serde(with = "serde_human")]
    pub recommendations_slow_latency: Duration,
    pub design: Design,
    pub shared_pool: u32,
    /// Separate design: a full recommendations pool refuses at once instead of queueing.
    pub recommendations_reject_when_full: bool,
    /// Mean latency (each call uniform between half and one and a half times it), timeout
    /// (waiting for a connection included) and separate pool size, per downstream.
    #[serde(with = "serde_human")]
    pub posts_latency: Duration,
    #[serde(with = "serde_human")]
    pub posts_timeout: Duration,
    pub posts_pool: u32,
    #[serde(with = "serde_human")]
    pub profile_latency: Duration,
    #[serde(with = "serde_human")]
    pub profile_timeout: Duration,
    pub profile_pool: u32,
    #[serde(with = "serde_human")]
    pub ads_latency: Duration,
    #[serde(with = "serde_human")]
    pub ads_timeout: Duration,
    pub ads_pool: u32,
    #[serde(with = "serde_human")]
    pub notifications_latency: Duration,
    #[serde(with = "serde_human")]
    pub notifications_timeout: Duration,
    pub notifications_pool: u32,
    #[serde(with = "serde_human")]
    pub recommendations_latency: Duration,
    #[serde(with = "serde_human")]
    pub recommendations_timeout: Duration,
    pub recommendations_pool: u32,
    #[serde(with = "serde_human")]
    pub search_latency: Duration,
    #[serde(with = "serde_human")]
    pub search_timeout: Duration,
    pub search_pool: u32,
}

impl Default for BulkheadParams {
    fn default() -> Self {
        let ms = Duration::from_millis;
        BulkheadParams {
            home_rate_per_s: 150.0,
            search_rate_per_s: 50.0,
            duration: Duration::from_secs(60),
            slow_at: Duration::from_secs(10),
            recommendations_slow_latency: Duration::from_secs(10),
            design: Design::Shared,
            shared_pool: 256,
            recommendations_reject_when_full: true,
            posts_latency: ms(80),
            posts_timeout: ms(150),
            posts_pool: 40,
            profile_latency: ms(40),
            profile_timeout: ms(150),
            profile_pool: 20,
            ads_latency: ms(60),
            ads_timeout: ms(150),
            ads_pool: 30,
            notifications_latency: ms(30),
            notifications_timeout: ms(150),
            notifications_pool: 15,
            recommendations_latency: ms(300),
            recommendations_timeout: ms(2000),
            recommendations_pool: 60,
            search_latency: ms(60),
            search_timeout: ms(150),
            search_pool: 10,
        }
    }
}

/// One downstream's settings.
#[derive(Debug, Clone, Copy)]
pub struct Downstream {
    pub latency: Duration,
    pub timeout: Duration,
    pub pool: u32,
}

impl BulkheadParams {
    /// The six downstreams in [`DOWNSTREAMS`] order.
    pub fn downstreams(&self) -> [Downstream; 6] {
        let d = |latency, timeout, pool| Downstream {
            latency,
            timeout,
            pool,
        };
        [
            d(self.posts_latency, self.posts_timeout, self.posts_pool),
            d(
                self.profile_latency,
                self.profile_timeout,
                self.profile_pool,
            ),
            d(self.ads_latency, self.ads_timeout, self.ads_pool),
            d(
                self.notifications_latency,
                self.notifications_timeout,
                self.notifications_pool,
            ),
            d(
                self.recommendations_latency,
                self.recommendations_timeout,
                self.recommendations_pool,
            ),
            d(self.search_latency, self.search_timeout, self.search_pool),
        ]
    }
}

impl Params for BulkheadParams {
    const NAME: &'static str = NAME;

    fn validate(&self) -> Result<(), SimError> {
        let bad = |k: &'static str, why: &str| Err(SimError::invalid(k, why));
        for (k, r) in [
            ("home_rate_per_s", self.home_rate_per_s),
            ("search_rate_per_s", self.search_rate_per_s),
        ] {
            if !(0.0..=100_000.0).contains(&r) {
                return bad(k, "must be between 0 and 100000");
            }
        }
        if self.duration.is_zero() || self.duration > Duration::from_secs(3600) {
            return bad("duration", "must be more than 0 and at most 1h");
        }
        if (self.home_rate_per_s * 5.0 + self.search_rate_per_s) * self.duration.as_secs_f64() > 5e6
        {
            return bad(
                "duration",
                "calls (6 per home load and search) x duration must be at most 5,000,000",
            );
        }
        if self.shared_pool == 0 {
            return bad("shared_pool", "must be at least 1");
        }
        let names = [
            ("posts_pool", "posts_timeout"),
            ("profile_pool", "profile_timeout"),
            ("ads_pool", "ads_timeout"),
            ("notifications_pool", "notifications_timeout"),
            ("recommendations_pool", "recommendations_timeout"),
            ("search_pool", "search_timeout"),
        ];
        for (d, (pool, timeout)) in self.downstreams().iter().zip(names) {
            if d.pool == 0 {
                return bad(pool, "must be at least 1");
            }
            if d.timeout.is_zero() {
                return bad(timeout, "must be more than 0");
            }
        }
        Ok(())
    }
}
