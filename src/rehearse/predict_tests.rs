//! Tests of the prediction: each against a rehearsed grid point.

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
        RunTiming::default(),
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
            RunTiming::default(),
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
    // Nothing kept: the first bucket holds the queue's room but what the shipped block's
    // full bucket may have let in since (its burst, half a second of the plan's rate).
    let block = crate::gate::limit::default_burst(plan.admit_rate);
    match dropped_all.fill {
        Fill::Tokens(n) => assert!(
            dropped_all.kept == 0 && n > 0 && block > 0,
            "{dropped_all:?}"
        ),
        other => panic!("{other:?}"),
    }
    assert!(
        kept_some.kept > 0 && kept_some.fill != Fill::Full,
        "{kept_some:?}"
    );
    // Read on the recorder's steps, the saving is the retry delay to within one step.
    assert!(
        kept <= none - sc.retry_delay().as_secs_f64() + sc.record_interval.as_secs_f64(),
        "keep answerable {kept} s against drop everything {none} s"
    );
}

/// The seed-7 grid's point 2 as rehearsed (1 replica x 9 slots, 282 workers, the
/// runbook's first action 73.04 s after the trigger ended, a drain alone keeping the
/// answerable requests): the run's scrapes were ticked 0.322 s after each half second
/// from that action, and its time to recover was read on them (2.322 s). The
/// prediction is read on the same ticks, not on half seconds from the action. (Rehearsals
/// then recorded every 0.5 s; the scenario says so.)
#[test]
fn the_prediction_is_read_on_the_runs_scrape_ticks() {
    let sc = Scenario::parse(
        "name: grid-2\nreplicas: 1\nservice:\n  concurrency: 9\n  cold_factor: 2.67\n  overload_factor: 2.65\nworkers:\n  count: 282\n  interval: 11084ms\n  attempt_header: x-attempt\noutage: 12042ms\nsteady: 17292ms\nattach_after: 60s\nrecord_interval: 500ms\n",
        "grid-2",
    )
    .unwrap();
    let first_action_s = 85.150;
    let ticks = (0..400).map(|n| 50.472 + 0.5 * f64::from(n));
    let phase = scrape_phase(ticks, first_action_s, sc.record_interval).unwrap();
    assert!((phase.as_secs_f64() - 0.322).abs() < 1e-9, "{phase:?}");
    let (rb, inputs, plan) = shipped_plan(&sc, 156.2);
    let at = |scrape_phase| {
        let r = Readmission::of(&rb, &inputs);
        let phase = RunTiming {
            scrape_phase,
            ..RunTiming::default()
        };
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
    let steps = (on_scrapes - 0.32) / sc.record_interval.as_secs_f64();
    assert!((steps - steps.round()).abs() < 1e-6, "{on_scrapes} s");
    assert!(
        (on_scrapes - on_action).abs() < 0.5,
        "{on_scrapes} against {on_action}"
    );
    // No scrape after the action: no phase to read on.
    assert_eq!(
        scrape_phase([80.0], first_action_s, sc.record_interval),
        None
    );
}

/// The seed-7 grid's point 3 as rehearsed (4 replicas x 11 slots, 870 workers at
/// about 420 req/s, its runbook's first action 12.93 s after the trigger ended, a drain
/// alone keeping 708 requests): the gate stood at the admit rate from the end of
/// `block-at-edge` (28.047 s) to the start of `readmit` (28.061 s), turning away what
/// arrived (the run's first scrape after it read 26 req/s rejected). Those clients are
/// in the retry loop for a retry delay, and the run read steady one scrape later than
/// the model that readmitted in the block's own tick: 1.458 s measured, 0.958 s
/// predicted. The shipped block now starts its bucket full (`fill: full`): half a second
/// of the plan's rate passes, nobody is turned away in those 14 ms, and the model reads
/// the same time either way. (Recorded every 0.5 s, as rehearsals then were.)
#[test]
fn the_gate_stands_at_the_admit_rate_as_long_as_the_runs_did() {
    let sc = Scenario::parse(
        "name: grid-3\nreplicas: 4\nservice:\n  concurrency: 11\n  cold_factor: 3.8\n  overload_factor: 4.55\nworkers:\n  count: 870\n  interval: 14025ms\n  attempt_header: none\noutage: 15000ms\nsteady: 24845ms\nrecord_interval: 500ms\n",
        "grid-3",
    )
    .unwrap();
    let rb = crate::runbook::load_file(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/runbooks/stuck-overload.yaml"
    )))
    .unwrap()
    .runbook;
    // The plan the run made from what it measured.
    let inputs = crate::plan::PlanInputs {
        arrival_rate: 450.6,
        capacity_cold: 287.0,
        k: 4.745,
        capacity: Some(1099.6),
        demand: None,
    };
    let plan = crate::plan::make_plan(&inputs, &rb.plan);
    let step = |name: &str, start_s, end_s| crate::rehearse::report::StepRecord {
        name: name.into(),
        start_s,
        end_s,
        outcome: "succeeded".into(),
    };
    let steps = [
        step("announce", 28.038, 28.041),
        step("block-at-edge", 28.042, 28.047),
        step("drain-backlog", 28.047, 28.057),
        step("readmit", 28.061, 32.601),
    ];
    let readmit = readmit_after(&rb, &steps);
    assert_eq!(readmit.map(|d| d.as_millis()), Some(14));
    let at_with = |readmit_after, block_fill| {
        let run = RunTiming {
            scrape_phase: Duration::from_millis(458),
            readmit_after,
        };
        let r = Readmission::of(&rb, &inputs).map(|r| Readmission { block_fill, ..r });
        predicted_time_to_recover(
            &sc,
            &plan,
            Duration::from_millis(12_930),
            false,
            false,
            r,
            run,
        )
        .unwrap()
    };
    use crate::gate::limit::Fill;
    let at = |r| at_with(r, Fill::Carried);
    let (at_once, as_run) = (at(None), at(readmit));
    // A scrape later (at once reads the phase to the default 10 ms tick).
    assert!(
        as_run - at_once > 0.9 * sc.record_interval.as_secs_f64(),
        "{as_run} s as the run readmitted against {at_once} s at once"
    );
    let full = at_with(readmit, Fill::Full);
    assert!(
        (full - at_once).abs() < 0.1 * sc.record_interval.as_secs_f64(),
        "{full} s with the block's bucket full against {at_once} s at once"
    );
    // Without the readmission step the run says nothing of it.
    assert_eq!(readmit_after(&rb, &steps[..3]), None);
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

/// The prediction is the median over the model's seeds: one draw of the clients' phases
/// off from the others does not move it, and where most draws have no time the first
/// one's reason is the answer.
#[test]
fn the_prediction_is_the_median_over_the_models_seeds() {
    let times = |v: Vec<Result<f64, String>>| move |seed: u64| v[(seed - 1) as usize].clone();
    let unknown = || Err::<f64, String>("unknown: no".into());
    assert_eq!(
        median_over_seeds(3, times(vec![Ok(1.5), Ok(0.9), Ok(0.9)])),
        Ok(0.9)
    );
    assert_eq!(
        median_over_seeds(3, times(vec![Ok(2.0), unknown(), Ok(1.0)])),
        Ok(2.0)
    );
    assert_eq!(
        median_over_seeds(3, times(vec![Ok(2.0), unknown(), unknown()])),
        unknown()
    );
    assert_eq!(median_over_seeds(1, times(vec![Ok(1.2)])), Ok(1.2));
}
