//! `retry-storm`: the small tick model, small enough to check by hand. 4 clients each send
//! one new call per tick during ticks 1-14; the server has room for 9 calls a tick, is
//! down during ticks 4-7, and when more than 9 calls arrive in a tick it completes only 4
//! (overload collapse) and the rest fail. A call is tried at most 4 times; calls are
//! served in the order they were first sent. Retries wait on the kernel's clock, one tick
//! a unit, under the crate's one retry policy.

use crate::retry::{RetryKind, RetryPolicy};
use crate::simulate::error::SimError;
use crate::simulate::kernel::clock::{Clock, Stepped};
use crate::simulate::kernel::record::Recovery;
use crate::simulate::kernel::rng::SplitMix64;
use crate::simulate::model::Params;
use crate::simulate::model::{Alternative, Figure, Model, Outcome, Unit};
use crate::simulate::plot::{Chart, Series};
use crate::simulate::text;
use plotters::style::{BLUE, GREEN, MAGENTA, RED};
use serde::{Deserialize, Serialize};
use std::fmt::Write;
use std::time::Duration;

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
    /// Fixed: the next tick; exponential: `backoff_base`, twice that, four times ... up to
    /// `max_delay` ticks; full jitter: random() x that, rounded up to a whole tick.
    pub policy: RetryKind,
    /// The first backoff in ticks. A call comes back in a later tick, so full jitter over a
    /// one-tick backoff could only ever mean the next tick, no jitter at all; two ticks is
    /// the least in which it can spread anything, and plain backoff starts from the same.
    pub backoff_base: u32,
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
            policy: RetryKind::Fixed,
            backoff_base: 2,
            max_delay: 8,
            ticks: 100,
        }
    }
}

/// One tick, as the retry policy counts time.
const TICK: Duration = Duration::from_secs(1);

impl StormParams {
    fn down(&self, t: u32) -> bool {
        self.down_from > 0 && t >= self.down_from && t <= self.down_to
    }

    /// The retry policy, one tick counted as a second: fixed waits one tick, the backoffs
    /// start at `backoff_base`.
    pub fn retry_policy(&self) -> RetryPolicy {
        let base = match self.policy {
            RetryKind::Fixed => 1,
            RetryKind::Exponential | RetryKind::FullJitter => self.backoff_base,
        };
        RetryPolicy::new(self.policy, TICK * base, TICK * self.max_delay)
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
    /// What it ran with.
    pub params: StormParams,
    /// From the server's return, one tick taken as one second: settled is the first tick
    /// in which every arriving call is served; recovered, that the run ends on such a tick.
    #[serde(flatten)]
    pub recovery: Recovery,
    pub calls: u32,
    pub served: u32,
    pub pending: u32,
    pub series: Vec<StormTick>,
}

/// The per-tick table and the summary lines; the chart of the same.
impl Outcome for StormReport {
    fn what(&self) -> String {
        format!("policy {}", self.params.policy)
    }

    fn text(&self) -> String {
        let mut o = String::new();
        let rows: Vec<Vec<String>> = self
            .series
            .iter()
            .map(|t| {
                [
                    t.tick,
                    t.arriving,
                    t.retries,
                    t.served,
                    t.turned_away,
                    t.given_up,
                ]
                .iter()
                .map(u32::to_string)
                .collect()
            })
            .collect();
        o.push_str(&text::table(
            &[
                "tick",
                "arriving",
                "retries",
                "served",
                "turned away",
                "given up",
            ],
            &rows,
        ));
        let r = &self.recovery;
        let _ = writeln!(o, "peak calls in a tick: {}", r.peak_calls);
        let _ = writeln!(
            o,
            "calls given up: {} of {} (served {}, pending {})",
            r.given_up, self.calls, self.served, self.pending
        );
        let _ = match r.settled_s {
            Some(n) => writeln!(o, "settled: {n} ticks after the server returned"),
            None => writeln!(
                o,
                "settled: never (some calls still turned away at the end)"
            ),
        };
        o
    }

    fn chart(&self) -> Chart {
        let pts = |f: fn(&StormTick) -> u32| -> Vec<(f64, f64)> {
            self.series
                .iter()
                .map(|t| (f64::from(t.tick), f64::from(f(t))))
                .collect()
        };
        let left = vec![
            Series::new("arriving", BLUE, pts(|t| t.arriving)),
            Series::new("retries", MAGENTA, pts(|t| t.retries)),
            Series::new("served", GREEN, pts(|t| t.served)),
            Series::new("turned away", RED, pts(|t| t.turned_away)),
        ];
        let title = format!("retry-storm, policy {}", self.params.policy);
        Chart::new(title, "tick", "calls", left)
    }

    fn time_to_recover_s(&self) -> Option<f64> {
        self.recovery.time_to_recover_s
    }

    fn figures(&self) -> Vec<Figure> {
        let r = &self.recovery;
        vec![
            Figure::flag("recovered", "settles", ("settles", "never"), r.recovered),
            Figure::new("settled_ticks", "settled after", Unit::Ticks, r.settled_s),
            Figure::count("peak_calls", "peak", r.peak_calls),
            Figure::count("given_up", "given up", r.given_up),
        ]
    }
}

impl Model for StormParams {
    type Report = StormReport;

    fn run(&self, seed: u64) -> StormReport {
        let mut rng = SplitMix64::new(seed);
        let policy = self.retry_policy();
        let mut clock: Clock<u32, Stepped> = Clock::new(u64::from(self.max_delay));
        // Tries so far, per call; a call's id is its place in the order first sent.
        let mut tries: Vec<u32> = Vec::new();
        let mut pending = 0u32;
        let mut series = Vec::new();
        let (mut served_total, mut given_up_total) = (0u32, 0u32);
        let back_at = if self.down_from > 0 {
            self.down_to + 1
        } else {
            1
        };
        clock.take(0);
        for t in 1..=self.ticks {
            if t > self.new_until.max(back_at) && pending == 0 {
                break;
            }
            if t <= self.new_until {
                for _ in 0..self.clients {
                    clock.schedule(u64::from(t), tries.len() as u32);
                    tries.push(0);
                    pending += 1;
                }
            }
            let mut arriving = clock.take(u64::from(t));
            arriving.sort_unstable();
            let n = arriving.len() as u32;
            let serve = if self.down(t) {
                0
            } else if n <= self.room {
                n
            } else {
                self.overload_served.min(n)
            };
            let mut row = StormTick {
                tick: t,
                arriving: n,
                retries: arriving.iter().filter(|&&c| tries[c as usize] > 0).count() as u32,
                served: serve,
                turned_away: n - serve,
                given_up: 0,
            };
            // In first-sent order: the first `serve` of them are served.
            for (k, &c) in arriving.iter().enumerate() {
                let tried = &mut tries[c as usize];
                *tried += 1;
                if (k as u32) < serve {
                    pending -= 1;
                } else if *tried >= self.max_tries {
                    pending -= 1;
                    row.given_up += 1;
                } else {
                    let d = policy.delay_units(*tried, TICK, || rng.unit());
                    clock.schedule(u64::from(t) + d, c);
                }
            }
            clock.give_back(arriving);
            served_total += row.served;
            given_up_total += row.given_up;
            series.push(row);
        }
        let recovery = Recovery::of(
            &series,
            |r| u64::from(r.arriving),
            |r| u64::from(r.turned_away),
            u64::from(given_up_total),
            // The series starts at tick 1.
            back_at.saturating_sub(1) as usize,
            1,
        );
        StormReport {
            params: self.clone(),
            recovery,
            calls: tries.len() as u32,
            served: served_total,
            pending,
            series,
        }
    }

    fn set_retry(&mut self, kind: RetryKind) -> Result<(), SimError> {
        self.policy = kind;
        Ok(())
    }

    fn alternatives(&self) -> Vec<Alternative<Self>> {
        let mut out = vec![Alternative::new("baseline", "", self.clone())];
        for kind in RetryKind::ALL.into_iter().filter(|k| *k != self.policy) {
            out.push(Alternative::new(
                format!("policy {kind}"),
                format!("policy={kind}"),
                StormParams {
                    policy: kind,
                    ..self.clone()
                },
            ));
        }
        let fewer = (self.max_tries / 2).max(1);
        out.push(Alternative::new(
            "fewer tries",
            format!("max_tries={fewer}"),
            StormParams {
                max_tries: fewer,
                ..self.clone()
            },
        ));
        out.push(Alternative::new(
            "shed instead of collapse",
            format!("overload_served={}", self.room),
            StormParams {
                overload_served: self.room,
                ..self.clone()
            },
        ));
        out
    }

    fn compare_heading(&self) -> String {
        format!(
            "scenario retry-storm (policy {}): one change at a time; settled: ticks from the server's return until a tick serves every call",
            self.policy
        )
    }
}

impl Params for StormParams {
    const NAME: &'static str = "retry-storm";

    fn validate(&self) -> Result<(), SimError> {
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
        if self.backoff_base == 0 || self.max_delay < self.backoff_base {
            return Err(SimError::invalid(
                "max_delay",
                "must be at least backoff_base, which must be at least 1",
            ));
        }
        Ok(())
    }
}
