//! What a detection reads when it is not a run: a runbook's signals, detection settings
//! and roles, or, without a runbook, the demo system's built-in signal set (so `recover
//! detect` and `recover plan` work on the demo with no runbook at all).

use super::{find_with_roles, RunbookError};
use crate::detect::default_signals;
use crate::detect::windows::Fields;
use crate::detect::DetectorConfig;
use crate::metrics::promql::roles;
use crate::metrics::promql::template::TemplateError;
use crate::metrics::signal::SignalSpec;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The signals and settings a detection judges with.
#[derive(Debug, Clone)]
pub struct Detection {
    pub signals: BTreeMap<String, SignalSpec>,
    pub config: DetectorConfig,
    pub roles: BTreeMap<String, String>,
    /// How messages name the settings.
    pub fields: Fields,
}

/// Why there is nothing to judge with.
#[derive(Debug, thiserror::Error)]
pub enum DetectionError {
    #[error(transparent)]
    Runbook(#[from] RunbookError),
    #[error("role: {0}")]
    Role(#[from] TemplateError),
}

/// The runbook `name`'s detection, or the built-in one; `roles` replace the declared ones.
pub fn detection(
    name: Option<&str>,
    dirs: &[PathBuf],
    roles: &BTreeMap<String, String>,
) -> Result<Detection, DetectionError> {
    if let Some(name) = name {
        let rb = find_with_roles(name, dirs, roles)?.runbook;
        return Ok(Detection {
            signals: rb.signals,
            config: rb.detect,
            roles: rb.roles,
            fields: Fields::runbook(),
        });
    }
    let mut all = roles::default_roles();
    all.extend(roles.clone());
    Ok(Detection {
        signals: default_signals::demo_signals_with_roles(&all)?,
        config: default_signals::detector_config(),
        roles: all,
        fields: Fields {
            interval: "the built-in interval".into(),
            grace: "the built-in grace".into(),
            grace_scrapes: "a runbook's spec.detect.grace_scrapes".into(),
            persist: "the built-in persist".into(),
            persist_scrapes: "a runbook's spec.detect.persist_scrapes".into(),
        },
    })
}
