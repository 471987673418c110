//! Telling "one replica is slow" apart from a stuck overload. Both raise p99, and behind
//! round robin a slow replica can push it past any limit, but the fixes are opposite: a
//! stuck overload needs load shed at the edge and every replica restarted in batches; one
//! slow replica (a noisy neighbour, a bad disk, still passing its health checks) needs
//! that one taken out of rotation and restarted or moved, and nothing done to the others.
//!
//! The rule reads a per-replica latency signal (`replica_service_time`): at one instant a
//! replica is an outlier when its latency is more than `factor` times the median of its
//! peers'. A slow replica is exactly ONE outlier: when several stand out, or every replica
//! is slow together (an overload slows all of them alike, so nobody stands out), it is
//! not this failure. Pure: no clock, no I/O.

use crate::metrics::signal::{names, Snapshot};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The replica that stands out, with the figures that say so.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SlowReplica {
    /// The replica's id as the platform names it (the scrape target's instance, or the
    /// series' `pod` / `instance` label).
    pub replica: String,
    /// Its latency, seconds.
    pub latency_s: f64,
    /// The median of its peers' latencies, seconds.
    pub peers_median_s: f64,
}

impl SlowReplica {
    /// How many times slower than its peers' median.
    pub fn ratio(&self) -> f64 {
        self.latency_s / self.peers_median_s
    }
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// The one replica whose latency is above `factor` x its peers' median, if exactly one
/// is. Needs at least two replicas with a figure (a replica alone has no peers); a peer
/// median of zero judges nobody.
pub fn outlier(latencies: &BTreeMap<String, f64>, factor: f64) -> Option<SlowReplica> {
    if latencies.len() < 2 {
        return None;
    }
    let mut found = latencies.iter().filter_map(|(id, &lat)| {
        let peers: Vec<f64> = latencies
            .iter()
            .filter(|(other, _)| *other != id)
            .map(|(_, &v)| v)
            .collect();
        let m = median(peers)?;
        (m > 0.0 && lat > factor * m).then(|| SlowReplica {
            replica: id.clone(),
            latency_s: lat,
            peers_median_s: m,
        })
    });
    let first = found.next()?;
    // A second outlier: not one slow replica but a wider slowdown.
    found.next().is_none().then_some(first)
}

/// The replica that has stood out alone in every snapshot of the window's trailing run,
/// with the index of the run's first snapshot; the figures are from the newest snapshot
/// that shows it. A snapshot without a figure for that replica (the gate ejected it, so
/// it served nothing in the rate window) and with nobody else standing out neither
/// confirms nor ends the run, also at the end of the window; one where its peers' median
/// holds it or another replica stands out ends it.
pub fn persisting(window: &[Snapshot], factor: f64) -> Option<(SlowReplica, usize)> {
    let lat = |s: &Snapshot| s.per_replica(names::REPLICA_SERVICE_TIME);
    let (newest_at, newest) = window
        .iter()
        .enumerate()
        .rev()
        .find_map(|(i, s)| outlier(&lat(s), factor).map(|o| (i, o)))?;
    let continues = |s: &Snapshot| {
        let l = lat(s);
        match outlier(&l, factor) {
            Some(o) => o.replica == newest.replica,
            None => !l.contains_key(&newest.replica),
        }
    };
    if !window[newest_at + 1..].iter().all(continues) {
        return None;
    }
    let mut start = newest_at;
    while start > 0 && continues(&window[start - 1]) {
        start -= 1;
    }
    Some((newest, start))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lat(v: &[(&str, f64)]) -> BTreeMap<String, f64> {
        v.iter().map(|(k, x)| (k.to_string(), *x)).collect()
    }

    #[test]
    fn one_replica_five_times_slower_stands_out() {
        let l = lat(&[("a", 0.04), ("b", 0.2), ("c", 0.041), ("d", 0.039)]);
        let s = outlier(&l, 3.0).expect("b is slow");
        assert_eq!(s.replica, "b");
        assert!((s.peers_median_s - 0.04).abs() < 1e-12);
        assert!((s.ratio() - 5.0).abs() < 1e-9);
    }

    #[test]
    fn all_slow_together_is_no_outlier() {
        // A stuck overload: every replica four times its healthy 40 ms, none above its peers.
        let l = lat(&[("a", 0.16), ("b", 0.17), ("c", 0.15), ("d", 0.16)]);
        assert_eq!(outlier(&l, 3.0), None);
    }

    #[test]
    fn two_slow_replicas_are_not_one_slow_replica() {
        let l = lat(&[
            ("a", 0.04),
            ("b", 0.2),
            ("c", 0.2),
            ("d", 0.04),
            ("e", 0.04),
        ]);
        assert_eq!(outlier(&l, 3.0), None);
    }

    #[test]
    fn a_replica_just_under_the_factor_is_not_an_outlier() {
        let l = lat(&[("a", 0.04), ("b", 0.119), ("c", 0.04)]);
        assert_eq!(outlier(&l, 3.0), None);
        let l = lat(&[("a", 0.04), ("b", 0.121), ("c", 0.04)]);
        assert_eq!(outlier(&l, 3.0).map(|s| s.replica), Some("b".into()));
    }

    #[test]
    fn fewer_than_two_figures_or_idle_peers_judge_nobody() {
        assert_eq!(outlier(&lat(&[("a", 1.0)]), 3.0), None);
        assert_eq!(outlier(&lat(&[]), 3.0), None);
        assert_eq!(
            outlier(&lat(&[("a", 0.0), ("b", 0.0), ("c", 1.0)]), 3.0),
            None
        );
    }

    #[test]
    fn two_replicas_the_slower_one_stands_out() {
        let l = lat(&[("a", 0.04), ("b", 0.2)]);
        assert_eq!(outlier(&l, 3.0).map(|s| s.replica), Some("b".into()));
    }

    fn snap(at: u64, v: &[(&str, f64)]) -> Snapshot {
        use crate::metrics::signal::{replica_key, Reading};
        Snapshot {
            at: std::time::UNIX_EPOCH + std::time::Duration::from_secs(at),
            readings: v
                .iter()
                .map(|(r, x)| {
                    let key = replica_key(names::REPLICA_SERVICE_TIME, r);
                    (key, Reading::Value { value: *x })
                })
                .collect(),
        }
    }

    #[test]
    fn the_run_is_where_the_same_replica_has_stood_out() {
        let healthy = [("a", 0.04), ("b", 0.04), ("c", 0.04)];
        let b_slow = [("a", 0.04), ("b", 0.2), ("c", 0.04)];
        let c_slow = [("a", 0.04), ("b", 0.04), ("c", 0.2)];
        let w = vec![
            snap(0, &b_slow),
            snap(1, &healthy),
            snap(2, &c_slow),
            snap(3, &b_slow),
            snap(4, &b_slow),
        ];
        let (s, start) = persisting(&w, 3.0).unwrap();
        assert_eq!((s.replica.as_str(), start), ("b", 3));
        // b ejected at the gate for a while: no figure for b, nobody else out.
        let b_out = [("a", 0.04), ("c", 0.04)];
        let w = vec![
            snap(0, &healthy),
            snap(1, &b_slow),
            snap(2, &b_out),
            snap(3, &b_slow),
        ];
        assert_eq!(persisting(&w, 3.0).map(|(_, i)| i), Some(1));
        // Ejected at the newest snapshot: still b, from its last figure.
        let w = vec![snap(0, &b_slow), snap(1, &b_out)];
        assert_eq!(
            persisting(&w, 3.0).map(|(s, i)| (s.replica, i)),
            Some(("b".into(), 0))
        );
        // Back in line at the newest snapshot: over.
        let w = vec![snap(0, &b_slow), snap(1, &healthy)];
        assert_eq!(persisting(&w, 3.0), None);
        assert_eq!(persisting(&w[..2], 3.0), None);
        assert_eq!(persisting(&[], 3.0), None);
    }

    /// A window of `n` one-second snapshots where `b` is `slow` x its peers and goodput
    /// is `good` of the 60 req/s offered.
    fn window(n: u64, slow: f64, good: f64) -> Vec<Snapshot> {
        use crate::metrics::signal::Reading;
        (0..n)
            .map(|t| {
                let mut s = snap(
                    t,
                    &[("a", 0.04), ("b", 0.04 * slow), ("c", 0.04), ("d", 0.04)],
                );
                for (k, v) in [(names::OFFERED_RATE, 60.0), (names::GOODPUT, 60.0 * good)] {
                    s.readings.insert(k.into(), Reading::Value { value: v });
                }
                s.readings
                    .insert(names::TRIGGER_ACTIVE.into(), Reading::Value { value: 0.0 });
                s
            })
            .collect()
    }

    #[test]
    fn the_verdict_is_slow_replica_only_when_it_lasts_and_the_rest_keep_up() {
        use crate::detect::{detect, DetectorConfig, VerdictKind};
        let cfg = DetectorConfig::default(); // persist 10 s, factor 3
        let v = detect(&window(12, 5.0, 0.95), &cfg);
        assert_eq!(v.verdict, VerdictKind::SlowReplica, "{}", v.summary);
        assert_eq!(
            v.slow_replica.as_ref().map(|s| s.replica.as_str()),
            Some("b")
        );
        assert_eq!(v.verdict.exit().code(), 13);
        // Not for long enough yet: the service keeps up, so healthy.
        let v = detect(&window(5, 5.0, 0.95), &cfg);
        assert_eq!(v.verdict, VerdictKind::Healthy, "{}", v.summary);
        // Goodput far below the load: not "the rest are healthy"; the stuck rules judge.
        let v = detect(&window(12, 5.0, 0.2), &cfg);
        assert_ne!(v.verdict, VerdictKind::SlowReplica, "{}", v.summary);
        // Everyone equally slow: nobody stands out.
        let v = detect(&window(12, 1.0, 0.95), &cfg);
        assert_eq!(v.verdict, VerdictKind::Healthy, "{}", v.summary);
    }
}
