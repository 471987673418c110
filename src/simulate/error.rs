//! What can go wrong when describing a simulation: every variant names the parameter, flag
//! or file position at fault, because the user has to find and fix it.

use crate::util::yaml::Diagnostic;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("unknown scenario `{name}`; built-in scenarios: {known} (or give a .yaml file)")]
    UnknownScenario { name: String, known: String },
    #[error("--set {0:?}: expected key=value")]
    SetSyntax(String),
    #[error("--set {key}: unknown parameter `{key}` for {model}; known: {known}")]
    UnknownParam {
        key: String,
        model: &'static str,
        known: String,
    },
    #[error("--set {key}={value}: {reason}")]
    BadValue {
        key: String,
        value: String,
        reason: String,
    },
    #[error("parameter `{key}`: {reason}")]
    Invalid { key: &'static str, reason: String },
    /// A scenario file, at file:line:column with the field, like every YAML file.
    #[error(transparent)]
    File(#[from] Diagnostic),
    #[error("{}: {message}", path.display())]
    FileOther { path: PathBuf, message: String },
    #[error("policy `{0}` is not one of fixed, exponential, full-jitter")]
    UnknownPolicy(String),
    #[error("plot: {0}")]
    Plot(String),
}

impl SimError {
    pub(crate) fn invalid(key: &'static str, reason: impl Into<String>) -> Self {
        SimError::Invalid {
            key,
            reason: reason.into(),
        }
    }
}
