//! The home-feed drills (`slow-replica`, `provider-outage`, `retry-layers`, `breaker`,
//! `bulkhead`): five failure shapes an on-call engineer must tell apart from a stuck
//! overload. Each is its own model behind [`DrillModel`]; this module puts them behind one
//! [`Drill`] value, so that scenario files, `--set`, `--compare`, `--output json` and
//! `--plot` treat every drill alike and a new drill is one line in [`drills!`].

use super::{breaker, bulkhead, provider_outage, retry_layers, slow_replica};
use crate::simulate::error::SimError;
use crate::simulate::overrides;
use crate::simulate::plot::{Area, PlotResult};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fmt::Debug;

/// One drill: its parameters (every one settable by name), a deterministic run, the text
/// a user reads, the table of alternatives, and a chart.
pub trait DrillModel {
    /// The scenario name (`--scenario NAME`, `model: NAME` in files).
    const NAME: &'static str;
    /// Defaults are the drill as specified; a file or `--set` changes any subset.
    type Params: Clone + Debug + PartialEq + Default + Serialize + DeserializeOwned;
    type Report: Clone + Debug + PartialEq + Serialize;
    /// One row of `--compare`.
    type Row: Clone + Debug + PartialEq + Serialize;

    fn validate(p: &Self::Params) -> Result<(), SimError>;
    /// Same parameters and seed, same report, byte for byte.
    fn run(p: &Self::Params, seed: u64) -> Self::Report;
    fn text(r: &Self::Report) -> String;
    /// The alternatives the drill compares, each run with the same seed.
    fn compare(p: &Self::Params, seed: u64) -> Vec<Self::Row>;
    fn compare_text(p: &Self::Params, seed: u64, rows: &[Self::Row]) -> String;
    fn plot(r: &Self::Report, root: &Area) -> PlotResult;
    /// Time to recover, for the drills that have one.
    fn time_to_recover_s(_r: &Self::Report) -> Option<f64> {
        None
    }
}

/// Declares [`Drill`], [`DrillReport`] and [`DrillComparison`] over the listed models, and
/// dispatches every operation to the model of the variant.
macro_rules! drills {
    ($($variant:ident => $model:ty),* $(,)?) => {
        /// A drill and its parameters.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Drill {
            $($variant(<$model as DrillModel>::Params),)*
        }

        /// What a drill's run produced (serialised as the model's own report).
        #[derive(Debug, Clone, PartialEq, Serialize)]
        #[serde(untagged)]
        pub enum DrillReport {
            $($variant(<$model as DrillModel>::Report),)*
        }

        /// A drill's `--compare` rows (serialised as the model's own rows).
        #[derive(Debug, Clone, PartialEq, Serialize)]
        #[serde(untagged)]
        pub enum DrillComparison {
            $($variant(Vec<<$model as DrillModel>::Row>),)*
        }

        /// Every drill name, for help and error messages.
        pub const NAMES: &[&str] = &[$(<$model as DrillModel>::NAME,)*];

        impl Drill {
            /// The drill called `name`, with its default parameters.
            pub fn by_name(name: &str) -> Option<Drill> {
                $(if name == <$model as DrillModel>::NAME {
                    return Some(Drill::$variant(Default::default()));
                })*
                None
            }

            pub fn name(&self) -> &'static str {
                match self {
                    $(Drill::$variant(_) => <$model as DrillModel>::NAME,)*
                }
            }

            /// `--set key=value`, by the parameter's scenario-file name.
            pub fn set(&mut self, key: &str, value: &str) -> Result<(), SimError> {
                match self {
                    $(Drill::$variant(p) => {
                        *p = overrides::apply(p, <$model as DrillModel>::NAME, key, value)?
                    })*
                }
                Ok(())
            }

            pub fn validate(&self) -> Result<(), SimError> {
                match self {
                    $(Drill::$variant(p) => <$model as DrillModel>::validate(p),)*
                }
            }

            pub fn run(&self, seed: u64) -> DrillReport {
                match self {
                    $(Drill::$variant(p) => DrillReport::$variant(<$model as DrillModel>::run(p, seed)),)*
                }
            }

            pub fn compare(&self, seed: u64) -> DrillComparison {
                match self {
                    $(Drill::$variant(p) => DrillComparison::$variant(<$model as DrillModel>::compare(p, seed)),)*
                }
            }

            /// The comparison as a table; `c` must come from this drill's [`Drill::compare`].
            pub fn compare_text(&self, seed: u64, c: &DrillComparison) -> String {
                match (self, c) {
                    $((Drill::$variant(p), DrillComparison::$variant(rows)) => {
                        <$model as DrillModel>::compare_text(p, seed, rows)
                    })*
                    #[allow(unreachable_patterns)]
                    _ => String::new(),
                }
            }

            /// The parameters of a scenario file whose `model:` names a drill; errors carry
            /// file, line, column and the field (`params.KEY`).
            pub fn from_file(
                model: &str,
                path: &std::path::Path,
                text: &str,
            ) -> Option<Result<(Drill, DrillFileHead), SimError>> {
                $(if model == <$model as DrillModel>::NAME {
                    return Some(
                        super::file::located::<DrillFile<<$model as DrillModel>::Params>>(path, text)
                            .map(|f| {
                                let head = f.head();
                                (Drill::$variant(f.params.unwrap_or_default()), head)
                            }),
                    );
                })*
                None
            }
        }

        impl DrillReport {
            pub fn text(&self) -> String {
                match self {
                    $(DrillReport::$variant(r) => <$model as DrillModel>::text(r),)*
                }
            }

            pub fn plot(&self, root: &Area) -> PlotResult {
                match self {
                    $(DrillReport::$variant(r) => <$model as DrillModel>::plot(r, root),)*
                }
            }

            pub fn time_to_recover_s(&self) -> Option<f64> {
                match self {
                    $(DrillReport::$variant(r) => <$model as DrillModel>::time_to_recover_s(r),)*
                }
            }
        }
    };
}

drills! {
    SlowReplica => slow_replica::SlowReplica,
    ProviderOutage => provider_outage::ProviderOutage,
    RetryLayers => retry_layers::RetryLayers,
    Breaker => breaker::Breaker,
    Bulkhead => bulkhead::Bulkhead,
}

/// A drill's scenario file: which drill, optional name, description and seed, and any
/// subset of its parameters under `params:`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DrillFile<P> {
    #[allow(dead_code)] // read first, to choose the parameter type
    model: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    #[allow(dead_code)] // for the reader of the file; not used by the model
    description: Option<String>,
    #[serde(default)]
    seed: Option<u64>,
    #[serde(default = "none")]
    params: Option<P>,
}

fn none<P>() -> Option<P> {
    None
}

/// What a drill file says besides its parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct DrillFileHead {
    pub name: Option<String>,
    pub seed: Option<u64>,
}

impl<P> DrillFile<P> {
    fn head(&self) -> DrillFileHead {
        DrillFileHead {
            name: self.name.clone(),
            seed: self.seed,
        }
    }
}
