//! The admission gate as the model sees it: a token bucket (rate, burst) and an in-flight
//! cap, rejecting fast. Same knobs as `recover::gate::limit::Limit`, so a plan's admit rate
//! means the same here as on the real gate; a change's fill is the gate's own
//! [`Fill`], turned into tokens where the real gate turns it ([`Fill::tokens`]).

use crate::gate::limit::Fill;

/// Why the gate turned an attempt away (or that it let it through).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    Admitted,
    RejectedRate,
    RejectedInFlight,
}

/// A limit change the procedure asks for, as the engine sends one to the gate's admin API.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LimitChange {
    /// `Some(rate)` limits, `None` opens the gate.
    pub rate_per_s: Option<f64>,
    /// None: the gate's default for the rate.
    pub burst: Option<u32>,
    /// How many tokens the new bucket starts with (the admin API's `fill`).
    pub fill: Fill,
}

impl LimitChange {
    /// A rate with the gate's default burst and no fill (`gate.limit`, the lift).
    pub fn rate(rate_per_s: Option<f64>) -> Self {
        LimitChange {
            rate_per_s,
            burst: None,
            fill: Fill::Carried,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Gate {
    /// Tokens added per tick; `None` = no rate limit.
    per_tick: Option<f64>,
    burst: f64,
    tokens: f64,
    max_in_flight: Option<u32>,
    in_flight: u32,
    tick_s: f64,
}

impl Gate {
    pub fn new(
        rate_per_s: Option<f64>,
        burst: u32,
        max_in_flight: Option<u32>,
        tick_s: f64,
    ) -> Self {
        let burst = f64::from(burst.max(1));
        Gate {
            per_tick: rate_per_s.map(|r| r * tick_s),
            burst,
            tokens: burst,
            max_in_flight,
            in_flight: 0,
            tick_s,
        }
    }

    /// Change the rate at runtime (the procedure does); `None` opens the gate.
    pub fn set_rate(&mut self, rate_per_s: Option<f64>) {
        self.per_tick = rate_per_s.map(|r| r * self.tick_s);
        self.tokens = self.tokens.min(self.burst);
    }

    /// A limit as the engine sets one (`gate.limit`, `gate.ramp`): the rate with the burst
    /// the engine gives it (the gate's default, half a second of the rate, where it names
    /// none), so a wave of retries meets the same bucket as in the real gate. A new limit
    /// opens no burst above what the old one had left (none after an open gate), unless the engine asks for a fill
    /// (the first readmission after a drain alone: full, or the room the kept requests
    /// leave), never above the burst; `None` opens the gate.
    pub fn set_limit(&mut self, change: LimitChange) {
        let mut burst = None;
        // The real gate cannot know how much just went through an open gate: a limit set
        // on it starts with an empty bucket (`gate::admission::Admission::apply`).
        if self.per_tick.is_none() {
            self.tokens = 0.0;
        }
        if let Some(r) = change.rate_per_s {
            let b = change
                .burst
                .unwrap_or_else(|| crate::gate::limit::default_burst(r))
                .max(1);
            self.burst = f64::from(b);
            burst = Some(b);
        }
        self.set_rate(change.rate_per_s);
        if self.per_tick.is_some() {
            if let Some(t) = burst.and_then(|b| change.fill.tokens(b)) {
                self.tokens = f64::from(t);
            }
        }
    }

    /// New limits mid-run; what is in flight stays in flight.
    pub fn reconfigure(&mut self, rate_per_s: Option<f64>, burst: u32, max_in_flight: Option<u32>) {
        self.burst = f64::from(burst.max(1));
        self.max_in_flight = max_in_flight;
        self.set_rate(rate_per_s);
    }

    pub fn rate_per_s(&self) -> Option<f64> {
        self.per_tick.map(|t| t / self.tick_s)
    }

    /// Called once per tick before arrivals.
    pub fn refill(&mut self) {
        if let Some(t) = self.per_tick {
            self.tokens = (self.tokens + t).min(self.burst);
        }
    }

    pub fn admit(&mut self) -> Admission {
        if let Some(cap) = self.max_in_flight {
            if self.in_flight >= cap {
                return Admission::RejectedInFlight;
            }
        }
        if self.per_tick.is_some() {
            if self.tokens < 1.0 {
                return Admission::RejectedRate;
            }
            self.tokens -= 1.0;
        }
        self.in_flight += 1;
        Admission::Admitted
    }

    /// An admitted attempt ended (answered, or its client gave up on it).
    pub fn finished(&mut self) {
        self.in_flight = self.in_flight.saturating_sub(1);
    }

    pub fn in_flight(&self) -> u32 {
        self.in_flight
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_limit_admits_rate_times_time_after_the_burst() {
        // 10/s with 10 ms ticks: 0.1 token a tick; burst 1.
        let mut g = Gate::new(Some(10.0), 1, None, 0.01);
        let mut admitted = 0;
        for _ in 0..100 {
            g.refill();
            for _ in 0..5 {
                if g.admit() == Admission::Admitted {
                    admitted += 1;
                    g.finished();
                }
            }
        }
        assert!((10..=11).contains(&admitted), "{admitted}");
    }

    /// A limit set on an open gate starts with an empty bucket, as the real gate's
    /// (`gate::admission::Admission::apply`: it cannot know how much just went through):
    /// the requests arriving in the same tick are turned away, not let through by a
    /// bucket the open gate left full.
    #[test]
    fn a_limit_on_an_open_gate_starts_empty() {
        let mut g = Gate::new(None, 50, None, 0.01);
        assert_eq!(g.admit(), Admission::Admitted);
        g.set_limit(LimitChange::rate(Some(100.0)));
        assert_eq!(g.admit(), Admission::RejectedRate);
        g.refill();
        assert_eq!(g.admit(), Admission::Admitted);
        assert_eq!(g.admit(), Admission::RejectedRate);
    }

    /// After a drain alone the engine's first readmission asks for a full bucket of the
    /// wave-sized burst: a returning wave of 90 goes through in the same tick, where a new
    /// limit without fill (the bucket emptied by the limit before) lets one token's worth;
    /// after a drain that kept requests, the room they leave, as the real gate (never
    /// above the burst).
    #[test]
    fn a_filled_limit_admits_a_wave_of_its_fill_at_once() {
        let wave = |fill| {
            let mut g = Gate::new(Some(10.0), 1, None, 0.01);
            g.admit();
            g.set_limit(LimitChange {
                rate_per_s: Some(90.0),
                burst: Some(90),
                fill,
            });
            g.refill();
            (0..200)
                .filter(|_| g.admit() == Admission::Admitted)
                .count()
        };
        assert_eq!(wave(Fill::Full), 90);
        assert_eq!(wave(Fill::Carried), 0);
        assert_eq!(wave(Fill::Tokens(37)), 37);
        assert_eq!(wave(Fill::Tokens(500)), 90);
    }

    #[test]
    fn in_flight_cap_rejects_until_something_finishes() {
        let mut g = Gate::new(None, 1, Some(2), 0.01);
        assert_eq!(g.admit(), Admission::Admitted);
        assert_eq!(g.admit(), Admission::Admitted);
        assert_eq!(g.admit(), Admission::RejectedInFlight);
        g.finished();
        assert_eq!(g.admit(), Admission::Admitted);
    }
}
