//! Outlier ejection by latency, the way Envoy ejects hosts: every interval, a replica
//! whose latency over that interval (mean or p99) is more than `factor` times the median
//! of its peers', with at least `min_requests` behind both figures, is taken out of the
//! rotation. The ejection lasts `base_ejection` times the number of times in a row it has
//! been ejected (capped), so a replica that stays bad stays out longer; never more than
//! `max_ejected_percent` of the replicas are out at once (at least one may go, at least
//! one always stays). Back in, its weight ramps from 10% to 100% over `ramp`, so a replica
//! still cold or still slow takes a small share first.
//!
//! Why latency and not health checks: a replica five times slower still answers its
//! health check, and behind round robin it makes p99 climb without bound.
//!
//! Pure: times are milliseconds on the caller's clock, and the caller owns the state, so
//! the gate (real clock, atomics) and the simulator (simulated clock) share it.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// The readmitted replica's starting share of its normal traffic (Envoy's slow start
/// default minimum weight is 10% as well).
pub const MIN_WEIGHT: f64 = 0.1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum LatencyStat {
    #[default]
    Mean,
    P99,
}

impl LatencyStat {
    pub fn name(self) -> &'static str {
        match self {
            LatencyStat::Mean => "mean",
            LatencyStat::P99 => "p99",
        }
    }
}

impl fmt::Display for LatencyStat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for LatencyStat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "mean" => Ok(LatencyStat::Mean),
            "p99" => Ok(LatencyStat::P99),
            _ => Err(format!("{s:?} is not one of mean, p99")),
        }
    }
}

/// When to eject and for how long. `Default` is what `recover gate` starts with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OutlierConfig {
    pub stat: LatencyStat,
    /// Length of the latency window, and how often replicas are judged.
    #[serde(with = "crate::util::duration::serde_human")]
    pub interval: Duration,
    /// Eject when the replica's latency exceeds this multiple of its peers' median.
    pub factor: f64,
    /// Requests in the window a replica needs to be judged, or to count as a peer.
    pub min_requests: u64,
    /// First ejection time; the n-th in a row lasts n times this.
    #[serde(with = "crate::util::duration::serde_human")]
    pub base_ejection: Duration,
    #[serde(with = "crate::util::duration::serde_human")]
    pub max_ejection: Duration,
    /// Share of the replicas that may be out at once (at least one, never all).
    pub max_ejected_percent: u32,
    /// Time for a readmitted replica's weight to ramp from 10% to 100%.
    #[serde(with = "crate::util::duration::serde_human")]
    pub ramp: Duration,
}

impl Default for OutlierConfig {
    fn default() -> Self {
        OutlierConfig {
            stat: LatencyStat::Mean,
            interval: Duration::from_secs(2),
            factor: 3.0,
            min_requests: 5,
            base_ejection: Duration::from_secs(10),
            max_ejection: Duration::from_secs(300),
            max_ejected_percent: 25,
            ramp: Duration::from_secs(10),
        }
    }
}

impl OutlierConfig {
    /// Refuse settings that cannot work, naming the setting.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        if self.interval.is_zero() {
            return Err(("interval", "must be more than 0".into()));
        }
        if !(self.factor.is_finite() && self.factor > 1.0) {
            return Err(("factor", "must be a number above 1".into()));
        }
        if self.min_requests == 0 {
            return Err(("min_requests", "must be at least 1".into()));
        }
        if self.base_ejection.is_zero() {
            return Err(("base_ejection", "must be more than 0".into()));
        }
        if self.max_ejection < self.base_ejection {
            return Err(("max_ejection", "must be at least base_ejection".into()));
        }
        if self.max_ejected_percent > 100 {
            return Err(("max_ejected_percent", "must be 0 to 100".into()));
        }
        Ok(())
    }
}

/// What one replica did in the last window.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct WindowStat {
    /// Requests that ended in the window (answered, or timed out).
    pub requests: u64,
    /// The configured statistic over them, in milliseconds.
    pub latency_ms: f64,
}

/// One replica's ejection state, kept by the caller between evaluations.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Health {
    /// Out until this moment; also the moment its readmission ramp starts.
    pub ejected_until_ms: Option<u64>,
    /// Still counted as ejected (the readmission has not been reported yet).
    pub out: bool,
    /// Ejections in a row: the next one lasts this + 1 times the base. Falls by one for
    /// every window the replica is judged healthy.
    pub multiplier: u32,
    /// Ejections since start.
    pub ejections: u64,
}

/// A change an evaluation made.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Event {
    Ejected {
        replica: usize,
        for_ms: u64,
        latency_ms: f64,
        peers_median_ms: f64,
    },
    Readmitted {
        replica: usize,
    },
}

/// How many of `n` replicas may be out at once.
pub fn max_ejected(n: usize, percent: u32) -> usize {
    if n < 2 || percent == 0 {
        return 0;
    }
    (n * percent as usize / 100).max(1).min(n - 1)
}

/// The replica's share of its normal traffic at `now_ms`: 0 while ejected, ramping from
/// [`MIN_WEIGHT`] to 1 over `ramp_ms` after the ejection ends, 1 otherwise.
pub fn weight(h: &Health, now_ms: u64, ramp_ms: u64) -> f64 {
    match h.ejected_until_ms {
        None => 1.0,
        Some(until) if now_ms < until => 0.0,
        Some(until) => {
            let since = now_ms - until;
            if ramp_ms == 0 || since >= ramp_ms {
                1.0
            } else {
                (since as f64 / ramp_ms as f64).max(MIN_WEIGHT)
            }
        }
    }
}

/// Judge every replica on its last window: readmit those whose time is up, eject the
/// outliers (worst first) while the share allows. `windows` and `health` are indexed by
/// replica and must be the same length.
pub fn evaluate(
    cfg: &OutlierConfig,
    now_ms: u64,
    windows: &[WindowStat],
    health: &mut [Health],
) -> Vec<Event> {
    let mut events = Vec::new();
    for (i, h) in health.iter_mut().enumerate() {
        if h.out && h.ejected_until_ms.is_some_and(|u| u <= now_ms) {
            h.out = false;
            events.push(Event::Readmitted { replica: i });
        }
    }
    let judged: Vec<usize> = (0..windows.len().min(health.len()))
        .filter(|&i| !health[i].out && windows[i].requests >= cfg.min_requests)
        .collect();
    let mut outliers = Vec::new();
    for &i in &judged {
        let mut peers: Vec<f64> = judged
            .iter()
            .filter(|&&j| j != i)
            .map(|&j| windows[j].latency_ms)
            .collect();
        let Some(median) = median(&mut peers) else {
            continue;
        };
        let latency = windows[i].latency_ms;
        if median > 0.0 && latency > cfg.factor * median {
            outliers.push((latency / median, i, median));
        } else {
            let h = &mut health[i];
            h.multiplier = h.multiplier.saturating_sub(1);
        }
    }
    // Worst first; equal ratios by index, so the result never depends on sort stability.
    outliers.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let allowed = max_ejected(health.len(), cfg.max_ejected_percent);
    let already_out = health.iter().filter(|h| h.out).count();
    let base = cfg.base_ejection.as_millis() as u64;
    let cap = (cfg.max_ejection.as_millis() as u64).max(base);
    let room = allowed.saturating_sub(already_out);
    for (_, i, median) in outliers.into_iter().take(room) {
        let h = &mut health[i];
        h.multiplier = h.multiplier.saturating_add(1);
        let for_ms = base.saturating_mul(u64::from(h.multiplier)).min(cap);
        h.ejected_until_ms = Some(now_ms + for_ms);
        h.out = true;
        h.ejections += 1;
        events.push(Event::Ejected {
            replica: i,
            for_ms,
            latency_ms: windows[i].latency_ms,
            peers_median_ms: median,
        });
    }
    events
}

/// The median (the mean of the middle two for an even count); `None` when empty.
fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    Some(if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(requests: u64, latency_ms: f64) -> WindowStat {
        WindowStat {
            requests,
            latency_ms,
        }
    }

    fn cfg() -> OutlierConfig {
        OutlierConfig::default()
    }

    #[test]
    fn a_replica_five_times_slower_than_its_peers_is_ejected() {
        let mut h = [Health::default(); 4];
        let windows = [w(30, 90.0), w(6, 450.0), w(30, 95.0), w(30, 88.0)];
        let ev = evaluate(&cfg(), 1_000, &windows, &mut h);
        assert_eq!(
            ev,
            vec![Event::Ejected {
                replica: 1,
                for_ms: 10_000,
                latency_ms: 450.0,
                peers_median_ms: 90.0
            }]
        );
        assert_eq!(h[1].ejected_until_ms, Some(11_000));
        assert!(h[1].out);
        assert_eq!(weight(&h[1], 5_000, 10_000), 0.0);
    }

    #[test]
    fn not_judged_below_the_minimum_request_count_or_the_factor() {
        let mut h = [Health::default(); 4];
        let few = [w(30, 90.0), w(4, 900.0), w(30, 95.0), w(30, 88.0)];
        assert!(evaluate(&cfg(), 0, &few, &mut h).is_empty());
        let close = [w(30, 90.0), w(30, 260.0), w(30, 95.0), w(30, 88.0)];
        assert!(evaluate(&cfg(), 0, &close, &mut h).is_empty());
        // Peers without enough requests do not count: no peers, no median, no verdict.
        let alone = [w(30, 900.0), w(0, 0.0), w(1, 1.0), w(0, 0.0)];
        assert!(evaluate(&cfg(), 0, &alone, &mut h).is_empty());
    }

    #[test]
    fn never_more_than_the_share_and_the_worst_goes_first() {
        let mut h = [Health::default(); 4];
        let two_slow = [w(30, 90.0), w(30, 500.0), w(30, 900.0), w(30, 90.0)];
        let ev = evaluate(&cfg(), 0, &two_slow, &mut h);
        assert_eq!(ev.len(), 1, "{ev:?}");
        assert!(matches!(ev[0], Event::Ejected { replica: 2, .. }));
        // Still out: replica 1 stays in although it is an outlier too.
        let ev = evaluate(&cfg(), 2_000, &two_slow, &mut h);
        assert!(ev.is_empty(), "{ev:?}");
        assert_eq!(max_ejected(4, 25), 1);
        assert_eq!(max_ejected(2, 25), 1);
        assert_eq!(max_ejected(10, 25), 2);
        assert_eq!(max_ejected(1, 100), 0);
        assert_eq!(max_ejected(3, 100), 2);
        assert_eq!(max_ejected(4, 0), 0);
    }

    #[test]
    fn ejection_time_grows_with_repeats_is_capped_and_decays_when_healthy() {
        let c = OutlierConfig {
            max_ejection: Duration::from_secs(25),
            ..cfg()
        };
        let slow = [w(30, 90.0), w(30, 500.0), w(30, 90.0), w(30, 90.0)];
        let healthy = [w(30, 90.0), w(30, 92.0), w(30, 90.0), w(30, 90.0)];
        let mut h = [Health::default(); 4];
        let mut now = 0;
        let mut times = Vec::new();
        for _ in 0..3 {
            let ev = evaluate(&c, now, &slow, &mut h);
            let Some(Event::Ejected { for_ms, .. }) = ev.last() else {
                panic!("{ev:?}")
            };
            times.push(*for_ms);
            now += for_ms;
            // Readmitted at the next evaluation after its time is up.
            let ev = evaluate(&c, now, &[WindowStat::default(); 4], &mut h);
            assert_eq!(ev, vec![Event::Readmitted { replica: 1 }]);
        }
        assert_eq!(times, vec![10_000, 20_000, 25_000]);
        assert_eq!(h[1].ejections, 3);
        // Three healthy windows bring the multiplier back to 0.
        for _ in 0..3 {
            assert!(evaluate(&c, now, &healthy, &mut h).is_empty());
        }
        assert_eq!(h[1].multiplier, 0);
    }

    #[test]
    fn readmission_ramps_the_weight() {
        let h = Health {
            ejected_until_ms: Some(10_000),
            ..Health::default()
        };
        assert_eq!(weight(&h, 9_999, 10_000), 0.0);
        assert_eq!(weight(&h, 10_000, 10_000), MIN_WEIGHT);
        assert_eq!(weight(&h, 15_000, 10_000), 0.5);
        assert_eq!(weight(&h, 20_000, 10_000), 1.0);
        assert_eq!(weight(&Health::default(), 0, 10_000), 1.0);
        assert_eq!(weight(&h, 10_001, 0), 1.0);
    }

    #[test]
    fn settings_are_checked() {
        assert!(cfg().check().is_ok());
        let bad = OutlierConfig {
            factor: 1.0,
            ..cfg()
        };
        assert_eq!(bad.check().unwrap_err().0, "factor");
        let bad = OutlierConfig {
            max_ejection: Duration::from_secs(1),
            ..cfg()
        };
        assert_eq!(bad.check().unwrap_err().0, "max_ejection");
    }
}
