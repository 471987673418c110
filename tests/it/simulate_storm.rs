//! The `retry-storm` tick model against a hand calculation, and its policies.

use recover::retry::RetryKind;
use recover::simulate::model::Model;
use recover::simulate::scenarios::retry_storm::StormParams;
use recover::simulate::StormTick;

fn row(
    tick: u32,
    arriving: u32,
    retries: u32,
    served: u32,
    turned_away: u32,
    given_up: u32,
) -> StormTick {
    StormTick {
        tick,
        arriving,
        retries,
        served,
        turned_away,
        given_up,
    }
}

/// Worked out by hand from the rules (4 clients, one new call each per tick in ticks 1-14;
/// room for 9 a tick; down in ticks 4-7; more than 9 arriving -> only 4 complete; at most 4
/// tries; served in the order first sent; `fixed` retries the next tick). "Group tN"
/// means the 4 calls first sent in tick N.
#[test]
fn immediate_retry_storm_matches_the_hand_calculation_tick_by_tick() {
    let expected = vec![
        // 1-3: 4 new calls each, well under 9: all served.
        row(1, 4, 0, 4, 0, 0),
        row(2, 4, 0, 4, 0, 0),
        row(3, 4, 0, 4, 0, 0),
        // 4: down. Group t4 (try 1) turned away.
        row(4, 4, 0, 0, 4, 0),
        // 5: group t5 try 1 + group t4 try 2 = 8, all turned away (down).
        row(5, 8, 4, 0, 8, 0),
        // 6: t6 try 1, t5 try 2, t4 try 3 = 12 turned away.
        row(6, 12, 8, 0, 12, 0),
        // 7: t7 try 1, t6 try 2, t5 try 3, t4 try 4 = 16 turned away; group t4 has used its
        //    4 tries: 4 calls given up.
        row(7, 16, 12, 0, 16, 4),
        // 8: server back. t8 try 1, t7 try 2, t6 try 3, t5 try 4 = 16 > 9: it completes only
        //    4, the oldest first: group t5 (on its last try). 12 turned away, none given up.
        row(8, 16, 12, 4, 12, 0),
        // 9-14: the same wave shifted by one: 4 new + 12 retries = 16 arrive, only the group
        //    on its 4th try is served (t6, t7, ... t11), the other 12 fail again.
        row(9, 16, 12, 4, 12, 0),
        row(10, 16, 12, 4, 12, 0),
        row(11, 16, 12, 4, 12, 0),
        row(12, 16, 12, 4, 12, 0),
        row(13, 16, 12, 4, 12, 0),
        row(14, 16, 12, 4, 12, 0),
        // 15: no new calls. t14 try 2, t13 try 3, t12 try 4 = 12 > 9: only group t12 served.
        row(15, 12, 12, 4, 8, 0),
        // 16: t14 try 3, t13 try 4 = 8 <= 9: all served. Nothing left.
        row(16, 8, 8, 8, 0, 0),
    ];
    let r = Model::run(&StormParams::default(), 1);
    assert_eq!(r.series, expected);
    assert_eq!(r.recovery.peak_calls, 16);
    assert_eq!(r.recovery.given_up, 4);
    // Server returns at tick 8; tick 16 is the first in which every arriving call is served.
    assert_eq!(r.recovery.settled_s, Some(8.0));
    assert!(r.recovery.recovered);
    // Conservation: 14 ticks x 4 clients = 56 calls = 52 served + 4 given up + 0 pending.
    assert_eq!(
        (r.calls, r.served, r.recovery.given_up as u32, r.pending),
        (56, 52, 4, 0)
    );
}

#[test]
fn every_call_is_served_given_up_or_pending_under_every_policy() {
    for policy in RetryKind::ALL {
        for seed in 1..5 {
            let p = StormParams {
                policy,
                ticks: 18, // cut short so some calls are still pending
                ..StormParams::default()
            };
            let r = Model::run(&p, seed);
            assert_eq!(
                r.calls,
                r.served + r.recovery.given_up as u32 + r.pending,
                "{policy} seed {seed}"
            );
            let served: u32 = r.series.iter().map(|t| t.served).sum();
            assert_eq!(served, r.served);
        }
    }
}

#[test]
fn backoff_gives_up_fewer_calls_and_jitter_flattens_the_peak() {
    let immediate = Model::run(&StormParams::default(), 1);
    let backoff = Model::run(
        &StormParams {
            policy: RetryKind::Exponential,
            ..StormParams::default()
        },
        1,
    );
    // Doubling delays (1, 2, 4 ticks) stretch the 4 tries past the outage: nobody gives up.
    assert_eq!(backoff.recovery.given_up, 0);
    assert!(immediate.recovery.given_up > backoff.recovery.given_up);
    let mut settled_sum = 0.0;
    for seed in 1..=10 {
        let r = Model::run(
            &StormParams {
                policy: RetryKind::FullJitter,
                ..StormParams::default()
            },
            seed,
        );
        assert!(
            r.recovery.peak_calls < immediate.recovery.peak_calls,
            "seed {seed}: {}",
            r.recovery.peak_calls
        );
        settled_sum += r.recovery.settled_s.unwrap_or(100.0);
    }
    assert!(
        settled_sum < 10.0 * immediate.recovery.settled_s.unwrap(),
        "{settled_sum}"
    );
}

#[test]
fn a_server_that_sheds_instead_of_collapsing_settles_sooner() {
    let shed = Model::run(
        &StormParams {
            overload_served: 9,
            ..StormParams::default()
        },
        1,
    );
    assert!(
        shed.recovery.settled_s.unwrap() < 8.0,
        "{:?}",
        shed.recovery.settled_s
    );
}
