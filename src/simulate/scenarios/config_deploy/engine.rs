//! The continuous-time engine: advances clients, gate and server one tick at a time, with
//! client wake-ups on the kernel's clock, and records a per-second series. Deterministic:
//! the only randomness is the kernel's seeded PRNG, drawn in a fixed order.

use super::clients::{Client, Phase};
use super::gate::{Admission, Gate};
use super::params::SystemParams;
use super::procedure::Procedure;
use super::readmission::Readmission;
use super::report::{DrainSeen, Second, SystemReport, Totals};
use super::server::{Arrival, Req, Server, ServerConfig};
use super::settled::{in_steps, Steps};
use crate::engine::restart::Drained;
use crate::gate::limit::Fill;
use crate::retry::{RetryBudget, RetryUnits};
use crate::runbook::action::DrainKeep;
use crate::simulate::kernel::clock::{Clock, Stepped};
use crate::simulate::kernel::record::{Recovery, Series};
use crate::simulate::kernel::rng::SplitMix64;
use std::time::Duration;

fn ticks(d: Duration, tick: Duration) -> u32 {
    (d.as_nanos() / tick.as_nanos().max(1)).min(u128::from(u32::MAX / 4)) as u32
}

/// Client timings in ticks, derived from the parameters (recomputed on a mid-run change).
#[derive(Debug, Clone, Copy)]
struct Timing {
    timeout_t: u32,
    interval_t: u32,
    /// The clients' policy in ticks, converted once: a delay is drawn per failed attempt.
    retry: RetryUnits,
    /// The longest delay anything is usually scheduled ahead (full jitter waits at most
    /// the backed-off delay).
    horizon: u64,
}

impl Timing {
    fn of(p: &SystemParams, tick: Duration) -> Self {
        let (timeout_t, interval_t) = (
            ticks(p.timeout, tick).max(1),
            ticks(p.interval, tick).max(1),
        );
        let retry = p.retry_policy();
        Timing {
            timeout_t,
            interval_t,
            retry: retry
                .in_nanos()
                .in_units(tick.as_nanos().clamp(1, u128::from(u64::MAX)) as u64),
            horizon: u64::from(interval_t.max(timeout_t).max(ticks(retry.max, tick))),
        }
    }
}

fn server_config(p: &SystemParams, tick: Duration) -> ServerConfig {
    ServerConfig {
        per_tick: p.capacity * tick.as_secs_f64(),
        cold_factor: p.cold_factor,
        warmup_ticks: ticks(p.warmup, tick),
        warm_after_requests: p.warm_after_requests,
        overload_factor: p.overload_factor,
        shedding: p.shedding,
        honour_deadline: p.honour_deadline,
        timeout_ticks: ticks(p.timeout, tick).max(1),
        job_ticks: p
            .concurrency
            .map(|c| f64::from(c) / p.capacity / tick.as_secs_f64()),
    }
}

struct Engine<'a> {
    p: &'a SystemParams,
    rng: SplitMix64,
    clients: Vec<Client>,
    clock: Clock<u32, Stepped>,
    server: Server,
    gate: Gate,
    budget: Option<RetryBudget>,
    cur: Second,
    /// Per second of sending: attempts sent then that failed (known only later for
    /// timeouts), so "every call arriving in that second was served" can be judged.
    sent_failed: Series<u64>,
    /// The tick the last failed attempt was sent at: where the final failure-free stretch
    /// begins, finer than the per-second series.
    last_failed: Option<u32>,
    /// The last tick more clients were in a retry loop than `settled_retrying_max` allows.
    last_retrying: Option<u32>,
    totals: Totals,
    in_retry: u64,
    t: Timing,
    spike: Option<(u32, u32, u32)>,
}

impl<'a> Engine<'a> {
    /// Change client, server and gate behaviour mid-run (what-if "we changed it now");
    /// trigger, tick and duration stay those of the run.
    fn reconfigure(&mut self, q: &'a SystemParams, tick: Duration) {
        let old = self.p;
        self.p = q;
        self.t = Timing::of(q, tick);
        self.server.reconfigure(server_config(q, tick));
        self.gate
            .reconfigure(q.gate_rate, q.gate_burst, q.gate_max_in_flight);
        if q.retry_budget != old.retry_budget {
            self.budget = budget(q);
        }
    }

    fn interval_at(&self, now: u32) -> u32 {
        match self.spike {
            Some((from, to, iv)) if now >= from && now < to => iv,
            _ => self.t.interval_t,
        }
    }

    #[inline]
    fn at(&mut self, id: u32, when: u32) {
        self.clients[id as usize].wake = when;
        self.clock.schedule(u64::from(when), id);
    }

    /// A spike starts: idle clients would otherwise keep their next poll up to a whole
    /// normal interval away; pull each into the spike's (shorter) interval.
    fn start_spike(&mut self, now: u32, iv: u32) {
        for id in 0..self.clients.len() as u32 {
            let c = self.clients[id as usize];
            if c.phase == Phase::Idle {
                let at = now + self.rng.below(u64::from(iv)) as u32;
                if at < c.wake {
                    self.at(id, at);
                }
            }
        }
    }

    fn wake(&mut self, id: u32, now: u32) {
        let c = self.clients[id as usize];
        if c.wake != now {
            return; // stale: the client moved on (answered before its timeout)
        }
        match c.phase {
            Phase::Idle => {
                self.totals.calls += 1;
                self.cur.first += 1;
                self.clients[id as usize].attempt = 1;
                self.send(id, now);
            }
            Phase::Backoff => {
                self.cur.retries += 1;
                self.clients[id as usize].attempt += 1;
                self.send(id, now);
            }
            Phase::Waiting => {
                self.cur.timeouts += 1;
                self.mark_failed(c.sent);
                self.gate.finished();
                self.fail(id, now);
            }
        }
    }

    fn mark_failed(&mut self, sent: u32) {
        *self.sent_failed.at(u64::from(sent)) += 1;
        self.last_failed = Some(self.last_failed.map_or(sent, |l| l.max(sent)));
    }

    fn send(&mut self, id: u32, now: u32) {
        self.cur.arriving += 1;
        self.totals.attempts += 1;
        let c = &mut self.clients[id as usize];
        c.seq = c.seq.wrapping_add(1);
        c.sent = now;
        let req = Req {
            client: id,
            seq: c.seq,
            sent: now,
        };
        if self.server.is_down(now) || self.gate.admit() != Admission::Admitted {
            self.cur.rejected += 1;
            self.mark_failed(now);
            return self.fail(id, now);
        }
        match self.server.arrive(req, now) {
            Arrival::Queued => {
                self.clients[id as usize].phase = Phase::Waiting;
                self.at(id, now + self.t.timeout_t);
            }
            Arrival::Refused | Arrival::Shed => {
                self.gate.finished();
                self.cur.rejected += 1;
                self.mark_failed(now);
                self.fail(id, now);
            }
        }
    }

    // Inlined: called once per failed attempt, and a call cost it a tenth of its work.
    #[inline]
    fn fail(&mut self, id: u32, now: u32) {
        let c = &mut self.clients[id as usize];
        if !c.in_retry {
            c.in_retry = true;
            self.in_retry += 1;
        }
        let attempt = c.attempt;
        let p = self.p;
        let out_of_attempts = p.max_attempts > 0 && attempt >= p.max_attempts;
        let out_of_budget =
            !out_of_attempts && self.budget.as_mut().is_some_and(|b| !b.try_spend());
        if out_of_attempts || out_of_budget {
            self.cur.given_up += 1;
            self.totals.given_up += 1;
            return self.end_poll(id, now);
        }
        let rng = &mut self.rng;
        let d = self.t.retry.delay(attempt, || rng.unit());
        self.clients[id as usize].phase = Phase::Backoff;
        self.at(id, now + d as u32);
    }

    fn end_poll(&mut self, id: u32, now: u32) {
        let iv = self.interval_at(now);
        let c = &mut self.clients[id as usize];
        if c.in_retry {
            c.in_retry = false;
            self.in_retry -= 1;
        }
        c.phase = Phase::Idle;
        let next = c.next_slot(iv, now);
        self.at(id, next);
    }

    /// A queued request answered with an error by a drain: its client, if still waiting on
    /// it, fails now and retries.
    fn drained(&mut self, req: Req, now: u32) {
        let c = self.clients[req.client as usize];
        if c.phase == Phase::Waiting && c.seq == req.seq {
            self.gate.finished();
            self.cur.rejected += 1;
            self.mark_failed(req.sent);
            self.fail(req.client, now);
        }
    }

    /// The procedure's drain (and restart, `plan_restart`): every queued request it does
    /// not keep is answered with an error at once (the demo service does), and its client
    /// retries a retry delay later; with `keep: answerable` (and no restart) each replica
    /// keeps the youngest it answers before their clients' deadlines.
    fn drain(&mut self, now: u32, keep: DrainKeep, tick_s: f64) -> DrainSeen {
        let clients = &self.clients;
        let live = |r: &Req| {
            let c = clients[r.client as usize];
            c.phase == Phase::Waiting && c.seq == r.seq
        };
        let clients_queued = self.server.queued().filter(|r| live(r)).count() as u64;
        let (out, kept) = match keep {
            _ if self.p.plan_restart => (self.server.restart(now), 0),
            DrainKeep::None => (self.server.take_queue(), 0),
            DrainKeep::Answerable => self
                .server
                .drain_keeping(now, self.p.replicas, tick_s, live),
        };
        let dropped = out.len() as u64;
        for r in out {
            self.drained(r, now);
        }
        DrainSeen {
            clients_queued,
            dropped,
            kept: kept as u64,
            fill: Fill::Carried,
        }
    }

    fn complete(&mut self, req: Req, now: u32) {
        let c = self.clients[req.client as usize];
        if c.phase == Phase::Waiting && c.seq == req.seq {
            self.cur.useful += 1;
            self.totals.served += 1;
            self.gate.finished();
            if let Some(b) = self.budget.as_mut() {
                b.on_success();
            }
            self.end_poll(req.client, now);
        } else {
            self.cur.abandoned += 1;
            self.totals.abandoned_work += 1;
        }
    }
}

fn budget(p: &SystemParams) -> Option<RetryBudget> {
    p.retry_budget
        .map(|r| RetryBudget::new(r, r * f64::from(p.clients)))
}

/// Attempts timed out and turned away so far (the seconds recorded and the current one).
fn so_far(series: &[Second], cur: &Second) -> (u64, u64) {
    series
        .iter()
        .chain(std::iter::once(cur))
        .fold((0, 0), |(t, r), s| (t + s.timeouts, r + s.rejected))
}

/// From the procedure's start to its readmission: the warming (`plan_warm`), or, where an
/// admit hold is given, that hold less the first rate's (what the plan counts for it).
fn ramp_delay(p: &SystemParams, plan: &crate::plan::Plan) -> Duration {
    match p.plan_admit_hold {
        Some(h) => h.saturating_sub(plan.ramp.first().map_or(Duration::ZERO, |s| s.hold)),
        None => p.plan_warm.unwrap_or_default(),
    }
}

/// The service as a drain alone left it, as the engine reads it: warm and cold capacity
/// as planned, the caches' `warmth` and the clients' timeout as exported.
fn drained_alone(
    p: &SystemParams,
    r: &Readmission,
    drain: Option<DrainSeen>,
    warmth: f64,
) -> Drained {
    // The block's filled bucket may let in as many as it started with after the drain,
    // counted as queued as the engine counts them.
    let block = p.plan.as_ref().map_or(0, |pl| {
        r.block_fill
            .tokens(crate::gate::limit::default_burst(pl.admit_rate))
            .unwrap_or(0)
    });
    Drained {
        kept: Some(drain.map_or(0, |d| d.kept) + u64::from(block)),
        capacity: r.capacity.or(Some(p.capacity)),
        capacity_cold: r.capacity_cold.unwrap_or(p.capacity * p.cold_factor),
        warm_fraction: Some(warmth),
        client_timeout_s: Some(p.timeout.as_secs_f64()),
    }
}

/// Run the model; with a plan (`p.plan`), its procedure starts at `plan_at`.
pub fn run(p: &SystemParams, seed: u64) -> SystemReport {
    run_with(p, None, seed)
}

/// [`run`], and if `change` is given, switch to its client, server and gate parameters at
/// `plan_at` (times are then measured from that change).
pub fn run_with(p: &SystemParams, change: Option<&SystemParams>, seed: u64) -> SystemReport {
    let plan = p.plan.as_ref();
    let tick = p.tick;
    let tick_s = tick.as_secs_f64();
    let n = ticks(p.duration, tick).max(1);
    let per_s = ticks(Duration::from_secs(1), tick).max(1);
    let timing = Timing::of(p, tick);
    let interval_t = timing.interval_t;
    let spike = (!p.spike.is_zero()).then(|| {
        let from = ticks(p.spike_at, tick);
        let iv = ((f64::from(interval_t) / p.spike_factor).round() as u32).max(1);
        (from, from + ticks(p.spike, tick), iv)
    });
    let change_horizon = change.map_or(0, |q| Timing::of(q, tick).horizon);
    let spike_horizon = spike.map_or(0, |s| u64::from(s.2));
    let horizon = timing.horizon.max(change_horizon).max(spike_horizon);
    let mut rng = SplitMix64::new(seed);
    let mut clock = Clock::new(horizon);
    let clients = (0..p.clients)
        .map(|id| {
            let first = rng.below(u64::from(interval_t)) as u32;
            clock.schedule(u64::from(first), id);
            Client::new(first)
        })
        .collect();
    let mut server = Server::new(server_config(p, tick));
    if p.cold_start {
        server.start_cold();
    }
    let mut e = Engine {
        p,
        rng,
        clients,
        clock,
        server,
        gate: Gate::new(p.gate_rate, p.gate_burst, p.gate_max_in_flight, tick_s),
        budget: budget(p),
        cur: Second::default(),
        sent_failed: Series::new(u64::from(per_s), (n / per_s + 1) as usize),
        last_failed: None,
        last_retrying: None,
        totals: Totals::default(),
        in_retry: 0,
        t: timing,
        spike,
    };
    let outage = (!p.outage.is_zero()).then(|| {
        let at = ticks(p.outage_at, tick);
        (at, at + ticks(p.outage, tick).max(1))
    });
    let plan_at = ticks(p.plan_at, tick);
    let plan_warmed_at = p.plan_warm.map(|w| plan_at + ticks(w, tick));
    let readmission = plan.map(|pl| {
        p.plan_readmission
            .clone()
            .unwrap_or_else(|| Readmission::for_plan(pl))
    });
    let ramp_at = plan.map_or(plan_at, |pl| plan_at + ticks(ramp_delay(p, pl), tick));
    let mut procedure = plan
        .zip(readmission.clone())
        .map(|(pl, r)| Procedure::new(pl, r, tick));
    let retrying_max = p
        .settled_retrying_max
        .map(|f| (f * f64::from(p.clients)).floor() as u64);
    let mut series = Vec::with_capacity((n / per_s + 1) as usize);
    let mut done: Vec<Req> = Vec::with_capacity(1024);
    // What the runbook's drain keeps of the queue (a restart loses all of it anyway).
    let keep = readmission
        .as_ref()
        .map_or(DrainKeep::None, |r| r.drain_keep);
    let mut drain: Option<DrainSeen> = None;

    for now in 0..n {
        if let Some((at, until)) = outage {
            if now == at {
                e.server.go_down(until);
            }
        }
        if let Some(q) = change {
            if now == plan_at {
                e.reconfigure(q, tick);
            }
        }
        if let Some(proc_) = procedure.as_mut() {
            if now == plan_at {
                e.gate.set_limit(proc_.start());
                drain = Some(e.drain(now, keep, tick_s));
                // A warm step after a drain alone readmits before its warm call.
                let warms_first = plan_warmed_at.is_some() && ramp_at > now;
                let opens = readmission
                    .as_ref()
                    .filter(|r| r.while_warming && warms_first && !p.plan_restart);
                let drained = opens.map(|r| drained_alone(p, r, drain, e.server.cache_warmth(now)));
                if let Some(first) = proc_.open_while_warming(drained) {
                    if let Some(d) = drain.as_mut() {
                        d.fill = first.fill;
                    }
                    e.gate.set_limit(first);
                }
            }
            if plan_warmed_at == Some(now) {
                e.server.warm();
            }
            if now == ramp_at {
                // After a drain alone the engine reads the service it left: warm and cold
                // capacity as planned, the caches' warmth and the clients' timeout as
                // exported.
                let drained = readmission
                    .as_ref()
                    .filter(|_| !p.plan_restart)
                    .map(|r| drained_alone(p, r, drain, e.server.cache_warmth(now)));
                let (timeouts, _) = so_far(&series, &e.cur);
                let first = proc_.begin_ramp(now, drained, timeouts);
                if let Some(d) = drain.as_mut().filter(|_| !first.fill.is_carried()) {
                    d.fill = first.fill;
                }
                e.gate.set_limit(first);
            }
        }
        if let Some((from, _, iv)) = e.spike {
            if now == from {
                e.start_spike(now, iv);
            }
        }
        e.gate.refill();
        let due = e.clock.take(u64::from(now));
        for &id in &due {
            e.wake(id, now);
        }
        e.clock.give_back(due);
        // Completions go through a reusable buffer: the server cannot call back into the
        // engine while it is borrowed.
        e.server.step(now, |r| done.push(r));
        for &r in &done {
            e.complete(r, now);
        }
        done.clear();
        if retrying_max.is_some_and(|m| e.in_retry > m) {
            e.last_retrying = Some(now);
        }
        if let Some(proc_) = procedure.as_mut().filter(|pr| pr.due(now)) {
            let (timeouts, rejected) = so_far(&series, &e.cur);
            if let Some(change) = proc_.measure(now, timeouts, rejected) {
                e.gate.set_limit(change);
            }
        }

        if (now + 1) % per_s == 0 {
            let t = now / per_s;
            let mut s = std::mem::take(&mut e.cur);
            s.t = t;
            s.queue = e.server.queue_len() as u64;
            s.in_retry = e.in_retry;
            s.capacity = (e.server.capacity_per_s(now, tick_s) * 100.0).round() / 100.0;
            s.gate_rate = e.gate.rate_per_s();
            series.push(s);
        }
    }

    for s in &mut series {
        s.sent_failed = e.sent_failed.rows().get(s.t as usize).copied().unwrap_or(0);
    }
    let pending = e.clients.iter().filter(|c| c.phase != Phase::Idle).count() as u64;
    e.totals.pending = pending;
    let (reference, reference_t) = match (plan, change) {
        (Some(_), _) => ("plan_start", plan_at / per_s),
        (None, Some(_)) => ("change", plan_at / per_s),
        (None, None) => ("trigger_end", ticks(p.trigger_end(), tick) / per_s),
    };
    let settle = ticks(p.settle_window, tick) / per_s;
    let mut recovery = Recovery::of(
        &series,
        |s| s.arriving,
        Second::failures,
        e.totals.given_up,
        reference_t as usize,
        settle as usize,
    );
    let end = series.len() as u32 * per_s;
    let step = ticks(p.recovery_step, tick).max(1);
    (recovery.recovered, recovery.time_to_recover_s) = in_steps(
        e.last_failed.max(e.last_retrying),
        Steps {
            every: step,
            phase: ticks(p.recovery_phase, tick) % step,
        },
        reference_t * per_s,
        end,
        settle.max(1) * per_s,
        tick_s,
    );
    SystemReport {
        recovery,
        reference,
        reference_s: f64::from(reference_t),
        relapses: procedure.as_ref().map_or(0, Procedure::relapses),
        drain,
        totals: e.totals,
        series,
    }
}
