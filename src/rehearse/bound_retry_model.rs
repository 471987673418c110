//! A request-level model of the clients' retry loop against the replicas, for the bound's
//! property tests ([`super::retry_tests`]): clients whose attempts are queued behind
//! abandoned work with their deadlines, clients waiting out their retry delay, each
//! replica's FIFO queue with the overload cost (`k` while it queues more than it answers
//! within the client timeout), and procedures that drain the queues at any time, drop any
//! part of them at any instant (the abandoned requests and those out of reach, keeping the
//! live ones the replica answers in time, as `platform::admin::answerable` decides; or any
//! subset), or turn clients away at the gate for a while. The clients' phases at the scrape
//! (next attempts spread over the delay or bunched, attempts out with various time left)
//! can be read on the workers' ladder and given to the bound. Apart from the tests so that
//! each reads in one sitting.

use super::*;
use proptest::prelude::*;
use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

#[derive(Debug, Clone)]
pub(super) struct Case {
    pub(super) replicas: usize,
    pub(super) concurrency: u32,
    pub(super) service_time_s: f64,
    pub(super) cold_factor: f64,
    pub(super) warm_after: u64,
    pub(super) k: f64,
    pub(super) timeout_s: f64,
    pub(super) delay_s: f64,
    /// Scraped this long before the runbook's start.
    pub(super) lag_s: f64,
    /// Abandoned requests queued at each replica at the scrape, then live ones.
    pub(super) dead: Vec<u32>,
    pub(super) live: Vec<u32>,
    /// Clients waiting out their delay at the scrape.
    pub(super) sleepers: u32,
    /// Their next attempts, spread evenly over `(from, from + width]` retry delays after
    /// the scrape (`(0, 1]`: spread over the whole delay; a narrow width: bunched).
    pub(super) sleep_from: f64,
    pub(super) sleep_width: f64,
    /// The live attempts' time left at the scrape, spread over `(lo, hi]` timeouts.
    pub(super) left: (f64, f64),
    /// The bound reads the clients' phases on the ladder (else it knows only the split).
    pub(super) phases: bool,
    pub(super) warmth: Vec<f64>,
    /// The procedure: drain every queue at this time (from the runbook's start), drop
    /// part of every queue at `keep_at` and every `keep_every` after (`keep` says which
    /// part), turn every arrival away until `closed_until`.
    pub(super) drain_at: Option<f64>,
    pub(super) keep_at: Option<f64>,
    pub(super) keep_every: Option<f64>,
    pub(super) keep: Keep,
    pub(super) closed_until: f64,
    pub(super) seed: u64,
}

/// What a drain at `keep_at` keeps of each queue (the rest is dropped; its live clients
/// send again a retry delay later).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Keep {
    /// The youngest live requests the replica answers before their deadlines, from its
    /// servers as they free at its cost now, not overloaded (`platform::admin::answerable`).
    Answerable,
    /// Each queued request, abandoned or live, with even odds.
    Any,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Ev {
    /// Client sends an attempt.
    Send(usize),
    /// Client's attempt number `.1` times out.
    Deadline(usize, u32),
    /// Replica's server finished a request: (replica, client and attempt if any).
    Done(usize, Option<(usize, u32)>),
    Drain,
    Keep,
}

struct At(f64, u64, Ev);
impl PartialEq for At {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for At {}
impl PartialOrd for At {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for At {
    fn cmp(&self, o: &Self) -> Ordering {
        // Earliest first in a max-heap.
        o.0.total_cmp(&self.0).then(o.1.cmp(&self.1))
    }
}

const HORIZON_S: f64 = 30.0;

/// The clients' state at the scrape, from the case's seed: each replica's live requests'
/// deadlines (rising, FIFO) and each sleeper's next attempt, both from the scrape.
pub(super) fn at_scrape(c: &Case) -> (Vec<Vec<f64>>, Vec<f64>) {
    let mut rand = xorshift(c.seed);
    let (lo, hi) = c.left;
    let live = c.live[..c.replicas]
        .iter()
        .map(|&n| {
            let mut ds: Vec<f64> = (0..n)
                .map(|_| c.timeout_s * (hi - (hi - lo) * rand()).max(1e-6))
                .collect();
            ds.sort_by(f64::total_cmp);
            ds
        })
        .collect();
    let sleepers = (0..c.sleepers)
        .map(|_| c.delay_s * (c.sleep_from + c.sleep_width * (1.0 - rand())).max(1e-6))
        .collect();
    (live, sleepers)
}

fn xorshift(seed: u64) -> impl FnMut() -> f64 {
    let mut rng = seed | 1;
    move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        (rng >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The workers' ladder (every 25 ms to 2.5 s, every 250 ms to 10 s), counting `values`.
pub(super) fn ladder(values: &[f64]) -> Ladder {
    let edges = (1..=100)
        .map(|i| f64::from(i) * 0.025)
        .chain((11..=40).map(|i| f64::from(i) * 0.25))
        .map(|le| (le, values.iter().filter(|&&v| v <= le).count() as f64))
        .collect();
    Ladder {
        edges,
        total: values.len() as f64,
    }
}

/// From the runbook's start, when `backlog` clients of the loop have been answered
/// (None: not within the horizon). Time 0 is the runbook's start, the scrape `-lag_s`.
#[allow(clippy::needless_range_loop)] // replicas index several arrays at once
pub(super) fn simulate(c: &Case, backlog: f64) -> Option<f64> {
    let r = c.replicas;
    let mut rand = xorshift(c.seed.rotate_left(17) ^ 0x9e37_79b9_7f4a_7c15);
    let (live, sleepers) = at_scrape(c);
    let t0 = -c.lag_s;
    let mut seq = 0u64;
    let mut heap = BinaryHeap::new();
    let mut push = |heap: &mut BinaryHeap<At>, t: f64, e: Ev| {
        seq += 1;
        heap.push(At(t, seq, e));
    };
    // Each client: its current attempt number and whether that attempt still waits.
    let mut attempt: Vec<u32> = vec![];
    let mut waiting: Vec<bool> = vec![];
    let mut answered = vec![false; 0];
    // Each client's current attempt's deadline.
    let mut deadline: Vec<f64> = vec![];
    // Queues hold (client, attempt) or None for abandoned work.
    let mut queues: Vec<VecDeque<Option<(usize, u32)>>> = vec![VecDeque::new(); r];
    for i in 0..r {
        for _ in 0..c.dead[i] {
            queues[i].push_back(None);
        }
        // Live ones were sent within the timeout, later ones later: deadlines rise.
        for d in live[i].iter().map(|d| t0 + d) {
            let id = attempt.len();
            attempt.push(1);
            waiting.push(true);
            answered.push(false);
            deadline.push(d);
            queues[i].push_back(Some((id, 1)));
            push(&mut heap, d, Ev::Deadline(id, 1));
        }
    }
    for next in sleepers {
        let id = attempt.len();
        attempt.push(0);
        waiting.push(false);
        answered.push(false);
        deadline.push(f64::INFINITY);
        push(&mut heap, t0 + next, Ev::Send(id));
    }
    // Every server busy with abandoned work until the runbook's start.
    let mut free = vec![0u32; r];
    for i in 0..r {
        for _ in 0..c.concurrency {
            push(&mut heap, 0.0, Ev::Done(i, None));
        }
    }
    // No sooner than the scrape, as the keep: a drain before it would have dropped
    // attempts the scrape reads out (their clients back a delay before the bound says).
    if let Some(d) = c.drain_at {
        push(&mut heap, d.max(t0), Ev::Drain);
    }
    if let Some(k) = c.keep_at {
        push(&mut heap, k.max(t0), Ev::Keep);
    }
    let mut served = vec![0u64; r];
    let mut done = 0.0;
    let capacity = f64::from(c.concurrency) / c.service_time_s;
    while let Some(At(t, _, ev)) = heap.pop() {
        if t > HORIZON_S {
            return None;
        }
        match ev {
            Ev::Send(id) => {
                attempt[id] += 1;
                let a = attempt[id];
                if t >= 0.0 && t < c.closed_until {
                    push(&mut heap, t + c.delay_s, Ev::Send(id));
                    continue;
                }
                waiting[id] = true;
                deadline[id] = t + c.timeout_s;
                let i = (rand() * r as f64) as usize % r;
                queues[i].push_back(Some((id, a)));
                push(&mut heap, t + c.timeout_s, Ev::Deadline(id, a));
            }
            Ev::Deadline(id, a) => {
                if attempt[id] == a && waiting[id] {
                    waiting[id] = false;
                    push(&mut heap, t + c.delay_s, Ev::Send(id));
                }
            }
            Ev::Done(i, req) => {
                if let Some((id, a)) = req {
                    served[i] += 1;
                    if attempt[id] == a && waiting[id] && !answered[id] {
                        waiting[id] = false;
                        answered[id] = true;
                        done += 1.0;
                        if done >= backlog {
                            return Some(t.max(0.0));
                        }
                    }
                } else if t > 0.0 {
                    served[i] += 1;
                }
                free[i] += 1;
            }
            Ev::Drain => {
                for q in queues.iter_mut() {
                    for (id, a) in q.drain(..).flatten() {
                        if attempt[id] == a && waiting[id] {
                            waiting[id] = false;
                            push(&mut heap, t + c.delay_s, Ev::Send(id));
                        }
                    }
                }
            }
            Ev::Keep => {
                if let Some(e) = c.keep_every {
                    push(&mut heap, t + e, Ev::Keep);
                }
                for i in 0..r {
                    let live = |q: &Option<(usize, u32)>| {
                        q.is_some_and(|(id, a)| attempt[id] == a && waiting[id])
                    };
                    let keep: Vec<bool> = match c.keep {
                        Keep::Any => queues[i].iter().map(|_| rand() < 0.5).collect(),
                        Keep::Answerable => {
                            let ds: Vec<f64> = queues[i]
                                .iter()
                                .filter(|q| live(q))
                                .map(|q| deadline[q.unwrap().0] - t)
                                .collect();
                            // Servers busy until their Done, the others free now.
                            let mut frees: Vec<f64> = heap
                                .iter()
                                .filter_map(|At(at, _, e)| {
                                    matches!(e, Ev::Done(j, _) if *j == i).then_some(at - t)
                                })
                                .collect();
                            frees.resize(c.concurrency as usize, 0.0);
                            let cost = c.service_time_s * multiplier(c, &served, i);
                            let n = crate::platform::admin::answerable(&ds, cost, &frees);
                            let mut seen = 0;
                            queues[i]
                                .iter()
                                .map(|q| {
                                    let l = live(q);
                                    seen += usize::from(l);
                                    l && seen > ds.len() - n
                                })
                                .collect()
                        }
                    };
                    let old = std::mem::take(&mut queues[i]);
                    let dropped: Vec<usize> = old
                        .into_iter()
                        .zip(keep)
                        .filter_map(|(q, k)| {
                            if k {
                                queues[i].push_back(q);
                                None
                            } else {
                                q.filter(|_| live(&q)).map(|(id, _)| id)
                            }
                        })
                        .collect();
                    for id in dropped {
                        waiting[id] = false;
                        push(&mut heap, t + c.delay_s, Ev::Send(id));
                    }
                }
            }
        }
        // Free servers start queued work (only from the runbook's start on: before it
        // they are busy with abandoned work).
        if t >= 0.0 {
            for i in 0..r {
                while free[i] > 0 {
                    let Some(req) = queues[i].pop_front() else {
                        break;
                    };
                    free[i] -= 1;
                    let m = multiplier(c, &served, i);
                    let over = queues[i].len() as f64 > capacity / m * c.timeout_s;
                    let cost = c.service_time_s * m * if over { c.k } else { 1.0 };
                    push(&mut heap, t + cost, Ev::Done(i, req));
                }
            }
        }
    }
    None
}

/// Replica `i`'s cold multiplier after serving `served[i]` requests since the start.
fn multiplier(c: &Case, served: &[u64], i: usize) -> f64 {
    let w = if c.warm_after == 0 {
        1.0
    } else {
        (c.warmth[i] + served[i] as f64 / c.warm_after as f64).min(1.0)
    };
    1.0 + (c.cold_factor - 1.0) * (1.0 - w)
}

pub(super) fn case() -> impl Strategy<Value = Case> {
    (
        (
            1usize..=3,
            1u32..=8,
            5u32..=50,
            1.0f64..4.0,
            0u64..=400,
            1.5f64..5.0,
        ),
        (0.5f64..2.0, 0.2f64..2.0, 0.0f64..0.5),
        (
            proptest::collection::vec(0u32..=600, 3),
            proptest::collection::vec(0u32..=120, 3),
            0u32..=200,
            proptest::collection::vec(0.0f64..=1.0, 3),
        ),
        (
            proptest::option::of(0.0f64..2.0),
            proptest::option::of(-0.5f64..2.0),
            proptest::option::of(0.01f64..0.5),
            prop_oneof![3 => Just(Keep::Answerable), 1 => Just(Keep::Any)],
            prop_oneof![Just(0.0), 0.0f64..2.0],
            any::<u64>(),
        ),
        phases(),
    )
        .prop_map(
            |(
                (replicas, concurrency, ms, cold_factor, warm_after, k),
                (timeout_s, delay_s, lag_s),
                (dead, live, sleepers, warmth),
                (drain_at, keep_at, keep_every, keep, closed_until, seed),
                (sleep_from, sleep_width, left, phases),
            )| Case {
                replicas,
                concurrency,
                service_time_s: f64::from(ms) / 1000.0,
                cold_factor,
                warm_after,
                k,
                timeout_s,
                delay_s,
                lag_s,
                dead: dead[..replicas].to_vec(),
                live: live[..replicas].to_vec(),
                sleepers,
                sleep_from,
                sleep_width,
                left,
                phases,
                warmth: warmth[..replicas].to_vec(),
                drain_at,
                keep_at,
                keep_every,
                keep,
                closed_until,
                seed,
            },
        )
}

/// Where the clients stand at the scrape: next attempts spread over the whole delay or
/// bunched in a narrow window anywhere in it, attempts out with their time left spread
/// over the whole timeout or over part of it; and whether the bound reads it.
pub(super) fn phases() -> impl Strategy<Value = (f64, f64, (f64, f64), bool)> {
    let sleep = prop_oneof![
        Just((0.0, 1.0)),
        (0.0f64..1.0, 0.001f64..=1.0).prop_map(|(from, w)| (from, (1.0 - from) * w)),
        (0.0f64..0.98, 0.001f64..0.02).prop_map(|(from, w)| (from, w)),
    ];
    let left = prop_oneof![
        Just((0.0, 1.0)),
        (0.0f64..1.0, 0.01f64..=1.0).prop_map(|(lo, w)| (lo, lo + (1.0 - lo) * w)),
    ];
    (sleep, left, any::<bool>()).prop_map(|((from, width), left, read)| (from, width, left, read))
}

/// The model's own phases at the scrape, read on the workers' ladder.
pub(super) fn phases_of(c: &Case) -> ClientPhases {
    let (live, sleepers) = at_scrape(c);
    ClientPhases {
        waiting_next: ladder(&sleepers),
        in_flight_left: ladder(&live.concat()),
    }
}

/// The model's servers at the scrape, read on the ladder as the service exports them:
/// every server busy with abandoned work until the runbook's start (`lag_s` after the
/// scrape), at its bucket's lower edge.
pub(super) fn servers_of(c: &Case) -> ServersAt {
    let each: Vec<BusyServer> = ladder(&vec![c.lag_s; c.concurrency as usize])
        .lower_edges()
        .into_iter()
        .map(|free_s| BusyServer { free_s, live: true })
        .collect();
    ServersAt {
        by_replica: vec![each; c.replicas],
        idle: 0,
        read_apart_s: 0.0,
        read_first: false,
        hold_over: None,
    }
}

/// The bound for the case (reading its phases where it says so): the least path, the
/// backlog, and the clients held back.
pub(super) fn bound_of(c: &Case) -> (f64, f64, f64) {
    bound_with(c, c.phases.then(|| phases_of(c)))
}

/// The bound for the case, given the clients' `phases`.
pub(super) fn bound_with(c: &Case, phases: Option<ClientPhases>) -> (f64, f64, f64) {
    let in_flight: f64 = c.live.iter().map(|&l| f64::from(l)).sum();
    let retrying = in_flight + f64::from(c.sleepers);
    let sys = BoundSystem {
        replicas: c.replicas as u32,
        capacity_warm_per_s: c.replicas as f64 * f64::from(c.concurrency) / c.service_time_s,
        cold_factor: c.cold_factor,
        warm_after: c.warm_after,
        warm_s: 0.5,
        workers: retrying as u32,
        retrying_allowed: 0.01,
        drain_clears_overload: true,
    };
    let lp = RetryLoop {
        retry_delay_s: c.delay_s,
        client_timeout_s: c.timeout_s,
        scraped_before_s: c.lag_s,
        in_flight,
        replicas: c.replicas as u32,
        concurrency: c.concurrency,
        service_time_s: c.service_time_s,
        servers: phases.is_some().then(|| servers_of(c)),
        phases,
        restart: Restart {
            start_to_ready_s: Some(0.0),
            cold_factor: c.cold_factor,
            warm_after: c.warm_after,
            warm_s: 0.5,
        },
    };
    let held = lp.held_back();
    let paths = sys.paths(BoundStart {
        retrying,
        restart_s: Some(0.0),
        warm_fraction: Some(c.warmth.iter().sum::<f64>() / c.replicas as f64),
        warm_per_replica: Some(c.warmth.clone()),
        retry_loop: Some(lp),
    });
    let (_, t) = least(&paths).expect("a bound");
    (t, sys.backlog(retrying), held)
}
