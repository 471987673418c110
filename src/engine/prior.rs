//! What the engine knows beyond its own short window, for a service that was stuck before
//! anyone looked: the last healthy period in the metrics history, and, for plan inputs
//! still missing after that, the operator at a terminal.
//!
//! Why it exists: the engine observes for a few seconds; a service stuck for an hour shows
//! no healthy moment in them, so capacity, the healthy service time and the demand
//! baseline must come from elsewhere. The look back is part of watching
//! ([`crate::detect::watch`]); [`plan_with_history`] is the one call the executor makes
//! after it, and the decision itself stays the pure [`super::planning::plan_run`].

use super::planning::{plan_run, PlannedRun};
use super::{EngineError, RunOptions};
use crate::detect::{Lookback, Verdict};
use crate::plan::{MissingInputs, Overrides};
use crate::runbook::Runbook;
use std::sync::Arc;

/// What the operator is asked: which inputs are missing, and the evidence there is.
#[derive(Debug, Clone)]
pub struct Question {
    pub missing: MissingInputs,
    /// One line per fact that may help pick a number (e.g. the highest goodput seen).
    pub evidence: Vec<String>,
}

/// Asks for missing plan inputs; returns what the operator gave (possibly nothing). Runs
/// on a blocking thread: it may read a terminal.
pub type Ask = Arc<dyn Fn(&Question) -> Overrides + Send + Sync>;

/// Decide from what the run watched (its verdict, and the look back over the metrics
/// history when the window left inputs unknown), asking the operator (when
/// [`RunOptions::ask`] is set) for what is still missing. Without an answer the refusal
/// names the runbook field and the flag.
pub async fn plan_with_history(
    rb: &Runbook,
    verdict: &Verdict,
    lookback: Option<&Lookback>,
    options: &RunOptions,
) -> Result<PlannedRun, EngineError> {
    let first = plan_run(rb, verdict, &options.overrides, options.inputs.as_ref());
    let (Err(EngineError::MissingInputs { source, .. }), Some(ask)) = (&first, &options.ask) else {
        return first;
    };
    let question = Question {
        missing: source.clone(),
        evidence: evidence_for_operator(verdict, lookback),
    };
    let ask = ask.clone();
    let given = tokio::task::spawn_blocking(move || ask(&question))
        .await
        .unwrap_or_default();
    let merged = merge(&options.overrides, &given);
    if merged == options.overrides {
        return first;
    }
    plan_run(rb, verdict, &merged, options.inputs.as_ref())
}

/// The operator's answers fill what the flags left open.
fn merge(flags: &Overrides, asked: &Overrides) -> Overrides {
    Overrides {
        arrival_rate: flags.arrival_rate.or(asked.arrival_rate),
        capacity_cold: flags.capacity_cold.or(asked.capacity_cold),
        k: flags.k.or(asked.k),
        capacity: flags.capacity.or(asked.capacity),
        demand: flags.demand.or(asked.demand),
    }
}

/// What an operator asked for capacity or k can go on: every estimate and candidate the
/// detector considered, and the best the service did in the history.
pub fn evidence_for_operator(v: &Verdict, lookback: Option<&Lookback>) -> Vec<String> {
    let mut out: Vec<String> = v
        .evidence
        .iter()
        .filter(|e| {
            matches!(
                e.signal.as_str(),
                "capacity"
                    | "capacity_cold"
                    | "k"
                    | "healthy_service_time"
                    | "lookback"
                    | "offered_rate"
                    | "goodput"
                    | "work_rate"
                    | "first_attempt_rate"
            )
        })
        .map(|e| match e.value {
            Some(x) => format!("{} = {x:.2}: {}", e.signal, e.note),
            None => format!("{}: {}", e.signal, e.note),
        })
        .collect();
    if let Some(lb) = lookback {
        let span = crate::util::duration::format(lb.span);
        if let Some(p) = &lb.peak_goodput {
            out.push(format!(
                "highest goodput in the last {span} of history: {:.1} req/s at {}",
                p.value, p.at
            ));
        }
        if let Some(p) = &lb.peak_work {
            out.push(format!(
                "highest work rate in the last {span} of history: {:.1} req/s at {}",
                p.value, p.at
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::signal::{names, Reading, SignalSpec, Snapshot};
    use crate::metrics::source::{MetricError, MetricSource};
    use crate::plan::inputs::Input;
    use crate::plan::Source;
    use std::collections::BTreeMap;
    use std::sync::Mutex;
    use std::time::{Duration, UNIX_EPOCH};

    /// A source with no history (as scraping `/metrics` directly).
    struct NoHistory;

    #[async_trait::async_trait]
    impl MetricSource for NoHistory {
        fn kind(&self) -> &'static str {
            "scrape"
        }
        async fn snapshot(
            &self,
            _: &BTreeMap<String, SignalSpec>,
        ) -> Result<Snapshot, MetricError> {
            Err(MetricError::Fetch {
                target: "none".into(),
                message: "not used".into(),
            })
        }
    }

    /// 20 s of a service stuck since before the window began.
    fn stuck_window() -> Vec<Snapshot> {
        (0..20u64)
            .map(|t| Snapshot {
                at: UNIX_EPOCH + Duration::from_secs(1_800_000_000 + t),
                readings: [
                    (names::OFFERED_RATE, 80.0),
                    (names::GOODPUT, 1.0),
                    (names::WORK_RATE, 50.0),
                    (names::QUEUE_DEPTH, 200.0),
                    (names::REPLICAS_NOT_READY, 0.0),
                    (names::FIRST_ATTEMPT_RATE, 1.0),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_string(), Reading::Value { value: v }))
                .collect(),
            })
            .collect()
    }

    /// The shipped runbook without its declarations: nothing says what the service can do.
    fn undeclared() -> Runbook {
        let mut rb = crate::runbook::find("stuck-overload", &[]).unwrap().runbook;
        rb.detect.capacity_per_replica = None;
        rb.detect.cold_factor = None;
        rb
    }

    /// The verdict on [`stuck_window`], with the look back a source without history gives.
    async fn stuck() -> (Verdict, Option<Lookback>) {
        let rb = undeclared();
        let window = stuck_window();
        let now = window.last().unwrap().at;
        crate::detect::observe::judge_looking_back(
            &NoHistory,
            &rb.signals,
            &rb.detect,
            &window,
            now,
        )
        .await
    }

    #[tokio::test]
    async fn a_missing_input_is_asked_for_with_the_evidence_or_refused_without_an_answer() {
        let asked: Arc<Mutex<Vec<Question>>> = Arc::default();
        let log = asked.clone();
        let options = RunOptions {
            ask: Some(Arc::new(move |q: &Question| {
                log.lock().unwrap().push(q.clone());
                Overrides {
                    capacity_cold: Some(50.0),
                    ..Overrides::default()
                }
            })),
            ..RunOptions::default()
        };
        let (verdict, lookback) = stuck().await;
        let d = plan_with_history(&undeclared(), &verdict, lookback.as_ref(), &options)
            .await
            .unwrap();
        assert_eq!(d.sources.capacity_cold.value, 50.0);
        assert_eq!(d.sources.capacity_cold.source, Source::Operator);
        let q = asked.lock().unwrap().pop().unwrap();
        assert_eq!(q.missing.missing, [Input::CapacityCold]);
        assert!(
            q.evidence.iter().any(|e| e.contains("no metrics history")),
            "{:?}",
            q.evidence
        );

        // Nobody to ask (no terminal): the refusal names the field and the flag.
        let e = plan_with_history(
            &undeclared(),
            &verdict,
            lookback.as_ref(),
            &RunOptions::default(),
        )
        .await
        .unwrap_err();
        let text = e.to_string();
        assert!(e.is_refusal(), "{text}");
        assert!(
            text.contains("spec.detect.capacity_per_replica")
                && text.contains("--assume-capacity-cold"),
            "{text}"
        );
    }

    #[test]
    fn flags_win_over_answers_and_answers_fill_the_rest() {
        let flags = Overrides {
            k: Some(3.0),
            ..Overrides::default()
        };
        let asked = Overrides {
            k: Some(9.0),
            capacity_cold: Some(50.0),
            ..Overrides::default()
        };
        let m = merge(&flags, &asked);
        assert_eq!(
            (m.k, m.capacity_cold, m.arrival_rate),
            (Some(3.0), Some(50.0), None)
        );
    }
}
