//! What can go wrong when describing a simulation: every variant names the parameter, flag
//! or file position at fault, because the user has to find and fix it.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("unknown scenario `{0}`; built-in scenarios: retry-storm, config-deploy, slow-replica, provider-outage, retry-layers, breaker, bulkhead (or give a .yaml file)")]
    UnknownScenario(String),
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
    #[error("{}:{line}:{column}: field `{field}`: {message}", path.display())]
    File {
        path: PathBuf,
        line: usize,
        column: usize,
        field: String,
        message: String,
    },
    #[error("{}: {message}", path.display())]
    FileOther { path: PathBuf, message: String },
    #[error("policy `{0}` is not one of immediate, backoff, backoff-jitter")]
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
