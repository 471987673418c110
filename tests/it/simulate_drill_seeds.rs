//! Each drill's documented conclusion, checked over the 20 seeds `--compare` runs by
//! default rather than on one seed: a conclusion here holds in every one of them, or the
//! test says which part does not (and docs/drills.md says so too).

use recover::retry::RetryKind;
use recover::simulate::kernel::arrivals::Arrivals;
use recover::simulate::model::Model;
use recover::simulate::scenarios::bulkhead::{BulkheadParams, Design};
use recover::simulate::scenarios::provider_outage::ProviderOutageParams;
use recover::simulate::scenarios::retry_layers::{Failures, RetryLayersParams};

const SEEDS: std::ops::RangeInclusive<u64> = 1..=20;

// ---------------------------------------------------------------------------------------
// provider-outage
// ---------------------------------------------------------------------------------------

fn outage(
    policy: RetryKind,
    seed: u64,
) -> recover::simulate::scenarios::provider_outage::ProviderOutageReport {
    let p = ProviderOutageParams {
        policy,
        ..ProviderOutageParams::default()
    };
    Model::run(&p, seed)
}

/// The ordering the drill teaches, seed by seed: full jitter recovers within the window
/// in every seed, while fixed retries and plain backoff keep their 40 retries in one tick
/// (five times the capacity) and never recover; full jitter's peak after the return stays
/// at or under the capacity-and-a-bit, and it serves every call.
#[test]
fn provider_outage_full_jitter_beats_plain_backoff_and_fixed_in_every_seed() {
    for seed in SEEDS {
        let jitter = outage(RetryKind::FullJitter, seed);
        let backoff = outage(RetryKind::Exponential, seed);
        let fixed = outage(RetryKind::Fixed, seed);
        let recovered = jitter
            .recovered_after_s
            .unwrap_or_else(|| panic!("seed {seed}: full jitter did not recover"));
        assert!(recovered < 18.0, "seed {seed}: {recovered}");
        for (name, r) in [("backoff", &backoff), ("fixed", &fixed)] {
            assert_eq!(r.recovered_after_s, None, "seed {seed} {name}");
            assert_eq!(r.peak_after_back, 40, "seed {seed} {name}");
            assert_eq!(r.waiting_at_end, 40, "seed {seed} {name}");
            assert!(
                jitter.peak_after_back < r.peak_after_back,
                "seed {seed} {name}"
            );
        }
        assert!(
            jitter.peak_after_back <= 12,
            "seed {seed}: {}",
            jitter.peak_after_back
        );
        assert_eq!(jitter.waiting_at_end, 0, "seed {seed}");
        // Backoff sends the fewest requests, fixed the most; full jitter in between, but
        // its requests are calls going through, not retries.
        assert!(backoff.requests < jitter.requests && jitter.requests < fixed.requests);
        assert!(jitter.retries < fixed.retries, "seed {seed}");
    }
}

// ---------------------------------------------------------------------------------------
// retry-layers, the overloaded store
// ---------------------------------------------------------------------------------------

fn storm(capacity: f64, budget: Option<f64>, seed: u64) -> (Option<f64>, f64) {
    let p = RetryLayersParams {
        failures: Failures::Load,
        arrivals: Arrivals::Poisson,
        store_capacity_per_s: capacity,
        retry_budget: budget,
        ..RetryLayersParams::default()
    };
    let r = Model::run(&p, seed);
    (r.storm_over_after_s, r.store_failing_at_end)
}

/// A one-second stall queues 1 s of calls, every one of them answered late and retried
/// 48-fold: 144,000 calls/s into a store working through 6,000, so its queue only grows
/// and it fails every call to the end of the run, long after the stall. A 10% budget per
/// layer queues only the second's 3,000 requests and the 3 x 100 starting tokens during
/// the stall (3,600 allowing for Poisson bunching); with the tokens spent the load is the
/// requests alone, so the queue drains at capacity - 3,000 (3,100 for the bunching) a
/// second, and answers are in time once it is down to what the store does in the 250 ms
/// timeout. The storm is over within that time, plus the second it ends in. With Poisson
/// arrivals, in every seed, and at a store capacity of 4,000, 6,000, 12,000 or 60,000
/// calls/s alike: the result is the mechanism's, not the default capacity's.
#[test]
fn retry_layers_overload_storm_outlives_its_cause_until_a_budget_ends_it() {
    for capacity in [4000.0, 6000.0, 12000.0, 60000.0] {
        for seed in SEEDS {
            let (over, failing) = storm(capacity, None, seed);
            assert_eq!(over, None, "capacity {capacity} seed {seed}");
            assert_eq!(failing, 1.0, "capacity {capacity} seed {seed}");
            let (over, failing) = storm(capacity, Some(0.1), seed);
            let over = over.unwrap_or_else(|| panic!("capacity {capacity} seed {seed}"));
            let drain_s = ((3600.0 - 0.25 * capacity) / (capacity - 3100.0)).max(0.0);
            assert!(
                over <= drain_s + 1.0,
                "capacity {capacity} seed {seed}: {over} > {drain_s} + 1"
            );
            assert_eq!(failing, 0.0, "capacity {capacity} seed {seed}");
        }
    }
}

/// Healthy, with room to spare: no stall, no failure.
#[test]
fn retry_layers_overload_mode_without_a_stall_fails_nothing() {
    for seed in SEEDS.take(5) {
        let p = RetryLayersParams {
            failures: Failures::Load,
            arrivals: Arrivals::Poisson,
            trigger_from: std::time::Duration::ZERO,
            trigger_to: std::time::Duration::ZERO,
            ..RetryLayersParams::default()
        };
        let r = Model::run(&p, seed);
        assert_eq!(r.loads.success, 1.0, "seed {seed}");
        assert_eq!(r.storm_over_after_s, Some(0.0), "seed {seed}");
    }
}

// ---------------------------------------------------------------------------------------
// bulkhead
// ---------------------------------------------------------------------------------------

/// After the slowdown the shared pool fails nearly every core call and search (their
/// 150 ms timeouts expire while they queue behind recommendations' 2 s calls) and separate
/// pools keep both at 100%, in every seed.
#[test]
fn bulkhead_separate_pools_keep_core_and_search_whole_in_every_seed() {
    for seed in SEEDS {
        let run = |design| {
            Model::run(
                &BulkheadParams {
                    design,
                    ..BulkheadParams::default()
                },
                seed,
            )
        };
        let shared = run(Design::Shared);
        assert!(
            shared.after.core < 0.1 && shared.after.search < 0.1,
            "seed {seed}: {:?}",
            shared.after
        );
        let separate = run(Design::Separate);
        assert_eq!(
            (separate.after.core, separate.after.search),
            (1.0, 1.0),
            "seed {seed}"
        );
    }
}
