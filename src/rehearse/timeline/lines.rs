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

/// One legend entry: a line's label, colour and width.
pub(super) type Key = (String, RGBColor, u32);

/// The same legend on every panel, right of its plot (and of `axis_px` of a right-hand
/// axis), where nothing else is drawn. Drawn on the panel itself: plotters keeps its own
/// legend inside the plot, over the curves and the labels.
pub(super) fn draw_legend<'a, CT: CoordTranslate>(
    chart: &ChartContext<'a, SVGBackend<'a>, CT>,
    area: &DrawingArea<SVGBackend, Shift>,
    axis_px: u32,
    keys: &[Key],
) -> Result<(), TimelineError> {
    let plot = chart.plotting_area();
    let (w, _) = plot.dim_in_pixel();
    let x = plot.get_base_pixel().0 - area.get_base_pixel().0 + (w + axis_px) as i32 + 12;
    for (i, (label, color, width)) in keys.iter().enumerate() {
        let y = 36 + 20 * i as i32;
        area.draw(&PathElement::new(
            vec![(x, y), (x + 20, y)],
            color.stroke_width(*width),
        ))
        .map_err(err)?;
        area.draw(&Text::new(
            label.clone(),
            (x + 26, y - 7),
            ("sans-serif", 14).into_font(),
        ))
        .map_err(err)?;
    }
    Ok(())
}
