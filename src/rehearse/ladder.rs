//! A cumulative count over a ladder of durations, as the demo's workers and service export
//! them (`le_s` rungs, Prometheus-histogram style): where each client of the retry loop
//! stood and how long each server stays busy, read at a scrape.
//!
//! Why it exists: the one reading of those rungs (each item at its bucket's lower edge,
//! counts that fall between gauges read apart taken as 0), shared by the bound's count
//! of clients and its count of servers, so the two cannot read a ladder differently.

/// A cumulative count over a ladder of durations, as a Prometheus histogram's buckets read:
/// for each edge `le_s` (increasing), how many items last at most `le_s`; `total` counts
/// every item, those past the last edge too.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Ladder {
    /// `(le_s, count)` pairs, `le_s` increasing, counts not falling.
    pub edges: Vec<(f64, f64)>,
    pub total: f64,
}

impl Ladder {
    /// Each item's least possible value: its bucket's lower edge (0 for the first bucket,
    /// the last edge past every edge), one entry per item counted.
    pub fn lower_edges(&self) -> Vec<f64> {
        let mut lo = 0.0;
        let mut out = vec![];
        for (le, n) in self.buckets() {
            // Counts are whole on a page; a sum read apart may not be: round down (an
            // item left out is a server taken as free at the scrape, which only adds).
            out.extend(std::iter::repeat_n(lo, n.max(0.0).floor() as usize));
            lo = le;
        }
        out
    }

    /// Each bucket's upper edge and count, the last past every edge (`+Inf`); counts that
    /// fall (gauges read apart) count as 0.
    pub(super) fn buckets(&self) -> impl Iterator<Item = (f64, f64)> + '_ {
        let mut below = 0.0_f64;
        self.edges
            .iter()
            .copied()
            .chain(std::iter::once((f64::INFINITY, self.total)))
            .map(move |(le, cum)| {
                let n = (cum - below).max(0.0);
                below = below.max(cum);
                (le, n)
            })
    }
}
