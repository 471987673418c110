//! A minimal reader for the Prometheus text exposition format, just enough for the
//! rehearsal's recorder to turn `/metrics` pages into numbers.
//!
//! Why it exists: the recorder must not wait for the metric-source module to land, and it
//! needs raw samples (labels and all), not signals. Everything that reads text goes through
//! [`parse`], so swapping in the shared scrape parser later touches one function.

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

/// Parse exposition text. Lines that do not parse are skipped: one odd line from a target
/// must not blind the recorder to the rest of the page.
pub fn parse(text: &str) -> Vec<Point> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<Point> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let name_end = line
        .find(|c: char| c == '{' || c.is_whitespace())
        .unwrap_or(line.len());
    let name = &line[..name_end];
    if name.is_empty() {
        return None;
    }
    let mut rest = &line[name_end..];
    let mut labels = BTreeMap::new();
    if let Some(after) = rest.strip_prefix('{') {
        let (parsed, remaining) = parse_labels(after)?;
        labels = parsed;
        rest = remaining;
    }
    let value_text = rest.split_whitespace().next()?;
    let value = parse_value(value_text)?;
    Some(Point {
        name: name.to_string(),
        labels,
        value,
    })
}

/// Parse `k="v",k2="v2"}` and return the labels and the text after the closing brace.
fn parse_labels(mut s: &str) -> Option<(BTreeMap<String, String>, &str)> {
    let mut labels = BTreeMap::new();
    loop {
        s = s.trim_start_matches([' ', ',']);
        if let Some(after) = s.strip_prefix('}') {
            return Some((labels, after));
        }
        let eq = s.find('=')?;
        let key = s[..eq].trim().to_string();
        s = s[eq + 1..].trim_start().strip_prefix('"')?;
        let mut value = String::new();
        let mut chars = s.char_indices();
        let end = loop {
            let (i, c) = chars.next()?;
            match c {
                '\\' => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                '"' => break i,
                other => value.push(other),
            }
        };
        labels.insert(key, value);
        s = &s[end + 1..];
    }
}

fn parse_value(s: &str) -> Option<f64> {
    match s {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        _ => s.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_labels_values_and_skips_comments() {
        let text = "# HELP x y\n# TYPE recover_gate_requests counter\n\
            recover_gate_requests_total{outcome=\"admitted\"} 12\n\
            recover_gate_limit_rate_per_s +Inf\n\
            lat_bucket{le=\"0.5\",who=\"a\\\"b\"} 3 1700000000\n\
            broken{ 1\n";
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
