//! The timeline's labels: the phases' names, "stuck detected" and each runbook step's
//! name, each placed where its moment starts, in lanes ([`super::lanes`]) so that none
//! covers another, and kept inside the plot. Apart from the panels, which only say where
//! the labels go.

use super::lanes;
use super::lines::Chart;
use super::{err, phase_color, TimelineError, ADMITTED, DETECT};
use crate::rehearse::report::Report;
use plotters::prelude::*;

/// Seconds and y units per pixel of a panel's plotting area, and where its time axis ends.
fn scale(chart: &Chart, y_max: f64) -> (f64, f64, f64) {
    let area = chart.plotting_area();
    let (w, h) = area.dim_in_pixel();
    let x = area.get_x_range();
    (
        (x.end - x.start) / f64::from(w.max(1)),
        y_max / f64::from(h.max(1)),
        x.end,
    )
}

/// Where a label that names the moment `t` starts: at `t`, or far enough left of it that
/// it ends inside the plot.
fn inside(t: f64, width: f64, x_end: f64) -> f64 {
    t.min(x_end - width)
}

const PHASE_FONT: f64 = 15.0;
const STEP_FONT: f64 = 13.0;

/// The phases' names and "stuck detected" along the top of the panel, each where its
/// moment starts, in lanes a line apart so that short phases keep legible names.
pub(super) fn label_phases_and_detection(
    chart: &mut Chart,
    r: &Report,
    y_max: f64,
) -> Result<(), TimelineError> {
    let mut labels: Vec<(f64, String, RGBColor)> = r
        .phases
        .iter()
        .map(|p| (p.start_s, p.name.clone(), phase_color(&p.name)))
        .collect();
    if let Some(d) = r.detected_stuck_s {
        labels.push((r.trigger_end_s + d, "stuck detected".into(), DETECT));
    }
    labels.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (s_per_px, y_per_px, x_end) = scale(chart, y_max);
    let runs: Vec<(f64, f64)> = labels
        .iter()
        .map(|(t, text, _)| {
            let width = lanes::text_width_px(text, PHASE_FONT) * s_per_px;
            (inside(t + 3.0 * s_per_px, width, x_end), width)
        })
        .collect();
    let lane = lanes::assign(&runs, 3, 4.0 * s_per_px);
    for (((_, text, color), (x, _)), lane) in labels.into_iter().zip(runs).zip(lane) {
        let y = y_max * 0.985 - lane as f64 * 20.0 * y_per_px;
        chart
            .draw_series(std::iter::once(Text::new(
                text,
                (x, y),
                ("sans-serif", PHASE_FONT).into_font().color(&color),
            )))
            .map_err(err)?;
    }
    Ok(())
}

/// Tick and name each runbook step where it started, in lanes so that steps a moment
/// apart keep legible names.
pub(super) fn mark_steps(chart: &mut Chart, r: &Report, y_max: f64) -> Result<(), TimelineError> {
    let (s_per_px, _, x_end) = scale(chart, y_max);
    let names: Vec<String> = r.steps.iter().map(|s| format!("> {}", s.name)).collect();
    let runs: Vec<(f64, f64)> = r
        .steps
        .iter()
        .zip(&names)
        .map(|(s, n)| {
            let width = lanes::text_width_px(n, STEP_FONT) * s_per_px;
            (inside(s.start_s, width, x_end), width)
        })
        .collect();
    let lane = lanes::assign(&runs, 8, 4.0 * s_per_px);
    for (((step, name), (x, _)), lane) in r.steps.iter().zip(names).zip(runs).zip(lane) {
        let y = y_max * (0.66 - 0.055 * lane as f64);
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(step.start_s, 0.0), (step.start_s, y)],
                ADMITTED.mix(0.35).stroke_width(1),
            )))
            .map_err(err)?;
        chart
            .draw_series(std::iter::once(Text::new(
                name,
                (x, y),
                ("sans-serif", STEP_FONT).into_font().color(&ADMITTED),
            )))
            .map_err(err)?;
    }
    Ok(())
}
