//! `timeline.svg`: the incident on one page, drawn with plotters.
//!
//! Why it exists: a report in numbers convinces the person who ran it; a picture explains
//! the incident to someone who was not there. Three panels share one time axis (0 = the
//! trigger fired) with the phases shaded across all of them:
//! 1. requests/s: offered at the edge, admitted by the gate, goodput, demand and the gate's
//!    limit (the line is absent while the gate is unlimited);
//! 2. client p99 latency against the client timeout (above it, every answer is wasted);
//! 3. clients stuck in a retry loop, and the service's queue depth (right axis).
//!    The moment the detector said Stuck is a vertical line through all three.

use super::report::Report;
use super::series::Sample;
use plotters::coord::Shift;
use plotters::prelude::*;

mod labels;
mod lanes;
mod lines;
use labels::{label_phases_and_detection, mark_steps};
use lines::{draw_legend, draw_line, Chart, Key, Right};

/// Drawing failed (plotters reports backend errors as strings).
#[derive(Debug, thiserror::Error)]
#[error("drawing timeline: {0}")]
pub struct TimelineError(String);

fn err<E: std::fmt::Debug>(e: E) -> TimelineError {
    TimelineError(format!("{e:?}"))
}

const W: u32 = 1440;
/// Pixels right of every panel's plot where its legend goes, so it never covers a curve
/// or a label.
const LEGEND_COLUMN: u32 = 300;
const H: u32 = 980;
const OFFERED: RGBColor = RGBColor(214, 39, 40);
const ADMITTED: RGBColor = RGBColor(31, 119, 180);
const GOODPUT: RGBColor = RGBColor(44, 160, 44);
const LIMIT: RGBColor = RGBColor(40, 40, 40);
const DEMAND: RGBColor = RGBColor(120, 120, 120);
const LATENCY: RGBColor = RGBColor(148, 103, 189);
const RETRYING: RGBColor = RGBColor(255, 127, 14);
const QUEUE: RGBColor = RGBColor(140, 86, 75);
const DETECT: RGBColor = RGBColor(200, 0, 120);

fn phase_color(name: &str) -> RGBColor {
    match name {
        "steady" | "hold" | "after" => RGBColor(120, 200, 120),
        "trigger" => RGBColor(230, 80, 80),
        "stuck" | "slow" => RGBColor(250, 170, 60),
        "recovery" => RGBColor(90, 150, 230),
        _ => RGBColor(180, 180, 180),
    }
}

/// Render the timeline of `report` from its recorded `samples` (times already on the
/// report's clock).
pub fn render_svg(report: &Report, samples: &[Sample]) -> Result<String, TimelineError> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (title, body) = root.split_vertically(90);
        draw_title(&title, report)?;
        let (rates, rest) = body.split_vertically(430);
        let (latency, clients) = rest.split_vertically(230);
        let x = x_range(report, samples);
        draw_rates(&rates, report, samples, x)?;
        draw_latency(&latency, report, samples, x)?;
        draw_clients(&clients, report, samples, x)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

fn x_range(report: &Report, samples: &[Sample]) -> (f64, f64) {
    let lo = samples.first().map(|s| s.t_s).unwrap_or(0.0);
    let hi = samples.last().map(|s| s.t_s).unwrap_or(1.0);
    let lo = report.phases.iter().map(|p| p.start_s).fold(lo, f64::min);
    let hi = report.phases.iter().map(|p| p.end_s).fold(hi, f64::max);
    (lo, if hi > lo { hi } else { lo + 1.0 })
}

fn draw_title(area: &DrawingArea<SVGBackend, Shift>, r: &Report) -> Result<(), TimelineError> {
    let verdict = match (r.recovered, r.time_to_recover_s, r.lower_bound_s) {
        (true, Some(t), Some(lb)) => format!("recovered in {t:.1} s (lower bound {lb:.1} s)"),
        (true, Some(t), None) => format!("recovered in {t:.1} s"),
        (true, None, _) => "recovered".to_string(),
        (false, _, _) => format!(
            "NOT recovered: {}",
            r.failure.as_deref().unwrap_or("no steady state")
        ),
    };
    let sc = &r.scenario;
    if let Some(run) = &r.run {
        return draw_run_title(area, r, run, &verdict);
    }
    let line1 = format!(
        "recover rehearse: {}, runbook {}: {verdict}",
        r.scenario.name, r.runbook
    );
    let line2 = format!(
        "{} workers ({:.1} req/s demand) -> gate -> {} replica(s), {:.0} req/s warm capacity; unavailable {:.0} s; k {}, shed {}",
        sc.workers,
        sc.demand_per_s,
        sc.replicas,
        sc.capacity_per_s,
        sc.unavailable_s,
        r.k.map(|k| format!("{k:.1}")).unwrap_or_else(|| "n/a".into()),
        r.shed_fraction.map(|s| format!("{:.0}%", s * 100.0)).unwrap_or_else(|| "n/a".into()),
    );
    area.draw(&Text::new(
        line1,
        (20, 10),
        ("sans-serif", 24).into_font().style(FontStyle::Bold),
    ))
    .map_err(err)?;
    area.draw(&Text::new(line2, (20, 42), ("sans-serif", 16).into_font()))
        .map_err(err)?;
    if let Some(why) = &r.failure {
        let mut why = format!("why: {why}");
        if why.len() > 150 {
            let cut = (0..=150)
                .rev()
                .find(|i| why.is_char_boundary(*i))
                .unwrap_or(0);
            why.truncate(cut);
            why.push_str("...");
        }
        area.draw(&Text::new(
            why,
            (20, 66),
            ("sans-serif", 16).into_font().color(&OFFERED),
        ))
        .map_err(err)?;
    }
    Ok(())
}

/// A real run's title: what the run knew, nothing a rehearsal's scenario would say.
fn draw_run_title(
    area: &DrawingArea<SVGBackend, Shift>,
    r: &Report,
    run: &super::report::RunFacts,
    verdict: &str,
) -> Result<(), TimelineError> {
    let line1 = format!(
        "recover run {} on {}, runbook {}: {verdict}",
        run.run_id, run.target, r.runbook
    );
    let line2 = format!(
        "t = 0 at the run's start ({}); k {}, shed {}, admit {}; {}",
        run.started_at,
        r.k.map(|k| format!("{k:.1}"))
            .unwrap_or_else(|| "unknown".into()),
        r.shed_fraction
            .map(|s| format!("{:.0}%", s * 100.0))
            .unwrap_or_else(|| "unknown".into()),
        r.admit_rate_per_s
            .map(|a| format!("{a:.1} req/s"))
            .unwrap_or_else(|| "unknown".into()),
        match run.onset_s {
            Some(o) => format!("trouble from t = {o:.0} s ({})", run.onset_from),
            None => format!("onset unknown ({})", run.onset_from),
        }
    );
    area.draw(&Text::new(
        line1,
        (20, 10),
        ("sans-serif", 24).into_font().style(FontStyle::Bold),
    ))
    .map_err(err)?;
    area.draw(&Text::new(line2, (20, 42), ("sans-serif", 16).into_font()))
        .map_err(err)?;
    Ok(())
}

/// Whether the report knows `field` (a real run lists what it does not; no line is drawn
/// for a figure it does not know).
fn known(r: &Report, field: &str) -> bool {
    r.run
        .as_ref()
        .is_none_or(|f| !f.unknown.contains_key(field))
}

/// A dashed horizontal line across the panel at `y`: a declared figure (demand, the
/// client timeout) the measured curves are read against.
fn reference_line(
    chart: &mut Chart,
    x: (f64, f64),
    y: f64,
    color: RGBColor,
) -> Result<(), TimelineError> {
    chart
        .draw_series(DashedLineSeries::new(
            vec![(x.0, y), (x.1, y)],
            8,
            6,
            color.stroke_width(2),
        ))
        .map_err(err)?;
    Ok(())
}

fn max_of(samples: &[Sample], f: impl Fn(&Sample) -> Option<f64>) -> f64 {
    samples
        .iter()
        .filter_map(f)
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max)
}

/// Shade the phases and mark the detection moment on a panel.
fn decorate(
    chart: &mut Chart,
    r: &Report,
    y_max: f64,
    label_phases: bool,
) -> Result<(), TimelineError> {
    chart
        .draw_series(r.phases.iter().map(|p| {
            Rectangle::new(
                [(p.start_s, 0.0), (p.end_s, y_max)],
                phase_color(&p.name).mix(0.16).filled(),
            )
        }))
        .map_err(err)?;
    if let Some(d) = r.detected_stuck_s {
        let t = r.trigger_end_s + d;
        chart
            .draw_series(DashedLineSeries::new(
                vec![(t, 0.0), (t, y_max)],
                6,
                4,
                DETECT.stroke_width(2),
            ))
            .map_err(err)?;
    }
    if label_phases {
        label_phases_and_detection(chart, r, y_max)?;
    }
    Ok(())
}

/// The clients panel's right-hand axis (queued requests), between its plot and legend.
const RIGHT_AXIS: u32 = 60;

/// Which figure of a sample a line draws.
type Pick = Box<dyn Fn(&Sample) -> Option<f64>>;

/// The frame of a panel with one y axis (the clients panel has a second one on the right,
/// so it is framed differently).
fn single_axis_panel<'b>(
    area: &DrawingArea<SVGBackend<'b>, Shift>,
    caption: &str,
    x: (f64, f64),
    y_max: f64,
) -> Result<Chart<'b, 'b>, TimelineError> {
    ChartBuilder::on(area)
        .margin(10)
        .margin_right(LEGEND_COLUMN)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .caption(caption, ("sans-serif", 18))
        .build_cartesian_2d(x.0..x.1, 0.0..y_max)
        .map_err(err)
}

fn draw_rates(
    area: &DrawingArea<SVGBackend, Shift>,
    r: &Report,
    s: &[Sample],
    x: (f64, f64),
) -> Result<(), TimelineError> {
    let demand = r.scenario.demand_per_s;
    let traffic = max_of(s, |v| v.offered_per_s)
        .max(max_of(s, |v| v.admitted_per_s))
        .max(max_of(s, |v| v.goodput_per_s))
        .max(demand);
    let y_max = (traffic * 1.15).max(1.0);
    let mut chart = single_axis_panel(area, "Requests per second", x, y_max)?;
    chart
        .configure_mesh()
        .y_desc("req/s")
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(err)?;
    decorate(&mut chart, r, y_max, true)?;
    mark_steps(&mut chart, r, y_max)?;
    if known(r, "scenario.demand_per_s") {
        reference_line(&mut chart, x, demand, DEMAND)?;
    }
    // The limit is drawn only where finite; clipped to the panel when far above traffic.
    let series: [(&str, RGBColor, u32, Pick); 4] = [
        (
            "offered at the edge (incl. retries)",
            OFFERED,
            2,
            Box::new(|v| v.offered_per_s),
        ),
        (
            "admitted by the gate",
            ADMITTED,
            2,
            Box::new(|v| v.admitted_per_s),
        ),
        (
            "goodput (useful answers)",
            GOODPUT,
            3,
            Box::new(|v| v.goodput_per_s),
        ),
        (
            "gate limit (absent = unlimited)",
            LIMIT,
            2,
            Box::new(move |v| {
                v.gate_limit_per_s
                    .filter(|l| l.is_finite())
                    .map(|l| l.min(y_max * 0.99))
            }),
        ),
    ];
    let mut keys: Vec<Key> = Vec::new();
    if known(r, "scenario.demand_per_s") {
        keys.push((format!("demand ({demand:.1}/s)"), DEMAND, 2));
    }
    for (label, color, width, f) in series {
        draw_line(&mut chart, s, f, label, color, width)?;
        keys.push((label.to_string(), color, width));
    }
    draw_legend(&chart, area, 0, &keys)
}

fn draw_latency(
    area: &DrawingArea<SVGBackend, Shift>,
    r: &Report,
    s: &[Sample],
    x: (f64, f64),
) -> Result<(), TimelineError> {
    let timeout = r.scenario.client_timeout_s;
    let y_max = (max_of(s, |v| v.p99_latency_s).max(timeout) * 1.2).max(0.1);
    let mut chart = single_axis_panel(
        area,
        "Client p99 latency vs client timeout (above it, answers are wasted)",
        x,
        y_max,
    )?;
    chart
        .configure_mesh()
        .y_desc("seconds")
        .x_label_formatter(&|v| format!("{v:.0}"))
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(err)?;
    decorate(&mut chart, r, y_max, false)?;
    if known(r, "scenario.client_timeout_s") {
        reference_line(&mut chart, x, timeout, OFFERED)?;
    }
    draw_line(
        &mut chart,
        s,
        |v| v.p99_latency_s,
        "p99 latency seen by clients",
        LATENCY,
        2,
    )?;
    let mut keys: Vec<Key> = Vec::new();
    if known(r, "scenario.client_timeout_s") {
        keys.push((format!("client timeout ({timeout:.1} s)"), OFFERED, 2));
    }
    keys.push(("p99 latency seen by clients".into(), LATENCY, 2));
    draw_legend(&chart, area, 0, &keys)
}

fn draw_clients(
    area: &DrawingArea<SVGBackend, Shift>,
    r: &Report,
    s: &[Sample],
    x: (f64, f64),
) -> Result<(), TimelineError> {
    let y_max = (r.scenario.workers as f64)
        .max(max_of(s, |v| v.workers_retrying))
        .max(1.0)
        * 1.1;
    let q_max = (max_of(s, |v| v.queue_depth) * 1.1).max(10.0);
    let mut chart = ChartBuilder::on(area)
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .margin_right(LEGEND_COLUMN - RIGHT_AXIS)
        .right_y_label_area_size(RIGHT_AXIS)
        .caption(
            "Clients in a retry loop, and the service's queue",
            ("sans-serif", 18),
        )
        .build_cartesian_2d(x.0..x.1, 0.0..y_max)
        .map_err(err)?
        .set_secondary_coord(x.0..x.1, 0.0..q_max);
    chart
        .configure_mesh()
        .x_desc("seconds since the trigger fired")
        .y_desc("clients")
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(err)?;
    chart
        .configure_secondary_axes()
        .y_desc("queued requests")
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(err)?;
    {
        let primary: &mut Chart = &mut chart;
        decorate(primary, r, y_max, false)?;
        draw_line(
            primary,
            s,
            |v| v.workers_retrying,
            "clients in a retry loop (left)",
            RETRYING,
            2,
        )?;
    }
    draw_line(
        &mut Right(&mut chart),
        s,
        |v| v.queue_depth,
        "queued at the service (right)",
        QUEUE,
        2,
    )?;
    let keys: [Key; 2] = [
        ("clients in a retry loop (left)".into(), RETRYING, 2),
        ("queued at the service (right)".into(), QUEUE, 2),
    ];
    draw_legend(&chart, area, RIGHT_AXIS, &keys)
}

#[cfg(test)]
#[path = "timeline_tests.rs"]
pub(crate) mod tests;
