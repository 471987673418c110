//! The one trait every scenario is behind: its parameters (every one settable by name), a
//! deterministic run, the words and the chart of a report, and the alternatives
//! `--compare` sets side by side with the figures it reads off each. What is generic about
//! a scenario (resolving a name, files, `--set`, running many seeds, the median and range
//! of each figure) is written once against this trait, in [`super::scenario`] and
//! [`super::compare`].

use super::error::SimError;
use super::plot::Chart;
use crate::retry::RetryKind;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fmt::Debug;

/// A scenario's parameters: the defaults are the scenario as specified; a file or `--set`
/// changes any subset, by the names they serialise under.
pub trait Params:
    Clone + Debug + PartialEq + Default + Serialize + DeserializeOwned + 'static
{
    /// The scenario name (`--scenario NAME`, `model: NAME` in files).
    const NAME: &'static str;
    /// Refuse values the model cannot run, naming the key.
    fn validate(&self) -> Result<(), SimError>;
}

/// What a run produced: its words, its chart, the figures `--compare` reads off it, and
/// (as JSON) itself. The scenario and the seed it ran are not its own: every run carries
/// them the same way ([`super::scenario::Ran`]).
pub trait Outcome: Debug + Serialize + 'static {
    /// What ran, for the report's first line after the scenario and the seed (empty:
    /// nothing to add).
    fn what(&self) -> String;
    /// The report in words, under its first line.
    fn text(&self) -> String;
    fn chart(&self) -> Chart;
    /// The figures of one row of `--compare`, in column order.
    fn figures(&self) -> Vec<Figure>;
    /// Time to recover, for scenarios that measure one.
    fn time_to_recover_s(&self) -> Option<f64> {
        None
    }
    /// For `--bench-runs`: attempts simulated in the run.
    fn attempts(&self) -> Option<u64> {
        None
    }
}

/// A scenario, implemented by its parameters: a deterministic run, and what `--compare`
/// sets side by side.
pub trait Model: Params {
    type Report: Outcome;

    /// Same parameters and seed, same report, byte for byte.
    fn run(&self, seed: u64) -> Self::Report;

    /// What `--compare` sets side by side, in table order.
    fn alternatives(&self) -> Vec<Alternative<Self>>;
    /// The line above the comparison table: what is compared, and how.
    fn compare_heading(&self) -> String;
    /// The figures `alt` shows for one seed, where `self` is the scenario as given.
    fn figures(&self, alt: &Self, seed: u64) -> Vec<Figure> {
        alt.run(seed).figures()
    }

    /// `--policy KIND`: set the scenario's retry policy; an error for one without.
    fn set_retry(&mut self, _kind: RetryKind) -> Result<(), SimError> {
        Err(SimError::invalid(
            "policy",
            format!(
                "--policy: {} has no retry policy; change it with --set",
                Self::NAME
            ),
        ))
    }

    /// A scenario file's `plan:`; the reason it is refused for a model that runs none.
    fn take_plan(&mut self, _plan: crate::plan::Plan) -> Result<(), String> {
        Err(format!("{} runs no plan", Self::NAME))
    }

    /// For `--bench-runs`: simulated client-seconds of one run (none: not a benchmark).
    fn client_seconds(&self) -> Option<f64> {
        None
    }
}

/// One row of `--compare`: a label, the `--set` changes that make it from the scenario,
/// and the parameters it runs with.
#[derive(Debug, Clone)]
pub struct Alternative<P> {
    pub label: String,
    pub change: String,
    pub params: P,
}

impl<P> Alternative<P> {
    pub fn new(label: impl Into<String>, change: impl Into<String>, params: P) -> Self {
        Alternative {
            label: label.into(),
            change: change.into(),
            params,
        }
    }
}

/// How a figure reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Count,
    /// A share in [0, 1], shown as a percentage.
    Percent,
    /// Seconds; none reads "never".
    Seconds,
    /// Whole ticks of a tick model; none reads "never".
    Ticks,
    /// Milliseconds (ten seconds and more read in seconds).
    Millis,
    /// A plain number with two decimals.
    Ratio,
    /// 1 or 0, read as the first or the second word.
    Flag(&'static str, &'static str),
}

/// One figure of one run: the JSON key, the table header, its unit and its value, and
/// what a missing value means (for times "never", else nothing to measure: "-").
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    pub key: &'static str,
    pub header: String,
    pub unit: Unit,
    pub value: Option<f64>,
    pub none: &'static str,
}

impl Figure {
    pub fn new(
        key: &'static str,
        header: impl Into<String>,
        unit: Unit,
        value: Option<f64>,
    ) -> Self {
        let none = match unit {
            Unit::Seconds | Unit::Ticks => "never",
            _ => "-",
        };
        Figure {
            key,
            header: header.into(),
            unit,
            value,
            none,
        }
    }

    /// A missing value reads `word`.
    pub fn none_reads(self, word: &'static str) -> Self {
        Figure { none: word, ..self }
    }

    pub fn count(key: &'static str, header: &str, n: u64) -> Self {
        Figure::new(key, header, Unit::Count, Some(n as f64))
    }

    pub fn share(key: &'static str, header: &str, x: f64) -> Self {
        Figure::new(key, header, Unit::Percent, Some(x))
    }

    pub fn flag(
        key: &'static str,
        header: &str,
        words: (&'static str, &'static str),
        b: bool,
    ) -> Self {
        Figure::new(
            key,
            header,
            Unit::Flag(words.0, words.1),
            Some(if b { 1.0 } else { 0.0 }),
        )
    }
}
