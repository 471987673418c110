//! `retry-storm`: the small tick model from the issue, small enough to check by hand.
//! 4 clients each send one new call per tick during ticks 1-14; the server has room for 9
//! calls a tick, is down during ticks 4-7, and when more than 9 calls arrive in a tick it
//! completes only 4 (overload collapse) and the rest fail. A call is tried at most 4 times;
//! calls are served in the order they were first sent.

use crate::simulate::kernel::rng::SplitMix64;
use crate::simulate::policy::{retry_delay_ticks, Policy};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StormParams {
    /// Clients, each sending one new call per tick while they send.
    pub clients: u32,
    /// Clients send new calls during ticks 1..=new_until.
    pub new_until: u32,
    /// Calls the server completes in a tick when not overloaded.
    pub room: u32,
    /// Calls completed in a tick when more than `room` arrive (collapse); set it to `room`
    /// to model a server that sheds the excess instead of collapsing.
    pub overload_served: u32,
    /// The server is down during ticks down_from..=down_to (0 and 0: never).
    pub down_from: u32,
    pub down_to: u32,
    /// Tries per call, the first included.
    pub max_tries: u32,
    pub policy: Policy,
    /// Backoff cap in ticks.
    pub max_delay: u32,
    /// Stop after this many ticks even if calls are still pending.
    pub ticks: u32,
}

impl Default for StormParams {
    fn default() -> Self {
        StormParams {
            clients: 4,
            new_until: 14,
            room: 9,
            overload_served: 4,
            down_from: 4,
            down_to: 7,
            max_tries: 4,
            policy: Policy::Immediate,
            max_delay: 8,
            ticks: 100,
        }
    }
}

impl StormParams {
    pub fn validate(&self) -> Result<(), crate::simulate::SimError> {
        use crate::simulate::SimError;
        if self.max_tries == 0 {
            return Err(SimError::invalid("max_tries", "must be at least 1"));
        }
        if self.ticks == 0 || self.ticks > 1_000_000 {
            return Err(SimError::invalid("ticks", "must be between 1 and 1000000"));
        }
        if u64::from(self.clients) * u64::from(self.new_until) > 10_000_000 {
            return Err(SimError::invalid(
                "clients",
                "clients x new_until must be at most 10^7",
            ));
        }
        if self.down_to < self.down_from {
            return Err(SimError::invalid("down_to", "must not be before down_from"));
        }
        Ok(())
    }

    fn down(&self, t: u32) -> bool {
        self.down_from > 0 && t >= self.down_from && t <= self.down_to
    }
}

/// One tick of the storm.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct StormTick {
    pub tick: u32,
    pub arriving: u32,
    /// Arriving calls that are retries (tried before).
    pub retries: u32,
    pub served: u32,
    pub turned_away: u32,
    /// Calls that failed their last allowed try this tick.
    pub given_up: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StormReport {
    pub scenario: String,
    pub policy: Policy,
    pub seed: u64,
    pub peak_calls: u32,
    pub given_up: u32,
    /// Ticks from the server's return until the first tick in which every arriving call is
    /// served; none if that never happened.
    pub settled_ticks: Option<u32>,
    pub recovered: bool,
    /// `settled_ticks` with one tick taken as one second.
    pub time_to_recover_s: Option<f64>,
    pub calls: u32,
    pub served: u32,
    pub pending: u32,
    pub series: Vec<StormTick>,
}

#[derive(Debug, Clone, Copy)]
struct Call {
    tries: u32,
    next: u32,
}

pub fn run(p: &StormParams, seed: u64) -> StormReport {
    let mut rng = SplitMix64::new(seed);
    let (backoff, jitter) = p.policy.switches();
    // Pending calls in the order first sent; a call leaves the list when served or given up.
    let mut pending: Vec<Call> = Vec::new();
    let mut arriving: Vec<usize> = Vec::new();
    let mut series = Vec::new();
    let (mut calls, mut served_total, mut given_up_total) = (0u32, 0u32, 0u32);
    let back_at = if p.down_from > 0 { p.down_to + 1 } else { 1 };
    for t in 1..=p.ticks {
        if t > p.new_until.max(back_at) && pending.is_empty() {
            break;
        }
        if t <= p.new_until {
            for _ in 0..p.clients {
                pending.push(Call { tries: 0, next: t });
                calls += 1;
            }
        }
        arriving.clear();
        arriving.extend((0..pending.len()).filter(|&i| pending[i].next == t));
        let n = arriving.len() as u32;
        let serve = if p.down(t) {
            0
        } else if n <= p.room {
            n
        } else {
            p.overload_served.min(n)
        };
        let mut row = StormTick {
            tick: t,
            arriving: n,
            retries: arriving.iter().filter(|&&i| pending[i].tries > 0).count() as u32,
            served: serve,
            turned_away: n - serve,
            given_up: 0,
        };
        // `arriving` is in first-sent order, so the first `serve` of them are served.
        for (k, &i) in arriving.iter().enumerate() {
            let c = &mut pending[i];
            c.tries += 1;
            if (k as u32) < serve {
                c.next = 0;
            } else if c.tries >= p.max_tries {
                c.next = 0;
                row.given_up += 1;
            } else {
                let d = retry_delay_ticks(
                    c.tries,
                    1,
                    u64::from(p.max_delay),
                    backoff,
                    jitter,
                    &mut rng,
                );
                c.next = t.saturating_add(d as u32);
            }
        }
        pending.retain(|c| c.next != 0);
        served_total += row.served;
        given_up_total += row.given_up;
        series.push(row);
    }
    let settled_ticks = series
        .iter()
        .find(|r| r.tick >= back_at && r.turned_away == 0)
        .map(|r| r.tick - back_at);
    StormReport {
        scenario: "retry-storm".into(),
        policy: p.policy,
        seed,
        peak_calls: series.iter().map(|r| r.arriving).max().unwrap_or(0),
        given_up: given_up_total,
        settled_ticks,
        recovered: settled_ticks.is_some(),
        time_to_recover_s: settled_ticks.map(f64::from),
        calls,
        served: served_total,
        pending: pending.len() as u32,
        series,
    }
}
