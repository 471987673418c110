//! The warm fractions over the rate window, and the cold multiplier a cost read over that
//! window carries.
//!
//! Why it exists: the cost candidates for k are rates over the built-in signals' rate
//! window, and a service warming as it works was colder through most of that window than
//! its gauge says at the end. Which mean of the cold multiplier `m(w) = 1 + (f - 1)(1 - w)`
//! such a rate carries depends on how the window's completions spread over it:
//!
//! - saturated (requests queued, every slot busy), requests finish at `C / (k m(t))` for a
//!   healthy capacity `C`, so the window's `T` seconds hold `C / k x integral of 1 / m dt`
//!   completions. Capacity over the completion rate reads `k x T / integral of 1 / m dt`,
//!   and so does the service time over the healthy one (busy slot-seconds over
//!   completions, by Little's law the same ratio): `k` times the *harmonic* time mean of
//!   `m`. The multiplier at the mean warm fraction is the arithmetic time mean, higher
//!   whenever the warmth moves within the window (the warm seconds finish more requests
//!   than the cold ones), so dividing by it read k low: 15-18% on grid points detected as
//!   the service went from cold to warm within the window.
//! - calm (nothing queued), completions follow the demand, even over the window, and the
//!   service time carries the arithmetic time mean of `m`: `m` at the mean warm fraction.
//!
//! Both means are time integrals over the scrapes the window holds (the trapezoid rule),
//! since a rate covers the time from the window's first scrape to its last.

use crate::metrics::signal::{names, Snapshot};

/// The service's warm fractions over a rate window: (seconds since the first scrape, warm
/// fraction), oldest first, never empty.
#[derive(Debug, Clone, PartialEq)]
pub struct Warmth {
    samples: Vec<(f64, f64)>,
}

impl Warmth {
    /// One instant: the window holds a single warm fraction.
    pub fn at(w: f64) -> Self {
        Warmth {
            samples: vec![(0.0, w.clamp(0.0, 1.0))],
        }
    }

    /// The warm fractions of the scrapes in the built-in signals' rate window ending at
    /// `last` (the window oldest first), or `None` when `last` has none.
    pub fn over_rate_window(window: &[Snapshot], last: &Snapshot) -> Option<Self> {
        let now = last.get(names::WARM_FRACTION)?;
        let scrapes = super::k::rate_window(window, last);
        let first = scrapes.first().map_or(last.at, |s| s.at);
        let samples: Vec<(f64, f64)> = scrapes
            .iter()
            .filter_map(|s| {
                let w = s.get(names::WARM_FRACTION)?;
                let t = s.at.duration_since(first).unwrap_or_default();
                Some((t.as_secs_f64(), w.clamp(0.0, 1.0)))
            })
            .collect();
        Some(if samples.is_empty() {
            Warmth::at(now)
        } else {
            Warmth { samples }
        })
    }

    /// The time mean of `g(w)` over the samples (trapezoids between scrapes); with one
    /// sample, or all at one instant, `g` of the last.
    fn time_mean(&self, g: impl Fn(f64) -> f64) -> f64 {
        let last = self.samples[self.samples.len() - 1];
        let span = last.0 - self.samples[0].0;
        if span <= 0.0 {
            return g(last.1);
        }
        let area: f64 = self
            .samples
            .windows(2)
            .map(|p| (p[1].0 - p[0].0) * (g(p[0].1) + g(p[1].1)) / 2.0)
            .sum();
        area / span
    }

    /// The time mean of the warm fraction over the window.
    pub fn mean(&self) -> f64 {
        self.time_mean(|w| w)
    }

    /// The cold multiplier a rate over the window carries for the cold factor `f`: the
    /// harmonic time mean of `m(w)` while `saturated`, else `m` at the mean warm fraction
    /// (see the module doc).
    pub fn multiplier(&self, f: f64, saturated: bool) -> f64 {
        let m = |w: f64| 1.0 + (f - 1.0) * (1.0 - w);
        if saturated {
            1.0 / self.time_mean(|w| 1.0 / m(w))
        } else {
            m(self.mean())
        }
    }

    /// What the multiplier was read from, for the evidence.
    pub fn describe(&self, saturated: bool) -> String {
        let (first, last) = (self.samples[0].1, self.samples[self.samples.len() - 1].1);
        if self.samples.len() == 1 || (first - last).abs() < 1e-9 && !saturated {
            return format!("warm fraction {:.2}", self.mean());
        }
        if saturated {
            format!(
                "harmonic time mean over the rate window while queued, warm fraction {first:.2} to {last:.2}, mean {:.2}",
                self.mean()
            )
        } else {
            format!(
                "warm fraction {:.2}, the mean over the rate window",
                self.mean()
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::signal::Reading;
    use std::time::{Duration, UNIX_EPOCH};

    fn at(ms: u64, w: f64) -> Snapshot {
        Snapshot {
            at: UNIX_EPOCH + Duration::from_millis(1_000_000 + ms),
            readings: [(
                names::WARM_FRACTION.to_string(),
                Reading::Value { value: w },
            )]
            .into_iter()
            .collect(),
        }
    }

    #[test]
    fn the_window_is_the_rate_window_and_its_mean_is_over_time() {
        // 0.0 at -10 s is outside the 5 s window; 0.2, 0.4 and 0.9 at -4, -2 and 0 s:
        // (2 x 0.3 + 2 x 0.65) / 4.
        let window = vec![at(0, 0.0), at(6_000, 0.2), at(8_000, 0.4), at(10_000, 0.9)];
        let w = Warmth::over_rate_window(&window, &window[3]).unwrap();
        assert!((w.mean() - 0.475).abs() < 1e-12, "{w:?}");
        let cold = Snapshot {
            readings: Default::default(),
            ..window[3].clone()
        };
        assert_eq!(Warmth::over_rate_window(&window, &cold), None);
    }

    /// Cold factor 3, warming linearly from 0 to 1 over the window: m runs from 3 to 1,
    /// its arithmetic mean is 2 and its harmonic mean 2 / ln 3 = 1.82. Saturated, the
    /// window finishes requests at C / (k m(t)); the harmonic mean is what their cost
    /// carries, calm the arithmetic one.
    #[test]
    fn saturated_the_multiplier_is_the_harmonic_time_mean() {
        let window: Vec<Snapshot> = (0..=100).map(|i| at(i * 50, i as f64 / 100.0)).collect();
        let w = Warmth::over_rate_window(&window, &window[100]).unwrap();
        assert!((w.multiplier(3.0, false) - 2.0).abs() < 1e-9);
        let harmonic = 2.0 / 3f64.ln();
        assert!((w.multiplier(3.0, true) - harmonic).abs() < 1e-3);
        // One warm fraction all window long: both means are m at it.
        let still = Warmth::at(0.5);
        assert_eq!(still.multiplier(3.0, true), 2.0);
        assert_eq!(still.multiplier(3.0, false), 2.0);
    }
}
