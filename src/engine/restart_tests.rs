//! The restart decision's and the readmission's first-limit tests (`super`).

use super::*;
use crate::engine::ramp::{next_move, RampMove, RampState, Seen};

fn healthy() -> RestartEvidence {
    RestartEvidence {
        replicas: vec![("a".into(), true), ("b".into(), true)],
        drained: vec!["a".into(), "b".into()],
        slow: None,
        resumed: vec![],
        admit_rate: Some(30.0),
        capacity: Some(200.0),
        capacity_cold: 100.0,
    }
}

fn restarts(d: &RestartDecision) -> Vec<String> {
    match d {
        RestartDecision::Restart { replicas, .. } => replicas.clone(),
        RestartDecision::Skip { .. } => vec![],
    }
}

#[test]
fn drained_ready_and_admitted_below_warm_capacity_restarts_nothing() {
    let d = decide(&healthy());
    assert!(
        matches!(&d, RestartDecision::Skip { reason } if reason.contains("no restart needed")),
        "{d:?}"
    );
}

#[test]
fn each_piece_of_evidence_against_the_drain_restarts() {
    let e = RestartEvidence {
        replicas: vec![("a".into(), true), ("b".into(), false)],
        ..healthy()
    };
    assert_eq!(restarts(&decide(&e)), ["b"]);
    let e = RestartEvidence {
        slow: Some("a".into()),
        ..healthy()
    };
    assert_eq!(restarts(&decide(&e)), ["a"]);
    let e = RestartEvidence {
        drained: vec!["a".into()],
        ..healthy()
    };
    let d = decide(&e);
    assert_eq!(restarts(&d), ["a", "b"]);
    assert!(format!("{d:?}").contains("b not drained"), "{d:?}");
    let e = RestartEvidence {
        admit_rate: Some(250.0),
        ..healthy()
    };
    assert_eq!(restarts(&decide(&e)), ["a", "b"]);
    // Warm capacity unknown: the cold capacity stands in for it.
    let e = RestartEvidence {
        capacity: None,
        admit_rate: Some(120.0),
        ..healthy()
    };
    assert_eq!(restarts(&decide(&e)), ["a", "b"]);
    let e = RestartEvidence {
        capacity: None,
        ..healthy()
    };
    assert!(restarts(&decide(&e)).is_empty());
    let e = RestartEvidence {
        admit_rate: Some(f64::NAN),
        ..healthy()
    };
    assert_eq!(restarts(&decide(&e)), ["a", "b"]);
    let e = RestartEvidence {
        admit_rate: None,
        ..healthy()
    };
    assert_eq!(restarts(&decide(&e)), ["a", "b"]);
}

#[test]
fn a_resumed_restart_is_finished() {
    let e = RestartEvidence {
        resumed: vec!["a".into()],
        ..healthy()
    };
    let d = decide(&e);
    assert_eq!(restarts(&d), ["a", "b"]);
}

/// Drained alone, warm, at 100 req/s warm and 50 cold, clients timing out after 1 s.
fn warm_drained() -> Drained {
    Drained {
        kept: Some(0),
        capacity: Some(100.0),
        capacity_cold: 50.0,
        warm_fraction: Some(1.0),
        client_timeout_s: Some(1.0),
    }
}

/// The plan's ramp: from 22.5 req/s (a quarter of 90) up to 0.9 x 100.
fn ramp_params() -> RampParams {
    RampParams {
        from: 22.5,
        factor: 1.5,
        ceiling: 90.0,
        max_relapses: 2,
        ceiling_holds: 3,
        headroom: 0.9,
    }
}

#[test]
fn after_a_drain_alone_the_ramp_starts_at_what_the_service_answers_now() {
    let p = ramp_params();
    assert_eq!(start_rate(&p, None), 22.5);
    let warm = Drained {
        kept: Some(0),
        capacity: Some(100.0),
        capacity_cold: 50.0,
        warm_fraction: Some(1.0),
        client_timeout_s: None,
    };
    assert!((start_rate(&p, Some(warm)) - 90.0).abs() < 1e-9);
    // Half warm: m = 1.5, 100 / 1.5 = 66.7 answered, 60 admitted.
    let half = Drained {
        warm_fraction: Some(0.5),
        ..warm
    };
    assert!((half.capacity_now() - 100.0 / 1.5).abs() < 1e-9);
    assert!((start_rate(&p, Some(half)) - 60.0).abs() < 1e-9);
    // Warmth unknown: the cold capacity. Never below the plan's rate.
    let unknown = Drained {
        warm_fraction: None,
        ..warm
    };
    assert!((start_rate(&p, Some(unknown)) - 45.0).abs() < 1e-9);
    let tiny = Drained {
        kept: Some(0),
        capacity: None,
        capacity_cold: 10.0,
        warm_fraction: Some(1.0),
        client_timeout_s: None,
    };
    assert_eq!(start_rate(&p, Some(tiny)), 22.5);
    // A relapse from there steps back to the plan's rate.
    let mut st = RampState::start(&p);
    st.rate = start_rate(&p, Some(warm));
    let m = next_move(&p, &mut st, Err("p99 over".into()), Seen::default());
    assert!(
        matches!(m, RampMove::StepBack { rate, .. } if (rate - 22.5).abs() < 1e-9),
        "{m:?}"
    );
}

/// A returning wave of retries after a drain alone: the gate's default burst (half a
/// second of the rate) cut an 80-request wave to 45 at 90 req/s, turning the rest
/// away for another retry delay. The queue may hold what the service answers within
/// the client timeout, so the burst goes to headroom x that.
#[test]
fn after_a_drain_alone_a_returning_wave_fits_the_queue_the_client_timeout_allows() {
    let p = ramp_params();
    let warm = warm_drained();
    // 0.9 x 100 req/s x 1 s: a wave of 90 at once, not 45.
    assert_eq!(wave_burst(&p, Some(warm), 90.0), Some(90));
    // Half warm: the service answers 66.7 req/s now; 0.9 x 66.7 x 1 s = 60.
    let half = Drained {
        warm_fraction: Some(0.5),
        ..warm
    };
    assert_eq!(wave_burst(&p, Some(half), 60.0), Some(60));
    // A short timeout leaves less room than half a second of the rate: never below
    // the default.
    let short = Drained {
        client_timeout_s: Some(0.2),
        ..warm
    };
    assert_eq!(wave_burst(&p, Some(short), 90.0), Some(45));
    // The timeout not measured, or no drain alone: the gate's default stands.
    let unknown = Drained {
        client_timeout_s: None,
        ..warm
    };
    assert_eq!(wave_burst(&p, Some(unknown), 90.0), None);
    assert_eq!(wave_burst(&p, None, 90.0), None);
}

/// The first limit after a drain alone starts full only at the wave-sized burst:
/// nothing queued, the timeout measured, the rate under what the service answers.
#[test]
fn the_first_limit_after_a_drain_alone_fills_only_at_the_wave_sized_burst() {
    let p = ramp_params();
    let warm = warm_drained();
    let burst = wave_burst(&p, Some(warm), 90.0).unwrap();
    let (fill, why) = fill_reason(&p, Some(warm), 90.0, burst).expect("fills");
    assert_eq!(fill, Fill::Full);
    assert!(
        why.contains("burst 90") && why.contains("nothing is queued"),
        "{why}"
    );
    // No drain alone, the timeout unknown, or the default burst (above what a 0.2 s
    // timeout's queue answers): no fill.
    assert_eq!(fill_reason(&p, None, 90.0, 90), None);
    let unknown = Drained {
        client_timeout_s: None,
        ..warm
    };
    assert_eq!(fill_reason(&p, Some(unknown), 90.0, 90), None);
    let short = Drained {
        client_timeout_s: Some(0.2),
        ..warm
    };
    let default = wave_burst(&p, Some(short), 90.0).unwrap();
    assert_eq!(default, 45);
    assert_eq!(fill_reason(&p, Some(short), 90.0, default), None);
    // A runbook's own burst, or a rate above headroom x what the service answers now.
    assert_eq!(fill_reason(&p, Some(warm), 90.0, 60), None);
    assert_eq!(fill_reason(&p, Some(warm), 95.0, burst), None);
}

/// A drain that kept requests (answered within their deadlines) left a queue of them:
/// the bucket starts with the room they leave, `room - kept`, so the queue holds at most
/// what it answers within the timeout; a count not given leaves no known room, and a
/// drain that kept the whole room leaves none.
#[test]
fn after_a_drain_that_kept_requests_the_bucket_starts_with_the_room_they_leave() {
    let p = ramp_params();
    let warm = warm_drained();
    let burst = wave_burst(&p, Some(warm), 90.0).unwrap();
    let kept = |kept| fill_reason(&p, Some(Drained { kept, ..warm }), 90.0, burst);
    let (fill, why) = kept(Some(5)).expect("fills");
    assert_eq!(fill, Fill::Tokens(85));
    assert!(
        why.contains("its bucket starts with 85 of burst 90: 5 requests are queued at most (those the drain kept, which the replicas answer within their deadlines, and any a filled block let in since), and 90 is what the queue answers within the clients' 1.00 s timeout"),
        "{why}"
    );
    assert_eq!(kept(Some(89)).map(|f| f.0), Some(Fill::Tokens(1)));
    assert_eq!(kept(Some(90)), None);
    assert_eq!(kept(Some(500)), None);
    assert_eq!(kept(None), None);
    // Not the wave-sized burst, or the timeout not measured: carried, as without keep.
    assert_eq!(
        fill_reason(
            &p,
            Some(Drained {
                kept: Some(5),
                ..warm
            }),
            90.0,
            60
        ),
        None
    );
    let unknown = Drained {
        kept: Some(5),
        client_timeout_s: None,
        ..warm
    };
    assert_eq!(fill_reason(&p, Some(unknown), 90.0, 90), None);
}

/// The run log says why the first bucket starts empty only where no room is known: a
/// count not given, or a drain that kept the whole room.
#[test]
fn the_first_bucket_is_said_not_filled_only_when_no_room_is_known() {
    let warm = warm_drained();
    let said = |kept| Drained { kept, ..warm }.kept_reason(0.9);
    assert_eq!(said(Some(0)), None);
    assert_eq!(said(Some(5)), None);
    assert!(said(None).unwrap().contains("did not say how many"));
    assert!(said(Some(90))
        .unwrap()
        .contains("90 requests are queued at most (those the drain kept and any a filled block let in since), no fewer than the 90"));
}
