//! What a run saw: the runbook's signals as the engine read them (the detection window,
//! every check, every live sample between checks) and the gate's limit as each gate
//! action found and left it. It is kept beside the run's journal
//! (`<run>.observed.json`, [`path_for`]) and mirrored with it, so `recover report` can
//! draw the run afterwards from what the controller measured, not from what a dashboard
//! kept.
//!
//! Bounded, so a run of any length fits the journal mirror's per-run value: at most
//! [`MAX_POINTS`] points of at most [`MAX_SIGNALS`] signals, and [`MAX_LIMITS`] limit
//! changes. When the points are full every other one is dropped and from then on only
//! one observation in `stride` is kept (the stride doubles each time): the whole run stays
//! covered, at an even, coarser resolution, and the file says which (`stride`, `seen`).
//! Worst case about [`MAX_BYTES`] of JSON (a unit test checks it).

use crate::metrics::signal::Snapshot;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The most points kept.
pub const MAX_POINTS: usize = 500;
/// The most signals (columns) kept; readings of further names are counted, not kept.
pub const MAX_SIGNALS: usize = 32;
/// The most limit changes kept; later ones are counted, not kept.
pub const MAX_LIMITS: usize = 200;
/// What the bounds above come to at worst, as JSON: under the journal mirror's 512 KiB
/// per run value.
pub const MAX_BYTES: usize = 480 * 1024;

/// The series of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Observed {
    pub run_id: String,
    /// One observation in `stride` is kept (1 until [`MAX_POINTS`] was reached).
    pub stride: u64,
    /// Observations offered, kept or not.
    pub seen: u64,
    /// Signal names: the columns of every point's `v`.
    pub signals: Vec<String>,
    /// Readings of names past [`MAX_SIGNALS`], not kept.
    #[serde(default)]
    pub signals_dropped: u64,
    pub points: Vec<Point>,
    /// The gate's limit as gate actions found and left it, in order.
    pub limits: Vec<LimitPoint>,
    /// Limit changes past [`MAX_LIMITS`], not kept.
    #[serde(default)]
    pub limits_dropped: u64,
}

/// The signals at one instant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// Seconds since the Unix epoch.
    pub t: f64,
    /// One value per signal column (`null`: the signal had no value then); a point taken
    /// before a column appeared is shorter.
    pub v: Vec<Option<f64>>,
}

/// The gate's limit from an instant on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LimitPoint {
    /// Seconds since the Unix epoch.
    pub t: f64,
    /// Admitted requests/s; `null` with no `unknown`: unlimited.
    pub rate_per_s: Option<f64>,
    /// Why the limit is not known from then on (the gate did not answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unknown: Option<String>,
}

/// The observed series of `run_id` in the run directory `dir`.
pub fn path_for(dir: &Path, run_id: &str) -> PathBuf {
    dir.join(format!("{run_id}.observed.json"))
}

pub fn epoch_s(t: SystemTime) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| (d.as_secs_f64() * 1000.0).round() / 1000.0)
        .unwrap_or(0.0)
}

impl Observed {
    pub fn new(run_id: &str) -> Observed {
        Observed {
            run_id: run_id.to_string(),
            stride: 1,
            seen: 0,
            signals: Vec::new(),
            signals_dropped: 0,
            points: Vec::new(),
            limits: Vec::new(),
            limits_dropped: 0,
        }
    }

    /// Keep `snap` if it falls on the stride; thin the points when they are full.
    pub fn push(&mut self, snap: &Snapshot) {
        let n = self.seen;
        self.seen += 1;
        if !n.is_multiple_of(self.stride) {
            return;
        }
        let mut v = vec![None; self.signals.len()];
        for (name, reading) in &snap.readings {
            let col = match self.signals.iter().position(|s| s == name) {
                Some(i) => i,
                None if self.signals.len() < MAX_SIGNALS => {
                    self.signals.push(name.clone());
                    v.push(None);
                    self.signals.len() - 1
                }
                None => {
                    self.signals_dropped += 1;
                    continue;
                }
            };
            v[col] = reading.value();
        }
        self.points.push(Point {
            t: epoch_s(snap.at),
            v,
        });
        if self.points.len() >= MAX_POINTS {
            let kept: Vec<Point> = self.points.drain(..).step_by(2).collect();
            self.points = kept;
            self.stride *= 2;
        }
    }

    /// The limit from `at` on: `Ok(rate)` (None: unlimited) or `Err(why unknown)`.
    pub fn limit(&mut self, at: SystemTime, limit: Result<Option<f64>, String>) {
        if self.limits.len() >= MAX_LIMITS {
            self.limits_dropped += 1;
            return;
        }
        let (rate_per_s, unknown) = match limit {
            Ok(r) => (r, None),
            Err(why) => (None, Some(why)),
        };
        if let Some(last) = self.limits.last() {
            if last.rate_per_s == rate_per_s && last.unknown == unknown {
                return;
            }
        }
        self.limits.push(LimitPoint {
            t: epoch_s(at),
            rate_per_s,
            unknown,
        });
    }

    /// The column of `signal`, if it was seen.
    pub fn column(&self, signal: &str) -> Option<usize> {
        self.signals.iter().position(|s| s == signal)
    }

    /// `signal` at point `p` (None: no value then, or never seen).
    pub fn value(&self, p: &Point, signal: &str) -> Option<f64> {
        self.column(signal)
            .and_then(|c| p.v.get(c).copied().flatten())
    }

    /// Write the series to `path` (atomically: a reader sees the old or the new).
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        let json = serde_json::to_vec(self).map_err(std::io::Error::other)?;
        crate::util::atomic_file::write_atomic(path, &json)
    }

    /// Read a series written by [`Observed::write`].
    pub fn read(path: &Path) -> Result<Observed, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::signal::Reading;
    use std::time::Duration;

    fn snap(i: u64, signals: usize) -> Snapshot {
        let at = SystemTime::UNIX_EPOCH + Duration::from_millis(1_780_000_000_000 + i * 537);
        let readings = (0..signals)
            .map(|s| {
                // Values as long as JSON writes them: 17 significant digits, signed.
                let value = -1.234_567_890_123_456_7e-7 * (1.0 + (i * 31 + s as u64) as f64);
                (
                    format!("signal_with_a_long_name_{s:02}{{replica-{s}}}"),
                    Reading::Value { value },
                )
            })
            .collect();
        Snapshot { at, readings }
    }

    #[test]
    fn a_long_run_keeps_its_whole_span_within_the_bounds() {
        let mut o = Observed::new("20260101T000000Z-abcd");
        let n = 100_000;
        for i in 0..n {
            o.push(&snap(i, MAX_SIGNALS + 8));
            o.limit(
                SystemTime::UNIX_EPOCH + Duration::from_secs(i),
                Ok(Some(i as f64 + 0.123_456_789_012_345)),
            );
        }
        assert!(o.points.len() < MAX_POINTS, "{}", o.points.len());
        assert!(o.points.len() > MAX_POINTS / 2 - 1, "{}", o.points.len());
        assert_eq!(o.signals.len(), MAX_SIGNALS);
        assert!(o.signals_dropped > 0);
        assert!(o.stride.is_power_of_two() && o.stride > 1);
        assert_eq!(o.seen, n);
        // Even resolution from the first observation to within one stride of the last.
        assert_eq!(o.points[0].t, epoch_s(snap(0, 1).at));
        let last = o.points.last().unwrap().t;
        let end = epoch_s(snap(n - 1, 1).at);
        assert!(end - last <= o.stride as f64 * 0.537 + 1e-6, "{last} {end}");
        let steps: Vec<f64> = o.points.windows(2).map(|w| w[1].t - w[0].t).collect();
        assert!(steps.iter().all(|s| (s - steps[0]).abs() < 1e-3), "uneven");
        assert_eq!(o.limits.len(), MAX_LIMITS);
        assert_eq!(o.limits_dropped, n - MAX_LIMITS as u64);
        let bytes = serde_json::to_vec(&o).unwrap().len();
        assert!(bytes <= MAX_BYTES, "{bytes} bytes");
        const { assert!(MAX_BYTES <= crate::platform::kube::journal::MAX_RUN_BYTES) };
    }

    #[test]
    fn a_short_run_keeps_every_observation_and_reads_back() {
        let mut o = Observed::new("r");
        for i in 0..10 {
            o.push(&snap(i, 3));
        }
        o.limit(SystemTime::UNIX_EPOCH, Ok(None));
        o.limit(SystemTime::UNIX_EPOCH, Ok(None));
        o.limit(
            SystemTime::UNIX_EPOCH,
            Err("the gate did not answer".into()),
        );
        assert_eq!((o.points.len(), o.stride, o.limits.len()), (10, 1, 2));
        let dir = tempfile::tempdir().unwrap();
        let path = path_for(dir.path(), "r");
        o.write(&path).unwrap();
        assert_eq!(Observed::read(&path).unwrap(), o);
        let p = &o.points[3];
        assert_eq!(o.value(p, "signal_with_a_long_name_01{replica-1}"), p.v[1]);
        assert_eq!(o.value(p, "nothing"), None);
    }
}
