//! The bound on the scrape grid against runs measured on it: a recorder ticking every
//! `record_interval`, each scrape reading the retry-loop gauge at some instant between its
//! tick and the moment its pages were read, and a run whose backlog is answered at or after
//! the fluid bound. No run may read under the bound placed on the grid.

use super::*;
use crate::rehearse::bound::{true_lower_bound, under_bound};
use crate::rehearse::scenario::Scenario;
use crate::rehearse::series::Sample;
use crate::rehearse::verify::{check, SteadyCriteria};
use proptest::prelude::*;

fn default_bound() -> LowerBound {
    let sc = Scenario::default();
    true_lower_bound(
        &sc,
        160.0,
        0.0,
        Some(0.08),
        &[1.0],
        &SteadyCriteria::default(),
        None,
    )
    .unwrap()
}

/// Ticks every `step` from `phase`, each read `latency` after it.
fn grid(phase: f64, step: f64, latency: f64, n: usize) -> Vec<(f64, f64)> {
    (0..n)
        .map(|i| {
            let t = phase + i as f64 * step;
            (t, t + latency)
        })
        .collect()
}

/// The default scenario's fluid bound, the runbook starting 50 ms after a tick of a 0.5 s
/// grid: the bound is the next tick at or after the fluid time, which a run measured on the
/// grid can reach and not beat.
#[test]
fn the_bound_is_the_first_scrape_at_or_after_the_fluid_bound() {
    let mut lb = default_bound();
    let fluid = lb.fluid_s;
    assert_eq!(lb.lower_bound_s, fluid);
    assert_eq!(lb.record_interval_s, 0.1);
    let (rb_start, zero) = (10.05, 4.0);
    on_scrape_grid(&mut lb, rb_start, 9.9, zero, grid(0.0, 0.5, 0.0, 100));
    let tick = ((rb_start + fluid) / 0.5).ceil() * 0.5;
    assert!(
        (lb.lower_bound_s - (tick - rb_start)).abs() < 1e-9,
        "{lb:?}"
    );
    assert!(lb.lower_bound_s >= fluid && lb.lower_bound_s < fluid + 0.5);
    assert_eq!(lb.fluid_s, fluid);
    assert_eq!(lb.sample_s, Some(tick - zero));
    assert!(lb.on_grid.contains("first scrape"), "{}", lb.on_grid);
    // The rehearsal's own check: a run measured at that tick is consistent, one a tick
    // earlier (under the grid's bound, above the fluid one when it falls between) is not.
    assert_eq!(under_bound(Some(tick - rb_start), Some(&lb)), None);
    let early = under_bound(Some(tick - 0.5 - rb_start), Some(&lb)).unwrap();
    assert!(early.contains("bug in the bound or the clock"), "{early}");
}

/// A scrape ticked before the fluid bound but read after it may read the run steady: its
/// tick is the bound, under the fluid time.
#[test]
fn a_scrape_straddling_the_fluid_bound_is_the_bound() {
    let mut lb = default_bound();
    let fluid = lb.fluid_s;
    let tick = fluid - 0.1;
    let scrapes = [(tick, fluid + 0.001), (tick + 0.5, tick + 0.5)];
    on_scrape_grid(&mut lb, 0.0, 0.0, 0.0, scrapes);
    assert_eq!(lb.lower_bound_s, tick);
    assert!(lb.lower_bound_s < fluid);
}

/// Recorded too briefly to reach it: the fluid bound, said so.
#[test]
fn no_scrape_reaching_the_fluid_bound_leaves_it_fluid() {
    let mut lb = default_bound();
    let fluid = lb.fluid_s;
    on_scrape_grid(&mut lb, 0.0, 0.0, 0.0, grid(0.0, 0.5, 0.0, 2));
    assert_eq!(lb.lower_bound_s, fluid);
    assert_eq!(lb.sample_s, None);
    assert!(lb.on_grid.starts_with("no scrape"), "{}", lb.on_grid);
}

/// The fluid bound counts the backlog as every client in the loop but what steady state
/// allows to stay: the state it ends in passes the steady check's retry criterion, and one
/// client fewer answered does not. So a measured steady sample is never one the fluid
/// bound has not reached.
#[test]
fn the_fluid_bound_answers_all_but_what_the_steady_check_allows() {
    let sc = Scenario::default();
    let crit = SteadyCriteria::default();
    let retrying = 160.0;
    let lb = default_bound();
    let left = retrying - lb.backlog;
    let demand = sc.demand_per_s();
    let sample = |r: f64| Sample {
        goodput_per_s: Some(demand),
        workers_retrying: Some(r),
        rejected_per_s: Some(0.0),
        offered_per_s: Some(demand),
        ..Sample::default()
    };
    assert!((left - crit.retrying_fraction_max * f64::from(sc.workers.count)).abs() < 1e-9);
    assert!(check(&sample(left), demand, sc.workers.count, &crit).is_ok());
    assert!(check(&sample(left + 1.0), demand, sc.workers.count, &crit).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// Whenever after the fluid bound the backlog is answered, wherever the grid's phase
    /// falls and however late in its read a scrape sees the gauge, the first scrape that can
    /// read the run steady is at or after the bound on the grid; with reads taking no time,
    /// the bound is the first tick at or after the fluid bound.
    #[test]
    fn a_run_on_the_scrape_grid_never_reads_under_the_aligned_bound(
        fluid in 0.0f64..8.0,
        rb_start in 0.0f64..30.0,
        phase in 0.0f64..0.5,
        late in prop_oneof![Just(0.0), 0.0f64..3.0],
        latency in prop_oneof![Just(0.0), 0.0f64..0.4],
        seen_at in 0.0f64..=1.0,
    ) {
        let step = 0.5;
        let mut lb = default_bound();
        lb.fluid_s = fluid;
        let scrapes = grid(phase, step, latency, 200);
        let from = rb_start - 0.2;
        on_scrape_grid(&mut lb, rb_start, from, 0.0, scrapes.clone());
        // The backlog answered at `answered`; a scrape reads the gauge at `t + seen_at x
        // latency`, and the earliest a steady run can start is the first that sees it.
        let answered = rb_start + fluid + late;
        let measured = scrapes
            .iter()
            .find(|&&(t, _)| t >= from && t + seen_at * latency >= answered)
            .map(|&(t, _)| t - rb_start)
            .unwrap();
        prop_assert!(measured >= lb.lower_bound_s - 1e-12, "{measured} under {lb:?}");
        prop_assert_eq!(under_bound(Some(measured), Some(&lb)), None);
        if latency == 0.0 {
            let first = scrapes
                .iter()
                .map(|&(t, _)| t)
                .find(|&t| t >= rb_start + fluid)
                .unwrap();
            prop_assert!((lb.lower_bound_s - (first - rb_start)).abs() < 1e-12);
            prop_assert!(lb.lower_bound_s >= fluid - 1e-12 && lb.lower_bound_s < fluid + step);
        }
    }
}
