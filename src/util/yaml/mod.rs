//! Diagnostics for the YAML files people write (runbooks, inventories, `serve.yaml`):
//! every problem is one [`Diagnostic`], `file:line:column: field.path: message`, whether
//! serde found it while reading or a check found it afterwards.
//!
//! serde_yaml knows a position only while it reads, and for an error about a whole
//! mapping (an unknown or missing field, a bad value checked after the fact) it gives the
//! position where that mapping or its parent began, often lines away; its message also
//! ends with that position and starts with the path. So the path is located in the text
//! ([`locate`]) and the message is cut to its words, and a file's problems all read alike.

mod locate;

pub use locate::{locate, locate_exact, path_string, segs_of, Seg};

use serde::de::DeserializeOwned;
use std::fmt;

/// One problem in a YAML file, at a place a person can jump to.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Diagnostic {
    pub file: String,
    pub line: usize,
    pub column: usize,
    /// Field path, e.g. `spec.steps[2].with.batch`.
    pub path: String,
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}: {}",
            self.file, self.line, self.column, self.path, self.message
        )
    }
}

impl std::error::Error for Diagnostic {}

impl Diagnostic {
    /// A problem with the node at `path` of `src` (a check made after parsing).
    pub fn at(file: &str, src: &str, path: &[Seg], message: impl Into<String>) -> Self {
        let (line, column) = locate(src, path);
        Diagnostic {
            file: file.to_string(),
            line,
            column,
            path: path_string(path),
            message: message.into(),
        }
    }

    /// A problem serde found while reading `src`.
    pub fn from_serde(
        file: &str,
        src: &str,
        e: &serde_path_to_error::Error<serde_yaml::Error>,
    ) -> Self {
        let path = segs_of(e.path());
        let shown = path_string(&path);
        let serde_at = e.inner().location().map(|l| (l.line(), l.column()));
        // serde's position is right when it is at or past the node (a bad scalar, a
        // syntax error further down); before the node it is where an enclosing mapping
        // began.
        let (line, column) = match (locate_exact(src, &path), serde_at) {
            (Some(node), Some(at)) => node.max(at),
            (Some(node), None) => node,
            (None, Some(at)) => at,
            (None, None) => locate(src, &path),
        };
        Diagnostic {
            file: file.to_string(),
            line,
            column,
            message: bare_message(&e.inner().to_string(), &shown),
            path: shown,
        }
    }
}

/// Read `src` as a `T`, or say where it is wrong.
pub fn parse<T: DeserializeOwned>(file: &str, src: &str) -> Result<T, Diagnostic> {
    serde_path_to_error::deserialize(serde_yaml::Deserializer::from_str(src))
        .map_err(|e| Diagnostic::from_serde(file, src, &e))
}

/// serde_yaml's message without the location and path it adds (a diagnostic prints its
/// own).
pub fn bare_message(msg: &str, path: &str) -> String {
    let mut m = match msg.rfind(" at line ") {
        Some(i) => &msg[..i],
        None => msg,
    };
    if let Some((head, rest)) = m.split_once(": ") {
        let within = |h: &str| {
            path == h || path.starts_with(&format!("{h}.")) || path.starts_with(&format!("{h}["))
        };
        if !head.contains(' ') && (within(head) || head.contains('.') || head.contains('[')) {
            m = rest;
        }
    }
    m.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_lose_serde_yamls_path_and_position() {
        assert_eq!(
            bare_message(
                "budget: unknown field `x`, expected `y` at line 7 column 3",
                "budget.x"
            ),
            "unknown field `x`, expected `y`"
        );
        assert_eq!(
            bare_message("routes[0]: missing field `name`", "routes[0].target"),
            "missing field `name`"
        );
        assert_eq!(
            bare_message("invalid type: string, expected u32", "a.b"),
            "invalid type: string, expected u32"
        );
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Doc {
        outer: Inner,
    }
    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Inner {
        first: u32,
        second: u32,
    }

    #[test]
    fn a_field_is_found_where_it_is_not_where_its_mapping_starts() {
        let src = "outer:\n  first: 1\n  second: x\n";
        let d = parse::<Doc>("d.yaml", src).unwrap_err();
        assert_eq!((d.line, d.path.as_str()), (3, "outer.second"), "{d}");
        let d = parse::<Doc>("d.yaml", "outer:\n  first: 1\n  secnd: 2\n").unwrap_err();
        assert_eq!(d.to_string().matches("line").count(), 0, "{d}");
        assert_eq!((d.line, d.column), (3, 3), "{d}");
    }
}
