//! Find where a field path (`spec.steps[2].with.batch`) sits in a YAML document's text.
//!
//! serde_yaml reports a location only for errors it raises while reading the text itself.
//! Semantic checks run after parsing, and action parameters are read from an already parsed
//! value; both know the field path but not the position. Re-locating the path in the text
//! keeps every message at the right `file:line:column` without a span-carrying YAML parser.
//! It understands block mappings and sequences (what runbooks are written in) and falls back
//! to the closest enclosing node for flow style.

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seg {
    Key(String),
    Index(usize),
}

/// Render a path the way messages show it: `spec.steps[2].with.batch`.
pub fn path_string(path: &[Seg]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Seg::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    if out.is_empty() {
        out.push('.');
    }
    out
}

/// Convert a serde_path_to_error path into our segments.
pub fn segs_of(path: &serde_path_to_error::Path) -> Vec<Seg> {
    use serde_path_to_error::Segment;
    path.iter()
        .filter_map(|s| match s {
            Segment::Seq { index } => Some(Seg::Index(*index)),
            Segment::Map { key } => Some(Seg::Key(key.clone())),
            Segment::Enum { variant } => Some(Seg::Key(variant.clone())),
            Segment::Unknown => None,
        })
        .collect()
}

#[derive(Debug, Clone, Copy)]
struct Line<'a> {
    /// 1-based line number.
    no: usize,
    /// 0-based column where `text` starts.
    col: usize,
    text: &'a str,
}

/// The 1-based (line, column) of the deepest node of `path` found in `src`.
pub fn locate(src: &str, path: &[Seg]) -> (usize, usize) {
    walk(src, path).0
}

/// The 1-based (line, column) of the node at `path`, if the whole path is in `src`.
pub fn locate_exact(src: &str, path: &[Seg]) -> Option<(usize, usize)> {
    match walk(src, path) {
        (pos, true) => Some(pos),
        _ => None,
    }
}

/// The deepest node of `path` found, and whether that is the whole path.
fn walk(src: &str, path: &[Seg]) -> ((usize, usize), bool) {
    let mut region: Vec<Line> = src
        .lines()
        .enumerate()
        .filter_map(|(i, raw)| {
            let text = raw.trim_start();
            let content = strip_comment(text);
            if content.trim().is_empty() || content.trim() == "---" {
                return None;
            }
            Some(Line {
                no: i + 1,
                col: raw.len() - text.len(),
                text: content.trim_end(),
            })
        })
        .collect();
    let mut pos = region.first().map(|l| (l.no, l.col + 1)).unwrap_or((1, 1));
    for (n, seg) in path.iter().enumerate() {
        let Some(first) = region.first().copied() else {
            return (pos, false);
        };
        if first.text.starts_with('{') || first.text.starts_with('[') {
            // Flow style: point at the key inside the line if we can, then stop.
            if let Seg::Key(k) = seg {
                if let Some(off) = first.text.find(&format!("{k}:")) {
                    pos = (first.no, first.col + off + 1);
                    return (pos, n + 1 == path.len());
                }
            }
            return (pos, false);
        }
        let base = first.col;
        let found = match seg {
            Seg::Key(k) => region
                .iter()
                .position(|l| l.col == base && key_of(l.text) == Some(k.as_str())),
            Seg::Index(i) => region
                .iter()
                .enumerate()
                .filter(|(_, l)| l.col == base && is_item(l.text))
                .nth(*i)
                .map(|(j, _)| j),
        };
        let Some(j) = found else {
            return (pos, false);
        };
        let line = region[j];
        pos = (line.no, line.col + 1);
        let mut child: Vec<Line> = Vec::new();
        let rest = match seg {
            Seg::Key(_) => line.text.find(':').map(|c| &line.text[c + 1..]),
            Seg::Index(_) => Some(&line.text[1..]),
        }
        .unwrap_or("");
        let trimmed = rest.trim_start();
        if !trimmed.is_empty() {
            let col = line.col + (line.text.len() - trimmed.len());
            child.push(Line {
                no: line.no,
                col,
                text: trimmed,
            });
        }
        child.extend(region[j + 1..].iter().take_while(|l| l.col > base).copied());
        region = child;
    }
    (pos, true)
}

fn strip_comment(text: &str) -> &str {
    if text.starts_with('#') {
        return "";
    }
    match text.find(" #") {
        Some(i) if !text[..i].contains('"') && !text[..i].contains('\'') => &text[..i],
        _ => text,
    }
}

fn is_item(text: &str) -> bool {
    text == "-" || text.starts_with("- ")
}

fn key_of(text: &str) -> Option<&str> {
    if is_item(text) {
        return None;
    }
    let colon = text.find(':')?;
    let after = &text[colon + 1..];
    if !(after.is_empty() || after.starts_with(' ')) {
        return None;
    }
    Some(text[..colon].trim().trim_matches('"').trim_matches('\''))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "\
apiVersion: recover/v1
spec:
  # a comment
  signals:
    goodput: {scrape: 'x'}
  steps:
    - name: block
      action: gate.limit
    - name: restart
      action: restart.batched
      with:
        batch: 150%
";

    fn k(s: &str) -> Seg {
        Seg::Key(s.into())
    }

    #[test]
    fn finds_nested_keys_and_items() {
        let p = [k("spec"), k("steps"), Seg::Index(1), k("with"), k("batch")];
        assert_eq!(locate(DOC, &p), (12, 9));
        assert_eq!(path_string(&p), "spec.steps[1].with.batch");
        assert_eq!(
            locate(DOC, &[k("spec"), k("steps"), Seg::Index(0), k("name")]),
            (7, 7)
        );
        assert_eq!(
            locate(DOC, &[k("spec"), k("steps"), Seg::Index(1), k("action")]),
            (10, 7)
        );
    }

    #[test]
    fn says_whether_the_whole_path_is_there() {
        let p = [k("spec"), k("steps"), Seg::Index(1), k("with"), k("batch")];
        assert_eq!(locate_exact(DOC, &p), Some((12, 9)));
        assert_eq!(locate_exact(DOC, &[k("spec"), k("nope")]), None);
        assert_eq!(
            locate_exact(DOC, &[k("spec"), k("signals"), k("goodput"), k("scrape")]),
            Some((5, 15))
        );
        assert_eq!(
            locate_exact(DOC, &[k("spec"), k("signals"), k("goodput"), k("other")]),
            None
        );
    }

    #[test]
    fn falls_back_to_the_closest_node() {
        assert_eq!(
            locate(DOC, &[k("spec"), k("signals"), k("goodput"), k("scrape")]),
            (5, 15)
        );
        assert_eq!(locate(DOC, &[k("spec"), k("nope")]), (2, 1));
    }
}
