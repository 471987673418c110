//! Which exposition format to answer `/metrics` with, and the Prometheus text format
//! (0.0.4) made from the OpenMetrics text `prometheus-client` writes.
//!
//! Why both: Prometheus asks for OpenMetrics first (its `Accept` header lists
//! `application/openmetrics-text` before `text/plain;version=0.0.4`), while `promtool check
//! metrics`, curl and many other scrapers read the older text format, in which an
//! OpenMetrics counter family (`# TYPE x counter` with samples `x_total`) reads as two
//! families, one of them without help. So each server answers what was asked, labelled
//! with the right content type, and text 0.0.4 when nothing in particular was.

/// `Content-Type` of an OpenMetrics answer.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// `Content-Type` of a text 0.0.4 answer.
pub const TEXT_004: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The two formats a `/metrics` endpoint answers in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    OpenMetrics,
    Text004,
}

impl Format {
    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => OPENMETRICS,
            Format::Text004 => TEXT_004,
        }
    }
}

/// The quality a media range in an `Accept` header is given (`q=`, default 1).
fn quality(params: &str) -> f64 {
    params
        .split(';')
        .filter_map(|p| p.trim().strip_prefix("q="))
        .find_map(|q| q.trim().parse::<f64>().ok())
        .unwrap_or(1.0)
}

/// OpenMetrics when the client accepts it at least as much as plain text, text 0.0.4
/// otherwise (no header, `*/*`, `text/plain`).
pub fn negotiate(accept: Option<&str>) -> Format {
    let Some(accept) = accept else {
        return Format::Text004;
    };
    let (mut om, mut text) = (0.0f64, 0.0f64);
    for range in accept.split(',') {
        let (media, params) = range.split_once(';').unwrap_or((range, ""));
        let q = quality(params);
        match media.trim().to_ascii_lowercase().as_str() {
            "application/openmetrics-text" => om = om.max(q),
            "text/plain" => text = text.max(q),
            _ => {}
        }
    }
    if om > 0.0 && om >= text {
        Format::OpenMetrics
    } else {
        Format::Text004
    }
}

/// Spell infinities as the exposition formats do (`+Inf`, `-Inf`); `prometheus-client`
/// prints Rust's `inf`.
fn value(v: &str) -> &str {
    match v {
        "inf" | "+inf" => "+Inf",
        "-inf" => "-Inf",
        "nan" => "NaN",
        other => other,
    }
}

/// The end of a sample's name and labels: after the closing brace (quotes respected), or
/// at the first space.
fn series_end(line: &str) -> usize {
    let Some(open) = line.find('{') else {
        return line.find(' ').unwrap_or(line.len());
    };
    if line[..open].contains(' ') {
        return line.find(' ').unwrap_or(line.len());
    }
    let mut in_quotes = false;
    let mut escaped = false;
    for (i, c) in line.char_indices().skip(open) {
        match c {
            _ if escaped => escaped = false,
            '\\' if in_quotes => escaped = true,
            '"' => in_quotes = !in_quotes,
            '}' if !in_quotes => return i + 1,
            _ => {}
        }
    }
    line.len()
}

/// A sample line with its value spelled as the formats want; for text 0.0.4 the exemplar
/// dropped (it has none) and the timestamp in milliseconds.
fn sample(line: &str, text004: bool) -> String {
    let end = series_end(line);
    let (series, rest) = line.split_at(end);
    let (rest, exemplar) = match rest.find(" # ") {
        Some(i) if text004 => (&rest[..i], ""),
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let mut parts = rest.split_whitespace();
    let v = value(parts.next().unwrap_or(""));
    let ts = parts.next().map(|t| {
        if text004 {
            t.parse::<f64>()
                .map(|s| format!("{}", (s * 1000.0).round() as i64))
                .unwrap_or_else(|_| t.to_string())
        } else {
            t.to_string()
        }
    });
    match ts {
        Some(ts) => format!("{series} {v} {ts}{exemplar}"),
        None => format!("{series} {v}{exemplar}"),
    }
}

/// OpenMetrics text as written, with infinities spelled right.
pub fn tidy_openmetrics(om: &str) -> String {
    let mut out = String::with_capacity(om.len());
    for line in om.lines() {
        if line.starts_with('#') || line.is_empty() {
            out.push_str(line);
        } else {
            out.push_str(&sample(line, false));
        }
        out.push('\n');
    }
    out
}

/// The same metrics in text format 0.0.4: counter families are named with `_total`, info
/// families with `_info`, `# UNIT`, `# EOF` and `_created` samples are dropped, help text
/// loses the `\"` escape 0.0.4 does not have, and timestamps turn into milliseconds.
pub fn to_text_004(om: &str) -> String {
    let mut out = String::with_capacity(om.len());
    let mut help: Option<(String, String)> = None;
    for line in om.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, text) = rest.split_once(' ').unwrap_or((rest, ""));
            help = Some((name.to_string(), text.replace("\\\"", "\"")));
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (family, kind) = rest.split_once(' ').unwrap_or((rest, "unknown"));
            let name = family;
            let (name, kind) = match kind.trim() {
                "counter" if !name.ends_with("_total") => (format!("{name}_total"), "counter"),
                "counter" => (name.to_string(), "counter"),
                "info" => (format!("{name}_info"), "gauge"),
                "stateset" => (name.to_string(), "gauge"),
                "gaugehistogram" => (name.to_string(), "histogram"),
                "gauge" | "histogram" | "summary" => (name.to_string(), kind.trim()),
                _ => (name.to_string(), "untyped"),
            };
            if let Some((_, text)) = help.take().filter(|(h, _)| h == family) {
                out.push_str(&format!("# HELP {name} {text}\n"));
            }
            out.push_str(&format!("# TYPE {name} {kind}\n"));
        } else if line.starts_with('#') || line.trim().is_empty() {
            // # EOF, # UNIT and comments have no 0.0.4 form.
        } else {
            let end = series_end(line);
            let metric = line[..end].split('{').next().unwrap_or("");
            if metric.ends_with("_created") {
                continue;
            }
            out.push_str(&sample(line, true));
            out.push('\n');
        }
    }
    out
}

/// The body and content type to answer with, from the OpenMetrics text of a registry.
pub fn answer(accept: Option<&str>, openmetrics: &str) -> (&'static str, String) {
    let format = negotiate(accept);
    let body = match format {
        Format::OpenMetrics => tidy_openmetrics(openmetrics),
        Format::Text004 => to_text_004(openmetrics),
    };
    (format.content_type(), body)
}

/// The `/metrics` answer for a request with these headers (every server uses this).
pub fn respond(headers: &axum::http::HeaderMap, openmetrics: &str) -> axum::response::Response {
    use axum::response::IntoResponse;
    let accept = headers
        .get(axum::http::header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    let (content_type, body) = answer(accept, openmetrics);
    ([(axum::http::header::CONTENT_TYPE, content_type)], body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What Prometheus 2.42 sends when it scrapes.
    const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

    #[test]
    fn the_format_follows_the_accept_header() {
        assert_eq!(negotiate(Some(PROMETHEUS_ACCEPT)), Format::OpenMetrics);
        assert_eq!(negotiate(None), Format::Text004);
        assert_eq!(negotiate(Some("*/*")), Format::Text004);
        assert_eq!(negotiate(Some("text/plain;version=0.0.4")), Format::Text004);
        assert_eq!(
            negotiate(Some("text/plain;q=1,application/openmetrics-text;q=0.5")),
            Format::Text004
        );
        assert_eq!(
            negotiate(Some("application/openmetrics-text;q=0")),
            Format::Text004
        );
    }

    const OM: &str = "# HELP req Requests \\\"by\\\" outcome.\n\
        # TYPE req counter\n\
        req_total{outcome=\"a b}\"} 3\n\
        req_created{outcome=\"a b}\"} 1700000000.5\n\
        # HELP lim Limit.\n# TYPE lim gauge\n# UNIT lim requests\nlim inf\n\
        # HELP ver Version.\n# TYPE ver info\nver_info{version=\"7\"} 1\n\
        # HELP lat Latency.\n# TYPE lat histogram\n\
        lat_bucket{le=\"+Inf\"} 2 # {trace_id=\"x\"} 0.5 1700000000.0\nlat_sum 0.5\nlat_count 2\n\
        # EOF\n";

    #[test]
    fn openmetrics_becomes_text_004() {
        let t = to_text_004(OM);
        assert_eq!(
            t,
            "# HELP req_total Requests \"by\" outcome.\n# TYPE req_total counter\n\
             req_total{outcome=\"a b}\"} 3\n\
             # HELP lim Limit.\n# TYPE lim gauge\nlim +Inf\n\
             # HELP ver_info Version.\n# TYPE ver_info gauge\nver_info{version=\"7\"} 1\n\
             # HELP lat Latency.\n# TYPE lat histogram\n\
             lat_bucket{le=\"+Inf\"} 2\nlat_sum 0.5\nlat_count 2\n"
        );
        let (ct, body) = answer(Some(PROMETHEUS_ACCEPT), OM);
        assert_eq!(ct, OPENMETRICS);
        assert!(
            body.contains("lim +Inf\n") && body.ends_with("# EOF\n"),
            "{body}"
        );
        assert!(body.contains("# {trace_id=\"x\"} 0.5"), "{body}");
        assert_eq!(answer(None, OM).0, TEXT_004);
    }

    #[test]
    fn timestamps_turn_into_milliseconds() {
        assert_eq!(to_text_004("x 1 1700000000.25\n"), "x 1 1700000000250\n");
    }
}
