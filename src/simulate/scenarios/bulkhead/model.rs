//! The event model of `bulkhead` on the kernel's clock (one unit a microsecond): home
//! loads and searches arrive as Poisson streams; a home load calls its five downstreams at
//! once; every call needs a connection from its pool (the shared one, or its own) and
//! waits for one in FIFO order when none is free, its timeout running from the moment it
//! was made. A call that times out gives its connection back (the caller closes it); one
//! still waiting leaves the queue.

use super::params::{BulkheadParams, Design, DOWNSTREAMS, RECOMMENDATIONS, SEARCH};
use crate::simulate::kernel::arrivals::{Arrivals, Stream};
use crate::simulate::kernel::clock::Clock;
use crate::simulate::kernel::rng::SplitMix64;
use std::collections::VecDeque;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ev {
    Home,
    Search,
    Answer(u32),
    Timeout(u32),
    Sample,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CallState {
    Waiting,
    Active,
    Done,
}

#[derive(Debug, Clone, Copy)]
struct Call {
    ds: usize,
    created_us: u64,
    state: CallState,
    ok: bool,
    /// Refused at once by a full pool that rejects.
    rejected: bool,
}

#[derive(Debug, Default)]
struct Pool {
    free: u32,
    waiters: VecDeque<u32>,
}

/// One call of the run, as the report reads it.
#[derive(Debug, Clone, Copy)]
pub struct Made {
    pub ds: usize,
    pub created_us: u64,
    pub ok: bool,
    pub rejected: bool,
}

/// What the report is computed from: every call (by arrival), and per second the
/// connections in use and the calls waiting for one.
pub struct Run {
    /// Home loads are runs of five calls, from index `homes[i]` on.
    pub calls: Vec<Made>,
    pub homes: Vec<u32>,
    pub samples: Vec<(u64, u64)>,
}

struct Sim<'a> {
    p: &'a BulkheadParams,
    rng: SplitMix64,
    clock: Clock<Ev>,
    now: u64,
    home: Stream,
    search: Stream,
    calls: Vec<Call>,
    homes: Vec<u32>,
    pools: Vec<Pool>,
    samples: Vec<(u64, u64)>,
    end_us: u64,
}

fn us(d: std::time::Duration) -> u64 {
    d.as_micros() as u64
}

pub fn run(p: &BulkheadParams, seed: u64) -> Run {
    let ds = p.downstreams();
    let pools = match p.design {
        Design::Shared => vec![Pool {
            free: p.shared_pool,
            ..Pool::default()
        }],
        Design::Separate => ds
            .iter()
            .map(|d| Pool {
                free: d.pool,
                ..Pool::default()
            })
            .collect(),
    };
    let horizon = ds.iter().map(|d| us(d.timeout)).max().unwrap_or(0);
    let mut sim = Sim {
        p,
        rng: SplitMix64::new(seed),
        clock: Clock::new(horizon),
        now: 0,
        home: Stream::new(Arrivals::Poisson, p.home_rate_per_s),
        search: Stream::new(Arrivals::Poisson, p.search_rate_per_s),
        calls: Vec::new(),
        homes: Vec::new(),
        pools,
        samples: Vec::new(),
        end_us: us(p.duration),
    };
    for (ev, rate) in [
        (Ev::Home, p.home_rate_per_s),
        (Ev::Search, p.search_rate_per_s),
    ] {
        if rate > 0.0 {
            sim.next(ev);
        }
    }
    sim.clock.schedule(1_000_000, Ev::Sample);
    while let Some((t, ev)) = sim.clock.pop() {
        sim.now = t;
        sim.handle(ev);
    }
    Run {
        calls: sim
            .calls
            .iter()
            .map(|c| Made {
                ds: c.ds,
                created_us: c.created_us,
                ok: c.ok,
                rejected: c.rejected,
            })
            .collect(),
        homes: sim.homes,
        samples: sim.samples,
    }
}

impl Sim<'_> {
    fn pool_of(&self, ds: usize) -> usize {
        match self.p.design {
            Design::Shared => 0,
            Design::Separate => ds,
        }
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Home => {
                self.homes.push(self.calls.len() as u32);
                for ds in 0..DOWNSTREAMS.len() - 1 {
                    self.call(ds);
                }
                self.next(Ev::Home);
            }
            Ev::Search => {
                self.call(SEARCH);
                self.next(Ev::Search);
            }
            Ev::Answer(c) => {
                if self.calls[c as usize].state == CallState::Active {
                    self.finish(c, true);
                }
            }
            Ev::Timeout(c) => match self.calls[c as usize].state {
                CallState::Active => self.finish(c, false),
                CallState::Waiting => self.calls[c as usize].state = CallState::Done,
                CallState::Done => {}
            },
            Ev::Sample => self.sample(),
        }
    }

    fn sample(&mut self) {
        let in_use: u64 = self
            .pools
            .iter()
            .zip(self.capacities())
            .map(|(p, cap)| u64::from(cap - p.free))
            .sum();
        let waiting = self
            .pools
            .iter()
            .flat_map(|p| p.waiters.iter())
            .filter(|&&c| self.calls[c as usize].state == CallState::Waiting)
            .count() as u64;
        self.samples.push((in_use, waiting));
        if self.now + 1_000_000 <= self.end_us {
            self.clock.schedule(self.now + 1_000_000, Ev::Sample);
        }
    }

    fn capacities(&self) -> Vec<u32> {
        match self.p.design {
            Design::Shared => vec![self.p.shared_pool],
            Design::Separate => self.p.downstreams().iter().map(|d| d.pool).collect(),
        }
    }

    /// The stream's next arrival, if it comes before the end.
    fn next(&mut self, ev: Ev) {
        let stream = match ev {
            Ev::Home => &mut self.home,
            _ => &mut self.search,
        };
        let t = stream.next(&mut self.rng);
        if t < self.end_us {
            self.clock.schedule(t, ev);
        }
    }

    fn call(&mut self, ds: usize) {
        let c = self.calls.len() as u32;
        self.calls.push(Call {
            ds,
            created_us: self.now,
            state: CallState::Waiting,
            ok: false,
            rejected: false,
        });
        let timeout = us(self.p.downstreams()[ds].timeout);
        self.clock.schedule(self.now + timeout, Ev::Timeout(c));
        let pool = self.pool_of(ds);
        if self.pools[pool].free > 0 {
            self.pools[pool].free -= 1;
            self.start(c);
        } else if self.p.design == Design::Separate
            && ds == RECOMMENDATIONS
            && self.p.recommendations_reject_when_full
        {
            let call = &mut self.calls[c as usize];
            call.state = CallState::Done;
            call.rejected = true;
        } else {
            self.pools[pool].waiters.push_back(c);
        }
    }

    /// Call `c` has a connection: its answer comes after the downstream's latency.
    fn start(&mut self, c: u32) {
        let ds = self.calls[c as usize].ds;
        self.calls[c as usize].state = CallState::Active;
        let latency = if ds == RECOMMENDATIONS && self.now >= us(self.p.slow_at) {
            us(self.p.recommendations_slow_latency)
        } else {
            let mean = us(self.p.downstreams()[ds].latency);
            self.rng.between(mean / 2, mean + mean / 2)
        };
        self.clock.schedule(self.now + latency, Ev::Answer(c));
    }

    /// Call `c` ended; its connection goes to the first caller still waiting.
    fn finish(&mut self, c: u32, ok: bool) {
        let call = &mut self.calls[c as usize];
        call.state = CallState::Done;
        call.ok = ok;
        let ds = call.ds;
        let pool = self.pool_of(ds);
        while let Some(w) = self.pools[pool].waiters.pop_front() {
            if self.calls[w as usize].state == CallState::Waiting {
                self.start(w);
                return;
            }
        }
        self.pools[pool].free += 1;
    }
}
