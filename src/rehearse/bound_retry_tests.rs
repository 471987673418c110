//! The bound against procedures that meet the clients, in the request-level model of
//! [`super::retry_model`]: procedures that serve part of the queue, drain it at any time,
//! drop any part of it at any instant (the abandoned requests and those out of reach,
//! keeping the live ones the replica answers in time; or any subset), or turn clients away
//! at the gate for a while. No procedure may beat the bound, whose retry floor holds the
//! held-back clients until they send again.

use super::retry_model::{bound_of, case, simulate, Case, Keep};
use super::*;
use proptest::prelude::*;
proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Whatever part of the queue a procedure serves, whenever it drains or drops part of
    /// it (the abandoned requests and those out of reach, keeping the live ones answered in
    /// time; or any subset), however long it turns clients away: it answers the backlog no
    /// sooner than the bound with its retry floor says.
    #[test]
    fn no_procedure_serving_part_of_the_queue_beats_the_retry_floor(c in case()) {
        let (bound, backlog, held) = bound_of(&c);
        if let Some(measured) = simulate(&c, backlog.ceil()) {
            prop_assert!(
                bound <= measured + 1e-9,
                "bound {bound:.4} s (held back {held}), the procedure took {measured:.4} s: {c:?}"
            );
        }
    }

    /// A drain that drops the abandoned requests ahead of the live ones and keeps the
    /// youngest it answers in time (`POST /admin/drain?keep=answerable`), once or again
    /// and again, at any instant from the scrape on: the live requests behind abandoned
    /// work are reached at once, at the healthy cost. It answers the backlog no sooner than
    /// the bound says either.
    #[test]
    fn no_drain_keeping_the_answerable_requests_beats_the_retry_floor(
        c in case(),
        at in -0.5f64..1.0,
        every in proptest::option::of(0.01f64..0.5),
    ) {
        let c = Case {
            drain_at: None,
            keep_at: Some(at),
            keep_every: every,
            keep: Keep::Answerable,
            sleepers: c.sleepers / 10,
            ..c
        };
        let (bound, backlog, held) = bound_of(&c);
        if let Some(measured) = simulate(&c, backlog.ceil()) {
            prop_assert!(
                bound <= measured + 1e-9,
                "bound {bound:.4} s (held back {held}), the procedure took {measured:.4} s: {c:?}"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Where the clients wait no longer between attempts than for one, the held-back
    /// clients never raise the bound: by their return a path has served at most the warm
    /// capacity times the delay, no more than the servers answer within the timeout.
    #[test]
    fn a_retry_delay_no_longer_than_the_timeout_never_raises_the_bound(
        (replicas, concurrency, ms) in (1u32..=4, 1u32..=16, 5u32..=80),
        (cold_factor, warm_after, warmth) in (1.0f64..4.0, 0u64..=500, 0.0f64..=1.0),
        (timeout_s, delay_share, lag_s) in (0.2f64..3.0, 0.0f64..=1.0, 0.0f64..0.5),
        (retrying, in_flight_share) in (0.0f64..3000.0, 0.0f64..=1.0),
    ) {
        let s = f64::from(ms) / 1000.0;
        let sys = BoundSystem {
            replicas,
            capacity_warm_per_s: f64::from(replicas * concurrency) / s,
            cold_factor,
            warm_after,
            warm_s: 0.5,
            workers: retrying.ceil() as u32,
            retrying_allowed: 0.01,
            drain_clears_overload: true,
        };
        let lp = RetryLoop {
            retry_delay_s: (timeout_s * delay_share).max(1e-3),
            client_timeout_s: timeout_s,
            scraped_before_s: lag_s,
            in_flight: retrying * in_flight_share,
            replicas,
            concurrency,
            service_time_s: s,
            phases: None,
        };
        let start = |retry_loop| BoundStart {
            retrying,
            restart_s: Some(0.0),
            warm_fraction: Some(warmth),
            warm_per_replica: None,
            retry_loop,
        };
        let without = least(&sys.paths(start(None))).map(|(_, t)| t);
        let with = least(&sys.paths(start(Some(lp.clone())))).map(|(_, t)| t);
        prop_assert_eq!(with, without, "held back {}", lp.held_back());
    }
}

/// The shape of seed 7's grid-8 rehearsal: 164 clients in flight, their requests queued
/// behind 4456 abandoned ones on 1 replica (c = 8, s = 40 ms, T = 1 s), scraped 0.39 s
/// before the runbook. Served FIFO, none is reached in time; but a drain that keeps the
/// answerable requests drops the abandoned ones and answers the youngest live ones at
/// once. A count that held back all but the 8 in service (156) put the bound at 1.38 s;
/// the procedure answers the backlog by 1.01 s. The servers answer up to
/// 8 x ceil(1 / 0.04) = 200 in time: nobody is held back.
#[test]
fn a_drain_keeping_the_answerable_requests_reaches_clients_behind_abandoned_work() {
    let c = Case {
        replicas: 1,
        concurrency: 8,
        service_time_s: 0.04,
        cold_factor: 2.0,
        warm_after: 300,
        k: 2.0,
        timeout_s: 1.0,
        delay_s: 1.0,
        lag_s: 0.39,
        dead: vec![4456],
        live: vec![164],
        sleepers: 0,
        warmth: vec![1.0],
        drain_at: None,
        keep_at: Some(-0.39),
        keep_every: Some(0.02),
        keep: Keep::Answerable,
        closed_until: 0.0,
        seed: 7,
    };
    let (bound, backlog, held) = bound_of(&c);
    assert_eq!(held, 0.0);
    let measured = simulate(&c, backlog.ceil()).expect("answered within the horizon");
    assert!(measured < 1.1, "{measured}");
    assert!(bound <= measured, "bound {bound}, measured {measured}");
}

/// The default scenario's stuck state: 84 clients in flight, their requests queued behind
/// 250 abandoned ones on 1 replica (c = 4, s = 40 ms, T = 1 s), 78 waiting out their
/// delay, scraped 20 ms before the runbook. A drain that keeps the answerable requests
/// reaches all 84 at once, and 4 servers answer up to 4 x ceil(1 / 0.04) = 100 of them
/// before their clients give up: nobody is held back, and the bound is the fluid one
/// (158 clients less 1.6 allowed, at 100 req/s: 1.56 s). With 300 in flight, 200 are held
/// back; a retry delay no longer than the timeout still leaves them out of the bound (by
/// then the service has not served more than the 100 + 78 others), a 2 s one raises it.
#[test]
fn clients_in_flight_beyond_what_the_servers_answer_in_time_wait_a_retry_delay() {
    let lp = RetryLoop {
        retry_delay_s: 1.0,
        client_timeout_s: 1.0,
        scraped_before_s: 0.02,
        in_flight: 84.0,
        replicas: 1,
        concurrency: 4,
        service_time_s: 0.04,
        phases: None,
    };
    assert_eq!(lp.answerable_in_time(), 100.0);
    assert_eq!(lp.held_back(), 0.0);
    let sys = BoundSystem {
        replicas: 1,
        capacity_warm_per_s: 100.0,
        cold_factor: 2.0,
        warm_after: 300,
        warm_s: 0.5,
        workers: 160,
        retrying_allowed: 0.01,
        drain_clears_overload: true,
    };
    let start = |retrying, retry_loop| BoundStart {
        retrying,
        restart_s: Some(0.002),
        warm_fraction: Some(1.0),
        warm_per_replica: Some(vec![1.0]),
        retry_loop,
    };
    let fluid = least(&sys.paths(start(158.0, None))).unwrap().1;
    assert!((fluid - 1.564).abs() < 0.01, "{fluid}");
    let with_loop = least(&sys.paths(start(158.0, Some(lp.clone())))).unwrap().1;
    assert_eq!(with_loop, fluid);
    // 300 in flight: 200 held back, but by 0.98 s the service serves 98, under the 178
    // it may answer: the floor does not bind.
    let deep = RetryLoop {
        in_flight: 300.0,
        ..lp.clone()
    };
    assert_eq!(deep.held_back(), 200.0);
    let fluid = least(&sys.paths(start(378.0, None))).unwrap().1;
    assert!((fluid - 3.762).abs() < 0.01, "{fluid}");
    let held = least(&sys.paths(start(378.0, Some(deep.clone()))))
        .unwrap()
        .1;
    assert_eq!(held, fluid);
    // A 2 s delay: until 1.98 s at most 178 answered, then the rest (376.2 - 178).
    let slow = RetryLoop {
        retry_delay_s: 2.0,
        ..deep.clone()
    };
    let held = least(&sys.paths(start(378.0, Some(slow)))).unwrap().1;
    assert!(
        (held - (1.98 + (376.2 - 178.0) / 100.0)).abs() < 0.01,
        "{held}"
    );
    // Two replicas answer up to 200 in time, however the 300 are split between them.
    let two = RetryLoop {
        replicas: 2,
        ..deep.clone()
    };
    assert_eq!(two.held_back(), 100.0);
    // A timeout that is not a whole number of service times: 4 x ceil(25.5) = 104.
    let odd = RetryLoop {
        client_timeout_s: 1.02,
        ..deep
    };
    assert_eq!(odd.held_back(), 300.0 - 104.0);
    // Nor does a policy without a least wait, or a loop not measured.
    let sc = crate::rehearse::scenario::Scenario::default();
    let jitter = crate::rehearse::scenario::Scenario {
        workers: crate::demo::topology::WorkersSpec {
            retry: "exp-jitter:base=100ms,max=10s".into(),
            ..sc.workers.clone()
        },
        ..sc.clone()
    };
    assert!(retry_loop_of(&jitter, 0.0, Some(84.0)).is_none());
    assert!(retry_loop_of(&sc, 0.0, None).is_none());
    assert_eq!(
        retry_loop_of(&sc, 0.0, Some(84.0)).map(|l| l.held_back()),
        Some(0.0)
    );
}
