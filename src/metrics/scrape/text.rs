//! Prometheus text exposition (0.0.4) and OpenMetrics 1.0 text parser.
//!
//! Exists so the controller can read `/metrics` endpoints directly, without a Prometheus
//! server in between. It accepts what `prometheus-client` and the Go client emit:
//! `# HELP` / `# TYPE` / `# UNIT` comments, other comments, label values with `\\`, `\"`
//! and `\n` escapes, `NaN`, `+Inf`, `-Inf` (and `inf`, which prometheus-client 0.24
//! writes for an infinite gauge), optional timestamps, OpenMetrics exemplars
//! (` # {...} v`) and the `# EOF` terminator (anything after it is ignored).
//! Errors name the line, so a broken exporter is easy to find.

use std::collections::BTreeMap;

/// One sample line: `name{labels} value`.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    /// Sorted by label name, so equal label sets compare equal.
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

impl Sample {
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A parsed `/metrics` page.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Exposition {
    pub samples: Vec<Sample>,
    /// Family name -> type from `# TYPE` lines ("counter", "gauge", "histogram", ...).
    pub types: BTreeMap<String, String>,
}

/// What is wrong with an exposition, and where.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

/// Parse a whole exposition page.
pub fn parse(text: &str) -> Result<Exposition, ParseError> {
    let mut out = Exposition::default();
    each_line(text, |line| {
        match line {
            Line::Type(name, kind) => {
                out.types.insert(name.to_string(), kind.to_string());
            }
            Line::Sample(text) => out.samples.push(parse_sample(text, true)?),
        }
        Ok(())
    })?;
    Ok(out)
}

/// Which samples of a page to keep: those of the metric names some signal reads (every
/// name when `names` is `None`), at most `cap` of them.
#[derive(Debug, Clone, Copy)]
pub struct Keep<'a> {
    pub names: Option<&'a std::collections::HashSet<String>>,
    pub cap: usize,
}

/// Why a page gives no samples.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PageError {
    #[error("bad exposition: {0}")]
    Parse(#[from] ParseError),
    #[error("{count} series of the metrics the signals read, over the cap of {cap} series a page (see docs/reference/limits.md)")]
    TooManySeries { count: usize, cap: usize },
}

/// The samples `keep` asks for. Every line is still checked (a broken page is refused as
/// [`parse`] refuses it), but the others are neither copied nor kept, so a page's cost
/// beyond its bytes is the series the signals read. Past the cap samples are only counted.
pub fn parse_kept(text: &str, keep: Keep<'_>) -> Result<Vec<Sample>, PageError> {
    let mut kept = Vec::new();
    let mut count = 0usize;
    each_line(text, |line| {
        if let Line::Sample(text) = line {
            let wanted = keep.names.is_none_or(|n| n.contains(sample_name(text)));
            count += usize::from(wanted);
            let build = wanted && count <= keep.cap;
            let sample = parse_sample(text, build)?;
            if build {
                kept.push(sample);
            }
        }
        Ok(())
    })?;
    if count > keep.cap {
        return Err(PageError::TooManySeries {
            count,
            cap: keep.cap,
        });
    }
    Ok(kept)
}

enum Line<'a> {
    Type(&'a str, &'a str),
    Sample(&'a str),
}

/// Call `f` on each `# TYPE` and sample line up to `# EOF`; its error gets the line number.
fn each_line<'a>(
    text: &'a str,
    mut f: impl FnMut(Line<'a>) -> Result<(), String>,
) -> Result<(), ParseError> {
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        let parsed = match line.strip_prefix('#') {
            Some(comment) => {
                let comment = comment.trim_start();
                if comment == "EOF" {
                    break;
                }
                let mut parts = comment.splitn(3, char::is_whitespace);
                match (parts.next(), parts.next(), parts.next()) {
                    (Some("TYPE"), Some(name), Some(kind)) => Line::Type(name, kind.trim()),
                    _ => continue,
                }
            }
            None => Line::Sample(line),
        };
        f(parsed).map_err(|message| ParseError {
            line: i + 1,
            message,
        })?;
    }
    Ok(())
}

fn is_name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':'
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// The metric name a sample line starts with (empty when it starts with none).
fn sample_name(line: &str) -> &str {
    let end = line
        .char_indices()
        .find(|&(_, c)| !is_name_char(c))
        .map(|(i, _)| i)
        .unwrap_or(line.len());
    &line[..end]
}

/// Check a sample line; build the sample only when `build` (else its name and labels are
/// left empty: nothing of an unread line is copied).
fn parse_sample(line: &str, build: bool) -> Result<Sample, String> {
    let name = sample_name(line);
    if name.is_empty() || !name.starts_with(is_name_start) {
        return Err(format!("expected a metric name, found {:?}", short(line)));
    }
    let mut rest = &line[name.len()..];
    let mut labels = Vec::new();
    if let Some(after) = rest.strip_prefix('{') {
        rest = parse_labels(after, build.then_some(&mut labels))?;
    }
    if !rest.starts_with([' ', '\t']) {
        return Err(format!("{name}: expected a space before the value"));
    }
    // An OpenMetrics exemplar follows " # "; the value and timestamp come before it.
    let rest = match rest.find(" # ") {
        Some(i) => &rest[..i],
        None => rest,
    };
    let mut fields = rest.split_whitespace();
    let value_text = fields
        .next()
        .ok_or_else(|| format!("{name}: missing value"))?;
    let value =
        parse_value(value_text).ok_or_else(|| format!("{name}: bad value {value_text:?}"))?;
    if let Some(ts) = fields.next() {
        if ts.parse::<f64>().is_err() {
            return Err(format!("{name}: bad timestamp {ts:?}"));
        }
    }
    if let Some(extra) = fields.next() {
        return Err(format!("{name}: unexpected {extra:?} after the value"));
    }
    labels.sort();
    let name = if build {
        name.to_string()
    } else {
        String::new()
    };
    Ok(Sample {
        name,
        labels,
        value,
    })
}

type Labels = Vec<(String, String)>;

/// Parse `a="x",b="y"}` (the opening brace already consumed) into `out` when given;
/// returns the rest after `}`.
fn parse_labels<'s>(mut s: &'s str, mut out: Option<&mut Labels>) -> Result<&'s str, String> {
    loop {
        s = s.trim_start();
        if let Some(rest) = s.strip_prefix('}') {
            return Ok(rest);
        }
        let end = s
            .char_indices()
            .find(|&(_, c)| !is_name_char(c))
            .map(|(i, _)| i)
            .unwrap_or(s.len());
        let label = &s[..end];
        if label.is_empty() {
            return Err(format!("expected a label name, found {:?}", short(s)));
        }
        s = s[end..].trim_start();
        s = s
            .strip_prefix('=')
            .ok_or_else(|| format!("label {label}: expected '='"))?
            .trim_start();
        s = s
            .strip_prefix('"')
            .ok_or_else(|| format!("label {label}: expected a quoted value"))?;
        let rest = match out.as_deref_mut() {
            Some(labels) => {
                let (value, rest) = unescape_quoted(s)
                    .ok_or_else(|| format!("label {label}: unterminated value"))?;
                labels.push((label.to_string(), value));
                rest
            }
            None => skip_quoted(s).ok_or_else(|| format!("label {label}: unterminated value"))?,
        };
        s = rest.trim_start();
        if let Some(rest) = s.strip_prefix(',') {
            s = rest;
        } else if !s.starts_with('}') {
            return Err(format!("label {label}: expected ',' or '}}'"));
        }
    }
}

/// The rest after a quoted value's closing quote, without reading the value.
fn skip_quoted(s: &str) -> Option<&str> {
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => return Some(&s[i + 1..]),
            // An escape always takes the next character; it is ASCII or starts a UTF-8
            // sequence whose other bytes are never a quote or a backslash.
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
    None
}

/// Read a label value up to its closing quote, resolving escapes. Returns the rest.
pub(crate) fn unescape_quoted(s: &str) -> Option<(String, &str)> {
    let mut out = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((out, &s[i + 1..])),
            '\\' => match chars.next()?.1 {
                'n' => out.push('\n'),
                '\\' => out.push('\\'),
                '"' => out.push('"'),
                // Unknown escapes are kept verbatim, as the Prometheus parser does.
                other => {
                    out.push('\\');
                    out.push(other);
                }
            },
            c => out.push(c),
        }
    }
    None
}

/// Like Go's strconv.ParseFloat, which Prometheus uses: `NaN`, `+Inf`, `-Inf`, `Inf` and
/// `Infinity` in any case (prometheus-client 0.24 writes an infinite gauge as `inf`).
fn parse_value(s: &str) -> Option<f64> {
    let (sign, body) = match s.as_bytes().first() {
        Some(b'+') => (1.0, &s[1..]),
        Some(b'-') => (-1.0, &s[1..]),
        _ => (1.0, s),
    };
    let lower = body.to_ascii_lowercase();
    match lower.as_str() {
        "nan" => Some(f64::NAN),
        "inf" | "infinity" => Some(sign * f64::INFINITY),
        _ if lower.chars().any(|c| c.is_ascii_alphabetic() && c != 'e') => None,
        _ => s.parse().ok(),
    }
}

fn short(s: &str) -> String {
    s.chars().take(40).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_special_values_and_eof() {
        let text = "# HELP x help with \"quotes\"\n# TYPE x gauge\n\
            x{path=\"a\\\\b\",msg=\"say \\\"hi\\\"\\n\"} NaN\n\
            y +Inf 1700000000000\n\
            z_total{a=\"1\"} 3 # {trace_id=\"abc\"} 1.0\n\
            # EOF\n\
            garbage after eof\n";
        let e = parse(text).unwrap();
        assert_eq!(e.samples.len(), 3);
        assert_eq!(e.samples[0].label("path"), Some("a\\b"));
        assert_eq!(e.samples[0].label("msg"), Some("say \"hi\"\n"));
        assert!(e.samples[0].value.is_nan());
        assert_eq!(e.samples[1].value, f64::INFINITY);
        assert_eq!(e.samples[2].value, 3.0);
        assert_eq!(e.types.get("x").map(String::as_str), Some("gauge"));
    }

    #[test]
    fn errors_name_the_line() {
        let err = parse("ok 1\nbad{a=\"1\" 2\n").unwrap_err();
        assert_eq!(err.line, 2);
        let err = parse("ok 1\n\nnovalue\n").unwrap_err();
        assert_eq!(err.line, 3);
        assert!(parse("x abc").is_err());
        assert_eq!(
            parse("x -infinity").unwrap().samples[0].value,
            f64::NEG_INFINITY
        );
        assert_eq!(parse("x inf").unwrap().samples[0].value, f64::INFINITY);
        assert!(parse("x 0x10").is_err());
    }
}
