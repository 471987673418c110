//! The lower bound on the recorder's scrape grid: the bound a measured time to recover is
//! compared with.
//!
//! Why it exists: the time to recover is read on the scrape grid (`steady_at` is the time
//! of the first scrape of a steady run, [`super::verify::steady_from`]), while the bound of
//! [`super::bound`] is a fluid time. A scrape reads the clients' retry-loop gauge at some
//! instant between its tick (`t_s`, the time the sample carries) and the moment its last
//! page was read (`read_s`). The steady check needs that gauge at most the criterion's
//! allowance, which no procedure reaches before the runbook's start plus the fluid bound
//! (the fluid bound is the time until all but that allowance are answered). So no scrape
//! whose pages were all read before then can start a steady run, and no run can be
//! measured steady before the first scrape read at or after it: its tick, less the
//! runbook's start, is the bound (derived in docs/design/arithmetic.md, "On the scrape
//! grid"). That scrape's tick is at or after the fluid bound, but for a scrape straddling
//! it (ticked before, read after), whose tick is then the bound: still one no run beats.

use super::report::LowerBound;

/// The tick of the first scrape from `from_s` on whose pages were read at or after `at_s`
/// (`scrapes`: `(t_s, read_s)` on one clock, in order); `None` when none was.
pub fn first_read_at_or_after(
    at_s: f64,
    from_s: f64,
    scrapes: impl IntoIterator<Item = (f64, f64)>,
) -> Option<f64> {
    scrapes
        .into_iter()
        .find(|&(t, read)| t >= from_s && read >= at_s)
        .map(|(t, _)| t)
}

/// Place the fluid bound `lb.fluid_s` on the scrape grid. `rb_start_s`: the runbook's
/// first action, from which the bound counts; `from_s`: the first tick the steady check
/// reads; `zero_s`: the report's zero (the trigger), all on the rehearsal clock. Where no
/// scrape reached the fluid bound, the bound stays the fluid one and says so.
pub fn on_scrape_grid(
    lb: &mut LowerBound,
    rb_start_s: f64,
    from_s: f64,
    zero_s: f64,
    scrapes: impl IntoIterator<Item = (f64, f64)>,
) {
    let at_s = rb_start_s + lb.fluid_s;
    match first_read_at_or_after(at_s, from_s, scrapes) {
        Some(t) => {
            lb.lower_bound_s = t - rb_start_s;
            lb.sample_s = Some(t - zero_s);
            lb.on_grid = format!(
                "the first scrape read at or after the runbook's start + the fluid bound {:.3} s (t = {:.3} s): its tick {:.3} s after the runbook's start, on a {:.2} s grid",
                lb.fluid_s,
                at_s - zero_s,
                lb.lower_bound_s,
                lb.record_interval_s
            );
        }
        None => {
            lb.lower_bound_s = lb.fluid_s;
            lb.sample_s = None;
            lb.on_grid = format!(
                "no scrape read at or after the runbook's start + the fluid bound {:.3} s: the fluid bound",
                lb.fluid_s
            );
        }
    }
}

#[cfg(test)]
#[path = "bound_grid_tests.rs"]
mod tests;
