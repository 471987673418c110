//! Check evaluation as pure functions, modelled on Argo Rollouts analysis runs: each
//! measurement is a success, a failure, neutral or inconclusive; the check passes after
//! `consecutive_successes`, fails past `failure_limit`, and missing data is never a pass
//! (it pauses, or fails at once, as the check says).

use crate::runbook::expr::Value;
use crate::runbook::schema::Inconclusive;
use crate::runbook::Check;
use serde::Serialize;

/// One measurement's classification.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Measurement {
    Success,
    Failure,
    /// Not a success, but the explicit failure condition does not hold either.
    Neutral,
    /// Some signal had no data; names listed.
    Inconclusive {
        missing: Vec<String>,
    },
}

/// Where a check stands.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", content = "reason", rename_all = "snake_case")]
pub enum CheckStatus {
    Running,
    Passed,
    Failed(String),
}

/// Counters a check keeps between measurements.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CheckState {
    pub measurements: u32,
    pub consecutive_successes: u32,
    pub failures: u32,
    pub inconclusive: u32,
}

/// Classify one measurement given a lookup for variable values.
pub fn measure(check: &Check, lookup: &dyn Fn(&str) -> Option<f64>) -> Measurement {
    match check.success.eval(lookup) {
        Value::Missing(missing) => Measurement::Inconclusive { missing },
        Value::Bool(true) => Measurement::Success,
        _ => match &check.failure {
            None => Measurement::Failure,
            Some(f) => match f.eval(lookup) {
                Value::Bool(true) => Measurement::Failure,
                Value::Missing(missing) => Measurement::Inconclusive { missing },
                _ => Measurement::Neutral,
            },
        },
    }
}

/// Fold one measurement into the state and say where the check stands.
pub fn record(check: &Check, state: &mut CheckState, m: &Measurement) -> CheckStatus {
    state.measurements += 1;
    match m {
        Measurement::Success => {
            state.consecutive_successes += 1;
            if state.consecutive_successes >= check.consecutive_successes {
                return CheckStatus::Passed;
            }
        }
        Measurement::Failure => {
            state.consecutive_successes = 0;
            state.failures += 1;
            if let Some(limit) = check.failure_limit.filter(|l| state.failures > *l) {
                return CheckStatus::Failed(format!(
                    "{} failed measurement(s), limit {limit}: `{}` does not hold",
                    state.failures, check.success
                ));
            }
        }
        Measurement::Neutral => state.consecutive_successes = 0,
        Measurement::Inconclusive { missing } => {
            state.consecutive_successes = 0;
            state.inconclusive += 1;
            let why = format!("no data for {}", missing.join(", "));
            match check.inconclusive {
                Inconclusive::Fail => return CheckStatus::Failed(format!("inconclusive: {why}")),
                Inconclusive::Pause if state.inconclusive > check.inconclusive_limit => {
                    return CheckStatus::Failed(format!(
                        "inconclusive {} times (limit {}): {why}",
                        state.inconclusive, check.inconclusive_limit
                    ))
                }
                Inconclusive::Pause => {}
            }
        }
    }
    if let Some(count) = check.count {
        if state.measurements >= count {
            return CheckStatus::Failed(format!(
                "did not pass within {count} measurements ({} successes in a row needed)",
                check.consecutive_successes
            ));
        }
    }
    CheckStatus::Running
}

/// As [`record`], while the signals may still describe the time before a change (their rate
/// windows reach back past it, e.g. to a restart): a success counts, anything else only
/// resets the run of successes, neither failing the check nor using up its `count`.
pub fn record_settling(check: &Check, state: &mut CheckState, m: &Measurement) -> CheckStatus {
    match m {
        Measurement::Success => record(check, state, m),
        _ => {
            state.consecutive_successes = 0;
            CheckStatus::Running
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runbook::expr::Expr;
    use std::time::Duration;

    #[test]
    fn a_check_without_failure_limit_waits_until_it_passes() {
        let rb = crate::runbook::parse_str(
            "t.yaml",
            "apiVersion: recover/v1\nkind: Runbook\nmetadata: {name: t}\nspec:\n  target: demo\n  signals: {q: {scrape: 'sum(q)'}}\n  checks: {calm: {success: q < 10}}\n  steps: [{name: w, action: wait.until, with: {check: calm}}]\n",
        )
        .unwrap();
        let c = &rb.checks["calm"];
        assert_eq!(c.failure_limit, None);
        let mut st = CheckState::default();
        for _ in 0..100 {
            assert_eq!(
                record(c, &mut st, &Measurement::Failure),
                CheckStatus::Running
            );
        }
        assert_eq!(
            record(c, &mut st, &Measurement::Success),
            CheckStatus::Passed
        );
    }

    fn check(consecutive: u32, failure_limit: u32, inc: Inconclusive) -> Check {
        Check {
            interval: Duration::from_secs(1),
            count: Some(6),
            success: Expr::parse("q < 10").unwrap(),
            failure: None,
            failure_limit: Some(failure_limit),
            consecutive_successes: consecutive,
            inconclusive: inc,
            inconclusive_limit: 2,
        }
    }

    fn run(c: &Check, values: &[Option<f64>]) -> CheckStatus {
        let mut st = CheckState::default();
        for v in values {
            let v = *v;
            let m = measure(c, &move |_| v);
            let s = record(c, &mut st, &m);
            if s != CheckStatus::Running {
                return s;
            }
        }
        CheckStatus::Running
    }

    /// The shipped stuck-overload runbook's `steady` check once failed a recovered run on
    /// one scrape that timed out on a loaded machine ("inconclusive: no data for
    /// latency_p99, queue_depth"): missing data is not a failure, so it now pauses.
    #[test]
    fn the_shipped_steady_check_waits_out_a_missing_scrape() {
        let rb = crate::runbook::find("stuck-overload", &[]).unwrap().runbook;
        let c = &rb.checks["steady"];
        let mut st = CheckState::default();
        let mut last = CheckStatus::Running;
        for ok in [true, true, false, true, true, true, true, true] {
            let lookup = |name: &str| match name.strip_prefix("params.") {
                Some(p) => rb.params.get(p).copied(),
                None if ok => Some(if name == "latency_p99" { 0.08 } else { 0.0 }),
                None => None,
            };
            last = record(c, &mut st, &measure(c, &lookup));
            if last != CheckStatus::Running {
                break;
            }
        }
        assert_eq!(last, CheckStatus::Passed, "{st:?}");
    }

    /// Every check of every embedded runbook waits out a missing scrape the same way: one
    /// scrape lost on a loaded machine is no evidence that a recovered service failed.
    #[test]
    fn no_embedded_check_fails_a_run_on_one_missing_scrape() {
        for (name, _) in crate::runbook::embedded() {
            let rb = crate::runbook::find(name, &[]).unwrap().runbook;
            for (check, c) in &rb.checks {
                let mut st = CheckState::default();
                let status = record(c, &mut st, &measure(c, &|_| None));
                assert_eq!(status, CheckStatus::Running, "{name}: check {check}");
            }
        }
    }

    #[test]
    fn needs_consecutive_successes() {
        let c = check(3, 5, Inconclusive::Pause);
        assert_eq!(
            run(
                &c,
                &[Some(1.0), Some(1.0), Some(50.0), Some(1.0), Some(1.0)]
            ),
            CheckStatus::Running
        );
        assert_eq!(
            run(&c, &[Some(50.0), Some(1.0), Some(1.0), Some(1.0)]),
            CheckStatus::Passed
        );
    }

    #[test]
    fn fails_past_the_failure_limit_or_count() {
        let c = check(1, 1, Inconclusive::Pause);
        assert!(
            matches!(run(&c, &[Some(50.0), Some(50.0)]), CheckStatus::Failed(m) if m.contains("limit 1"))
        );
        let c = check(3, 10, Inconclusive::Pause);
        let s = run(
            &c,
            &[
                Some(50.0),
                Some(1.0),
                Some(50.0),
                Some(1.0),
                Some(1.0),
                Some(50.0),
            ],
        );
        assert!(matches!(s, CheckStatus::Failed(m) if m.contains("within 6")));
    }

    #[test]
    fn missing_data_never_passes() {
        let c = check(1, 5, Inconclusive::Fail);
        assert!(matches!(run(&c, &[None]), CheckStatus::Failed(m) if m.contains("no data for q")));
        let c = check(1, 5, Inconclusive::Pause);
        assert_eq!(run(&c, &[None, None]), CheckStatus::Running);
        assert!(
            matches!(run(&c, &[None, None, None]), CheckStatus::Failed(m) if m.contains("inconclusive 3 times"))
        );
        assert_eq!(run(&c, &[None, Some(1.0)]), CheckStatus::Passed);
    }

    #[test]
    fn settling_ignores_what_is_not_a_success_then_judges_as_usual() {
        let c = check(2, 0, Inconclusive::Fail);
        let mut st = CheckState::default();
        let bad = measure(&c, &|_| Some(50.0));
        let good = measure(&c, &|_| Some(1.0));
        let none = measure(&c, &|_| None);
        for m in [&bad, &none, &bad, &good, &bad] {
            assert_eq!(record_settling(&c, &mut st, m), CheckStatus::Running);
        }
        assert_eq!((st.failures, st.measurements), (0, 1));
        assert_eq!(record_settling(&c, &mut st, &good), CheckStatus::Running);
        assert_eq!(record_settling(&c, &mut st, &good), CheckStatus::Passed);
        // Settled, the first failure past the limit fails it.
        let mut st = CheckState::default();
        assert!(matches!(record(&c, &mut st, &bad), CheckStatus::Failed(_)));
    }
}
