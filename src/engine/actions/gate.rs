//! Actions on the gate: `gate.limit` sets a limit, `gate.ramp` readmits step by step
//! (each move decided by [`super::super::ramp`]). Every limit the engine sets carries a
//! note saying which run set it, until when, and who must act if that run is gone.

use super::checks::{run_check, AfterChange};
use super::limit::{
    describe_limit, fillable, limit_note, set_change, set_limit, DEFAULT_LIMIT_DEADLINE,
};
use super::readmit::{drained_alone, ramp_ceiling, ramp_params, say_unfilled, set_readmission};
use super::{Act, Ctx, Preview, StepFailure, Tally};
use crate::engine::journal::Event;
use crate::engine::progress::{ProgressEvent, Readings};
use crate::engine::ramp::{next_move, settle_advice, RampDecision, RampMove, RampState, Seen};
use crate::engine::restart::start_rate;
use crate::gate::limit::{Fill, Limit, LimitChange};
use crate::metrics::signal::{names, Snapshot};
use crate::runbook::action::{Action, DrainKeep, GateLimit, GateRamp, RateSetting};
use crate::util::duration::format as dur;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// A dry run lists at most this many ramp rates before the last.
const DESCRIBED_RAMP_RATES: usize = 20;

#[async_trait::async_trait]
impl Act for GateLimit {
    async fn perform(&self, ctx: &Arc<Ctx>, step: &str, tally: &Tally) -> Result<(), StepFailure> {
        let deadline = self.deadline.unwrap_or(DEFAULT_LIMIT_DEADLINE);
        let note = Some(limit_note(ctx, step, self.note.as_deref(), deadline));
        let limit = match &self.rate {
            RateSetting::Unlimited => Limit {
                note,
                ..Limit::unlimited()
            },
            RateSetting::Rate(q) => {
                let rate = ctx.fixed.quantity(q)?.max(0.0);
                let mif = self
                    .max_in_flight
                    .as_ref()
                    .map(|m| ctx.fixed.quantity(m))
                    .transpose()?
                    .map(|v| v.max(0.0).round() as u32);
                Limit {
                    rate_per_s: Some(rate),
                    burst: burst_for(rate, self.burst),
                    max_in_flight: mif,
                    note,
                    shadow: self.shadow,
                }
            }
        };
        let fill = match self.fill {
            f if f.is_carried() || limit.rate_per_s.is_none() => Fill::Carried,
            f if fillable(ctx, step, "this limit's bucket") => f,
            _ => Fill::Carried,
        };
        let tokens = fill.tokens(limit.burst);
        let filled = tokens
            .map(|n| format!(", its bucket starting with {n}"))
            .unwrap_or_default();
        let said = format!("gate limit -> {}{filled}", describe_limit(&limit));
        tally.did(said.clone());
        ctx.info(step, said);
        set_change(
            ctx,
            step,
            LimitChange {
                limit: limit.clone(),
                fill,
            },
        )
        .await?;
        if let Some(n) = tokens {
            ctx.note_filled(n);
        }
        if let Some(r) = limit.rate_per_s {
            tally.set("rate_per_s", r);
        }
        Ok(())
    }

    fn describe(&self, p: &Preview) -> Vec<String> {
        vec![match &self.rate {
            RateSetting::Unlimited => "set the gate to unlimited".into(),
            RateSetting::Rate(r) => format!(
                "set the gate to {} req/s ({}), burst {}, {}",
                p.fixed
                    .quantity(r)
                    .map(|v| format!("{v:.1}"))
                    .unwrap_or_else(|e| e.to_string()),
                r.0,
                self.burst.map(|b| b.to_string()).unwrap_or_else(|| format!(
                    "{} (half a second of the rate)",
                    burst_for(p.fixed.quantity(r).unwrap_or(0.0), None)
                )),
                if self.shadow {
                    "in shadow: the gate counts what it would refuse and refuses nothing".into()
                } else if let Some(n) = self
                    .fill
                    .tokens(burst_for(p.fixed.quantity(r).unwrap_or(0.0), self.burst,))
                {
                    format!(
                        "its bucket starting with {n} (the requests arriving as it is set pass, up to that many, then the rate holds; carried instead where the gate follows a ConfigMap), review deadline {}",
                        dur(self.deadline.unwrap_or(DEFAULT_LIMIT_DEADLINE))
                    )
                } else {
                    format!(
                        "review deadline {}",
                        dur(self.deadline.unwrap_or(DEFAULT_LIMIT_DEADLINE))
                    )
                }
            ),
        }]
    }
}

#[async_trait::async_trait]
impl Act for GateRamp {
    async fn perform(&self, ctx: &Arc<Ctx>, step: &str, tally: &Tally) -> Result<(), StepFailure> {
        let p = ramp_params(self, &ctx.rb, &ctx.fixed)?;
        let from = p.from;
        // The check is the hold: each rate stands until the check has its consecutive
        // successes. A fixed wait before it only when the step asks for one.
        let hold = self.hold.unwrap_or(Duration::ZERO);
        // The check judges the readmission alone: not the drain and restart before it.
        let after = AfterChange {
            since: SystemTime::now(),
            settle_until: tokio::time::Instant::now() + self.settle(),
        };
        let mut st = RampState::start(&p);
        let drained = drained_alone(ctx).await;
        // A warm step may have opened the readmission already (its first limit set,
        // bucket and all): go on from there, never below it, the bucket carried over.
        let opened = ctx.opened();
        st.rate = start_rate(&p, drained).max(opened.unwrap_or(p.from));
        if let Some(d) = drained.filter(|_| st.rate > p.from) {
            let since = match opened {
                Some(r) => format!(" (readmitting at {r:.1} req/s since the caches began to warm; the bucket carries over)"),
                None => String::new(),
            };
            ctx.info(
                step,
                format!(
                    "starting at {:.1} req/s, not the plan's {from:.1}: the run drained every replica and restarted none, so {} and the caches kept their warmth{since}",
                    st.rate,
                    d.queued_words()
                ),
            );
        }
        // Said once: only the first limit could have been filled (said by the warm step
        // when it opened the readmission).
        if let Some(d) = drained.filter(|_| opened.is_none()) {
            say_unfilled(ctx, step, self, &p, d);
        }
        let mut applied: Option<f64> = None;
        let figures = |st: &RampState, lifted: bool| {
            tally.set("final_rate", st.rate);
            tally.set("relapses", st.relapses as f64);
            tally.set("lifted", if lifted { 1.0 } else { 0.0 });
        };
        tally.set("raises", 0.0);
        loop {
            figures(&st, false);
            if applied != Some(st.rate) {
                // Only the readmission's first limit may fill its bucket.
                let first = applied.is_none() && opened.is_none();
                set_readmission(ctx, step, self, &p, drained, st.rate, first).await?;
                applied = Some(st.rate);
                tally.did(format!("admit {:.1} req/s", st.rate));
            }
            ctx.emit(ProgressEvent::RampHolding {
                step: step.to_string(),
                check: self.check.clone(),
                check_needed: ctx
                    .rb
                    .checks
                    .get(&self.check)
                    .map_or(0, |c| c.consecutive_successes),
                hold_s: hold.as_secs_f64(),
                params: p,
                state: st.clone(),
            });
            if !hold.is_zero() {
                hold_watching(ctx, step, hold).await;
            }
            let checked = run_check(ctx, step, &self.check, None, Some(after))
                .await
                .map(|_| ())
                .map_err(|e| e.to_string());
            let snap = ctx.snapshot_since(Some(after.since)).await.ok();
            if let Some(snap) = &snap {
                // The figures beside the decision are the ones it was made from.
                ctx.emit(ProgressEvent::Observed {
                    step: step.to_string(),
                    readings: Readings::read(&ctx.fixed.lookup(Some(snap))),
                });
            }
            let seen = Seen {
                demand: ctx.fixed.inputs.demand,
                ..seen_in(snap.as_ref(), &self.rejected_signal)
            };
            let rejected = seen.rejected;
            let capacity_now = seen.capacity_now;
            let at_rate = st.rate;
            let check_failed = checked.clone().err();
            let decision = next_move(&p, &mut st, checked, seen);
            let decided = RampDecision {
                step: step.to_string(),
                at_rate,
                rejected,
                check_failed,
                decision: decision.clone(),
            };
            ctx.record(Event::RampDecided(decided.clone()));
            ctx.emit(ProgressEvent::RampDecided(decided));
            match decision {
                RampMove::Raise { .. } => tally.add("raises", 1.0),
                RampMove::Hold { .. } | RampMove::StepBack { .. } => {}
                RampMove::Finish { reason } => {
                    let lift = Limit {
                        note: Some(format!(
                            "lifted by recover run {} (runbook {}, step {step}): {reason}",
                            ctx.run_id, ctx.rb.name
                        )),
                        ..Limit::unlimited()
                    };
                    set_limit(ctx, step, lift).await?;
                    figures(&st, true);
                    tally.say(reason);
                    return Ok(());
                }
                RampMove::Settle { rate, reason } => {
                    let capacity = ctx.fixed.inputs.capacity.or(capacity_now);
                    let next = format!(
                        "{reason}. The gate stays at {rate:.1} req/s, which the service can take. {}",
                        settle_advice(rate, ctx.fixed.inputs.demand, capacity)
                    );
                    tracing::warn!(run_id = %ctx.run_id, "{next}");
                    ctx.settled(&reason);
                    figures(&st, false);
                    tally.say(next);
                    return Ok(());
                }
                RampMove::Fail { reason } => {
                    figures(&st, false);
                    return Err(StepFailure::Relapsed(reason));
                }
            }
        }
    }

    fn describe(&self, p: &Preview) -> Vec<String> {
        let (from, factor) = match (p.fixed.quantity(&self.from), p.fixed.quantity(&self.factor)) {
            (Ok(from), Ok(factor)) => (from, factor),
            (Err(e), _) | (_, Err(e)) => return vec![format!("raise the gate: {e}")],
        };
        let ceiling = ramp_ceiling(p.fixed, from);
        let mut rates = vec![];
        let mut r = from;
        while r < ceiling && rates.len() < DESCRIBED_RAMP_RATES && factor > 1.0 {
            rates.push(format!("{r:.1}"));
            r *= factor;
        }
        rates.push(format!("{ceiling:.1}"));
        let needed =
            p.rb.checks
                .get(&self.check)
                .map(|c| {
                    format!(
                        "{} passes in a row, every {}",
                        c.consecutive_successes,
                        dur(c.interval)
                    )
                })
                .unwrap_or_default();
        let hold = match self.hold {
            Some(h) => format!("holding {} then ", dur(h)),
            None => String::new(),
        };
        let mut lines = vec![format!(
            "raise the gate through {} req/s (or straight to what is offered when the service's measured capacity allows it, within the last, or within headroom x the capacity the service shows once readmitted when that is more), {hold}raising as soon as check {} passes at each ({needed}; for the first {} only its passes count); step back on relapse (max {}); lift the limit once the gate rejects nothing; at the last rate hold while it still rejects (up to {} more holds), then leave the limit there",
            rates.join(" -> "),
            self.check,
            dur(self.settle()),
            self.max_relapses,
            self.ceiling_holds
        )];
        if self.burst.is_none() {
            let h = p.rb.plan.headroom;
            lines.push(format!(
                "if this run drained every replica and restarted none (nothing queued): start at {h} x what the service answers now, with a burst of {h} x that x the clients' measured timeout (what the queue answers within it), and ask the gate to start that first limit's bucket full (fill: the drained clients' returning wave passes whole); later limits open no burst. If a warm step before this one opened the readmission while the caches warmed, its limit was the first: start at this step's start rate at the warmth measured then, never below the opened one, the bucket carried over"
            ));
            if drains_keep(p.rb) {
                lines.push("the drain keeps the requests each replica answers before their deadlines: the first limit's bucket starts full only if every replica says it kept none; after a drain that kept requests it starts with the room they leave (that burst less the requests kept, so the queue holds at most what it answers within the timeout), and empty if a replica does not say how many it kept".into());
            }
        }
        lines
    }
}

/// What the ramp decides from besides its check: the gate's rejected rate (`rejected_signal`)
/// and the capacity the service shows now, concurrency over service time (Little's law).
fn seen_in(snap: Option<&Snapshot>, rejected_signal: &str) -> Seen {
    let Some(s) = snap else {
        return Seen::default();
    };
    let capacity_now = match (s.get(names::CONCURRENCY_LIMIT), s.get(names::SERVICE_TIME)) {
        (Some(c), Some(t)) if c > 0.0 && t > 0.0 => Some(c / t),
        _ => None,
    };
    Seen {
        rejected: s.get(rejected_signal),
        capacity_now,
        demand: None,
    }
}

/// Wait out a ramp's hold; while someone watches, publish what the signals show at the
/// runbook's observe interval, so the live view does not freeze between checks.
async fn hold_watching(ctx: &Ctx, step: &str, hold: Duration) {
    if !ctx.watched() {
        tokio::time::sleep(hold).await;
        return;
    }
    let until = tokio::time::Instant::now() + hold;
    let every = ctx.rb.observe.interval.max(Duration::from_millis(100));
    loop {
        if let Ok(snap) = ctx.snapshot().await {
            ctx.emit(ProgressEvent::Observed {
                step: step.to_string(),
                readings: Readings::read(&ctx.fixed.lookup(Some(&snap))),
            });
        }
        let now = tokio::time::Instant::now();
        if now >= until {
            return;
        }
        tokio::time::sleep((until - now).min(every)).await;
    }
}

fn burst_for(rate: f64, burst: Option<u32>) -> u32 {
    burst.unwrap_or_else(|| crate::gate::limit::default_burst(rate))
}

/// Whether a drain in the runbook keeps the answerable requests.
fn drains_keep(rb: &crate::runbook::Runbook) -> bool {
    rb.steps
        .iter()
        .any(|s| matches!(&s.action, Action::BacklogDrain(d) if d.keep != DrainKeep::None))
}
