//! When the model's run counts as recovered, read in steps finer than its per-second
//! series: a rehearsal reads steady state once a scrape, and a one-second step is already
//! a third of a 3 s recovery.

/// Whether the run recovered and the time it took, in ticks of `step`: the final
/// failure-free stretch begins at the first step boundary after `last_failed` (the tick
/// the last failed attempt was sent at, or the last tick more clients retried than
/// `settled_retrying_max` allows), not before `reference`, and must last `settle` up to
/// `end`. With a step of one second this is the per-second rule of
/// [`crate::simulate::kernel::record::Recovery::of`]; a shorter one resolves what the
/// per-second series rounds up.
pub(super) fn in_steps(
    last_failed: Option<u32>,
    step: u32,
    reference: u32,
    end: u32,
    settle: u32,
    tick_s: f64,
) -> (bool, Option<f64>) {
    let clean_from = last_failed
        .map_or(0, |l| (l / step + 1) * step)
        .max(reference);
    let recovered = end.saturating_sub(clean_from) >= settle;
    // Whole milliseconds: ticks times a float tick would print 2.5000000000000004.
    let secs = |t: u32| (f64::from(t) * tick_s * 1000.0).round() / 1000.0;
    (recovered, recovered.then(|| secs(clean_from - reference)))
}

#[cfg(test)]
mod tests {
    use super::in_steps;

    /// 100 ticks a second: in whole seconds the rule is the per-second one (clean from
    /// the second after the last failed send); in half seconds it resolves the half.
    #[test]
    fn recovery_reads_from_the_step_after_the_last_failure() {
        let tick = 0.01;
        // Last failure sent at 12.30 s, reference 10 s, run to 30 s, settle 5 s.
        assert_eq!(
            in_steps(Some(1230), 100, 1000, 3000, 500, tick),
            (true, Some(3.0))
        );
        assert_eq!(
            in_steps(Some(1230), 50, 1000, 3000, 500, tick),
            (true, Some(2.5))
        );
        assert_eq!(
            in_steps(Some(1250), 50, 1000, 3000, 500, tick),
            (true, Some(3.0))
        );
        // Never failing after the reference: recovered at it.
        assert_eq!(
            in_steps(Some(900), 50, 1000, 3000, 500, tick),
            (true, Some(0.0))
        );
        assert_eq!(in_steps(None, 50, 1000, 3000, 500, tick), (true, Some(0.0)));
        // Not clean for the settle window before the end.
        assert_eq!(
            in_steps(Some(2600), 50, 1000, 3000, 500, tick),
            (false, None)
        );
    }
}
