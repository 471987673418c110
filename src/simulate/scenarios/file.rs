//! Scenario files: YAML describing which model to run and any parameters that differ from
//! its defaults, optionally a plan and a seed. Unknown fields are refused and every error
//! names file:line:column and the field, because a typo silently ignored would answer a
//! different what-if question than the one asked.

use super::drill::Drill;
use super::Scenario;
use crate::plan::Plan;
use crate::simulate::error::SimError;
use crate::simulate::params::SystemParams;
use crate::simulate::scenarios::retry_storm::StormParams;
use serde::Deserialize;
use std::path::Path;

/// The two original models; a drill's name (`slow-replica`, ...) is read by
/// [`Drill::from_file`] instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Model {
    RetryStorm,
    ConfigDeploy,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioFile {
    /// Which model, and whose defaults the parameters start from.
    model: Model,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    #[allow(dead_code)] // for the reader of the file; not used by the model
    description: Option<String>,
    #[serde(default)]
    seed: Option<u64>,
    /// Parameters of `config-deploy` (any subset).
    #[serde(default)]
    system: Option<SystemParams>,
    /// Parameters of `retry-storm` (any subset).
    #[serde(default)]
    storm: Option<StormParams>,
    /// A recovery plan to run at `system.plan_at` (config-deploy only).
    #[serde(default)]
    plan: Option<Plan>,
}

pub fn load(path: &Path) -> Result<Scenario, SimError> {
    let text = std::fs::read_to_string(path).map_err(|e| SimError::FileOther {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    parse(path, &text)
}

/// Deserialize `text` as `T`, every error naming file:line:column and the field.
pub(super) fn located<T: serde::de::DeserializeOwned>(
    path: &Path,
    text: &str,
) -> Result<T, SimError> {
    let de = serde_yaml::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let field = e.path().to_string();
        let inner = e.into_inner();
        let (line, column) = inner.location().map_or((0, 0), |l| (l.line(), l.column()));
        let mut message = inner.to_string();
        // serde_yaml appends " at line L column C"; the prefix already says where.
        if let Some(i) = message.find(" at line ") {
            message.truncate(i);
        }
        // ...and may prefix the parent path, which the field already names.
        if let Some((head, rest)) = message.split_once(": ") {
            if !head.contains(' ') && field.starts_with(head) {
                message = rest.to_string();
            }
        }
        SimError::File {
            path: path.to_path_buf(),
            line,
            column,
            field,
            message,
        }
    })
}

/// Just the `model:` of a file, to choose how to read the rest.
#[derive(Debug, Deserialize)]
struct ModelOnly {
    model: Option<String>,
}

/// Parse scenario text; `path` only names the file in errors.
pub fn parse(path: &Path, text: &str) -> Result<Scenario, SimError> {
    let other = |message: &str| SimError::FileOther {
        path: path.to_path_buf(),
        message: message.to_string(),
    };
    let model = serde_yaml::from_str::<ModelOnly>(text)
        .ok()
        .and_then(|m| m.model);
    if let Some(m) = &model {
        let known = ["retry-storm", "config-deploy"];
        if !known.contains(&m.as_str()) && Drill::by_name(m).is_none() {
            return Err(other(&format!(
                "model `{m}` is not one of {}, {}",
                known.join(", "),
                super::drill::NAMES.join(", ")
            )));
        }
    }
    if let Some(parsed) = model.and_then(|m| Drill::from_file(&m, path, text)) {
        let (drill, head) = parsed?;
        let name = head.name.unwrap_or_else(|| drill.name().to_string());
        let scenario = Scenario::Drill {
            name,
            drill,
            seed: head.seed,
        };
        scenario.validate().map_err(|e| other(&e.to_string()))?;
        return Ok(scenario);
    }
    let f: ScenarioFile = located(path, text)?;
    let name = f.name.unwrap_or_else(|| {
        path.file_stem()
            .map_or("scenario".into(), |s| s.to_string_lossy().into_owned())
    });
    let scenario = match f.model {
        Model::RetryStorm => {
            if f.system.is_some() || f.plan.is_some() {
                return Err(other(
                    "model retry-storm takes a `storm:` section, not `system:` or `plan:`",
                ));
            }
            Scenario::Storm {
                name,
                params: f.storm.unwrap_or_default(),
                seed: f.seed,
            }
        }
        Model::ConfigDeploy => {
            if f.storm.is_some() {
                return Err(other(
                    "model config-deploy takes a `system:` section, not `storm:`",
                ));
            }
            Scenario::System {
                name,
                params: Box::new(f.system.unwrap_or_default()),
                plan: f.plan,
                seed: f.seed,
            }
        }
    };
    scenario.validate().map_err(|e| other(&e.to_string()))?;
    Ok(scenario)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_field_names_file_line_column_and_field() {
        let text = "model: config-deploy\nsystem:\n  clients: 50\n  overload: 2\n";
        let e = parse(Path::new("x.yaml"), text).unwrap_err().to_string();
        assert!(e.starts_with("x.yaml:4:3: field `system.overload`"), "{e}");
        assert!(e.contains("unknown field `overload`"), "{e}");
    }

    #[test]
    fn bad_value_names_the_field() {
        let text = "model: config-deploy\nsystem:\n  timeout: soon\n";
        let e = parse(Path::new("x.yaml"), text).unwrap_err().to_string();
        assert!(e.starts_with("x.yaml:3:"), "{e}");
        assert!(e.contains("system.timeout"), "{e}");
    }

    #[test]
    fn a_subset_of_parameters_keeps_the_other_defaults() {
        let text = "model: config-deploy\nseed: 9\nsystem:\n  shedding: true\n";
        let Scenario::System { params, seed, .. } = parse(Path::new("s.yaml"), text).unwrap()
        else {
            panic!("wrong model");
        };
        assert!(params.shedding);
        assert_eq!(params.clients, 500);
        assert_eq!(seed, Some(9));
    }
}
