//! What a continuous-model run produced: the per-second series and the summary a user
//! asks about (did it recover, how fast, how bad was the peak). The recovery analysis is a
//! pure function of the series so tests and `--compare` read it the same way.

use serde::Serialize;

/// One simulated second.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Second {
    /// Start of the second, in seconds since the run began.
    pub t: u32,
    /// Attempts arriving at the edge (first attempts + retries).
    pub arriving: u64,
    pub first: u64,
    pub retries: u64,
    /// Turned away fast: by the gate, by shedding, or refused while down.
    pub rejected: u64,
    /// Answered within the client timeout (goodput).
    pub useful: u64,
    /// Served after the client had left (wasted work).
    pub abandoned: u64,
    /// Attempts whose client timed out.
    pub timeouts: u64,
    /// Polls given up (max attempts or retry budget).
    pub given_up: u64,
    /// Attempts sent in this second that failed (rejected, or timed out later).
    pub sent_failed: u64,
    /// Server queue depth at the end of the second.
    pub queue: u64,
    /// Clients whose current poll has failed at least once, at the end of the second.
    pub in_retry: u64,
    /// Useful requests per second the server can do right now (cold, overloaded: lower).
    pub capacity: f64,
    /// The gate's rate limit, if any.
    pub gate_rate: Option<f64>,
}

impl Second {
    /// Attempts sent in this second that were not served in time: the second is clean
    /// when every call arriving in it was served.
    pub fn failures(&self) -> u64 {
        self.sent_failed
    }
}

/// Calls (polls) accounted for: every poll started is served, given up or still pending.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    pub calls: u64,
    pub served: u64,
    pub given_up: u64,
    pub pending: u64,
    pub attempts: u64,
    pub abandoned_work: u64,
}

/// The summary and series of a `config-deploy`-style run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SystemReport {
    pub scenario: &'static str,
    pub seed: u64,
    /// Most attempts arriving in one second.
    pub peak_calls: u64,
    pub given_up: u64,
    /// Seconds from the reference (trigger end, or the procedure start) until the first
    /// second in which every arriving attempt was served.
    pub settled_s: Option<f64>,
    /// Failure-free for at least the settle window at the end of the run.
    pub recovered: bool,
    /// Seconds from the reference until the final failure-free stretch began.
    pub time_to_recover_s: Option<f64>,
    /// What the times are measured from: "trigger_end" or "plan_start".
    pub reference: &'static str,
    pub reference_s: f64,
    /// Procedure relapses (0 without a plan).
    pub relapses: u32,
    pub totals: Totals,
    pub series: Vec<Second>,
}

/// (settled_s, recovered, time_to_recover_s) from a series; `reference_s` is where the
/// clock starts, `settle_s` how long the final clean stretch must be.
pub fn analyse(
    series: &[Second],
    reference_s: u32,
    settle_s: u32,
) -> (Option<u32>, bool, Option<u32>) {
    let from = (reference_s as usize).min(series.len());
    let settled = series[from..]
        .iter()
        .position(|s| s.failures() == 0)
        .map(|i| i as u32);
    let last_bad = series.iter().rposition(|s| s.failures() > 0);
    let clean_from = last_bad.map_or(0, |i| i + 1).max(from);
    let clean_len = series.len() - clean_from;
    let recovered = clean_len as u32 >= settle_s.max(1);
    let ttr = recovered.then(|| (clean_from - from) as u32);
    (settled, recovered, ttr)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(fails: &[u64]) -> Vec<Second> {
        fails
            .iter()
            .enumerate()
            .map(|(t, f)| Second {
                t: t as u32,
                sent_failed: *f,
                ..Second::default()
            })
            .collect()
    }

    #[test]
    fn recovery_starts_after_the_last_failing_second() {
        let s = series(&[0, 5, 5, 0, 3, 0, 0, 0, 0]);
        assert_eq!(analyse(&s, 1, 3), (Some(2), true, Some(4)));
    }

    #[test]
    fn a_short_clean_tail_is_not_recovery() {
        let s = series(&[0, 5, 5, 5, 5, 5, 0, 0]);
        assert_eq!(analyse(&s, 1, 3), (Some(5), false, None));
    }
}
