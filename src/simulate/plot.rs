//! `--plot FILE.svg`: the series as a chart, because a stuck overload is easiest to see as a
//! picture (arrivals staying high while goodput stays near zero). Rendered to a string with
//! plotters' SVG backend and written atomically.

use super::error::SimError;
use super::report::SystemReport;
use super::scenarios::retry_storm::StormReport;
use super::scenarios::Report;
use plotters::prelude::*;
use std::path::Path;

const SIZE: (u32, u32) = (1000, 520);

pub fn write(r: &Report, path: &Path) -> Result<(), SimError> {
    let svg = render(r)?;
    crate::util::atomic_file::write_atomic(path, svg.as_bytes())
        .map_err(|e| SimError::Plot(format!("{}: {e}", path.display())))
}

pub fn render(r: &Report) -> Result<String, SimError> {
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, SIZE).into_drawing_area();
        match r {
            Report::Storm(s) => storm(&root, s),
            Report::System(s) => system(&root, s),
            Report::Drill(d) => d.plot(&root),
        }
        .map_err(|e| SimError::Plot(e.to_string()))?;
        root.present().map_err(|e| SimError::Plot(e.to_string()))?;
    }
    Ok(buf)
}

pub type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;
pub type PlotResult = Result<(), Box<dyn std::error::Error>>;
/// A named, coloured line and how to read its value from one point of the series.
type Line<T, V> = (&'static str, RGBColor, fn(&T) -> V);

/// One line of a drill's chart: label, colour, width and its points.
pub struct Series {
    pub label: String,
    pub color: RGBColor,
    pub width: u32,
    pub points: Vec<(f64, f64)>,
}

impl Series {
    pub fn new(label: impl Into<String>, color: RGBColor, points: Vec<(f64, f64)>) -> Self {
        Series {
            label: label.into(),
            color,
            width: 2,
            points,
        }
    }
}

/// The axes of a drill's chart; `right` adds a second y axis for `right_series`.
pub struct Axes<'a> {
    pub title: String,
    pub x_desc: &'a str,
    pub y_desc: &'a str,
    pub right: Option<&'a str>,
}

/// A line chart over time (the drills' charts): `left` against the left axis, `right`
/// against the right one (if `axes.right` names it). Axes start at 0 and end 10% above
/// the highest point.
pub fn lines(root: &Area, axes: &Axes, left: &[Series], right: &[Series]) -> PlotResult {
    root.fill(&WHITE)?;
    let max = |s: &[Series], f: fn(&(f64, f64)) -> f64| {
        s.iter()
            .flat_map(|l| l.points.iter().map(f))
            .fold(0.0f64, f64::max)
    };
    let x_max = max(left, |p| p.0).max(max(right, |p| p.0)).max(1.0);
    let y_max = max(left, |p| p.1).max(1e-9) * 1.1;
    let y2_max = max(right, |p| p.1).max(1e-9) * 1.1;
    let mut chart = ChartBuilder::on(root)
        .caption(&axes.title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .right_y_label_area_size(if axes.right.is_some() { 70 } else { 0 })
        .build_cartesian_2d(0f64..x_max, 0f64..y_max)?
        .set_secondary_coord(0f64..x_max, 0f64..y2_max);
    chart
        .configure_mesh()
        .x_desc(axes.x_desc)
        .y_desc(axes.y_desc)
        .draw()?;
    if let Some(desc) = axes.right {
        chart.configure_secondary_axes().y_desc(desc).draw()?;
    }
    for s in left {
        chart
            .draw_series(LineSeries::new(
                s.points.iter().copied(),
                s.color.stroke_width(s.width),
            ))?
            .label(s.label.as_str())
            .legend(legend(s.color));
    }
    if axes.right.is_some() {
        for s in right {
            chart
                .draw_secondary_series(LineSeries::new(
                    s.points.iter().copied(),
                    s.color.stroke_width(s.width),
                ))?
                .label(s.label.as_str())
                .legend(legend(s.color));
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

fn legend(c: RGBColor) -> impl Fn((i32, i32)) -> PathElement<(i32, i32)> {
    move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
}

fn storm(root: &Area, r: &StormReport) -> PlotResult {
    root.fill(&WHITE)?;
    let x_max = r.series.last().map_or(1, |t| t.tick) + 1;
    let y_max = r.peak_calls.max(1) + 2;
    let mut chart = ChartBuilder::on(root)
        .caption(
            format!("retry-storm, policy {}", r.policy),
            ("sans-serif", 22),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(0u32..x_max, 0u32..y_max)?;
    chart
        .configure_mesh()
        .x_desc("tick")
        .y_desc("calls")
        .draw()?;
    let lines: [Line<super::StormTick, u32>; 4] = [
        ("arriving", BLUE, |t| t.arriving),
        ("retries", MAGENTA, |t| t.retries),
        ("served", GREEN, |t| t.served),
        ("turned away", RED, |t| t.turned_away),
    ];
    for (label, color, f) in lines {
        let pts: Vec<(u32, u32)> = r.series.iter().map(|t| (t.tick, f(t))).collect();
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))?
            .label(label)
            .legend(legend(color));
        chart.draw_series(pts.into_iter().map(|p| Circle::new(p, 3, color.filled())))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

fn system(root: &Area, r: &SystemReport) -> PlotResult {
    root.fill(&WHITE)?;
    let x_max = r.series.len().max(1) as f64;
    let y_max = r
        .series
        .iter()
        .map(|s| s.arriving.max(s.useful + s.abandoned) as f64)
        .fold(1.0, f64::max)
        * 1.1;
    let q_max = r.series.iter().map(|s| s.queue as f64).fold(1.0, f64::max) * 1.1;
    let title = match (r.recovered, r.time_to_recover_s) {
        (true, Some(t)) => format!(
            "{}: recovers {t} s after {}",
            r.scenario,
            r.reference.replace('_', " ")
        ),
        _ => format!("{}: stays stuck", r.scenario),
    };
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .right_y_label_area_size(70)
        .build_cartesian_2d(0f64..x_max, 0f64..y_max)?
        .set_secondary_coord(0f64..x_max, 0f64..q_max);
    chart
        .configure_mesh()
        .x_desc("time (s)")
        .y_desc("requests per second")
        .draw()?;
    chart
        .configure_secondary_axes()
        .y_desc("queue depth")
        .draw()?;
    // Drawn back to front: the wide grey capacity line stays visible under the wasted
    // work that, in a stuck state, uses all of it.
    let lines: [(Line<super::Second, f64>, u32); 5] = [
        (
            ("capacity (useful/s)", RGBColor(170, 170, 170), |s| {
                s.capacity
            }),
            5,
        ),
        (
            (
                "arriving/s (retries come in waves)",
                RGBColor(90, 120, 230),
                |s| s.arriving as f64,
            ),
            1,
        ),
        (("rejected/s", MAGENTA, |s| s.rejected as f64), 2),
        (
            ("wasted/s (served after timeout)", RED, |s| {
                s.abandoned as f64
            }),
            2,
        ),
        (("useful/s", GREEN, |s| s.useful as f64), 2),
    ];
    for ((label, color, f), width) in lines {
        let pts = r.series.iter().map(|s| (f64::from(s.t), f(s)));
        chart
            .draw_series(LineSeries::new(pts, color.stroke_width(width)))?
            .label(label)
            .legend(legend(color));
    }
    let orange = RGBColor(230, 140, 0);
    chart
        .draw_secondary_series(LineSeries::new(
            r.series.iter().map(|s| (f64::from(s.t), s.queue as f64)),
            ShapeStyle::from(orange).stroke_width(1),
        ))?
        .label("queue depth (right axis)")
        .legend(legend(orange));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}
