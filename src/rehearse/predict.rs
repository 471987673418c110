//! The simulator's prediction for the same system and plan, for the report's
//! `predicted_time_to_recover_s`.
//!
//! Why it exists: a rehearsal whose measured recovery is far from the model's prediction
//! says that either the model or the procedure is wrong; both are worth knowing.

use super::scenario::Scenario;
use crate::plan::Plan;
use crate::simulate::Readmission;
use crate::simulate::{check_plan, SystemParams};
use std::time::Duration;

/// How long the engine's ramp stands at the admit rate, counted from the procedure's start:
/// the warming before it (`warm`), then its check's passes (the plan's step hold). The
/// rehearsal's engine reads a scrape source, which cuts the check's windows at the ramp's
/// start, so the drain and the restart before it cost the check nothing.
pub fn admit_hold(plan: &Plan, warm: Option<Duration>) -> Duration {
    warm.unwrap_or_default() + plan.ramp.first().map_or(Duration::ZERO, |s| s.hold)
}

/// How long the rehearsed system runs before the trigger: the stage judges steady state
/// only over full rate windows, so its first `rate_window`, then the `steady` phase; at
/// least 10 s, which gives the clients' phases time to spread.
pub fn lead_in(sc: &Scenario) -> Duration {
    Duration::from_secs(10).max(sc.rate_window + sc.steady)
}

/// The scenario as simulator parameters: the service started cold as the demo service
/// starts, the outage after the lead-in ([`lead_in`]), the procedure `plan_after` after
/// the outage ended (the runbook's first action), restarting the service if the run did
/// (`restart`; else a drain alone), warming the caches `warm` after that when the runbook
/// has a `cache.warm` step. The service warms with its work, as the demo service does
/// (`service.warm_after` requests per replica).
pub fn system_params(
    sc: &Scenario,
    plan_after: Duration,
    restart: bool,
    warm: Option<Duration>,
) -> SystemParams {
    // The procedure decides once a second from the second it starts in, and the time to
    // recover is read in the rehearsal's scrape steps from there: the outage starts at
    // about the lead-in, so that the procedure starts on a second.
    let lead = lead_in(sc);
    let start = lead + sc.outage + plan_after;
    let outage_at = lead + (Duration::from_secs(start.as_secs() + 1) - start);
    SystemParams {
        clients: sc.workers.count,
        interval: sc.workers.interval,
        timeout: sc.workers.timeout,
        retry_delay: sc.retry_delay(),
        capacity: sc.capacity_per_s(),
        overload_factor: sc.service.overload_factor,
        cold_factor: 1.0 / sc.service.cold_factor.max(1.0),
        warmup: sc.service.warm_duration,
        // The model serves from one pool; each demo replica warms over its own
        // `warm_after` requests, and balanced, N of them are as warm as one pool that has
        // served N x `warm_after`. One replica's count read 4 replicas warm 4x too soon,
        // and a model that warm was no longer stuck when the procedure started.
        warm_after_requests: sc.service.warm_after * u64::from(sc.replicas.max(1)),
        cold_start: true,
        // Each request holds one of the replicas' slots for its work and is answered at
        // its end: under overload that work is a good part of the client's timeout.
        concurrency: Some(sc.replicas.max(1) * sc.service.concurrency.max(1)),
        // A drain that keeps the answerable requests decides replica by replica.
        replicas: sc.replicas.max(1),
        outage_at,
        outage: sc.outage,
        plan_at: outage_at + sc.outage + plan_after,
        plan_restart: restart,
        plan_warm: warm,
        settle_window: sc.hold,
        // A rehearsal judges steady state once a scrape: read the time to recover in the
        // same steps, not in whole seconds, and, as it does, only once (almost) no client
        // is in a retry loop.
        recovery_step: sc.scrape_interval,
        settled_retrying_max: Some(super::verify::SteadyCriteria::default().retrying_fraction_max),
        ..SystemParams::default()
    }
}

/// Where the run's scrape ticks fall after the runbook's first action (`first_action_s`),
/// within one scrape `step`: the first of `ticks` (the recorder's grid scrapes, those
/// the steady check reads) at or after it, less it. The measured time to recover is read
/// on these ticks (times like 1.32 s, 1.82 s), so the prediction is read on ticks of the
/// same phase. None when no scrape was ticked at or after the first action.
pub fn scrape_phase(
    ticks: impl IntoIterator<Item = f64>,
    first_action_s: f64,
    step: Duration,
) -> Option<Duration> {
    let step_s = step.as_secs_f64();
    let first = ticks.into_iter().find(|&t| t >= first_action_s)?;
    (step_s > 0.0).then(|| Duration::from_secs_f64((first - first_action_s).rem_euclid(step_s)))
}

/// Predicted seconds from the runbook's first action to recovery, or why there is no
/// prediction: the model does not recover with this plan, or its system was not failing
/// when the procedure started (it recovered on its own or never got stuck, so a time of 0
/// would describe the model, not the system rehearsed). `restarts`: the run restarted the
/// replicas (else it only drained them). `warms`: the runbook warmed the caches before
/// readmitting (it takes the scenario's `service.warm_duration`). `readmission`: the
/// runbook's `gate.ramp` step and check with the plan's inputs, which the model's
/// procedure follows as the engine does (none: a ramp holding the plan's step hold).
/// `phase`: where the scrape ticks the time is read on fall after the first action
/// ([`scrape_phase`]; zero: on the action itself), to the model's tick.
pub fn predicted_time_to_recover(
    sc: &Scenario,
    plan: &Plan,
    plan_after: Duration,
    restarts: bool,
    warms: bool,
    readmission: Option<Readmission>,
    phase: Duration,
) -> Result<f64, String> {
    let warm = warms.then_some(sc.service.warm_duration);
    let base = system_params(sc, plan_after, restarts, warm);
    let p = SystemParams {
        recovery_phase: on_ticks(phase, base.tick, base.recovery_step),
        plan_admit_hold: Some(admit_hold(plan, warm)),
        // The rehearsal's feed scrapes the engine's source every scrape interval.
        plan_readmission: readmission.map(|r| Readmission {
            scrape: Some(sc.scrape_interval),
            ..r
        }),
        ..base
    };
    let check = check_plan(&p, plan, 1);
    judge(check.recovers, check.time_to_recover_s, plan_after)
}

/// `phase` to the nearest whole `tick`, within one `step`.
fn on_ticks(phase: Duration, tick: Duration, step: Duration) -> Duration {
    let (tick_ns, step_ns) = (tick.as_nanos().max(1), step.as_nanos().max(1));
    let ticks = (phase.as_nanos() + tick_ns / 2) / tick_ns;
    Duration::from_nanos(((ticks * tick_ns) % step_ns) as u64)
}

/// The model's answer as a prediction, or why it is none.
fn judge(recovers: bool, time_s: Option<f64>, plan_after: Duration) -> Result<f64, String> {
    match (recovers, time_s) {
        (true, Some(t)) if t > 0.0 => Ok(t),
        (true, _) => Err(format!(
            "unknown: the model was not failing when the procedure started ({} after the trigger ended): it recovered on its own or never got stuck, so it has no time to predict",
            crate::util::duration::format(plan_after)
        )),
        (false, _) => Err("unknown: the model does not recover with this plan".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shipped runbook, the scenario's true inputs with `arrival_rate` arriving, and
    /// the plan the runbook makes from them.
    fn shipped_plan(
        sc: &Scenario,
        arrival_rate: f64,
    ) -> (
        crate::runbook::Runbook,
        crate::plan::PlanInputs,
        crate::plan::Plan,
    ) {
        let rb = crate::runbook::load_file(std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/runbooks/stuck-overload.yaml"
        )))
        .unwrap()
        .runbook;
        let capacity = sc.capacity_per_s();
        let inputs = crate::plan::PlanInputs {
            arrival_rate,
            capacity_cold: capacity / sc.service.cold_factor,
            k: sc.service.overload_factor,
            capacity: Some(capacity),
            demand: None,
        };
        let plan = crate::plan::make_plan(&inputs, &rb.plan);
        (rb, inputs, plan)
    }
    use crate::plan::RampStep;

    #[test]
    fn a_model_that_was_not_stuck_predicts_nothing() {
        let after = Duration::from_secs(30);
        assert_eq!(judge(true, Some(4.0), after), Ok(4.0));
        let e = judge(true, Some(0.0), after).unwrap_err();
        assert!(e.contains("not failing when the procedure started"), "{e}");
        assert!(judge(false, None, after)
            .unwrap_err()
            .contains("does not recover"));
    }

    /// The seed-7 grid's point 3 (4 replicas x 4 slots, cold 2.55, k 2.34), its
    /// procedure starting 5 s after the trigger ended: the real system was stuck then, and
    /// the model, warming each replica over its own 300 requests, is too.
    #[test]
    fn replicas_warm_each_over_their_own_requests_so_the_model_is_still_stuck() {
        let sc = Scenario::parse(
            "name: grid-3\nreplicas: 4\nservice:\n  concurrency: 4\n  cold_factor: 2.55\n  overload_factor: 2.34\nworkers:\n  count: 514\n  interval: 9584ms\n  attempt_header: x-attempt\noutage: 9774ms\n",
            "grid-3",
        )
        .unwrap();
        let p = system_params(&sc, Duration::from_secs(5), false, None);
        assert_eq!(p.warm_after_requests, 4 * sc.service.warm_after);
        let plan = Plan {
            shed_fraction: 0.64,
            admit_rate: 62.1,
            ramp: [62.1, 93.0, 139.0]
                .into_iter()
                .map(|rate_per_s| RampStep {
                    rate_per_s,
                    hold: Duration::from_millis(1500),
                })
                .collect(),
            ..Plan::default()
        };
        let got = predicted_time_to_recover(
            &sc,
            &plan,
            Duration::from_secs(5),
            false,
            true,
            None,
            Duration::ZERO,
        );
        assert!(got.is_ok(), "{got:?}");
    }

    /// The seed-1 grid's point 26 (1 replica x 14 slots, cold 2.11, k 3.29, 499 workers,
    /// a 13.3 s outage): rehearsed for real it got stuck (Stuck 5.1 s after the trigger
    /// ended). The model answered every request the moment its work was paid and brought
    /// the served workers back together one interval later; it recovered by itself 1 s
    /// after the trigger. Answering at the end of each request's work (278 ms of a 1 s
    /// timeout while cold and overloaded), it stays stuck as the real one did.
    #[test]
    fn a_point_the_real_system_got_stuck_at_is_stuck_in_the_model() {
        let sc = Scenario::parse(
            "name: grid-26\nreplicas: 1\nservice:\n  concurrency: 14\n  cold_factor: 2.11\n  overload_factor: 3.29\nworkers:\n  count: 499\n  interval: 12371ms\n  attempt_header: x-attempt\noutage: 13337ms\n",
            "grid-26",
        )
        .unwrap();
        let mut p = system_params(&sc, Duration::ZERO, true, None);
        p.duration = p.outage_at + p.outage + Duration::from_secs(40);
        let run = crate::simulate::run_system(&p, None, 27);
        assert!(!run.recovery.recovered, "{:?}", run.recovery);
    }

    /// After a drain alone the engine's first limit lets the drained clients' returning
    /// wave through whole (a full bucket of the wave-sized burst), so little sent after
    /// the drain fails; but a client stays in a retry loop until its retry is answered,
    /// and a rehearsal is not steady before no more than 1% of them retry. Counting failed
    /// sends alone, the model read recovery a scrape or more early (on most grid points
    /// 0 s: "not failing when the procedure started").
    #[test]
    fn after_a_drain_alone_recovery_waits_for_the_drained_clients_retries() {
        // The seed-1 grid's point 4, planned from its true numbers, the procedure 7 s
        // after the trigger ended as the grid's was.
        let sc = Scenario::parse(
            "name: grid-4\nreplicas: 1\nservice:\n  concurrency: 5\n  cold_factor: 3.2\n  overload_factor: 4.6\nworkers:\n  count: 119\n  interval: 14216ms\n  attempt_header: x-attempt\noutage: 15000ms\nsteady: 41339ms\n",
            "grid-4",
        )
        .unwrap();
        let (rb, inputs, plan) = shipped_plan(&sc, 300.0);
        let after = Duration::from_secs(7);
        let p = SystemParams {
            plan_readmission: Readmission::of(&rb, &inputs),
            ..system_params(&sc, after, false, None)
        };
        let time = |p: &SystemParams| check_plan(p, &plan, 1).time_to_recover_s;
        let sends_alone = SystemParams {
            settled_retrying_max: None,
            ..p.clone()
        };
        // 2.5 s from the last failed send; 3.5 s once no more than 1% of the clients
        // retry, the scrape a rehearsal could first read steady.
        let (alone, got) = (time(&sends_alone).unwrap(), time(&p).unwrap());
        assert!(got > alone, "{got} against {alone}");
        assert!(got >= sc.retry_delay().as_secs_f64(), "{got}");
    }

    /// The seed-7 grid's point 8 (1 replica x 8 slots, 355 workers, 1 s timeout, a fixed
    /// 1 s retry delay), its procedure 73 s after the trigger ended as rehearsed: the
    /// outage of fast errors put every client in one half of a 2 s cycle (sending and
    /// waiting out its timeout, then waiting its retry delay), and 73 s is an odd number
    /// of seconds after the service came back, so at the drain nearly every client has an
    /// attempt queued (the rehearsal measured 312 of 355). Dropping them all sends them
    /// back one retry delay later as one wave, which the gate cuts; keeping the ones the
    /// replica answers in time answers them at once, and the bucket starts with only the
    /// room they leave.
    #[test]
    fn on_a_synchronized_loop_keeping_the_answerable_requests_saves_a_retry_delay() {
        let sc = Scenario::parse(
            "name: grid-8
replicas: 1
service:
  concurrency: 8
  cold_factor: 2.46
  overload_factor: 1.7
workers:
  count: 355
  interval: 9278ms
  attempt_header: none
outage: 10234ms
steady: 13341ms
attach_after: 60s
",
            "grid-8",
        )
        .unwrap();
        let (rb, inputs, plan) = shipped_plan(&sc, 200.0);
        let with_at = |keep, after| {
            let r = Readmission {
                drain_keep: keep,
                ..Readmission::of(&rb, &inputs).unwrap()
            };
            let time = predicted_time_to_recover(
                &sc,
                &plan,
                after,
                false,
                false,
                Some(r.clone()),
                Duration::ZERO,
            );
            let p = SystemParams {
                plan_admit_hold: Some(admit_hold(&plan, None)),
                plan_readmission: Some(Readmission {
                    scrape: Some(sc.scrape_interval),
                    ..r
                }),
                ..system_params(&sc, after, false, None)
            };
            let drain = crate::simulate::run_system(&p, Some(&plan), 1)
                .drain
                .unwrap();
            (time.unwrap(), drain)
        };
        let with = |keep| with_at(keep, Duration::from_secs(73));
        use crate::runbook::action::DrainKeep;
        let (none, dropped_all) = with(DrainKeep::None);
        let (kept, kept_some) = with(DrainKeep::Answerable);
        // Synchronized: most clients wait on a queued attempt when the drain comes at an
        // odd second after the service came back, few at an even one.
        let (_, even) = with_at(DrainKeep::None, Duration::from_secs(72));
        assert!(dropped_all.clients_queued * 10 > 8 * 355, "{dropped_all:?}");
        assert!(even.clients_queued * 10 < 2 * 355, "{even:?}");
        use crate::gate::limit::Fill;
        assert_eq!((dropped_all.kept, dropped_all.fill), (0, Fill::Full));
        assert!(
            kept_some.kept > 0 && kept_some.fill != Fill::Full,
            "{kept_some:?}"
        );
        assert!(
            kept <= none - sc.retry_delay().as_secs_f64(),
            "keep answerable {kept} s against drop everything {none} s"
        );
    }

    /// The seed-7 grid's point 2 as rehearsed (1 replica x 9 slots, 282 workers, the
    /// runbook's first action 73.04 s after the trigger ended, a drain alone keeping the
    /// answerable requests): the run's scrapes were ticked 0.322 s after each half second
    /// from that action, and its time to recover was read on them (2.322 s). The
    /// prediction is read on the same ticks, not on half seconds from the action.
    #[test]
    fn the_prediction_is_read_on_the_runs_scrape_ticks() {
        let sc = Scenario::parse(
            "name: grid-2\nreplicas: 1\nservice:\n  concurrency: 9\n  cold_factor: 2.67\n  overload_factor: 2.65\nworkers:\n  count: 282\n  interval: 11084ms\n  attempt_header: x-attempt\noutage: 12042ms\nsteady: 17292ms\nattach_after: 60s\n",
            "grid-2",
        )
        .unwrap();
        let first_action_s = 85.150;
        let ticks = (0..400).map(|n| 50.472 + 0.5 * f64::from(n));
        let phase = scrape_phase(ticks, first_action_s, sc.scrape_interval).unwrap();
        assert!((phase.as_secs_f64() - 0.322).abs() < 1e-9, "{phase:?}");
        let (rb, inputs, plan) = shipped_plan(&sc, 156.2);
        let at = |phase| {
            let r = Readmission::of(&rb, &inputs);
            predicted_time_to_recover(
                &sc,
                &plan,
                Duration::from_millis(73_040),
                false,
                false,
                r,
                phase,
            )
            .unwrap()
        };
        let (on_action, on_scrapes) = (at(Duration::ZERO), at(phase));
        let steps = (on_scrapes - 0.32) / sc.scrape_interval.as_secs_f64();
        assert!((steps - steps.round()).abs() < 1e-6, "{on_scrapes} s");
        assert!(
            (on_scrapes - on_action).abs() < 0.5,
            "{on_scrapes} against {on_action}"
        );
        // No scrape after the action: no phase to read on.
        assert_eq!(
            scrape_phase([80.0], first_action_s, sc.scrape_interval),
            None
        );
    }

    #[test]
    fn the_admit_rate_stands_for_the_warming_and_the_checks_passes() {
        let plan = Plan {
            ramp: vec![RampStep {
                rate_per_s: 20.0,
                hold: Duration::from_millis(1500),
            }],
            ..Plan::default()
        };
        assert_eq!(admit_hold(&plan, None), Duration::from_millis(1500));
        let warm = Some(Duration::from_millis(500));
        assert_eq!(admit_hold(&plan, warm), Duration::from_secs(2));
    }
}
