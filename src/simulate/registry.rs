//! The scenarios a user can name: a list, one line per model. A new scenario is a module
//! under `scenarios/` implementing [`super::model::Model`] and a line here; nothing else
//! names it.

use super::error::SimError;
use super::file;
use super::scenario::{entry, Entry, Scenario};
use super::scenarios::{
    breaker::BreakerParams, bulkhead::BulkheadParams, config_deploy::params::SystemParams,
    provider_outage::ProviderOutageParams, retry_layers::RetryLayersParams,
    retry_storm::StormParams, slow_replica::SlowReplicaParams,
};
use crate::util::yaml::{Diagnostic, Seg};
use std::path::Path;

/// Every built-in scenario: the two models of the stuck overload, then the five home-feed
/// drills.
pub const MODELS: &[Entry] = &[
    entry::<StormParams>(),
    entry::<SystemParams>(),
    entry::<SlowReplicaParams>(),
    entry::<ProviderOutageParams>(),
    entry::<RetryLayersParams>(),
    entry::<BreakerParams>(),
    entry::<BulkheadParams>(),
];

/// Every scenario name, for help and error messages.
pub fn names() -> Vec<&'static str> {
    MODELS.iter().map(|m| m.name).collect()
}

fn by_name(name: &str) -> Option<&'static Entry> {
    MODELS.iter().find(|m| m.name == name)
}

/// A built-in name, or a path to a YAML scenario file.
pub fn resolve(name_or_path: &str) -> Result<Scenario, SimError> {
    if let Some(m) = by_name(name_or_path) {
        return Ok(m.scenario());
    }
    let path = Path::new(name_or_path);
    let looks_like_file =
        name_or_path.ends_with(".yaml") || name_or_path.ends_with(".yml") || path.exists();
    if looks_like_file {
        load(path)
    } else {
        Err(SimError::UnknownScenario {
            name: name_or_path.to_string(),
            known: names().join(", "),
        })
    }
}

/// A scenario file.
pub fn load(path: &Path) -> Result<Scenario, SimError> {
    parse(path, &file::read_text(path)?)
}

/// Scenario text; `path` only names the file in errors.
pub fn parse(path: &Path, text: &str) -> Result<Scenario, SimError> {
    let model = file::model_of(text);
    match model.as_deref().map(|m| (m, by_name(m))) {
        Some((_, Some(m))) => m.read(path, text),
        Some((m, None)) => Err(Diagnostic::at(
            &path.display().to_string(),
            text,
            &[Seg::Key("model".into())],
            format!("`{m}` is not one of {}", names().join(", ")),
        )
        .into()),
        // No readable `model:`: let the reader say where the file is wrong.
        None => MODELS[0].read(path, text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(text: &str) -> String {
        parse(Path::new("x.yaml"), text).unwrap_err().to_string()
    }

    /// The error for `text` starts with `start`.
    fn refused_with(text: &str, start: &str) {
        let e = error(text);
        assert!(e.starts_with(start), "{e}");
    }

    #[test]
    fn unknown_field_names_file_line_column_and_field() {
        refused_with(
            "model: config-deploy\nsystem:\n  clients: 50\n  overload: 2\n",
            "x.yaml:4:3: system.overload: unknown field `overload`",
        );
    }

    #[test]
    fn bad_and_refused_values_name_the_field_where_it_is() {
        let e = error("model: config-deploy\nparams:\n  timeout: soon\n");
        assert!(e.starts_with("x.yaml:3:"), "{e}");
        assert!(e.contains("params.timeout"), "{e}");
        let e = error("model: breaker\nseed: 2\nparams:\n  calls_per_s: 10\n  error_rate: 2\n");
        assert_eq!(e, "x.yaml:5:3: params.error_rate: must be between 0 and 1");
        refused_with(
            "model: nope\n",
            "x.yaml:1:1: model: `nope` is not one of retry-storm",
        );
        refused_with(
            "model: retry-storm\nplan:\n  shed_fraction: 0.5\n  admit_rate: 1\n  arithmetic: []\n  ramp: []\n",
            "x.yaml:2:1: plan: retry-storm runs no plan",
        );
    }

    #[test]
    fn a_subset_of_parameters_keeps_the_other_defaults() {
        let s = parse(
            Path::new("s.yaml"),
            "model: config-deploy\nseed: 9\nsystem:\n  shedding: true\n",
        )
        .unwrap();
        let p = s.params::<SystemParams>().unwrap();
        assert!(p.shedding);
        assert_eq!(p.clients, 500);
        assert_eq!(s.file_seed(), Some(9));
    }

    #[test]
    fn every_model_resolves_by_name_and_runs() {
        for name in names() {
            let s = resolve(name).unwrap();
            assert_eq!(s.model(), name);
            s.validate().unwrap();
        }
        assert!(resolve("no-such-thing").is_err());
    }
}
