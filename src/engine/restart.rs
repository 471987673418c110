//! Whether a `restart.batched` step with `when: needed` restarts anything, and which
//! replicas, as a pure function of what the run knows when the step starts.
//!
//! Why it exists: a restart costs every replica its start-to-ready time and its warm caches
//! (a cold service answers `cold_factor` times slower), and in a stuck overload sustained by
//! retries it buys nothing a drain has not already bought. That overload lives in the
//! queue: a request costs `k` times its healthy work while more is queued than the service
//! answers within the client timeout, and the retries keep the queue that long. Drop the
//! queue and admit less than the service answers warm, and the queue cannot build again:
//! the process was never the problem. So the step restarts only where the evidence says
//! the process is, in order:
//!
//! 1. A restart this run had begun (a resumed run): finish it, so no replica is left
//!    half-way and the run does what its journal says it started.
//! 2. A replica that is not ready: it serves nobody until it is replaced; restart those.
//! 3. A replica the verdict named slow: its own service time is far above its peers' with
//!    no queue to explain it, so its process state is bad; restart that one.
//! 4. A replica this run has not drained: its queue still holds the overload, and a
//!    restart is the one other way to empty it; restart all of them.
//! 5. A gate that admits at least the warm capacity, or has no limit, or does not say
//!    (the warm capacity unknown counts as the cold capacity, which it is at least): the
//!    queue could build again; restart all.
//!
//! Otherwise nothing is restarted, and the step says why; and the readmission that follows
//! starts at what the drained service answers ([`start_rate`]), not at the plan's rate
//! for a cold, overloaded one.

use super::ramp::RampParams;
use crate::gate::limit::Fill;

/// What the run knows when the step starts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RestartEvidence {
    /// Every replica now, with whether it is ready.
    pub replicas: Vec<(String, bool)>,
    /// Replicas this run drained (their drain answered).
    pub drained: Vec<String>,
    /// The replica the verdict named slow, if any.
    pub slow: Option<String>,
    /// Replicas an interrupted run of this step had already restarted.
    pub resumed: Vec<String>,
    /// The gate's limit now, req/s (None: no limit, or the gate did not say).
    pub admit_rate: Option<f64>,
    /// Warm capacity of the ready replicas, req/s, if known.
    pub capacity: Option<f64>,
    /// Cold capacity, req/s (a floor on the warm capacity).
    pub capacity_cold: f64,
}

/// What the step does.
#[derive(Debug, Clone, PartialEq)]
pub enum RestartDecision {
    /// Restart these replicas (all of them, or the ones named), because of `reason`.
    Restart {
        replicas: Vec<String>,
        reason: String,
    },
    /// Restart nothing, because of `reason`.
    Skip { reason: String },
}

/// Decide, by the rules in the module's doc, in their order.
pub fn decide(e: &RestartEvidence) -> RestartDecision {
    let all: Vec<String> = e.replicas.iter().map(|(r, _)| r.clone()).collect();
    let restart =
        |replicas: Vec<String>, reason: String| RestartDecision::Restart { replicas, reason };
    if !e.resumed.is_empty() {
        return restart(
            all,
            format!(
                "this step had restarted {} before the run was interrupted: finishing it",
                e.resumed.join(", ")
            ),
        );
    }
    let not_ready: Vec<String> = e
        .replicas
        .iter()
        .filter(|(_, ready)| !ready)
        .map(|(r, _)| r.clone())
        .collect();
    if !not_ready.is_empty() {
        let reason = format!(
            "{} not ready: a replica that serves nobody is replaced",
            not_ready.join(", ")
        );
        return restart(not_ready, reason);
    }
    if let Some(slow) = e.slow.as_ref().filter(|s| all.contains(s)) {
        return restart(
            vec![slow.clone()],
            format!("the verdict named {slow} slow with no queue to explain it: its process state is bad"),
        );
    }
    let undrained: Vec<&String> = all.iter().filter(|r| !e.drained.contains(r)).collect();
    if !undrained.is_empty() {
        return restart(
            all.clone(),
            format!(
                "{} not drained by this run: the overload is still queued there, and a restart is the other way to drop it",
                undrained.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
            ),
        );
    }
    let (warm, warm_from) = match e.capacity {
        Some(c) if c >= e.capacity_cold => (c, "warm capacity"),
        _ => (
            e.capacity_cold,
            "cold capacity (the warm capacity is at least that)",
        ),
    };
    let admit = match e.admit_rate {
        Some(r) if r.is_finite() && r < warm => r,
        Some(r) => {
            return restart(
                all,
                format!("the gate admits {r:.1} req/s, not below the {warm_from} {warm:.1} req/s: the queue could build again"),
            )
        }
        None => {
            return restart(
                all,
                "the gate has no limit (or did not say which): the retries could build the queue again".into(),
            )
        }
    };
    RestartDecision::Skip {
        reason: format!(
            "no restart needed: every replica ready and drained by this run, and the gate admits {admit:.1} req/s below the {warm_from} {warm:.1} req/s, so the overload (which lived in the queue) cannot build again; a restart would only cost start-to-ready and warm caches"
        ),
    }
}

/// The service as a drain with no restart leaves it: no queue but what the drain kept (the
/// requests it answers within their clients' deadlines), caches as warm as they were.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Drained {
    /// Requests queued at most, over every replica: what the drain kept, plus what a limit
    /// whose bucket this run filled (a block's `fill`) may have let in after it (None: a
    /// replica did not say).
    pub kept: Option<u64>,
    /// Warm capacity, req/s (None: not known).
    pub capacity: Option<f64>,
    /// Cold capacity, req/s.
    pub capacity_cold: f64,
    /// Mean warm fraction of the replicas now (None: not measured).
    pub warm_fraction: Option<f64>,
    /// The clients' timeout per attempt as they export it, seconds (None: not measured; a
    /// declared one is not used here, see [`wave_burst`]).
    pub client_timeout_s: Option<f64>,
}

impl Drained {
    /// What the service answers now: `capacity / m(w)` with the cold multiplier
    /// `m(w) = 1 + (f - 1)(1 - w)`, `f = capacity / capacity_cold`; no overload factor,
    /// since nothing is queued beyond what the service answers within the timeout (what
    /// a drain keeps). Warmth or warm capacity unknown: the cold capacity, which it
    /// answers at least.
    pub fn capacity_now(&self) -> f64 {
        let cold = self.capacity_cold.max(0.0);
        match (self.capacity, self.warm_fraction) {
            (Some(c), Some(w)) if c.is_finite() && c >= cold && cold > 0.0 && w.is_finite() => {
                let f = c / cold;
                c / (1.0 + (f - 1.0) * (1.0 - w.clamp(0.0, 1.0)))
            }
            _ => cold,
        }
    }

    /// What the queue answers within the clients' measured timeout at `headroom` of what
    /// the service answers now, in whole requests: `floor(headroom x capacity_now x
    /// timeout)`. None when the timeout was not measured (a declared one may be stale).
    pub fn queue_room(&self, headroom: f64) -> Option<f64> {
        let timeout = self
            .client_timeout_s
            .filter(|t| t.is_finite() && *t > 0.0)?;
        Some((headroom.clamp(0.0, 1.0) * self.capacity_now() * timeout).floor())
    }

    /// Why the readmission's first bucket starts empty although the run drained alone: a
    /// replica did not say how many requests it kept, or the drain kept at least what the
    /// queue answers within the clients' timeout at `headroom` ([`fill_reason`] fills only
    /// what the queue has room for). None otherwise. Pure.
    pub fn kept_reason(&self, headroom: f64) -> Option<String> {
        match (self.kept, self.queue_room(headroom)) {
            (None, _) => Some(
                "a replica's drain did not say how many requests it kept (a service that ignores ?keep= does not say, and may have kept any number); the queue is not known empty, so the bucket starts empty".into(),
            ),
            (Some(n), Some(room)) if n > 0 && room - (n as f64) < 1.0 => Some(format!(
                "{n} requests are queued at most (those the drain kept and any a filled block let in since), no fewer than the {room:.0} the queue answers within the clients' timeout; the bucket starts empty"
            )),
            _ => None,
        }
    }

    /// What is queued after the drain, in words for the run log.
    pub fn queued_words(&self) -> &'static str {
        match self.kept {
            Some(0) => "nothing is queued",
            _ => "nothing is queued but what the replicas answer before their clients' deadlines",
        }
    }
}

/// Where the readmission starts. The plan's admit rate (`from`) is sized for a service that
/// may be cold and still overloaded: capacity_cold / k. After a drain with no restart
/// (`drained`) nothing is queued, so no request costs k, and the caches keep the warmth
/// they had; admitting `headroom` of what the service answers now keeps the queue from
/// building again, so the ramp starts there: never below the plan's rate, never above the
/// ceiling. A relapse still steps back to the plan's rate ([`super::ramp::next_move`]). Pure.
///
/// It stands after a drain that kept requests (`keep: answerable`, [`Drained::kept`] not
/// 0, or not known): a replica keeps only what it answers before its clients' deadlines
/// at its cost now, not overloaded (`platform::admin::answerable`), so what is kept is
/// answered within the timeout and costs no k; and arrivals admitted below what the
/// service answers never wait longer than the kept ones did (the queue drains faster than
/// it fills). What changes is the first bucket: it starts with the room the kept requests
/// leave ([`fill_reason`]).
pub fn start_rate(p: &RampParams, drained: Option<Drained>) -> f64 {
    match drained {
        Some(d) => (p.headroom.clamp(0.0, 1.0) * d.capacity_now())
            .min(p.ceiling)
            .max(p.from),
        None => p.from,
    }
}

/// The burst the readmission may give the gate after a drain alone, so that a returning
/// wave of retries goes through whole instead of in cuts of half a second of the rate.
///
/// The service counts as overloaded only while it queues more than it answers within the
/// client timeout (`queue > capacity x client_timeout`, the demo service's own test). The
/// drain left nothing queued, and the gate admits at most `headroom x capacity_now` a
/// second, under what the service answers: so a token bucket of that rate whose burst is
/// `headroom x capacity_now x client_timeout` can never queue more than that burst (the
/// queue grows only by what the bucket lets through beyond the service's rate, and the rate
/// is under it), which stays under the overload threshold. A new limit opens no burst by
/// itself (it keeps at most what the old one had left, `gate::admission`), so the
/// readmission's first limit asks the gate to start its bucket full ([`fill_reason`]):
/// the drained clients come back one retry delay later, and a bucket refilling from
/// empty while the early ones and the demand spend it turns most of that wave away for
/// another retry delay.
///
/// After a drain that kept `kept` requests the burst stays, and the bucket starts with the
/// room they leave, `room - kept` (`room` = this burst): `t` seconds on at rate `r` the
/// gate has let in at most `room - kept + r x t`, while the kept ones have shrunk by
/// `capacity_now x t`, so the queue holds at most `room + (r - capacity_now) t <= room`,
/// what it answers within the timeout: the same bound as a full bucket into an empty
/// queue.
///
/// Only the measured client timeout counts: a declared one may be stale, and a longer
/// timeout than the clients' would let in a wave that overloads. Never below the gate's
/// default burst for `rate` (what the readmission used before), `None` when the timeout or
/// the drain is not known.
pub fn wave_burst(p: &RampParams, drained: Option<Drained>, rate: f64) -> Option<u32> {
    let room = drained?.queue_room(p.headroom)?;
    let default = crate::gate::limit::default_burst(rate);
    Some(default.max(room.clamp(1.0, f64::from(u32::MAX)) as u32))
}

/// How the readmission's first limit (`rate`, `burst`) starts its bucket, and why; None
/// when it carries over what the old limit had left (a new limit's usual start). Only
/// where the bound of [`wave_burst`] holds from the first instant: the run drained every
/// replica and restarted none, each replica said how many requests it kept, the clients'
/// timeout is measured, the rate is at most `headroom` of what the service answers now,
/// and the burst is the wave-sized one, `room = headroom x capacity_now x timeout`, not
/// the gate's default (which may be larger than what the queue answers within a short
/// timeout). The bucket then starts with the room the kept requests leave, `room - kept`:
/// full when nothing was kept, none when that is under one token. The queue then holds
/// at most `room`, what it answers within the timeout. Pure.
pub fn fill_reason(
    p: &RampParams,
    drained: Option<Drained>,
    rate: f64,
    burst: u32,
) -> Option<(Fill, String)> {
    let d = drained?;
    // What was kept is in the queue: a count not given leaves no known room.
    let kept = d.kept?;
    let room = d.queue_room(p.headroom)?;
    let (headroom, now) = (p.headroom.clamp(0.0, 1.0), d.capacity_now());
    let timeout = d.client_timeout_s.unwrap_or_default();
    if !(rate > 0.0 && rate <= headroom * now) || room < 1.0 || f64::from(burst) != room {
        return None;
    }
    let sized = format!(
        "headroom {headroom} x the {now:.1} req/s the service answers now x the clients' measured {timeout:.2} s timeout"
    );
    if kept == 0 {
        return Some((
            Fill::Full,
            format!(
                "its bucket starts full at burst {burst}: this run drained every replica and restarted none, so nothing is queued, and {burst} is {sized}, what the queue answers within that timeout; the drained clients' returning wave passes whole instead of waiting another retry delay"
            ),
        ));
    }
    let tokens = u64::from(burst).checked_sub(kept).filter(|t| *t >= 1)?;
    let tokens = u32::try_from(tokens).ok()?;
    Some((
        Fill::Tokens(tokens),
        format!(
            "its bucket starts with {tokens} of burst {burst}: {kept} requests are queued at most (those the drain kept, which the replicas answer within their deadlines, and any a filled block let in since), and {burst} is what the queue answers within the clients' {timeout:.2} s timeout ({sized}), so the queue holds at most {burst}; the drained clients' returning wave passes as far as that room allows instead of waiting another retry delay"
        ),
    ))
}

#[cfg(test)]
#[path = "restart_tests.rs"]
mod tests;
