//! A limit a failed or aborted run left on a target's gate. Such a run ends in on_failure's
//! safe hold: the gate admits a reduced rate until a human has looked at the service and
//! lifts it. A second automated run on top of it would plan from a service the hold
//! throttles and restore, on success, the hold itself as "the limit before the run", so
//! serve refuses to act while it stands, and says what a human should do. Pure: the
//! receiver reads the gate (`receiver/standing.rs`) and hands the limit in.

use serde::{Deserialize, Serialize};

use crate::engine::report::{Outcome, RunReport};
use crate::gate::limit::Limit;

/// The limit a failed or aborted run left, as serve last saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StandingLimit {
    /// The engine's id of the run that set it (its note names it).
    pub run_id: String,
    /// How that run ended: `failed` or `aborted`.
    pub outcome: String,
    /// The limit, in words (`45.0 req/s (burst 23)`), or why it is unknown.
    pub limit: String,
    /// When a human must have reviewed it (RFC 3339), from the limit's note.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review_by: Option<String>,
    /// `recover gate limit lift ...`, one per gate a person must change.
    pub commands: Vec<String>,
    /// Set when the gate did not answer on the last look: the limit is taken to stand.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unconfirmed: Option<String>,
}

/// What a finished run left standing, from its report: `None` when the run did not fail,
/// was a dry run, or left the gate admitting everything. A run whose gate did not answer
/// at its end counts as leaving its hold (it cannot be told apart from one that did).
pub fn left_by(report: &RunReport) -> Option<StandingLimit> {
    if report.dry_run || !matches!(report.outcome, Outcome::Failed | Outcome::Aborted) {
        return None;
    }
    let gate = report.gate.as_ref()?;
    let limit = match &gate.limit {
        Some(l) if !l.restricts() => return None,
        Some(l) => describe(l),
        None => format!("unknown ({})", gate.said),
    };
    Some(StandingLimit {
        run_id: report.run_id.clone(),
        outcome: report.outcome.words().to_string(),
        limit,
        review_by: gate.review_by.clone(),
        commands: gate.commands.clone(),
        unconfirmed: None,
    })
}

/// Whether `now`, the gate's limit as read, is still the one the run left: it restricts
/// and its note names the run. A limit a person set since (another note), or none, means
/// a human has taken the gate over.
pub fn still_stands(held: &StandingLimit, now: &Limit) -> bool {
    let mark = format!("set by recover run {} ", held.run_id);
    now.restricts() && now.note.as_deref().is_some_and(|n| n.contains(&mark))
}

/// The record after a successful read of the gate: `None` once the limit is gone.
pub fn after_read(held: &StandingLimit, now: &Limit) -> Option<StandingLimit> {
    still_stands(held, now).then(|| StandingLimit {
        limit: describe(now),
        review_by: now
            .review_by()
            .map(|t| humantime::format_rfc3339_seconds(t).to_string()),
        unconfirmed: None,
        ..held.clone()
    })
}

fn describe(l: &Limit) -> String {
    let rate = l
        .rate_per_s
        .map(|r| format!("{r:.1} req/s (burst {})", l.burst));
    let cap = l.max_in_flight.map(|m| format!("at most {m} in flight"));
    [rate, cap]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(", ")
}

impl StandingLimit {
    /// What the refusal says: the limit, its deadline and the exact command.
    pub fn message(&self, target: &str) -> String {
        let review = self
            .review_by
            .as_deref()
            .map(|t| format!(", review by {t}"))
            .unwrap_or_default();
        let lift = if self.commands.is_empty() {
            "`recover gate limit lift` at the target's gate".to_string()
        } else {
            self.commands
                .iter()
                .map(|c| format!("`{c}`"))
                .collect::<Vec<_>>()
                .join(" and ")
        };
        let unconfirmed = self
            .unconfirmed
            .as_deref()
            .map(|e| format!(" (the gate did not answer just now: {e}; taken as still standing)"))
            .unwrap_or_default();
        format!(
            "LIMIT STANDING on {target}: the {} run {} left the gate at {}{review}{unconfirmed}; not acting on top of it: a human checks the service (recover history), then lifts the limit: {lift}; serve acts on the next alert once it is lifted",
            self.outcome, self.run_id, self.limit
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::report::GateLeft;

    fn hold(run: &str) -> Limit {
        Limit {
            rate_per_s: Some(45.0),
            burst: 23,
            max_in_flight: None,
            shadow: false,
            note: Some(format!("set by recover run {run} (runbook stuck-overload, step hold-at-safe-rate); review by 2030-01-01T00:00:00Z: if that run is no longer active")),
        }
    }

    fn report(outcome: Outcome, limit: Option<Limit>) -> RunReport {
        let mut r = RunReport::new("r1", "stuck-overload", "local:demo", "");
        r.outcome = outcome;
        r.gate = Some(GateLeft {
            said: "left at 45.0 req/s by the run's safe hold".into(),
            review_by: Some("2030-01-01T00:00:00Z".into()),
            limit,
            commands: vec![
                "recover gate limit lift --admin http://127.0.0.1:18081 --token-file /d/gate.token"
                    .into(),
            ],
        });
        r
    }

    #[test]
    fn only_a_failed_or_aborted_run_that_left_a_limit_leaves_one_standing() {
        let held = left_by(&report(Outcome::Failed, Some(hold("r1")))).unwrap();
        assert_eq!(held.limit, "45.0 req/s (burst 23)");
        assert_eq!(held.outcome, "failed");
        assert!(left_by(&report(Outcome::Aborted, Some(hold("r1")))).is_some());
        assert!(left_by(&report(Outcome::Succeeded, Some(hold("r1")))).is_none());
        assert!(left_by(&report(Outcome::Failed, Some(Limit::unlimited()))).is_none());
        let unknown = left_by(&report(Outcome::Failed, None)).unwrap();
        assert!(unknown.limit.starts_with("unknown ("), "{}", unknown.limit);
        let mut dry = report(Outcome::Failed, Some(hold("r1")));
        dry.dry_run = true;
        assert!(left_by(&dry).is_none());
    }

    #[test]
    fn the_limit_stands_until_it_is_lifted_or_replaced() {
        let held = left_by(&report(Outcome::Failed, Some(hold("r1")))).unwrap();
        assert!(still_stands(&held, &hold("r1")));
        assert!(after_read(&held, &hold("r1")).is_some());
        assert!(!still_stands(&held, &Limit::unlimited()));
        assert!(!still_stands(&held, &hold("r2")), "another run's limit");
        let by_hand = Limit {
            note: Some("set by hand after the incident".into()),
            ..hold("r1")
        };
        assert!(after_read(&held, &by_hand).is_none());
        // A lifted limit keeps the old note in the gate's answer: not standing.
        let lifted = Limit {
            note: hold("r1").note,
            ..Limit::unlimited()
        };
        assert!(!still_stands(&held, &lifted));
    }

    #[test]
    fn the_message_says_what_a_human_should_do() {
        let mut held = left_by(&report(Outcome::Failed, Some(hold("r1")))).unwrap();
        let m = held.message("local:demo");
        assert!(m.contains("the failed run r1 left the gate at 45.0 req/s (burst 23), review by 2030-01-01T00:00:00Z"), "{m}");
        assert!(m.contains("`recover gate limit lift --admin http://127.0.0.1:18081 --token-file /d/gate.token`"), "{m}");
        held.unconfirmed = Some("connection refused".into());
        assert!(held
            .message("local:demo")
            .contains("did not answer just now: connection refused"));
    }
}
