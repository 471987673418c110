//! Drawing one figure of the samples as a line on a timeline panel: broken at gaps in the
//! data, one legend entry however many pieces, on a panel's own axes or its right-hand
//! ones. Every panel draws its lines this way, so it lives apart from the panels' layout.

use super::{err, TimelineError};
use crate::rehearse::series::Sample;
use plotters::chart::{DualCoordChartContext, SeriesAnno};
use plotters::coord::Shift;
use plotters::prelude::*;

/// Runs of consecutive samples where `f` has a finite value: a gap in the data is a gap
/// in the line, never a drop to zero.
fn segments(samples: &[Sample], f: impl Fn(&Sample) -> Option<f64>) -> Vec<Vec<(f64, f64)>> {
    let mut out = vec![];
    let mut cur: Vec<(f64, f64)> = vec![];
    for s in samples {
        match f(s).filter(|v| v.is_finite()) {
            Some(v) => cur.push((s.t_s, v)),
            None if !cur.is_empty() => out.push(std::mem::take(&mut cur)),
            None => {}
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

pub(super) type Chart<'a, 'b> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

pub(super) type DualChart<'a, 'b> = DualCoordChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

/// The axes a line is drawn against: a panel's own, or the right-hand axes of the clients
/// panel (plotters draws on those through a different method).
pub(super) trait Axes<'a, 'b> {
    fn line(
        &mut self,
        points: Vec<(f64, f64)>,
        style: ShapeStyle,
    ) -> Result<&mut SeriesAnno<'a, SVGBackend<'b>>, TimelineError>;
}

impl<'a, 'b> Axes<'a, 'b> for Chart<'a, 'b> {
    fn line(
        &mut self,
        points: Vec<(f64, f64)>,
        style: ShapeStyle,
    ) -> Result<&mut SeriesAnno<'a, SVGBackend<'b>>, TimelineError> {
        self.draw_series(LineSeries::new(points, style))
            .map_err(err)
    }
}

/// The right-hand axes of a two-axis panel.
pub(super) struct Right<'c, 'a, 'b>(pub(super) &'c mut DualChart<'a, 'b>);

impl<'a, 'b> Axes<'a, 'b> for Right<'_, 'a, 'b> {
    fn line(
        &mut self,
        points: Vec<(f64, f64)>,
        style: ShapeStyle,
    ) -> Result<&mut SeriesAnno<'a, SVGBackend<'b>>, TimelineError> {
        self.0
            .draw_secondary_series(LineSeries::new(points, style))
            .map_err(err)
    }
}

/// One figure of the samples as a line, broken where the data has gaps, with one legend
/// entry however many pieces it is drawn in.
pub(super) fn draw_line<'a, 'b>(
    axes: &mut impl Axes<'a, 'b>,
    s: &[Sample],
    pick: impl Fn(&Sample) -> Option<f64>,
    label: &str,
    color: RGBColor,
    width: u32,
) -> Result<(), TimelineError> {
    let mut first = true;
    for seg in segments(s, pick) {
        let drawn = axes.line(seg, color.stroke_width(width))?;
        if first {
            drawn.label(label).legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(width))
            });
            first = false;
        }
    }
    Ok(())
}

/// The same boxed legend, top right, on every panel.
pub(super) fn draw_legend<'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, CT>,
    area: &DrawingArea<SVGBackend, Shift>,
) -> Result<(), TimelineError> {
    chart
        .configure_series_labels()
        .position(legend_spot(area))
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(err)
}

/// Upper right, but below the phase names drawn along the top edge.
fn legend_spot(area: &DrawingArea<SVGBackend, Shift>) -> SeriesLabelPosition {
    let (w, _) = area.dim_in_pixel();
    SeriesLabelPosition::Coordinate(w as i32 - 420, 28)
}
