//! When the model's run counts as recovered, read in steps finer than its per-second
//! series: a rehearsal reads steady state once a scrape, and a one-second step is already
//! a third of a 3 s recovery.

/// The instants recovery can be read at, in ticks: `phase + k * every` after the
/// reference. A rehearsal reads steady state at its scrape ticks, which fall wherever its
/// recorder's clock put them relative to the runbook's first action; a prediction read on
/// ticks counted from that action itself reads up to a step away from the same run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Steps {
    pub every: u32,
    /// Less than `every`.
    pub phase: u32,
}

impl Steps {
    /// The first step boundary strictly after tick `t`, on the grid through
    /// `reference + phase`.
    fn after(self, t: u32, reference: u32) -> u32 {
        let (every, origin) = (i64::from(self.every), i64::from(reference + self.phase));
        let k = (i64::from(t) - origin).div_euclid(every) + 1;
        (origin + k * every).max(0) as u32
    }
}

/// Whether the run recovered and the time it took, on `steps`: the final failure-free
/// stretch begins at the first step boundary after `last_failed` (the tick the last
/// failed attempt was sent at, or the last tick more clients retried than
/// `settled_retrying_max` allows), not before `reference`, and must last `settle` up to
/// `end`. With a step of one second and no phase this is the per-second rule of
/// [`crate::simulate::kernel::record::Recovery::of`]; a shorter one resolves what the
/// per-second series rounds up.
pub(super) fn in_steps(
    last_failed: Option<u32>,
    steps: Steps,
    reference: u32,
    end: u32,
    settle: u32,
    tick_s: f64,
) -> (bool, Option<f64>) {
    let clean_from = last_failed
        .map_or(0, |l| steps.after(l, reference))
        .max(reference);
    let recovered = end.saturating_sub(clean_from) >= settle;
    // Whole milliseconds: ticks times a float tick would print 2.5000000000000004.
    let secs = |t: u32| (f64::from(t) * tick_s * 1000.0).round() / 1000.0;
    (recovered, recovered.then(|| secs(clean_from - reference)))
}

#[cfg(test)]
mod tests {
    use super::{in_steps, Steps};

    fn every(every: u32) -> Steps {
        Steps { every, phase: 0 }
    }

    /// 100 ticks a second: in whole seconds the rule is the per-second one (clean from
    /// the second after the last failed send); in half seconds it resolves the half.
    #[test]
    fn recovery_reads_from_the_step_after_the_last_failure() {
        let tick = 0.01;
        // Last failure sent at 12.30 s, reference 10 s, run to 30 s, settle 5 s.
        assert_eq!(
            in_steps(Some(1230), every(100), 1000, 3000, 500, tick),
            (true, Some(3.0))
        );
        assert_eq!(
            in_steps(Some(1230), every(50), 1000, 3000, 500, tick),
            (true, Some(2.5))
        );
        assert_eq!(
            in_steps(Some(1250), every(50), 1000, 3000, 500, tick),
            (true, Some(3.0))
        );
        // Never failing after the reference: recovered at it.
        assert_eq!(
            in_steps(Some(900), every(50), 1000, 3000, 500, tick),
            (true, Some(0.0))
        );
        assert_eq!(
            in_steps(None, every(50), 1000, 3000, 500, tick),
            (true, Some(0.0))
        );
        // Not clean for the settle window before the end.
        assert_eq!(
            in_steps(Some(2600), every(50), 1000, 3000, 500, tick),
            (false, None)
        );
    }

    /// The run's scrape ticks fall 0.32 s after each half second from the reference: a
    /// last failure sent at 11.10 s (1.1 s after the reference) is first read clean at
    /// 1.32 s, not 1.5 s; one sent at 11.40 s at 1.82 s.
    #[test]
    fn recovery_reads_on_the_steps_phase() {
        let (tick, steps) = (
            0.01,
            Steps {
                every: 50,
                phase: 32,
            },
        );
        assert_eq!(
            in_steps(Some(1110), steps, 1000, 3000, 500, tick),
            (true, Some(1.32))
        );
        assert_eq!(
            in_steps(Some(1140), steps, 1000, 3000, 500, tick),
            (true, Some(1.82))
        );
        // Before the first tick after the reference: read at it.
        assert_eq!(
            in_steps(Some(1010), steps, 1000, 3000, 500, tick),
            (true, Some(0.32))
        );
        assert_eq!(
            in_steps(Some(900), steps, 1000, 3000, 500, tick),
            (true, Some(0.0))
        );
    }
}
