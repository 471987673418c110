//! `--plot FILE.svg`: the chart toolkit the scenarios draw with (a line chart over time with
//! an optional second axis), rendered to a string with plotters' SVG backend and written
//! atomically. It knows no scenario: each draws its own series with [`lines`].

use super::error::SimError;
use plotters::prelude::*;
use std::path::Path;

const SIZE: (u32, u32) = (1000, 520);

pub type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;
pub type PlotResult = Result<(), Box<dyn std::error::Error>>;

/// Draw with `draw` and write the SVG to `path` atomically.
pub fn write(path: &Path, draw: impl FnOnce(&Area) -> PlotResult) -> Result<(), SimError> {
    let svg = render(draw)?;
    crate::util::atomic_file::write_atomic(path, svg.as_bytes())
        .map_err(|e| SimError::Plot(format!("{}: {e}", path.display())))
}

/// Draw with `draw` into an SVG string.
pub fn render(draw: impl FnOnce(&Area) -> PlotResult) -> Result<String, SimError> {
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, SIZE).into_drawing_area();
        draw(&root).map_err(|e| SimError::Plot(e.to_string()))?;
        root.present().map_err(|e| SimError::Plot(e.to_string()))?;
    }
    Ok(buf)
}

/// One line of a chart: label, colour, width and its points.
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

    pub fn width(mut self, width: u32) -> Self {
        self.width = width;
        self
    }
}

/// The axes of a chart; `right` adds a second y axis for the right-hand series.
pub struct Axes<'a> {
    pub title: String,
    pub x_desc: &'a str,
    pub y_desc: &'a str,
    pub right: Option<&'a str>,
}

/// A line chart over time: `left` against the left axis, drawn in order (the first
/// underneath), `right` against the right one (if `axes.right` names it). Axes start at 0
/// and end 10% above the highest point.
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

pub fn legend(c: RGBColor) -> impl Fn((i32, i32)) -> PathElement<(i32, i32)> {
    move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
}
