//! The readmission's first limit, as `gate.ramp` sets it and as a `cache.warm` step sets it
//! earlier after a drain alone (`engine::warm_readmit`): one construction for both, so the
//! limit opened while the caches warm is the one the ramp would have set at that warmth.

use super::limit::{fillable, limit_note, set_change, DEFAULT_LIMIT_DEADLINE};
use super::{Ctx, StepFailure, Tally};
use crate::engine::ramp::RampParams;
use crate::engine::restart::{fill_reason, start_rate, wave_burst, Drained};
use crate::engine::vars::Fixed;
use crate::engine::warm_readmit::ramp_after_named;
use crate::gate::limit::{Fill, Limit, LimitChange};
use crate::metrics::signal::names;
use crate::runbook::action::GateRamp;

/// The ramp's parameters: its start and factor from the plan, the ceiling, its relapse and
/// ceiling limits, the plan's headroom.
pub(super) fn ramp_params(
    ramp: &GateRamp,
    rb: &crate::runbook::Runbook,
    fixed: &Fixed,
) -> Result<RampParams, StepFailure> {
    let from = fixed.quantity(&ramp.from)?;
    let factor = fixed.quantity(&ramp.factor)?;
    if !(from > 0.0 && factor > 1.0) {
        return Err(StepFailure::BadRamp { from, factor });
    }
    Ok(RampParams {
        from,
        factor,
        ceiling: ramp_ceiling(fixed, from),
        max_relapses: ramp.max_relapses,
        ceiling_holds: ramp.ceiling_holds,
        headroom: rb.plan.headroom,
    })
}

/// The readmission's limit at `rate`, set by `step`: the ramp step's burst, else the
/// wave-sized one after a drain alone, else the gate's default; its bucket started as
/// [`fill_reason`] says only at the readmission's first limit (`first`) and only when the
/// step fixes no burst. With why it fills, when it does.
fn readmission_change(
    ctx: &Ctx,
    step: &str,
    ramp: &GateRamp,
    p: &RampParams,
    drained: Option<Drained>,
    rate: f64,
    first: bool,
) -> (LimitChange, Option<String>) {
    let burst = ramp
        .burst
        .or_else(|| wave_burst(p, drained, rate))
        .unwrap_or_else(|| crate::gate::limit::default_burst(rate));
    let fill = (first && ramp.burst.is_none())
        .then(|| fill_reason(p, drained, rate, burst))
        .flatten()
        .filter(|_| fillable(ctx, step, "the first limit's bucket"));
    let why = [ramp.note.as_deref(), fill.as_ref().map(|f| f.1.as_str())];
    let why = why.into_iter().flatten().collect::<Vec<_>>().join("; ");
    let note = (!why.is_empty()).then_some(why.as_str());
    let limit = Limit {
        rate_per_s: Some(rate),
        burst,
        max_in_flight: None,
        note: Some(limit_note(ctx, step, note, DEFAULT_LIMIT_DEADLINE)),
        shadow: false,
    };
    let (fill, why) = fill.map_or((Fill::Carried, None), |(f, w)| (f, Some(w)));
    (LimitChange { limit, fill }, why)
}

/// Set the readmission's limit at `rate` ([`readmission_change`]), saying why its bucket
/// fills when it does.
pub(super) async fn set_readmission(
    ctx: &Ctx,
    step: &str,
    ramp: &GateRamp,
    p: &RampParams,
    drained: Option<Drained>,
    rate: f64,
    first: bool,
) -> Result<(), StepFailure> {
    let (change, fill) = readmission_change(ctx, step, ramp, p, drained, rate, first);
    if let Some(why) = fill {
        ctx.info(step, format!("admitting {rate:.1} req/s: {why}"));
    }
    set_change(ctx, step, change).await
}

/// Say once, at the readmission's first limit, why its bucket is not filled after a drain
/// that kept requests (a step that fixes its burst fills nothing anyway).
pub(super) fn say_unfilled(ctx: &Ctx, step: &str, ramp: &GateRamp, p: &RampParams, d: Drained) {
    if let Some(why) = d.kept_reason(p.headroom).filter(|_| ramp.burst.is_none()) {
        ctx.info(
            step,
            format!("the first limit's bucket is not filled: {why}"),
        );
    }
}

/// Before the warm call of the `cache.warm` step `step`: after a drain alone, set the gate
/// to the first limit of the `gate.ramp` that follows, at the warmth measured now
/// (`engine::warm_readmit`), journalled as any limit. Nothing when no such ramp follows,
/// the run restarted a replica or did not drain every one, or the ramp would start no
/// higher than the plan's rate. A ramp whose figures do not resolve is left to say so.
pub(super) async fn open_while_warming(
    ctx: &Ctx,
    step: &str,
    tally: &Tally,
) -> Result<(), StepFailure> {
    let Some((ramp_step, ramp)) = ramp_after_named(&ctx.rb.steps, step) else {
        return Ok(());
    };
    let Ok(p) = ramp_params(ramp, &ctx.rb, &ctx.fixed) else {
        return Ok(());
    };
    let Some(d) = drained_alone(ctx).await else {
        return Ok(());
    };
    let rate = start_rate(&p, Some(d));
    if rate <= p.from {
        return Ok(());
    }
    let warmth = d
        .warm_fraction
        .map_or("unknown (counted cold)".into(), |w| format!("{w:.2}"));
    ctx.info(
        step,
        format!(
            "readmitting at {rate:.1} req/s while the caches warm, the first limit step {ramp_step} would set at this warmth: the run drained every replica and restarted none, so {}, and the service answers {:.1} req/s at warmth {warmth}",
            d.queued_words(),
            d.capacity_now()
        ),
    );
    say_unfilled(ctx, step, ramp, &p, d);
    set_readmission(ctx, step, ramp, &p, Some(d), rate, true).await?;
    ctx.note_opened(rate);
    tally.set("readmitted_at", rate);
    tally.did(format!("admit {rate:.1} req/s while warming"));
    Ok(())
}

/// What a `cache.warm` step's dry run adds when it opens the readmission: None when no
/// `gate.ramp` follows it as [`ramp_after_named`] requires.
pub(super) fn describe_while_warming(rb: &crate::runbook::Runbook, step: &str) -> Option<String> {
    let (ramp_step, _) = ramp_after_named(&rb.steps, step)?;
    let h = rb.plan.headroom;
    Some(format!(
        "first, if this run drained every replica and restarted none: set the gate to the first limit step {ramp_step} would set at the warmth measured now ({h} x what the service answers at that warmth, when above the plan's rate; its burst and bucket as {ramp_step} describes), so the service answers while its caches warm; {ramp_step} then starts at its own start rate at the warmth it measures, at least that, its bucket carried over"
    ))
}

/// The service as this run's drain left it, when the run drained every replica and
/// restarted none (else None: the plan's rate stands).
pub(super) async fn drained_alone(ctx: &Ctx) -> Option<Drained> {
    let ids: Vec<String> = ctx
        .platform
        .replicas()
        .await
        .ok()?
        .into_iter()
        .map(|r| r.id)
        .collect();
    if !ctx.drained_alone(&ids) {
        return None;
    }
    let snap = ctx.snapshot().await.ok();
    let get = |name| snap.as_ref().and_then(|s| s.get(name));
    Some(Drained {
        kept: ctx.queued_after_drain(&ids),
        capacity: ctx.fixed.inputs.capacity,
        capacity_cold: ctx.fixed.inputs.capacity_cold,
        warm_fraction: get(names::WARM_FRACTION),
        client_timeout_s: get(names::CLIENT_TIMEOUT),
    })
}

/// How high the ramp may raise the limit: the plan's ramp end rate (headroom x healthy
/// capacity when known), else the larger of the stuck-state arrival rate and healthy
/// capacity.
pub(super) fn ramp_ceiling(fixed: &Fixed, from: f64) -> f64 {
    let end = fixed.plan.ramp_end_rate;
    let fallback = fixed
        .inputs
        .arrival_rate
        .max(fixed.inputs.capacity.unwrap_or(0.0));
    (if end.is_finite() && end > 0.0 {
        end
    } else {
        fallback
    })
    .max(from)
}
