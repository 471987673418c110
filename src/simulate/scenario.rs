//! A scenario as the command line and the tests hold it, whichever model it is: its
//! parameters behind the [`Model`] trait, with `--set`, `--policy`, validation, a run, a
//! comparison over seeds, and a report with words, a chart and JSON. Written once, so no
//! code outside a model's own module names any model.

use super::compare::{self, Comparison, Seeds};
use super::error::SimError;
use super::file;
use super::model::{Model, Outcome};
use super::overrides;
use super::plot::{self, Area, PlotResult};
use super::text;
use crate::retry::RetryKind;
use serde::Serialize;
use std::any::Any;
use std::fmt;
use std::path::Path;

/// What the erased scenario can do, for any model.
trait Erased {
    fn model(&self) -> &'static str;
    fn set(&mut self, key: &str, value: &str) -> Result<(), SimError>;
    fn set_retry(&mut self, kind: RetryKind) -> Result<(), SimError>;
    fn validate(&self) -> Result<(), SimError>;
    fn run(&self, seed: u64) -> Report;
    fn compare(&self, name: &str, seeds: Seeds) -> Comparison;
    fn client_seconds(&self) -> Option<f64>;
    fn params(&self) -> &dyn Any;
    fn same(&self, other: &dyn Erased) -> bool;
    fn clone_box(&self) -> Box<dyn Erased>;
    fn debug(&self) -> String;
}

struct Typed<M: Model> {
    params: M,
}

impl<M: Model> Erased for Typed<M> {
    fn model(&self) -> &'static str {
        M::NAME
    }

    fn set(&mut self, key: &str, value: &str) -> Result<(), SimError> {
        self.params = overrides::apply(&self.params, M::NAME, key, value)?;
        Ok(())
    }

    fn set_retry(&mut self, kind: RetryKind) -> Result<(), SimError> {
        self.params.set_retry(kind)
    }

    fn validate(&self) -> Result<(), SimError> {
        self.params.validate()
    }

    fn run(&self, seed: u64) -> Report {
        Report(Box::new(Ran::<M>::of(&self.params, seed)))
    }

    fn compare(&self, name: &str, seeds: Seeds) -> Comparison {
        compare::compare::<M>(name, &self.params, seeds)
    }

    fn client_seconds(&self) -> Option<f64> {
        self.params.client_seconds()
    }

    fn params(&self) -> &dyn Any {
        &self.params
    }

    fn same(&self, other: &dyn Erased) -> bool {
        other.params().downcast_ref::<M>() == Some(&self.params)
    }

    fn clone_box(&self) -> Box<dyn Erased> {
        Box::new(Typed::<M> {
            params: self.params.clone(),
        })
    }

    fn debug(&self) -> String {
        format!("{:?}", self.params)
    }
}

/// A runnable scenario: a model, its parameters, and the name and seed it was given.
pub struct Scenario {
    name: String,
    seed: Option<u64>,
    inner: Box<dyn Erased>,
}

/// A scenario file read into a model's parameters, and what else it said.
type Read = Result<(Box<dyn Erased>, file::Head), SimError>;

/// How the registry makes a scenario of one model: by name, or from a file's text.
#[derive(Clone, Copy)]
pub struct Entry {
    pub name: &'static str,
    new: fn() -> Box<dyn Erased>,
    read: fn(&Path, &str) -> Read,
}

/// The registry's entry for `M`.
pub const fn entry<M: Model>() -> Entry {
    Entry {
        name: M::NAME,
        new: new::<M>,
        read: read::<M>,
    }
}

fn new<M: Model>() -> Box<dyn Erased> {
    Box::new(Typed::<M> {
        params: M::default(),
    })
}

fn read<M: Model>(path: &Path, text: &str) -> Read {
    let with = file::Reader {
        validate: M::validate,
        plan: M::take_plan,
    };
    let (params, head) = file::read::<M>(path, text, with)?;
    Ok((Box::new(Typed::<M> { params }), head))
}

impl Entry {
    /// The scenario with the model's defaults.
    pub fn scenario(&self) -> Scenario {
        Scenario {
            name: self.name.to_string(),
            seed: None,
            inner: (self.new)(),
        }
    }

    /// The scenario a file describes; `path` names the file in errors.
    pub fn read(&self, path: &Path, text: &str) -> Result<Scenario, SimError> {
        let (inner, head) = (self.read)(path, text)?;
        let name = head.name.unwrap_or_else(|| self.name.to_string());
        Ok(Scenario {
            name,
            seed: head.seed,
            inner,
        })
    }
}

impl Scenario {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The model it runs (`model:` in files).
    pub fn model(&self) -> &'static str {
        self.inner.model()
    }

    /// The seed a scenario file asked for, if any.
    pub fn file_seed(&self) -> Option<u64> {
        self.seed
    }

    /// `--set key=value`, by the parameter's scenario-file name.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), SimError> {
        self.inner.set(key, value)
    }

    /// `--policy KIND`: the scenario's retry policy (an error for one without).
    pub fn set_policy_named(&mut self, kind: &str) -> Result<(), SimError> {
        let kind = kind
            .parse::<RetryKind>()
            .map_err(|_| SimError::UnknownPolicy(kind.to_string()))?;
        self.inner.set_retry(kind)
    }

    pub fn validate(&self) -> Result<(), SimError> {
        self.inner.validate()
    }

    /// Run it. Validate first; an invalid scenario runs with clamped values.
    pub fn run(&self, seed: u64) -> Report {
        self.inner.run(seed)
    }

    /// `--compare`: every alternative over `seeds`.
    pub fn compare(&self, seeds: Seeds) -> Comparison {
        self.inner.compare(&self.name, seeds)
    }

    /// For `--bench-runs`: simulated client-seconds of one run.
    pub fn client_seconds(&self) -> Option<f64> {
        self.inner.client_seconds()
    }

    /// The parameters, if the model's are `P`.
    pub fn params<P: 'static>(&self) -> Option<&P> {
        self.inner.params().downcast_ref::<P>()
    }
}

impl Clone for Scenario {
    fn clone(&self) -> Self {
        Scenario {
            name: self.name.clone(),
            seed: self.seed,
            inner: self.inner.clone_box(),
        }
    }
}

impl fmt::Debug for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Scenario {{ name: {:?}, model: {}, seed: {:?}, params: {} }}",
            self.name,
            self.model(),
            self.seed,
            self.inner.debug()
        )
    }
}

/// Two scenarios run the same model with the same parameters.
impl PartialEq for Scenario {
    fn eq(&self, other: &Self) -> bool {
        self.inner.same(other.inner.as_ref())
    }
}

/// What a run of any model produced.
pub struct Report(Box<dyn ErasedReport>);

trait ErasedReport {
    fn text(&self) -> String;
    fn plot(&self, root: &Area) -> PlotResult;
    fn json(&self) -> serde_json::Result<String>;
    fn attempts(&self) -> Option<u64>;
    fn time_to_recover_s(&self) -> Option<f64>;
    fn any(&self) -> &dyn Any;
}

/// A run of any model: the scenario and the seed it ran, then the model's own report (in
/// JSON, `scenario` and `seed` are the first keys of every model's report).
#[derive(Debug, Serialize)]
pub struct Ran<M: Model> {
    pub scenario: &'static str,
    pub seed: u64,
    #[serde(flatten)]
    pub report: M::Report,
}

impl<M: Model> Ran<M> {
    /// Run `params` with `seed`.
    pub fn of(params: &M, seed: u64) -> Self {
        Ran {
            scenario: M::NAME,
            seed,
            report: params.run(seed),
        }
    }

    /// The report in words, under the line naming the scenario, the seed and what ran.
    pub fn text(&self) -> String {
        text::heading(self.scenario, self.seed, &self.report.what()) + &self.report.text()
    }
}

impl<M: Model> ErasedReport for Ran<M> {
    fn text(&self) -> String {
        Ran::text(self)
    }
    fn plot(&self, root: &Area) -> PlotResult {
        plot::lines(root, &self.report.chart())
    }
    fn json(&self) -> serde_json::Result<String> {
        serde_json::to_string_pretty(self)
    }
    fn attempts(&self) -> Option<u64> {
        self.report.attempts()
    }
    fn time_to_recover_s(&self) -> Option<f64> {
        self.report.time_to_recover_s()
    }
    fn any(&self) -> &dyn Any {
        &self.report
    }
}

impl Report {
    /// The report in words.
    pub fn text(&self) -> String {
        self.0.text()
    }

    /// The model's own report as pretty JSON.
    pub fn json(&self) -> serde_json::Result<String> {
        self.0.json()
    }

    /// `--plot FILE.svg`: the chart, written atomically.
    pub fn write_plot(&self, path: &Path) -> Result<(), SimError> {
        plot::write(path, |root| self.0.plot(root))
    }

    /// For `--bench-runs`: the attempts the run simulated.
    pub fn attempts(&self) -> Option<u64> {
        self.0.attempts()
    }

    pub fn time_to_recover_s(&self) -> Option<f64> {
        self.0.time_to_recover_s()
    }

    /// The model's own report, if it is an `R`.
    pub fn get<R: 'static>(&self) -> Option<&R> {
        self.0.any().downcast_ref::<R>()
    }
}
