//! The steady-state check and relapses: pure functions over the recorded series (the
//! lower bound is [`super::bound`]).
//!
//! Why it exists: "recovered" must mean the same thing in the rehearsal, its baselines and
//! the report: goodput near demand, no client in a retry loop, the gate rejecting
//! (almost) nothing; held, not glimpsed.

use super::series::Sample;
use serde::{Deserialize, Serialize};

/// What counts as steady state.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SteadyCriteria {
    /// Goodput at least this fraction of demand.
    pub goodput_ratio_min: f64,
    /// At most this fraction of the clients in a retry loop (a stray timeout on a loaded
    /// laptop is not an incident).
    pub retrying_fraction_max: f64,
    /// The gate rejects at most this fraction of what it is offered.
    pub reject_ratio_max: f64,
}

impl Default for SteadyCriteria {
    fn default() -> Self {
        SteadyCriteria {
            goodput_ratio_min: 0.85,
            retrying_fraction_max: 0.01,
            reject_ratio_max: 0.01,
        }
    }
}

/// Is this one sample steady? `Err` lists what is not (or what is missing).
pub fn check(sample: &Sample, demand: f64, workers: u32, c: &SteadyCriteria) -> Result<(), String> {
    let mut bad = Vec::new();
    match sample.goodput_per_s {
        Some(g) if g >= c.goodput_ratio_min * demand => {}
        Some(g) => bad.push(format!(
            "goodput {g:.1}/s < {:.0}% of demand {demand:.1}/s",
            c.goodput_ratio_min * 100.0
        )),
        None => bad.push("no goodput data".to_string()),
    }
    match sample.workers_retrying {
        Some(r) if r <= c.retrying_fraction_max * workers as f64 => {}
        Some(r) => bad.push(format!("{r:.0} clients in a retry loop")),
        None => bad.push("no retry-loop data".to_string()),
    }
    match (sample.rejected_per_s, sample.offered_per_s) {
        (Some(rej), Some(off)) if rej <= c.reject_ratio_max * off.max(1.0) => {}
        (Some(rej), _) => bad.push(format!("gate rejecting {rej:.1}/s")),
        _ => bad.push("no gate data".to_string()),
    }
    if bad.is_empty() {
        Ok(())
    } else {
        Err(bad.join("; "))
    }
}

/// A sample that cannot be judged (a scrape timed out on a loaded machine) is neither
/// steady nor a failure; these errors mark it.
fn no_data(err: &str) -> bool {
    err.split("; ").all(|e| e.starts_with("no "))
}

/// The first instant from which every judged sample is steady, lasting at least `hold_s`
/// up to the last sample. Samples without data neither break nor extend the run, but at
/// least two thirds of the run's samples must have been judged (no data is no proof).
pub fn steady_from(
    samples: &[Sample],
    demand: f64,
    workers: u32,
    c: &SteadyCriteria,
    hold_s: f64,
) -> Option<f64> {
    let last = samples.last()?.t_s;
    let mut start: Option<(f64, usize, usize)> = None; // (since, judged, total)
    for s in samples {
        match check(s, demand, workers, c) {
            Ok(()) => {
                let (t, j, n) = start.unwrap_or((s.t_s, 0, 0));
                start = Some((t, j + 1, n + 1));
            }
            Err(e) if no_data(&e) => {
                if let Some((t, j, n)) = start {
                    start = Some((t, j, n + 1));
                }
            }
            Err(_) => start = None,
        }
    }
    let (t, judged, total) = start?;
    (last - t >= hold_s && judged * 3 >= total * 2).then_some(t)
}

/// Times the system fell back into the stuck state after it had started to recover:
/// after a sample that served well (goodput at least half of what it was given, capped at
/// demand, with p99 under the client timeout), a run of `min_samples` samples in which
/// goodput fell under half of that again; or, once steady state was reached, a run of
/// `min_samples` unsteady ones. Samples without data are skipped; a brief p99 excursion
/// while goodput stays high is not a relapse (see [`over_timeout_s`]).
pub fn relapses(
    samples: &[Sample],
    demand: f64,
    workers: u32,
    c: &SteadyCriteria,
    min_samples: usize,
    timeout_s: f64,
) -> u32 {
    let mut serving = false;
    let mut steady = false;
    let mut bad_run = 0usize;
    let mut count = 0;
    for s in samples {
        let verdict = check(s, demand, workers, c);
        let given = s.admitted_per_s.map(|a| a.min(demand));
        let good = match (s.goodput_per_s, given) {
            (Some(g), Some(a)) if a > 0.0 => Some(g >= 0.5 * a),
            _ => None,
        };
        let fast = s.p99_latency_s.is_some_and(|p| p < timeout_s);
        if verdict.is_ok() {
            steady = true;
        }
        if (good == Some(true) && fast) || verdict.is_ok() {
            serving = true;
            bad_run = 0;
            continue;
        }
        let lost_steady = steady && matches!(&verdict, Err(e) if !no_data(e));
        if serving && (good == Some(false) || lost_steady) {
            bad_run += 1;
            if bad_run == min_samples {
                count += 1;
                serving = false;
                steady = false;
            }
        }
    }
    count
}

/// Seconds, after client p99 first fell under the timeout, during which it was at or
/// above it again (answers wasted), summed over samples (each counts for the gap to the
/// next one).
pub fn over_timeout_s(samples: &[Sample], timeout_s: f64) -> f64 {
    let mut below = false;
    let mut total = 0.0;
    for w in samples.windows(2) {
        match w[0].p99_latency_s {
            Some(p) if p < timeout_s => below = true,
            Some(_) if below => total += w[1].t_s - w[0].t_s,
            _ => {}
        }
    }
    total
}

/// Why the scrape at `t_s` (the lower bound's, on the recorder's grid) did not read the run
/// steady, or None when it did or no sample is there. The check's own words, and when any
/// client was in a retry loop, how many the gate turned away over the `retry_delay_s` before
/// it: a client turned away waits that delay before it asks again, so those are still in
/// the loop at this scrape whatever the service could answer. This is what makes a run
/// read steady a scrape or more after the bound, point by point.
pub fn unsteady_at(
    samples: &[Sample],
    t_s: f64,
    demand: f64,
    workers: u32,
    c: &SteadyCriteria,
    retry_delay_s: f64,
) -> Option<String> {
    let at = samples.iter().position(|s| (s.t_s - t_s).abs() < 1e-6)?;
    let why = check(&samples[at], demand, workers, c).err()?;
    if samples[at].workers_retrying.unwrap_or(0.0) <= 0.0 {
        return Some(why);
    }
    // Each sample's rejections are over the scrape interval before it.
    let turned_away: f64 = samples[..=at]
        .windows(2)
        .filter(|w| w[1].t_s > t_s - retry_delay_s)
        .filter_map(|w| w[1].rejected_per_s.map(|r| r * (w[1].t_s - w[0].t_s)))
        .sum();
    Some(format!(
        "{why} (the gate turned away {turned_away:.0} clients in the {retry_delay_s:.2} s retry delay before it)"
    ))
}

/// Goodput over demand, averaged over the samples in the last `window_s` seconds.
pub fn goodput_ratio_end(samples: &[Sample], demand: f64, window_s: f64) -> Option<f64> {
    let last = samples.last()?.t_s;
    let vals: Vec<f64> = samples
        .iter()
        .filter(|s| s.t_s >= last - window_s)
        .filter_map(|s| s.goodput_per_s)
        .collect();
    if vals.is_empty() || demand <= 0.0 {
        return None;
    }
    Some(vals.iter().sum::<f64>() / vals.len() as f64 / demand)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(t: f64, goodput: f64, retrying: f64, rejected: f64) -> Sample {
        Sample {
            t_s: t,
            goodput_per_s: Some(goodput),
            workers_retrying: Some(retrying),
            rejected_per_s: Some(rejected),
            offered_per_s: Some(goodput + rejected),
            ..Sample::default()
        }
    }

    #[test]
    fn steady_needs_all_three_and_a_hold() {
        let c = SteadyCriteria::default();
        let mut v = vec![s(0.0, 2.0, 300.0, 0.0), s(1.0, 20.0, 0.0, 5.0)];
        for i in 2..=12 {
            v.push(s(i as f64, 20.0, 0.0, 0.0));
        }
        assert_eq!(steady_from(&v, 20.0, 500, &c, 10.0), Some(2.0));
        assert_eq!(steady_from(&v, 20.0, 500, &c, 11.0), None);
        assert_eq!(relapses(&v, 20.0, 500, &c, 2, 2.0), 0);
        v.push(s(13.0, 1.0, 400.0, 0.0));
        v.push(s(14.0, 1.0, 400.0, 0.0));
        assert_eq!(relapses(&v, 20.0, 500, &c, 2, 2.0), 1);
        assert_eq!(steady_from(&v, 20.0, 500, &c, 1.0), None);
        // A sample without data neither breaks a steady run nor counts as a relapse.
        let mut w: Vec<Sample> = (0..12).map(|i| s(i as f64, 20.0, 0.0, 0.0)).collect();
        w[5] = Sample {
            t_s: 5.0,
            ..Sample::default()
        };
        assert_eq!(steady_from(&w, 20.0, 500, &c, 10.0), Some(0.0));
        assert_eq!(relapses(&w, 20.0, 500, &c, 1, 2.0), 0);
        // Recovering under a gate (not yet steady), then goodput collapses again.
        let gated = |t: f64, g: f64, p99: f64| Sample {
            p99_latency_s: Some(p99),
            admitted_per_s: Some(10.0),
            ..s(t, g, 100.0, 50.0)
        };
        let mut r: Vec<Sample> = (0..4).map(|i| gated(i as f64, 8.0, 0.1)).collect();
        // A burst past the timeout while goodput stays up: no relapse, but counted.
        r.push(gated(4.0, 9.0, 2.5));
        r.push(gated(5.0, 9.0, 2.5));
        r.push(gated(6.0, 8.0, 0.1));
        assert_eq!(relapses(&r, 20.0, 500, &c, 2, 2.0), 0);
        assert!((over_timeout_s(&r, 2.0) - 2.0).abs() < 1e-9);
        for i in 7..10 {
            r.push(gated(i as f64, 1.0, 2.5));
        }
        assert_eq!(relapses(&r, 20.0, 500, &c, 2, 2.0), 1);
    }
    #[test]
    fn the_bounds_scrape_names_what_failed_and_the_clients_turned_away_a_retry_delay_before() {
        let c = SteadyCriteria::default();
        // Turned away 16 clients (32/s over half a second) a scrape before the bound's.
        let v = vec![
            s(0.0, 20.0, 60.0, 0.0),
            s(0.5, 40.0, 60.0, 32.0),
            s(1.0, 60.0, 16.0, 0.0),
            s(1.5, 60.0, 0.0, 0.0),
        ];
        assert_eq!(
            unsteady_at(&v, 1.0, 20.0, 160, &c, 1.0).as_deref(),
            Some(
                "16 clients in a retry loop (the gate turned away 16 clients in the 1.00 s retry delay before it)"
            )
        );
        // A retry delay shorter than the scrape gap counts only the last interval.
        assert!(unsteady_at(&v, 1.0, 20.0, 160, &c, 0.4)
            .is_some_and(|w| w.contains("turned away 0 clients")));
        // Steady there, or no scrape at that instant: nothing to say.
        assert_eq!(unsteady_at(&v, 1.5, 20.0, 160, &c, 1.0), None);
        assert_eq!(unsteady_at(&v, 1.2, 20.0, 160, &c, 1.0), None);
        // Goodput short with no client retrying: the check's words alone.
        let w = vec![s(0.0, 5.0, 0.0, 0.0)];
        assert_eq!(
            unsteady_at(&w, 0.0, 20.0, 160, &c, 1.0).as_deref(),
            Some("goodput 5.0/s < 85% of demand 20.0/s")
        );
    }
}
