//! The one recorder of every scenario: rows of a series by time, the latency percentiles
//! of a set of calls, and a figure's median and range across seeds. Kept apart from the
//! models so every report reads its numbers the same way.

use serde::Serialize;

/// Rows of a series, one per `step` of time (a second in the scenario's unit, say): the
/// row holding time `t` is `t / step`, created on first use.
#[derive(Debug, Clone)]
pub struct Series<T> {
    step: u64,
    rows: Vec<T>,
}

impl<T: Default> Series<T> {
    /// Rows `step` apart (at least one unit), `rows` of them to start with.
    pub fn new(step: u64, rows: usize) -> Self {
        Series {
            step: step.max(1),
            rows: (0..rows).map(|_| T::default()).collect(),
        }
    }

    /// The row holding time `t`.
    #[inline]
    pub fn at(&mut self, t: u64) -> &mut T {
        let i = (t / self.step) as usize;
        if i < self.rows.len() {
            return &mut self.rows[i];
        }
        self.grow_to(i)
    }

    /// Rows up to `i`, made on first use (rare: a series is sized for its run).
    #[cold]
    #[inline(never)]
    fn grow_to(&mut self, i: usize) -> &mut T {
        self.rows.resize_with(i + 1, T::default);
        &mut self.rows[i]
    }

    pub fn rows(&self) -> &[T] {
        &self.rows
    }

    pub fn into_rows(self) -> Vec<T> {
        self.rows
    }
}

/// Nearest-rank percentile of sorted values (0 when empty).
pub fn percentile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Latency of a set of calls, as their callers saw it (a failed call counts with the time
/// it took to fail).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Latency {
    pub calls: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub failed: u64,
}

impl Latency {
    /// From each call's latency in microseconds and whether it failed.
    pub fn of(mut us_failed: Vec<(u64, bool)>) -> Latency {
        us_failed.sort_unstable();
        let v: Vec<u64> = us_failed.iter().map(|x| x.0).collect();
        let ms = |q: f64| percentile(&v, q) as f64 / 1000.0;
        Latency {
            calls: v.len() as u64,
            p50_ms: ms(0.5),
            p99_ms: ms(0.99),
            max_ms: v.last().copied().unwrap_or(0) as f64 / 1000.0,
            failed: us_failed.iter().filter(|x| x.1).count() as u64,
        }
    }
}

/// How a run came out of its trouble, read off its series by one rule in every model that
/// measures it. Times are in the series' periods: a second, or a tick of a tick model
/// that takes one tick as one second.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Recovery {
    /// Most attempts arriving in one period.
    pub peak_calls: u64,
    /// Calls given up (out of attempts, or of retry budget).
    pub given_up: u64,
    /// From the reference until the first period in which every arriving attempt was
    /// served.
    pub settled_s: Option<f64>,
    /// Failure-free for at least the settle window at the end of the run.
    pub recovered: bool,
    /// From the reference until the final failure-free stretch began.
    pub time_to_recover_s: Option<f64>,
}

impl Recovery {
    /// From a series: each period's arriving attempts and those of them that failed; the
    /// period the times count from (`reference`), and how many failure-free periods at
    /// the end make a recovery (`settle`, at least one).
    pub fn of<T>(
        series: &[T],
        arriving: impl Fn(&T) -> u64,
        failing: impl Fn(&T) -> u64,
        given_up: u64,
        reference: usize,
        settle: usize,
    ) -> Recovery {
        let from = reference.min(series.len());
        let settled = series[from..].iter().position(|s| failing(s) == 0);
        let last_bad = series.iter().rposition(|s| failing(s) > 0);
        let clean_from = last_bad.map_or(0, |i| i + 1).max(from);
        let recovered = series.len() - clean_from >= settle.max(1);
        Recovery {
            peak_calls: series.iter().map(arriving).max().unwrap_or(0),
            given_up,
            settled_s: settled.map(|i| i as f64),
            recovered,
            time_to_recover_s: recovered.then(|| (clean_from - from) as f64),
        }
    }
}

/// One figure over several seeds: its median and its range. `None` (never, or nothing to
/// measure) counts as larger than any number.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    /// The lower of the two middle values for an even count: always one seed's figure.
    pub median: Option<f64>,
    pub min: Option<f64>,
    pub max: Option<f64>,
}

impl Spread {
    pub fn of(values: &[Option<f64>]) -> Spread {
        let mut v = values.to_vec();
        v.sort_by(|a, b| match (a, b) {
            (Some(x), Some(y)) => x.total_cmp(y),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => std::cmp::Ordering::Equal,
        });
        let at = |i: usize| v.get(i).copied().flatten();
        Spread {
            median: at(v.len().saturating_sub(1) / 2),
            min: at(0),
            max: at(v.len().saturating_sub(1)),
        }
    }

    /// The same figure in every seed.
    pub fn is_constant(&self) -> bool {
        self.min == self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 0.5), 50);
        assert_eq!(percentile(&v, 0.99), 99);
        assert_eq!(percentile(&[], 0.5), 0);
    }

    #[test]
    fn series_rows_grow_to_the_time_asked_for() {
        let mut s: Series<u32> = Series::new(10, 1);
        *s.at(3) += 1;
        *s.at(25) += 2;
        assert_eq!(s.rows(), &[1, 0, 2]);
    }

    fn recovery(fails: &[u64], reference: usize, settle: usize) -> Recovery {
        Recovery::of(fails, |_| 1, |f| *f, 0, reference, settle)
    }

    #[test]
    fn recovery_starts_after_the_last_failing_period() {
        let r = recovery(&[0, 5, 5, 0, 3, 0, 0, 0, 0], 1, 3);
        assert_eq!(
            (r.settled_s, r.recovered, r.time_to_recover_s),
            (Some(2.0), true, Some(4.0))
        );
    }

    #[test]
    fn a_short_clean_tail_is_not_recovery() {
        let r = recovery(&[0, 5, 5, 5, 5, 5, 0, 0], 1, 3);
        assert_eq!(
            (r.settled_s, r.recovered, r.time_to_recover_s),
            (Some(5.0), false, None)
        );
    }

    #[test]
    fn spread_counts_never_as_the_largest() {
        let s = Spread::of(&[Some(3.0), None, Some(1.0), Some(2.0)]);
        assert_eq!((s.median, s.min, s.max), (Some(2.0), Some(1.0), None));
        let s = Spread::of(&[None, None, Some(1.0)]);
        assert_eq!(s.median, None);
        assert!(Spread::of(&[Some(4.0), Some(4.0)]).is_constant());
    }
}
