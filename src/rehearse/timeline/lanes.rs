//! Where a panel's labels go so that none covers another: each label is a run along the
//! time axis (where it starts, how wide its text is), and goes into the first lane whose
//! last label has ended before it starts. Steps a few hundred milliseconds apart, or a
//! trigger phase shorter than its own name, would otherwise print on top of each other.
//! Pure: the panels turn lanes into heights.

/// An estimate of a label's width in pixels, generous enough for the widest sans-serif
/// letters on average (0.6 em per character), so a label never runs into the next one.
pub(super) fn text_width_px(text: &str, font_px: f64) -> f64 {
    text.chars().count() as f64 * font_px * 0.6
}

/// The lane of each label (start, width; both in the same unit, in the order given).
/// Labels in one lane keep `gap` between them. When every lane of `lanes` is taken, a
/// label goes into the lane that frees first: the fewest overlaps a fixed height allows.
pub(super) fn assign(labels: &[(f64, f64)], lanes: usize, gap: f64) -> Vec<usize> {
    let lanes = lanes.max(1);
    let mut ends = vec![f64::NEG_INFINITY; lanes];
    labels
        .iter()
        .map(|&(start, width)| {
            let lane = (0..lanes)
                .find(|&l| ends[l] + gap <= start)
                .unwrap_or_else(|| {
                    (0..lanes)
                        .min_by(|&a, &b| ends[a].total_cmp(&ends[b]))
                        .unwrap_or(0)
                });
            ends[lane] = ends[lane].max(start + width);
            lane
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_that_would_touch_take_the_next_lane() {
        // Three labels 1 unit apart, each 3 wide, then one well after them.
        let lanes = assign(&[(0.0, 3.0), (1.0, 3.0), (2.0, 3.0), (10.0, 3.0)], 4, 0.5);
        assert_eq!(lanes, [0, 1, 2, 0]);
    }

    #[test]
    fn a_label_reuses_a_lane_once_its_label_ended() {
        let lanes = assign(&[(0.0, 2.0), (1.0, 2.0), (2.5, 2.0)], 3, 0.5);
        assert_eq!(lanes, [0, 1, 0]);
    }

    #[test]
    fn with_every_lane_taken_the_one_that_frees_first_is_used() {
        let lanes = assign(&[(0.0, 9.0), (1.0, 3.0), (2.0, 1.0)], 2, 0.0);
        assert_eq!(lanes, [0, 1, 1]);
    }
}
