//! Scenario files: YAML naming the model to run and any parameters that differ from its
//! defaults, optionally a name, a seed and (for a model that runs one) a recovery plan.
//! Read through [`crate::util::yaml`] like every other YAML file the tool reads: unknown
//! fields are refused and every problem, a value the model refuses included, is reported
//! at file:line:column with the field, because a typo silently ignored would answer a
//! different what-if question than the one asked.

use super::error::SimError;
use crate::plan::Plan;
use crate::util::yaml::{self, Diagnostic, Seg};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use std::path::Path;

/// The keys the parameters may sit under: `params`, or the older `system` (config-deploy)
/// and `storm` (retry-storm).
const SECTIONS: [&str; 3] = ["params", "system", "storm"];

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File<P> {
    #[allow(dead_code)] // read first, on its own, to choose the parameter type
    model: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    #[allow(dead_code)] // for the reader of the file; not used by the model
    description: Option<String>,
    #[serde(default)]
    seed: Option<u64>,
    #[serde(default = "none", alias = "system", alias = "storm")]
    params: Option<P>,
    #[serde(default)]
    plan: Option<Plan>,
}

fn none<P>() -> Option<P> {
    None
}

/// What a file says besides its parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Head {
    pub name: Option<String>,
    pub seed: Option<u64>,
}

/// How a model takes what a file gives it.
pub struct Reader<P> {
    /// Refuse values the model cannot run, naming the key.
    pub validate: fn(&P) -> Result<(), SimError>,
    /// Take a `plan:`; an error (the reason) for a model that runs none.
    pub plan: fn(&mut P, Plan) -> Result<(), String>,
}

/// Just the `model:` of a file, to choose how to read the rest.
#[derive(Debug, Deserialize)]
struct ModelOnly {
    model: Option<String>,
}

/// The model a file names, if it names one.
pub fn model_of(text: &str) -> Option<String> {
    serde_yaml::from_str::<ModelOnly>(text)
        .ok()
        .and_then(|m| m.model)
}

pub fn read_text(path: &Path) -> Result<String, SimError> {
    std::fs::read_to_string(path).map_err(|e| SimError::FileOther {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// Read the parameters (and the rest) of a file whose model takes `P`; `path` only names
/// the file in errors.
pub fn read<P: DeserializeOwned + Default>(
    path: &Path,
    text: &str,
    with: Reader<P>,
) -> Result<(P, Head), SimError> {
    let file = path.display().to_string();
    let f: File<P> = yaml::parse(&file, text)?;
    let section = section_in(text);
    let mut params = f.params.unwrap_or_default();
    if let Some(plan) = f.plan {
        (with.plan)(&mut params, plan)
            .map_err(|why| Diagnostic::at(&file, text, &[Seg::Key("plan".into())], why))?;
    }
    (with.validate)(&params).map_err(|e| {
        let (path, message) = match e {
            SimError::Invalid { key, reason } => {
                (vec![Seg::Key(section.into()), Seg::Key(key.into())], reason)
            }
            other => (vec![Seg::Key(section.into())], other.to_string()),
        };
        Diagnostic::at(&file, text, &path, message)
    })?;
    Ok((
        params,
        Head {
            name: f.name,
            seed: f.seed,
        },
    ))
}

/// Which of the parameter keys the file uses (`params` when none).
fn section_in(text: &str) -> &'static str {
    let top: Option<serde_yaml::Mapping> = serde_yaml::from_str(text).ok();
    SECTIONS
        .into_iter()
        .find(|k| top.as_ref().is_some_and(|m| m.contains_key(*k)))
        .unwrap_or(SECTIONS[0])
}
