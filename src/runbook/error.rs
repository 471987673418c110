//! Why a runbook cannot be used, and the [`Reporter`] that gathers each problem as a
//! [`Diagnostic`] at file:line:column while the passes (`load`, `limits`, `validate`,
//! `roles`) read it: the vocabulary they share, below all of them.

pub use crate::util::yaml::Diagnostic;

use crate::util::yaml::Seg;

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
        self.diags
            .push(Diagnostic::at(self.file, self.src, path, message));
    }
}
