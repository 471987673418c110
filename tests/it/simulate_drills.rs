//! The five home-feed drills of `recover simulate`: each model's healthy behaviour as the
//! drill specifies it, and the headline results, with the expected figures worked out
//! from the rules rather than copied from a run. Then the command as a user runs it.

use recover::gate::balance::policy::BalancePolicy;
use recover::retry::RetryKind;
use recover::simulate::model::Model;
use recover::simulate::resolve;
use recover::simulate::scenarios::breaker::{self, BreakerKind, BreakerParams, ErrorMode};
use recover::simulate::scenarios::bulkhead::{self, BulkheadParams, Design};
use recover::simulate::scenarios::provider_outage::{self, ProviderOutageParams};
use recover::simulate::scenarios::retry_layers::{self, RetryLayersParams};
use recover::simulate::scenarios::slow_replica::SlowReplicaParams;
use std::process::Output;
use std::time::Duration;

fn near(got: f64, want: f64, tolerance: f64) -> bool {
    (got - want).abs() <= tolerance
}

// ---------------------------------------------------------------------------------------
// slow-replica
// ---------------------------------------------------------------------------------------

fn slow(balancer: BalancePolicy) -> SlowReplicaParams {
    SlowReplicaParams {
        balancer,
        ..SlowReplicaParams::default()
    }
}

/// Healthy, every call costs the 10 ms round trip plus 72-88 ms of work, and with 60
/// evenly spaced calls/s each replica gets one every 66.7 ms (round robin) while each of
/// its two workers is busy at most 88 ms: nobody queues. So p50 = 10 + 80 = 90 ms and
/// p99 = 10 + 72 + 0.99 x 16 = 97.8 ms, never above 98 ms.
#[test]
fn slow_replica_healthy_is_p50_90_p99_100_and_25_per_s_per_replica() {
    let p = SlowReplicaParams {
        slow_factor: 1.0,
        ..slow(BalancePolicy::RoundRobin)
    };
    assert!(near(p.capacity_per_replica(), 25.0, 1e-9)); // 2 workers / 80 ms
    let r = Model::run(&p, 1);
    let all = r.slowed;
    assert!(near(all.p50_ms, 90.0, 1.0), "{all:?}");
    assert!(near(all.p99_ms, 97.8, 0.5), "{all:?}");
    assert!(all.max_ms <= 98.0 && all.failed == 0, "{all:?}");
    for rep in &r.replicas {
        assert!(near(rep.share, 0.25, 0.001), "{rep:?}");
    }
    // Least outstanding never queues either (it always finds a free worker). Power of
    // two choices looks at two replicas only: now and then both are busy while a third
    // is idle, and the call waits: a healthy p99 above 100 ms, bounded by one wait.
    let lor = SlowReplicaParams {
        balancer: BalancePolicy::LeastOutstanding,
        ..p.clone()
    };
    assert!(Model::run(&lor, 1).slowed.p99_ms <= 98.0);
    let p2c = SlowReplicaParams {
        balancer: BalancePolicy::P2c,
        ..p.clone()
    };
    let r = Model::run(&p2c, 1).slowed;
    assert!(r.p99_ms > 98.0 && r.max_ms <= 2.0 * 98.0, "{r:?}");
}

/// Offer 140 req/s: round robin gives each replica 35/s; finishing 25/s, each queue grows
/// by 10/s, so after 60 s each replica holds about 600 requests.
#[test]
fn slow_replica_each_replica_finishes_25_per_s() {
    let p = SlowReplicaParams {
        slow_factor: 1.0,
        rate_per_s: 140.0,
        ..slow(BalancePolicy::RoundRobin)
    };
    let r = Model::run(&p, 1);
    assert!(
        near(r.slow_backlog_at_end as f64, 600.0, 20.0),
        "{}",
        r.slow_backlog_at_end
    );
}

/// Round robin ignores load: B keeps its 25% (15/s) but finishes 25 / 5 = 5/s, so its
/// queue grows by 10/s from 1 s to 60 s: about 590 when arrivals stop, and the last call
/// there waits 590 / 5 = 118 s. Three quarters of the calls never see B: p50 stays fine.
#[test]
fn slow_replica_round_robin_queue_and_p99_grow_without_bound() {
    let r = Model::run(&slow(BalancePolicy::RoundRobin), 1);
    assert!(near(r.slow_capacity, 5.0, 1e-9));
    assert!(near(r.slow_share, 0.25, 0.005), "{}", r.slow_share);
    assert!(
        near(r.slow_backlog_at_end as f64, 590.0, 10.0),
        "{}",
        r.slow_backlog_at_end
    );
    assert!(near(r.slowed.max_ms, 118_000.0, 2_500.0), "{:?}", r.slowed);
    assert!(r.slowed.p50_ms < 100.0, "{:?}", r.slowed);
    // Climbing: the last 10 s are worse than the whole.
    assert!(r.last_10s.p99_ms > 100_000.0, "{:?}", r.last_10s);
    let early = &r.series[5];
    let late = &r.series[55];
    assert!(late.p99_ms > 5.0 * early.p99_ms, "{early:?} {late:?}");
}

/// Least outstanding requests and power of two choices send B only about what it
/// finishes (5 of 60 req/s = 8.3%), so its queue stays at its two workers or so and the
/// p99 stays bounded by one slow request (5 x 88 + 10 = 450 ms) plus a little queueing.
#[test]
fn slow_replica_load_aware_balancers_keep_b_to_what_it_finishes() {
    for b in [BalancePolicy::LeastOutstanding, BalancePolicy::P2c] {
        let r = Model::run(&slow(b), 1);
        assert!(r.slow_share < 0.10, "{b}: share {}", r.slow_share);
        assert!(
            r.slow_max_backlog <= 6,
            "{b}: backlog {}",
            r.slow_max_backlog
        );
        assert!(r.slowed.p99_ms < 1000.0, "{b}: {:?}", r.slowed);
        assert_eq!(r.slowed.failed, 0);
    }
}

/// The gate's balancing: least outstanding plus outlier ejection. B's mean latency (over
/// 360 ms) is far above 3x its peers' 90 ms, so the first evaluation with 5 of its
/// requests ejects it; it stays out 10 s, then 20 s, then 30 s (the base times the
/// ejections in a row); with B out the p99 is the healthy one.
#[test]
fn slow_replica_the_gate_ejects_b_for_growing_times_and_keeps_p99_healthy() {
    let p = SlowReplicaParams {
        outlier_ejection: true,
        ..slow(BalancePolicy::LeastOutstanding)
    };
    let r = Model::run(&p, 1);
    let times: Vec<f64> = r.ejections.iter().map(|e| e.for_s).collect();
    assert_eq!(times, vec![10.0, 20.0, 30.0], "{:?}", r.ejections);
    assert!(r.ejections.iter().all(|e| e.replica == "B"));
    let first = r.ejections[0].at_s;
    assert!(
        first > 1.0 && first <= 1.0 + 2.0 * 2.0 + 1e-9,
        "first ejection at {first}"
    );
    assert!(r.slow_share < 0.02, "{}", r.slow_share);
    assert!(
        r.last_10s.p99_ms <= 2.0 * r.healthy.p99_ms,
        "{:?} vs {:?}",
        r.last_10s,
        r.healthy
    );
}

/// A 250 ms timeout: every call to B after the slowdown takes at least 5 x 72 + 10 = 370
/// ms, so exactly B's calls fail: 25% under round robin, and nobody waits over 250 ms.
/// Hedging after 150 ms is capped at 10% of the calls.
#[test]
fn slow_replica_timeout_fails_b_s_share_and_hedging_stays_under_its_cap() {
    let p = SlowReplicaParams {
        timeout: Some(Duration::from_millis(250)),
        ..slow(BalancePolicy::RoundRobin)
    };
    let r = Model::run(&p, 1);
    let failed = r.slowed.failed as f64 / r.slowed.calls as f64;
    assert!(near(failed, 0.25, 0.005), "{failed}");
    assert!(r.slowed.max_ms <= 250.0 + 1e-9, "{:?}", r.slowed);
    for b in BalancePolicy::ALL {
        let p = SlowReplicaParams {
            hedge_after: Some(Duration::from_millis(150)),
            ..slow(b)
        };
        let r = Model::run(&p, 1);
        assert!(
            r.hedges > 0 && r.hedged_share <= 0.10,
            "{b}: {}",
            r.hedged_share
        );
    }
}

// ---------------------------------------------------------------------------------------
// provider-outage
// ---------------------------------------------------------------------------------------

fn outage(policy: RetryKind, seed: u64) -> provider_outage::ProviderOutageReport {
    let p = ProviderOutageParams {
        policy,
        ..ProviderOutageParams::default()
    };
    Model::run(&p, seed)
}

/// Fixed 1 s retries, by hand (ticks of 100 ms): all 40 clients call at 2.0 s (tick 20),
/// as the provider goes down, and all fail. Every one retries 10 ticks later, all in the
/// same tick: 30, 40, 50 (down), 60 (back: 40 offered, more than 8, so it collapses and
/// serves none), 70 ... 230: never one served, so none sends a new call. 22 ticks x 40 =
/// 880 requests, 840 of them retries; peak 40 at 6.0 s; never recovered.
#[test]
fn provider_outage_fixed_retries_stay_together_and_never_recover() {
    let r = outage(RetryKind::Fixed, 1);
    for t in &r.series {
        let want = if t.tick >= 20 && t.tick % 10 == 0 {
            40
        } else {
            0
        };
        assert_eq!((t.new + t.retries, t.served), (want, 0), "{t:?}");
    }
    assert_eq!((r.calls, r.retries, r.requests), (40, 840, 880));
    assert_eq!((r.peak_after_back, r.peak_after_back_at_s), (40, 6.0));
    assert_eq!((r.recovered_after_s, r.waiting_at_end), (None, 40));
}

/// Exponential backoff without jitter: the 40 retry together after 1, 2, 4, 8 s: ticks 30,
/// 50 (down), 90 and 170 (back, 40 at once: collapse); the next wait is capped at 10 s,
/// so the fifth retry would be at 27 s, after the window. 5 x 40 = 200 requests.
#[test]
fn provider_outage_plain_backoff_stays_together_and_never_recovers() {
    let r = outage(RetryKind::Exponential, 1);
    let busy: Vec<u64> = r
        .series
        .iter()
        .filter(|t| t.new + t.retries > 0)
        .map(|t| t.tick)
        .collect();
    assert_eq!(busy, vec![20, 30, 50, 90, 170]);
    assert!(r.series.iter().all(|t| t.served == 0));
    assert_eq!(
        (r.requests, r.peak_after_back, r.peak_after_back_at_s),
        (200, 40, 9.0)
    );
    assert_eq!(r.recovered_after_s, None);
}

/// Full jitter draws each wait in [0, backoff): the 40 retries spread over the ticks, the
/// provider is offered about its capacity or less, and once a client's call is through its
/// next one keeps that tick. In every one of 20 seeds it recovers within the window and
/// the peak after the return stays far below the 40 of the synchronised policies.
#[test]
fn provider_outage_full_jitter_spreads_the_retries_and_recovers() {
    for seed in 1..=20 {
        let r = outage(RetryKind::FullJitter, seed);
        assert!(r.recovered_after_s.is_some(), "seed {seed}: {r:?}");
        assert!(r.peak_after_back < 20, "seed {seed}: {}", r.peak_after_back);
        assert_eq!(r.waiting_at_end, 0, "seed {seed}");
    }
}

/// A provider that serves 8 of the 40 instead of collapsing does not save fixed retries:
/// the 8 it serves call again a second later, in the same tick as the 32 retries.
#[test]
fn provider_outage_shedding_does_not_break_up_synchronised_retries() {
    let p = ProviderOutageParams {
        policy: RetryKind::Fixed,
        shed: true,
        ..ProviderOutageParams::default()
    };
    let r = Model::run(&p, 1);
    assert_eq!(r.recovered_after_s, None);
    assert_eq!(r.peak_after_back, 40);
    assert_eq!(r.served, 8 * 18);
}

// ---------------------------------------------------------------------------------------
// retry-layers
// ---------------------------------------------------------------------------------------

fn layers(failure_rate: f64, retry_budget: Option<f64>) -> [f64; 4] {
    let p = RetryLayersParams {
        failure_rate,
        retry_budget,
        ..RetryLayersParams::default()
    };
    retry_layers::loads(&p, 1).per_s
}

/// Everything failing: each call is tried 1 + retries times, so the loads multiply:
/// 3000, 3000 x 3, x 4, x 4 = 3000, 9000, 36000, 144000 (48 store calls per request).
/// Nothing failing: 3000 everywhere.
#[test]
fn retry_layers_everything_failing_multiplies_by_48() {
    assert_eq!(layers(1.0, None), [3000.0, 9000.0, 36000.0, 144000.0]);
    assert_eq!(layers(0.0, None), [3000.0; 4]);
}

/// Half the store's calls failing: the downstream tries its store 1 + 1/2 + 1/4 + 1/8 =
/// 1.875 times per call and fails only when all 4 fail (1/16); so the API tries the
/// downstream 1 + 1/16 + 1/256 + 1/4096 = 1.0667 times, and the app the API practically
/// once. Loads: 3000, 3000, 3200, 6000.
#[test]
fn retry_layers_half_failing_doubles_the_store_load() {
    let q: f64 = 1.0 / 16.0;
    let downstream = 3000.0 * (1.0 + q + q * q + q * q * q);
    let want = [3000.0, 3000.0, downstream, downstream * 1.875];
    let got = layers(0.5, None);
    for (g, w) in got.iter().zip(want) {
        assert!(near(*g, w, w * 0.01), "{got:?} vs {want:?}");
    }
}

/// A 10% budget with everything failing: no success ever refills a bucket, so each layer
/// retries only with the 100 tokens it started with: 100 retries over the 10 s, 10/s more
/// per layer: 3000, 3010, 3020, 3030. Half failing: retries stay near 10% of successes.
#[test]
fn retry_layers_a_budget_caps_the_extra_load() {
    assert_eq!(layers(1.0, Some(0.1)), [3000.0, 3010.0, 3020.0, 3030.0]);
    let half = layers(0.5, Some(0.1));
    for w in half.windows(2) {
        // At most 10% of the calls above (every success adds 0.1), plus the 10/s start.
        assert!(w[1] <= w[0] * 1.1 + 10.0, "{half:?}");
    }
    assert!(half[3] < layers(0.5, None)[3] * 0.7, "{half:?}");
}

/// The deadline: attempt k starts at (k-1) x (250 + 100) ms: 0, 350, 700. The second has
/// 50 ms left, less than the 100 ms an answer takes; the third starts after the deadline.
#[test]
fn retry_layers_retries_do_not_fit_a_400_ms_deadline() {
    let p = RetryLayersParams::default();
    let a = retry_layers::deadline(&p);
    let starts: Vec<f64> = a.iter().map(|x| x.starts_ms).collect();
    assert_eq!(starts, vec![0.0, 350.0, 700.0]);
    assert_eq!(a[1].left_ms, 50.0);
    assert!(!a[1].fits && !a[2].fits);
    assert!(!Model::run(&p, 1).retries_fit);
    let fast = RetryLayersParams {
        answer_latency: Duration::from_millis(40),
        ..p
    };
    assert!(Model::run(&fast, 1).retries_fit);
}

// ---------------------------------------------------------------------------------------
// breaker
// ---------------------------------------------------------------------------------------

pub(crate) fn breaker_run(
    errors: ErrorMode,
    kind: BreakerKind,
    seed: u64,
) -> breaker::BreakerReport {
    let p = BreakerParams {
        errors,
        breaker: kind,
        ..BreakerParams::default()
    };
    Model::run(&p, seed)
}

/// Without a breaker: random errors fail about half; a fixed half of the 100 callers
/// fails exactly half of the calls (each caller calls 300 times); an overloaded
/// dependency serving 50 calls in any second fails the other half of 100 calls/s, and
/// with that load never gets the calm it needs to recover.
#[test]
fn breaker_none_sees_the_dependency_as_it_is() {
    let r = breaker_run(ErrorMode::Random, BreakerKind::None, 1);
    assert!(near(r.success_rate, 0.5, 0.01), "{}", r.success_rate);
    let r = breaker_run(ErrorMode::DeterministicHalf, BreakerKind::None, 1);
    assert_eq!(r.success_rate, 0.5);
    assert_eq!(r.good_callers_success_rate, Some(1.0));
    let r = breaker_run(ErrorMode::Overload, BreakerKind::None, 1);
    assert!(near(r.success_rate, 0.5, 0.005), "{}", r.success_rate);
    assert_eq!(r.dependency_recovered, Some(false));
    assert_eq!(r.trips + r.reopens, 0);
}

/// Overload: calls 0-49 (0-0.49 s) are served, then the second's 50 are used up, so calls
/// at 0.50, 0.51 ... fail: the consecutive breaker opens at the fifth, 0.54 s; the rate
/// breaker at the 100th call (0.99 s: 50 of 100 failed, over 40%). Ten seconds without
/// load heal the dependency (it needs 5), the probes succeed, it closes, and 100 calls/s
/// on the healed dependency (120/s) never trip it again.
#[test]
fn breaker_open_time_lets_an_overloaded_dependency_recover() {
    for (kind, first) in [(BreakerKind::Consecutive, 0.54), (BreakerKind::Rate, 0.99)] {
        let r = breaker_run(ErrorMode::Overload, kind, 1);
        assert!(
            near(r.first_open_s.unwrap(), first, 1e-9),
            "{kind:?}: {:?}",
            r.first_open_s
        );
        assert_eq!(
            (r.trips, r.reopens, r.closes, r.flaps),
            (1, 0, 1, 0),
            "{kind:?}"
        );
        assert_eq!(r.dependency_recovered, Some(true));
        // Refused for 10 s (1000 calls) and failed for under a second before: 96%+.
        assert!(r.success_rate > 0.96, "{kind:?}: {}", r.success_rate);
    }
}

/// Random errors: a run of 5 failures comes every 62 calls on average (2^6 - 2), so the
/// consecutive breaker trips well within a second of closing, and its single probe
/// passes half the time: it flaps all along. The rate breaker needs all 5 probes to pass
/// (1 in 32): it stays open nearly all the time. Either way at most one open per 10 s.
#[test]
fn breaker_random_errors_make_breakers_flap_or_stay_open() {
    let c = breaker_run(ErrorMode::Random, BreakerKind::Consecutive, 1);
    assert!(c.flaps >= 5 && c.closes >= 5, "{c:?}");
    assert!(c.trips + c.reopens <= 30);
    let r = breaker_run(ErrorMode::Random, BreakerKind::Rate, 1);
    assert!(r.open_share > 0.9 && r.closes <= 3, "{r:?}");
    assert!(near(r.first_open_s.unwrap(), 0.99, 1e-9));
}

/// A deterministic half: the calls come from the callers in the same order every second
/// and the open time (10 s, 1000 calls) is a whole number of seconds, so a probe round
/// starts with the caller at the same place in the order as the call that opened the
/// breaker.
#[test]
fn breaker_probes_of_a_deterministic_half_end_stuck_open() {
    for seed in 1..=6 {
        for kind in [BreakerKind::Consecutive, BreakerKind::Rate] {
            let r = breaker_run(ErrorMode::DeterministicHalf, kind, seed);
            if r.trips == 0 {
                continue; // no run of 5 failing callers in this seed's order
            }
            let what = format!(
                "seed {seed} {kind:?}: trips {} closes {}",
                r.trips, r.closes
            );
            if kind == BreakerKind::Consecutive {
                // It trips on a failure, and that caller is the probe 1000 calls later.
                assert_eq!((r.trips, r.closes), (1, 0), "{what}");
            }
            // The rate breaker first trips at its 100th call, whoever made it, so a first
            // probe round may pass; once one fails, every later round starts with that
            // caller: stuck open for the rest of the run, refusing the working half too.
            let tail = &r.series[r.series.len() - 100..];
            assert!(tail.iter().all(|s| s.open_share == 1.0), "{what}");
            assert!(r.good_callers_success_rate.unwrap() < 0.05, "{what}");
        }
    }
    let r = breaker_run(ErrorMode::DeterministicHalf, BreakerKind::Rate, 1);
    assert_eq!(r.trips, 1, "50% > 40%: the rate breaker always trips");
}

// ---------------------------------------------------------------------------------------
// bulkhead
// ---------------------------------------------------------------------------------------

fn bulk(design: Design) -> bulkhead::BulkheadReport {
    Model::run(
        &BulkheadParams {
            design,
            ..BulkheadParams::default()
        },
        1,
    )
}

/// Healthy, Little's law puts about 80 connections in use (150/s x 0.51 s of latency over
/// the five calls, + 50/s x 0.06 s for search), every call fits its 150 ms timeout and
/// every pool has room: everything is served. All but recommendations' own pool of 60,
/// which holds 45 in flight on average: a Poisson stream's bursts fill it now and then and
/// it refuses at once. In the long run that is Erlang's loss formula, B(60 servers, 45
/// offered) = 0.54% of its calls; over the 10 s before the slowdown (about 1,500 calls) a
/// seed sees a few times more or less, so it is checked over 20 seeds.
#[test]
fn bulkhead_healthy_serves_everything() {
    let erlang_b = (1..=60).fold(1.0f64, |b, c| 45.0 * b / (f64::from(c) + 45.0 * b));
    assert!(near(erlang_b, 0.0054, 0.0001), "{erlang_b}");
    for d in [Design::Shared, Design::Separate] {
        let r = bulk(d);
        for s in &r.series[..8] {
            assert_eq!((s.core, s.search), (1.0, 1.0), "{d:?} {s:?}");
        }
        assert!(
            r.before.per_downstream[..4].iter().all(|&s| s == 1.0),
            "{d:?}"
        );
    }
    let refused: Vec<f64> = (1..=20)
        .map(|seed| {
            let p = BulkheadParams {
                design: Design::Separate,
                ..BulkheadParams::default()
            };
            Model::run(&p, seed).before.recommendations_refused
        })
        .collect();
    let mean = refused.iter().sum::<f64>() / refused.len() as f64;
    assert!(near(mean, erlang_b, erlang_b / 2.0), "{refused:?}");
    assert!(refused.iter().all(|&r| r < 4.0 * erlang_b), "{refused:?}");
}

/// Recommendations holding every connection for its 2 s timeout wants 150 x 2 = 300:
/// more than the shared 256, which fills; every other call then queues behind
/// recommendations' calls and its 150 ms timeout expires before a connection frees, so
/// the core call and search fail (all but the few made before the pool filled). Separate
/// pools keep them whole; recommendations' own 60 pass 60 / 2 s = 30 of its 150 calls/s,
/// so 80% are refused at once.
#[test]
fn bulkhead_separate_pools_keep_core_and_search_whole() {
    let shared = bulk(Design::Shared);
    assert_eq!(shared.max_in_use, 256);
    assert!(
        shared.after.core < 0.1 && shared.after.search < 0.1,
        "{:?}",
        shared.after
    );
    let separate = bulk(Design::Separate);
    assert_eq!((separate.after.core, separate.after.search), (1.0, 1.0));
    assert_eq!(separate.after.per_downstream[4], 0.0);
    assert!(
        near(separate.after.recommendations_refused, 0.8, 0.02),
        "{}",
        separate.after.recommendations_refused
    );
}

// ---------------------------------------------------------------------------------------
// The command
// ---------------------------------------------------------------------------------------

const DRILLS: [&str; 5] = [
    "slow-replica",
    "provider-outage",
    "retry-layers",
    "breaker",
    "bulkhead",
];

fn recover(args: &[&str]) -> Output {
    crate::support::bin()
        .arg("simulate")
        .args(args)
        .output()
        .expect("run recover")
}

fn stdout(o: &Output) -> String {
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn every_drill_is_byte_for_byte_deterministic_in_json_and_text() {
    for d in DRILLS {
        for format in ["json", "text"] {
            let args = ["--scenario", d, "--output", format, "--seed", "7"];
            let (a, b) = (recover(&args), recover(&args));
            assert_eq!(stdout(&a), stdout(&b), "{d} {format}");
        }
        let v: serde_json::Value =
            serde_json::from_str(&stdout(&recover(&["--scenario", d, "--output", "json"])))
                .unwrap();
        assert_eq!(v["scenario"], d);
    }
}

#[test]
fn the_text_states_the_numbers_each_drill_asks_for() {
    let expect: [(&str, &[&str]); 5] = [
        (
            "slow-replica",
            &[
                "healthy (calls before the slowdown): p50",
                "B's share of requests",
                "B's queue: max",
                "t(s)",
            ],
        ),
        (
            "provider-outage",
            &[
                "peak requests in one tick after the provider is back: ",
                "total requests sent: ",
                "time to recover after it came back: ",
            ],
        ),
        (
            "retry-layers",
            &[
                "144000",
                "store calls per request: 48.00",
                "retries fit inside the deadline: no",
            ],
        ),
        (
            "breaker",
            &["opens: ", "closes: ", "flaps: ", "calls that succeeded: "],
        ),
        (
            "bulkhead",
            &[
                "after the slowdown: core call (posts + profile) ",
                "search ",
            ],
        ),
    ];
    for (d, needles) in expect {
        let text = stdout(&recover(&["--scenario", d]));
        for n in needles {
            assert!(text.contains(n), "{d}: missing {n:?} in\n{text}");
        }
    }
}

#[test]
fn compare_shows_every_alternative_in_one_table() {
    let expect: [(&str, &[&str]); 5] = [
        (
            "slow-replica",
            &[
                "round robin",
                "least outstanding",
                "power of two choices",
                "gate: least outstanding + ejection",
                "timeout 250 ms",
                "hedge at 150 ms, max 10%",
            ],
        ),
        (
            "provider-outage",
            &[
                "exponential backoff without jitter",
                "fixed 1s retries",
                "full jitter",
                "never",
            ],
        ),
        (
            "retry-layers",
            &[
                "everything failing",
                "50% of store calls failing",
                "retry budget 10% per layer",
                "144000",
            ],
        ),
        (
            "breaker",
            &[
                "random",
                "deterministic-half",
                "overload",
                "consecutive",
                "rate",
            ],
        ),
        (
            "bulkhead",
            &[
                "one shared pool of 256",
                "separate pools, recommendations refuses when full",
            ],
        ),
    ];
    for (d, needles) in expect {
        let text = stdout(&recover(&["--scenario", d, "--compare"]));
        for n in needles {
            assert!(text.contains(n), "{d}: missing {n:?} in\n{text}");
        }
        let json = stdout(&recover(&[
            "--scenario",
            d,
            "--compare",
            "--output",
            "json",
        ]));
        let rows: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert!(rows.as_array().is_some_and(|r| r.len() >= 3), "{d}: {json}");
    }
}

#[test]
fn every_drill_draws_its_plot() {
    let dir = tempfile::tempdir().unwrap();
    for d in DRILLS {
        let path = dir.path().join(format!("{d}.svg"));
        stdout(&recover(&[
            "--scenario",
            d,
            "--plot",
            path.to_str().unwrap(),
        ]));
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("</svg>"), "{d}");
        assert!(svg.contains(d), "{d}: title missing");
    }
}

#[test]
fn bad_input_exits_2_naming_the_key() {
    let o = recover(&["--scenario", "slow-replica", "--set", "balancer=random"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--set balancer=random"));
    let o = recover(&["--scenario", "breaker", "--set", "opn_for=3s"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("unknown parameter `opn_for`") && err.contains("open_for"),
        "{err}"
    );
    let o = recover(&["--scenario", "bulkhead", "--set", "posts_pool=0"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("posts_pool"));
    let o = recover(&["--scenario", "retry-layers", "--policy", "fixed"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--policy"));
    let o = recover(&["--scenario", "provider-outage", "--policy", "full-jitter"]);
    assert!(stdout(&o).contains("full jitter"));
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("x.yaml");
    std::fs::write(
        &f,
        "model: breaker\nparams:\n  error_rate: 0.5\n  probes: 3\n",
    )
    .unwrap();
    let o = recover(&["--scenario", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("x.yaml:4:3: params.probes: unknown field"),
        "{err}"
    );
}

/// The shipped scenario files write every choice down: each is exactly the built-in
/// drill, so the comments in them describe what `--scenario NAME` runs.
#[test]
fn the_shipped_scenario_files_are_the_built_in_drills() {
    let root = env!("CARGO_MANIFEST_DIR");
    for d in DRILLS {
        let path = format!("{root}/examples/scenarios/drills/{d}.yaml");
        let from_file = resolve(&path).unwrap();
        assert_eq!(from_file, resolve(d).unwrap(), "{d}");
        assert_eq!(from_file.file_seed(), Some(1));
    }
}
