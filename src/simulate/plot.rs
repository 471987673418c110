//! `--plot FILE.svg`: the chart toolkit the scenarios draw with (a line chart over time with
//! an optional second axis), rendered to a string with plotters' SVG backend and written
//! atomically. It knows no scenario: each draws its own series with [`lines`].

use super::error::SimError;
use plotters::prelude::*;
use std::path::Path;

const SIZE: (u32, u32) = (1000, 520);
/// The colour of a chart's one line on its second axis.
const RIGHT_LINE: RGBColor = RGBColor(230, 140, 0);

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

/// What a chart shows: a line chart over time, `left` against the left axis, drawn in
/// order (the first underneath), and `right` against a second y axis when there is one.
/// A scenario describes its chart; [`lines`] draws any of them.
pub struct Chart {
    pub title: String,
    pub x_desc: &'static str,
    pub y_desc: &'static str,
    pub left: Vec<Series>,
    /// The second axis's description and its series.
    pub right: Option<(&'static str, Vec<Series>)>,
}

impl Chart {
    pub fn new(
        title: impl Into<String>,
        x_desc: &'static str,
        y_desc: &'static str,
        left: Vec<Series>,
    ) -> Self {
        Chart {
            title: title.into(),
            x_desc,
            y_desc,
            left,
            right: None,
        }
    }

    /// A second y axis described `desc`, with one line on it labelled `label`.
    pub fn with_right_line(self, desc: &'static str, label: &str, points: Vec<(f64, f64)>) -> Self {
        let line = Series::new(format!("{label} (right axis)"), RIGHT_LINE, points);
        self.with_right(desc, vec![line])
    }

    /// A second y axis described `desc`, for `series`.
    pub fn with_right(self, desc: &'static str, series: Vec<Series>) -> Self {
        Chart {
            right: Some((desc, series)),
            ..self
        }
    }
}

/// Draw `chart`. Axes start at 0 and end 10% above the highest point.
pub fn lines(root: &Area, chart: &Chart) -> PlotResult {
    root.fill(&WHITE)?;
    let left = chart.left.as_slice();
    let right = chart.right.as_ref().map_or(&[][..], |r| r.1.as_slice());
    let max = |s: &[Series], f: fn(&(f64, f64)) -> f64| {
        s.iter()
            .flat_map(|l| l.points.iter().map(f))
            .fold(0.0f64, f64::max)
    };
    let x_max = max(left, |p| p.0).max(max(right, |p| p.0)).max(1.0);
    let y_max = max(left, |p| p.1).max(1e-9) * 1.1;
    let y2_max = max(right, |p| p.1).max(1e-9) * 1.1;
    let mut drawn = ChartBuilder::on(root)
        .caption(&chart.title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .right_y_label_area_size(if chart.right.is_some() { 70 } else { 0 })
        .build_cartesian_2d(0f64..x_max, 0f64..y_max)?
        .set_secondary_coord(0f64..x_max, 0f64..y2_max);
    drawn
        .configure_mesh()
        .x_desc(chart.x_desc)
        .y_desc(chart.y_desc)
        .draw()?;
    if let Some((desc, _)) = &chart.right {
        drawn.configure_secondary_axes().y_desc(*desc).draw()?;
    }
    for s in left {
        labelled(drawn.draw_series(line(s))?, s);
    }
    for s in right {
        labelled(drawn.draw_secondary_series(line(s))?, s);
    }
    drawn
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

/// One series as plotters draws it, on either axis.
fn line<'b>(s: &Series) -> LineSeries<SVGBackend<'b>, (f64, f64)> {
    LineSeries::new(s.points.iter().copied(), s.color.stroke_width(s.width))
}

/// The legend entry of a drawn series.
fn labelled(drawn: &mut plotters::chart::SeriesAnno<'_, SVGBackend<'_>>, s: &Series) {
    drawn.label(s.label.as_str()).legend(legend(s.color));
}

pub fn legend(c: RGBColor) -> impl Fn((i32, i32)) -> PathElement<(i32, i32)> {
    move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
}
