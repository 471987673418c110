//! Setting the gate's limit as every step does it: the limit checked before it is sent,
//! journalled before and after, and carrying a note saying which run set it, until when,
//! and who must act if that run is gone. Below the steps that set limits (`gate`,
//! `readmit`, `handback`), so they share it without importing each other.

use super::{Ctx, StepFailure};
use crate::engine::journal::{unknown, ActionRecord};
use crate::engine::progress::ProgressEvent;
use crate::gate::limit::{Limit, LimitChange};
use crate::platform::Known;
use std::time::{Duration, SystemTime};

/// How long a limit the engine sets may stand unattended when its step names no deadline:
/// the note on the limit asks for a review by then.
pub const DEFAULT_LIMIT_DEADLINE: Duration = Duration::from_secs(30 * 60);

/// The note every limit the engine sets carries: who set it, until when, who must act.
pub(super) fn limit_note(ctx: &Ctx, step: &str, note: Option<&str>, deadline: Duration) -> String {
    let until = humantime::format_rfc3339_seconds(SystemTime::now() + deadline);
    let owner = ctx
        .rb
        .owner
        .as_deref()
        .unwrap_or("the owner of the target service");
    format!(
        "set by recover run {} (runbook {}, step {step}){}; review by {until}: if that run is no longer active (recover history), {owner} must check the service and lift or adjust this limit (recover gate limit)",
        ctx.run_id,
        ctx.rb.name,
        note.map(|n| format!(": {n}")).unwrap_or_default()
    )
}

/// Set the gate's limit, journalling the limit before and after. A limit the gate would
/// refuse is not sent: the step fails naming the field.
pub(super) async fn set_limit(ctx: &Ctx, step: &str, limit: Limit) -> Result<(), StepFailure> {
    set_change(ctx, step, LimitChange::carried(limit)).await
}

/// [`set_limit`] for a change that may ask the gate to fill the new limit's bucket.
pub(super) async fn set_change(
    ctx: &Ctx,
    step: &str,
    change: LimitChange,
) -> Result<(), StepFailure> {
    let limit = &change.limit;
    crate::gate::validate::check(limit).map_err(|e| StepFailure::PlatformAt {
        what: "setting the gate limit".into(),
        source: crate::platform::PlatformError::Other(format!(
            "the gate cannot enforce this limit, so it was not sent: {e}"
        )),
    })?;
    let gate = ctx.platform.gate();
    let read = |l: Result<Limit, crate::platform::PlatformError>| match l {
        Ok(l) => Known::Value(l),
        Err(e) => unknown(format!("the gate did not say: {e}")),
    };
    let before = read(gate.get_limit().await);
    ctx.saw_limit_before(&before);
    ctx.started(
        step,
        ActionRecord::SetLimit {
            before: before.clone(),
            new: change.clone(),
            after: None,
        },
    )?;
    gate.change_limit(&change)
        .await
        .map_err(|source| StepFailure::PlatformAt {
            what: "setting the gate limit".into(),
            source,
        })?;
    ctx.emit(ProgressEvent::LimitSet {
        step: step.to_string(),
        rate_per_s: limit.rate_per_s,
        shadow: limit.shadow,
    });
    let after = read(gate.get_limit().await);
    ctx.finished(
        step,
        ActionRecord::SetLimit {
            before,
            new: change,
            after: Some(after),
        },
    )
}

/// Whether this run's gate can start a limit's bucket full; if not, say so in the run's
/// log, naming the bucket (`what`): the limit then opens with what the old one had left,
/// as any change does.
pub(super) fn fillable(ctx: &Ctx, step: &str, what: &str) -> bool {
    let can = ctx.platform.gate().fills();
    if !can {
        ctx.info(
            step,
            format!("{what} is not filled: this gate takes its limit from stored state (a ConfigMap), which cannot carry a one-off"),
        );
    }
    can
}

pub fn describe_limit(l: &Limit) -> String {
    match l.rate_per_s {
        None => "unlimited".into(),
        Some(r) => format!(
            "{r:.1} req/s (burst {}{}){}",
            l.burst,
            l.max_in_flight
                .map(|m| format!(", max in flight {m}"))
                .unwrap_or_default(),
            if l.shadow {
                " in shadow: counted, nothing refused"
            } else {
                ""
            }
        ),
    }
}
