//! Parse and validate a runbook's text. Two passes: serde reads the document (syntax,
//! types, unknown fields, unknown actions, durations), then [`super::validate`] checks what
//! serde cannot (references, ranges, safety rules). Every problem becomes a
//! [`Diagnostic`] naming file:line:column and the field path, gathered by a [`Reporter`].

use super::error::{Diagnostic, Reporter, RunbookError};
use super::schema::RawRunbook;
use super::Runbook;
use std::path::{Path, PathBuf};

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
    super::limits::check_size(file, src.len()).map_err(|d| RunbookError::Invalid(vec![d]))?;
    let mut rep = Reporter::new(file, src);
    let de = serde_yaml::Deserializer::from_str(src);
    let raw: RawRunbook = match serde_path_to_error::deserialize(de) {
        Ok(r) => r,
        Err(e) => {
            rep.diags.push(Diagnostic::from_serde(file, src, &e));
            return Err(RunbookError::Invalid(rep.diags));
        }
    };
    let (steps, on_failure) = (raw.spec.steps.len(), raw.spec.on_failure.len());
    super::limits::check_steps(file, src, steps, on_failure)
        .map_err(|d| RunbookError::Invalid(vec![d]))?;
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
    let src = super::limits::read_capped(path)?;
    let runbook = parse_str_with_roles(&path.display().to_string(), &src, roles)?;
    Ok(super::LoadedRunbook {
        runbook,
        source: src,
        origin: super::Origin::File(PathBuf::from(path)),
    })
}
