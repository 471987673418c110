//! Exposition text into points with label maps, for the rehearsal's recorder.
//!
//! Why it exists: the recorder sums and filters by label across targets; this adapts the
//! shared parser (`metrics::scrape::text`, the one the detector uses) to that shape, so
//! both read `/metrics` pages the same way. Everything that reads text goes through
//! [`parse`].

use std::collections::BTreeMap;

/// One sample line: `name{labels} value`.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

impl Point {
    /// True if every `(key, value)` in `want` is among this point's labels.
    pub fn matches(&self, want: &[(&str, &str)]) -> bool {
        want.iter()
            .all(|(k, v)| self.labels.get(*k).map(String::as_str) == Some(*v))
    }
}

/// Parse exposition text. A page that does not parse yields no points (the target
/// counts as not answering), never a partial page read as zeros.
pub fn parse(text: &str) -> Vec<Point> {
    match crate::metrics::scrape::text::parse(text) {
        Ok(page) => page
            .samples
            .into_iter()
            .map(|s| Point {
                name: s.name,
                labels: s.labels.into_iter().collect(),
                value: s.value,
            })
            .collect(),
        Err(e) => {
            tracing::debug!("unparsable /metrics page at line {}: {}", e.line, e.message);
            vec![]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_labels_values_and_skips_comments() {
        let text = "# HELP x y\n# TYPE recover_gate_requests counter\n\
            recover_gate_requests_total{outcome=\"admitted\"} 12\n\
            recover_gate_limit_rate_per_second +Inf\n\
            lat_bucket{le=\"0.5\",who=\"a\\\"b\"} 3 1700000000\n";
        let pts = parse(text);
        assert_eq!(pts.len(), 3);
        assert_eq!(pts[0].name, "recover_gate_requests_total");
        assert!(pts[0].matches(&[("outcome", "admitted")]));
        assert_eq!(pts[0].value, 12.0);
        assert!(pts[1].value.is_infinite());
        assert_eq!(pts[2].labels["who"], "a\"b");
        assert_eq!(pts[2].labels["le"], "0.5");
    }
}
