//! Parse and validate a runbook's text. Two passes: serde reads the document (syntax,
//! types, unknown fields, unknown actions, durations), then [`super::validate`] checks what
//! serde cannot (references, ranges, safety rules). Every problem becomes a
//! [`Diagnostic`] naming file:line:column and the field path.

use super::locate::{locate, path_string, segs_of as segs, Seg};
use super::schema::RawRunbook;
use super::Runbook;
use std::fmt;
use std::path::{Path, PathBuf};

/// One problem in a runbook, at a place a person can jump to.
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

/// Why a runbook could not be used.
#[derive(Debug, thiserror::Error)]
pub enum RunbookError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{}", render(.0))]
    Invalid(Vec<Diagnostic>),
    #[error("no runbook named {name:?} (looked in {searched})")]
    NotFound { name: String, searched: String },
}

fn render(diags: &[Diagnostic]) -> String {
    diags
        .iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

impl RunbookError {
    /// The diagnostics, if this is a validation failure.
    pub fn diagnostics(&self) -> &[Diagnostic] {
        match self {
            RunbookError::Invalid(d) => d,
            _ => &[],
        }
    }
}

/// Collects diagnostics for one file, locating each path in the text.
pub(crate) struct Reporter<'a> {
    pub file: &'a str,
    pub src: &'a str,
    pub diags: Vec<Diagnostic>,
}

impl<'a> Reporter<'a> {
    pub fn new(file: &'a str, src: &'a str) -> Self {
        Reporter {
            file,
            src,
            diags: Vec::new(),
        }
    }

    pub fn at(&mut self, path: &[Seg], message: impl Into<String>) {
        let (line, column) = locate(self.src, path);
        self.push(path, line, column, message.into());
    }

    pub fn push(&mut self, path: &[Seg], line: usize, column: usize, message: String) {
        self.diags.push(Diagnostic {
            file: self.file.to_string(),
            line,
            column,
            path: path_string(path),
            message,
        });
    }
}

/// serde_yaml's message without the location and path it appends (we print our own).
pub(crate) fn bare_message(msg: &str, path: &str) -> String {
    let mut m = match msg.rfind(" at line ") {
        Some(i) => &msg[..i],
        None => msg,
    };
    if let Some(rest) = m.strip_prefix(&format!("{path}: ")) {
        m = rest;
    } else if let Some((head, rest)) = m.split_once(": ") {
        if !head.contains(' ') && (head.contains('.') || head.contains('[')) {
            m = rest;
        }
    }
    m.to_string()
}

/// Parse and validate runbook text; `file` is how messages name it.
pub fn parse_str(file: &str, src: &str) -> Result<Runbook, RunbookError> {
    parse_str_with_roles(file, src, &Default::default())
}

/// [`parse_str`], with roles (checked by the caller) replacing or adding to `spec.roles`.
pub fn parse_str_with_roles(
    file: &str,
    src: &str,
    roles: &std::collections::BTreeMap<String, String>,
) -> Result<Runbook, RunbookError> {
    let mut rep = Reporter::new(file, src);
    let de = serde_yaml::Deserializer::from_str(src);
    let raw: RawRunbook = match serde_path_to_error::deserialize(de) {
        Ok(r) => r,
        Err(e) => {
            let path = segs(e.path());
            let shown = path_string(&path);
            let msg = bare_message(&e.inner().to_string(), &shown);
            match e.inner().location() {
                Some(loc) => rep.push(&path, loc.line(), loc.column(), msg),
                None => rep.at(&path, msg),
            }
            return Err(RunbookError::Invalid(rep.diags));
        }
    };
    let runbook = super::validate::validate(raw, roles, &mut rep);
    match runbook {
        Some(r) if rep.diags.is_empty() => Ok(r),
        _ => Err(RunbookError::Invalid(rep.diags)),
    }
}

/// Read and validate a runbook file.
pub fn load_file(path: &Path) -> Result<super::LoadedRunbook, RunbookError> {
    load_file_with_roles(path, &Default::default())
}

pub(crate) fn load_file_with_roles(
    path: &Path,
    roles: &std::collections::BTreeMap<String, String>,
) -> Result<super::LoadedRunbook, RunbookError> {
    let src = std::fs::read_to_string(path).map_err(|source| RunbookError::Io {
        path: path.display().to_string(),
        source,
    })?;
    let runbook = parse_str_with_roles(&path.display().to_string(), &src, roles)?;
    Ok(super::LoadedRunbook {
        runbook,
        source: src,
        origin: super::Origin::File(PathBuf::from(path)),
    })
}
