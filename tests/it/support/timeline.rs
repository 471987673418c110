//! `timeline.svg` as a reader sees it: each text with the box it covers, estimated from
//! its position, anchor, font size and length (0.55 em per character, about the average
//! sans-serif letter), so tests can check that no label covers another and read the
//! figures the picture shows.

/// One `<text>` of the SVG and the box it covers, in pixels.
#[derive(Debug, Clone)]
pub struct Label {
    pub text: String,
    pub left: f64,
    pub top: f64,
    pub right: f64,
    pub bottom: f64,
}

fn attr(tag: &str, name: &str) -> Option<String> {
    let at = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    let len = tag[at..].find('"')?;
    Some(tag[at..at + len].to_string())
}

fn unescape(s: &str) -> String {
    s.replace("&gt;", ">")
        .replace("&lt;", "<")
        .replace("&apos;", "'")
        .replace("&quot;", "\"")
        .replace("&amp;", "&")
}

/// Every text of `svg`, in order.
pub fn labels(svg: &str) -> Vec<Label> {
    let mut out = Vec::new();
    let mut rest = svg;
    while let Some(open) = rest.find("<text ") {
        let tag_end = open + rest[open..].find('>').expect("unclosed <text");
        let tag = &rest[open..tag_end];
        let close = tag_end + rest[tag_end..].find("</text>").expect("no </text>");
        let text = unescape(rest[tag_end + 1..close].trim());
        rest = &rest[close..];
        let num = |n: &str| -> f64 {
            attr(tag, n)
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("<text> without a numeric {n}: {tag}"))
        };
        let (x, y, size) = (num("x"), num("y"), num("font-size"));
        let (w, h) = (text.chars().count() as f64 * size * 0.55, size);
        let dy = attr(tag, "dy").unwrap_or_default();
        // plotters hangs text below y (dy 0.76em), centres it on y (dy 0.5ex), or else
        // sits it on y as a baseline.
        let top = if dy.ends_with("em") {
            y
        } else if dy.ends_with("ex") {
            y - h / 2.0
        } else {
            y - 0.8 * h
        };
        let left = match attr(tag, "text-anchor").as_deref() {
            Some("middle") => x - w / 2.0,
            Some("end") => x - w,
            _ => x,
        };
        let (left, top, w, h) = if attr(tag, "transform").is_some_and(|t| t.contains("rotate")) {
            (x - h / 2.0, y - w / 2.0, h, w)
        } else {
            (left, top, w, h)
        };
        out.push(Label {
            text,
            left,
            top,
            right: left + w,
            bottom: top + h,
        });
    }
    out
}

/// The pairs of texts whose boxes overlap.
pub fn overlapping(labels: &[Label]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (i, a) in labels.iter().enumerate() {
        for b in &labels[i + 1..] {
            if a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom {
                out.push((a.text.clone(), b.text.clone()));
            }
        }
    }
    out
}
