//! The hand-back after a run's last step: a limit set in an incident must not outlive it
//! unnoticed. By default the gate gets back the limit it had before the run's first gate
//! action (usually none); `spec.handback: hold` keeps the last limit, whose note carries
//! its step's review deadline. A run that fails never gets here: on_failure's safe hold
//! stands. Either way [`gate_left`] says what the gate is left at and the exact command
//! that changes it.

use super::limit::{describe_limit, set_limit};
use super::{Act, Ctx, Preview, StepFailure, Tally};
use crate::engine::report::{GateLeft, Outcome};
use crate::gate::limit::Limit;
use crate::platform::Known;
use crate::runbook::action::GateHandback;
use crate::runbook::schema::Handback;

/// What the run saw of the gate: the limit before its first gate action, once it acts,
/// and whether a readmission settled below what is offered.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GateMemory {
    /// None: the run has not changed the gate (yet).
    pub before_run: Option<Known<Limit>>,
    /// Why a `gate.ramp` left its limit standing (the gate still rejected at its ceiling):
    /// restoring the old limit would let that excess in at once, so the hand-back keeps it.
    pub settled: Option<String>,
}

#[async_trait::async_trait]
impl Act for GateHandback {
    async fn perform(
        &self,
        ctx: &std::sync::Arc<Ctx>,
        step: &str,
        tally: &Tally,
    ) -> Result<(), StepFailure> {
        if self.mode == Handback::Hold {
            tally.say(
                "spec.handback is hold: the gate keeps the last limit, until its review deadline"
                    .into(),
            );
            return Ok(());
        }
        if let Some(why) = ctx.gate_memory().settled {
            tally.say(format!(
                "the gate keeps the limit the readmission settled at: {why}"
            ));
            return Ok(());
        }
        match ctx.limit_before_run() {
            None => {
                tally.say("the run did not change the gate: nothing to hand back".into());
                Ok(())
            }
            Some(Known::Unknown { unknown }) => {
                // Restoring a guess could open the gate wider than it was: keep the limit
                // the run set, which carries its review deadline.
                tally.say(format!(
                    "the gate keeps the last limit: the limit before the run is unknown ({unknown})"
                ));
                Ok(())
            }
            Some(Known::Value(before)) => {
                let restored = Limit {
                    note: Some(format!(
                        "handed back by recover run {} (runbook {}): the limit before the run{}",
                        ctx.run_id,
                        ctx.rb.name,
                        before
                            .note
                            .as_deref()
                            .map(|n| format!("; its note then: {n}"))
                            .unwrap_or_default()
                    )),
                    ..before
                };
                let words = describe_limit(&restored);
                set_limit(ctx, step, restored).await?;
                tally.did(format!("gate limit -> {words} (as before the run)"));
                Ok(())
            }
        }
    }

    fn describe(&self, _p: &Preview) -> Vec<String> {
        vec![match self.mode {
            Handback::Restore => "hand the gate back: restore the limit it had before the run's first gate action (spec.handback: restore)".into(),
            Handback::Hold => "keep the last limit the run set, until its step's review deadline (spec.handback: hold)".into(),
        }]
    }
}

/// What a finished run leaves on the gate, and the commands that change it. Reads the
/// gate once; a gate that does not answer is said so, not guessed.
pub async fn gate_left(ctx: &Ctx, outcome: Outcome) -> GateLeft {
    let gate = ctx.platform.gate();
    let flags = gate.shell_flags();
    let now = gate.get_limit().await;
    let memory = ctx.gate_memory();
    let (limit, read_error) = match now {
        Ok(l) => (Some(l), None),
        Err(e) => (None, Some(e.to_string())),
    };
    decide_left(outcome, ctx.rb.handback, &memory, limit, read_error, &flags)
}

/// The words and commands for what a run leaves on the gate. Pure.
pub fn decide_left(
    outcome: Outcome,
    mode: Handback,
    memory: &GateMemory,
    limit: Option<Limit>,
    read_error: Option<String>,
    flags: &[String],
) -> GateLeft {
    let review_by = limit
        .as_ref()
        .and_then(Limit::review_by)
        .map(humantime::format_rfc3339_seconds)
        .map(|t| t.to_string());
    let now = limit.as_ref().map(describe_limit).unwrap_or_else(|| {
        format!(
            "unknown (the gate did not answer: {})",
            read_error.clone().unwrap_or_default()
        )
    });
    let restricts = limit.as_ref().is_none_or(Limit::restricts);
    let review = review_by
        .as_deref()
        .map(|t| format!(", review by {t}"))
        .unwrap_or_default();
    let touched = memory.before_run.is_some();
    let said = match (outcome, touched) {
        (_, false) => format!("not changed by this run; it is at {now}"),
        (Outcome::Succeeded, true) if memory.settled.is_some() => format!(
            "held at {now}{review}: the readmission settled there ({})",
            memory.settled.as_deref().unwrap_or_default()
        ),
        (Outcome::Succeeded, true) if mode == Handback::Restore => {
            format!("handed back: {now}, the limit it had before the run")
        }
        (Outcome::Succeeded, true) => format!("held at {now} (spec.handback: hold){review}"),
        (_, true) => {
            format!("left at {now} by the run's safe hold{review}: a human decides when to lift it")
        }
    };
    let verb = if restricts { "lift" } else { "set --rate RATE" };
    let commands = flags
        .iter()
        .map(|f| format!("recover gate limit {verb} {f}"))
        .collect();
    GateLeft {
        said,
        limit,
        review_by,
        commands,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touched() -> GateMemory {
        GateMemory {
            before_run: Some(Known::Value(Limit::unlimited())),
            settled: None,
        }
    }

    fn limited(rate: f64) -> Limit {
        Limit {
            rate_per_s: Some(rate),
            burst: 45,
            max_in_flight: None,
            note: Some(
                "set by recover run r1 (runbook x, step hold); review by 2030-01-01T00:00:00Z: if"
                    .into(),
            ),
            shadow: false,
        }
    }

    #[test]
    fn each_ending_says_where_the_gate_is_and_how_to_change_it() {
        let flags = ["--admin http://127.0.0.1:18081 --token-file /t/gate.token".to_string()];
        let back = decide_left(
            Outcome::Succeeded,
            Handback::Restore,
            &touched(),
            Some(Limit::unlimited()),
            None,
            &flags,
        );
        assert!(
            back.said.starts_with("handed back: unlimited"),
            "{}",
            back.said
        );
        assert_eq!(back.commands, ["recover gate limit set --rate RATE --admin http://127.0.0.1:18081 --token-file /t/gate.token"]);
        let held = decide_left(
            Outcome::Succeeded,
            Handback::Hold,
            &touched(),
            Some(limited(90.0)),
            None,
            &flags,
        );
        assert!(held.said.contains("held at 90.0 req/s"), "{}", held.said);
        assert!(
            held.said.contains("review by 2030-01-01T00:00:00Z"),
            "{}",
            held.said
        );
        assert_eq!(
            held.commands,
            ["recover gate limit lift --admin http://127.0.0.1:18081 --token-file /t/gate.token"]
        );
        let failed = decide_left(
            Outcome::Failed,
            Handback::Restore,
            &touched(),
            Some(limited(20.0)),
            None,
            &flags,
        );
        assert!(
            failed.said.contains("safe hold, review by 2030"),
            "{}",
            failed.said
        );
        assert!(failed.commands[0].starts_with("recover gate limit lift "));
        let gone = decide_left(
            Outcome::Aborted,
            Handback::Restore,
            &touched(),
            None,
            Some("connection refused".into()),
            &flags,
        );
        assert!(
            gone.said
                .contains("unknown (the gate did not answer: connection refused)"),
            "{}",
            gone.said
        );
        assert!(
            gone.commands[0].starts_with("recover gate limit lift "),
            "unknown is treated as limited"
        );
        let untouched = decide_left(
            Outcome::Succeeded,
            Handback::Restore,
            &GateMemory::default(),
            Some(Limit::unlimited()),
            None,
            &flags,
        );
        assert!(
            untouched.said.starts_with("not changed by this run"),
            "{}",
            untouched.said
        );
        let settled = GateMemory {
            settled: Some("the gate still rejects 4.0 req/s at the ceiling 18.0 req/s".into()),
            ..touched()
        };
        let kept = decide_left(
            Outcome::Succeeded,
            Handback::Restore,
            &settled,
            Some(limited(18.0)),
            None,
            &flags,
        );
        assert!(
            kept.said
                .starts_with("held at 18.0 req/s (burst 45), review by 2030"),
            "{}",
            kept.said
        );
        assert!(kept.commands[0].starts_with("recover gate limit lift "));
    }
}
