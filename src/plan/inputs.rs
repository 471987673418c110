//! Where a plan's inputs come from: the one place a verdict, what the runbook declares and
//! what the operator gives become [`PlanInputs`], each number with its [`Source`].
//!
//! Why one place: the engine, the webhook receiver, `recover plan` and the rehearsal all
//! turn a verdict into plan inputs. Done four times, the order of precedence and the
//! message for a missing input drift apart; done here, a new source (a lookback in the
//! metrics history, Little's law, asking on a terminal) is added once, between the ones
//! already tried, and every caller gets it.
//!
//! Precedence, per input: the operator's number; else the verdict's estimate (which
//! already prefers what `spec.detect` declares over what it measured); else what
//! `spec.detect` declares; else the input is missing and [`MissingInputs`] names the
//! runbook field and the flag that would supply it.

use super::PlanInputs;
use crate::detect::{DetectorConfig, Source, Verdict};
use serde::{Deserialize, Serialize};
use std::fmt;

/// A plan input and where it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sourced {
    pub value: f64,
    pub source: Source,
    /// In words: which setting, flag or signals.
    pub from: String,
    /// The lowest and highest candidate considered, when there were several (k).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<[f64; 2]>,
}

impl Sourced {
    pub fn new(value: f64, source: Source, from: impl Into<String>) -> Self {
        Sourced {
            value,
            source,
            from: from.into(),
            range: None,
        }
    }

    /// "25.0 req/s, declared (spec.detect.capacity_per_replica 50 x 1 ready)".
    fn line(&self, name: &str, unit: &str) -> String {
        let range = self
            .range
            .filter(|[lo, hi]| hi > lo)
            .map(|[lo, hi]| format!("; candidates ranged {lo:.2} .. {hi:.2}"))
            .unwrap_or_default();
        format!(
            "{name} = {:.2}{unit}: {} ({}{range})",
            self.value,
            self.source.as_str(),
            self.from
        )
    }
}

/// Plan inputs, each with its source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourcedInputs {
    pub arrival_rate: Sourced,
    pub capacity_cold: Sourced,
    pub k: Sourced,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<Sourced>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub demand: Option<Sourced>,
}

impl SourcedInputs {
    /// The numbers alone.
    pub fn values(&self) -> PlanInputs {
        PlanInputs {
            arrival_rate: self.arrival_rate.value,
            capacity_cold: self.capacity_cold.value,
            k: self.k.value,
            capacity: self.capacity.as_ref().map(|s| s.value),
            demand: self.demand.as_ref().map(|s| s.value),
        }
    }

    /// One line per input: its value, whether it was measured, declared, given or
    /// assumed, and from what (shown by `recover plan`, dry runs and run reports).
    pub fn describe(&self) -> Vec<String> {
        let mut out = vec![
            self.arrival_rate.line("arrival_rate", " req/s"),
            self.capacity_cold.line("capacity_cold", " req/s"),
            self.k.line("k", ""),
        ];
        if let Some(c) = &self.capacity {
            out.push(c.line("capacity", " req/s"));
        }
        if let Some(d) = &self.demand {
            out.push(d.line("demand", " req/s"));
        }
        out
    }

    /// Every input from one source (numbers a caller already holds, e.g. from a journal).
    pub fn all_from(inputs: &PlanInputs, source: Source, from: &str) -> Self {
        let s = |v: f64| Sourced::new(v, source, from);
        SourcedInputs {
            arrival_rate: s(inputs.arrival_rate),
            capacity_cold: s(inputs.capacity_cold),
            k: s(inputs.k),
            capacity: inputs.capacity.map(s),
            demand: inputs.demand.map(s),
        }
    }
}

/// Numbers the operator gives for this run; each wins over measured and declared ones.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Overrides {
    pub arrival_rate: Option<f64>,
    pub capacity_cold: Option<f64>,
    pub k: Option<f64>,
    pub capacity: Option<f64>,
    pub demand: Option<f64>,
}

impl Overrides {
    /// True when the operator gave every input a plan cannot do without, so the plan does
    /// not rest on the verdict at all.
    pub fn is_complete(&self) -> bool {
        self.arrival_rate.is_some() && self.capacity_cold.is_some() && self.k.is_some()
    }
}

impl From<PlanInputs> for Overrides {
    fn from(i: PlanInputs) -> Self {
        Overrides {
            arrival_rate: Some(i.arrival_rate),
            capacity_cold: Some(i.capacity_cold),
            k: Some(i.k),
            capacity: i.capacity,
            demand: i.demand,
        }
    }
}

/// One plan input, to name what is missing and what would supply it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    ArrivalRate,
    CapacityCold,
    K,
}

impl Input {
    pub fn name(self) -> &'static str {
        match self {
            Input::ArrivalRate => "arrival rate",
            Input::CapacityCold => "cold capacity",
            Input::K => "k",
        }
    }

    /// The runbook fields that would supply it, if any can.
    pub fn runbook_fields(self) -> Option<&'static str> {
        match self {
            Input::ArrivalRate => None,
            Input::CapacityCold => Some(
                "spec.detect.capacity_per_replica (or capacity_per_s) and spec.detect.cold_factor",
            ),
            Input::K => Some("spec.detect.k"),
        }
    }

    /// The `recover --runbook` flag that would supply it.
    pub fn assume_flag(self) -> &'static str {
        match self {
            Input::ArrivalRate => "--assume-arrival-rate",
            Input::CapacityCold => "--assume-capacity-cold",
            Input::K => "--assume-k",
        }
    }
}

/// Inputs a plan needs that nothing supplied.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct MissingInputs {
    pub missing: Vec<Input>,
}

impl fmt::Display for MissingInputs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.missing.iter().map(|i| i.name()).collect();
        write!(f, "no estimate of {}:", names.join(", "))?;
        for (n, i) in self.missing.iter().enumerate() {
            let sep = if n == 0 { " " } else { "; " };
            match i.runbook_fields() {
                Some(fields) => write!(
                    f,
                    "{sep}declare {} in the runbook ({fields}) or give {}",
                    i.name(),
                    i.assume_flag()
                )?,
                None => write!(
                    f,
                    "{sep}{} is measured only (the offered rate); give {}",
                    i.name(),
                    i.assume_flag()
                )?,
            }
        }
        Ok(())
    }
}

impl PlanInputs {
    /// The plan's inputs from a verdict, what the runbook declares (`spec.detect`) and the
    /// operator's numbers, each with its source (see the module doc for the precedence).
    pub fn from_verdict(
        verdict: &Verdict,
        declared: &DetectorConfig,
        operator: &Overrides,
    ) -> Result<SourcedInputs, MissingInputs> {
        let op = |v: Option<f64>| v.map(|v| Sourced::new(v, Source::Operator, "the operator"));
        let est = |v: Option<f64>, s: Option<Source>, from: Option<&str>| {
            v.map(|v| {
                Sourced::new(
                    v,
                    s.unwrap_or(Source::Measured),
                    from.unwrap_or("the detector's estimate"),
                )
            })
        };
        let decl = |v: Option<f64>, field: &str| {
            v.map(|v| Sourced::new(v, Source::Declared, format!("spec.detect.{field}")))
        };
        let vs = &verdict.sources;
        let arrival_rate = op(operator.arrival_rate).or_else(|| {
            est(
                verdict.arrival_rate,
                vs.arrival_rate,
                Some("offered rate now"),
            )
        });
        let capacity = op(operator.capacity)
            .or_else(|| {
                est(
                    verdict.capacity,
                    vs.capacity,
                    verdict.capacity_from.as_deref(),
                )
            })
            .or_else(|| decl(declared.capacity_per_s, "capacity_per_s"));
        let capacity_cold = op(operator.capacity_cold)
            .or_else(|| {
                est(
                    verdict.capacity_cold,
                    vs.capacity_cold,
                    verdict.capacity_cold_from.as_deref(),
                )
            })
            .or_else(|| {
                let (c, f) = (capacity.as_ref()?, declared.cold_factor?);
                Some(Sourced::new(
                    c.value / f.max(1.0),
                    c.source,
                    format!("capacity {:.1} / spec.detect.cold_factor {f}", c.value),
                ))
            });
        let k = op(operator.k)
            .or_else(|| {
                est(verdict.k, vs.k, verdict.k_from.as_deref()).map(|k| {
                    pessimistic(Sourced {
                        range: verdict.k_range,
                        ..k
                    })
                })
            })
            .or_else(|| decl(declared.k, "k"));
        let demand = op(operator.demand)
            .or_else(|| est(verdict.demand, vs.demand, verdict.demand_from.as_deref()))
            .or_else(|| decl(declared.demand_per_s, "demand_per_s"));
        match (arrival_rate, capacity_cold, k) {
            (Some(arrival_rate), Some(capacity_cold), Some(k)) => Ok(SourcedInputs {
                arrival_rate,
                capacity_cold,
                k,
                capacity,
                demand,
            }),
            (a, c, k) => Err(MissingInputs {
                missing: [
                    (a.is_none(), Input::ArrivalRate),
                    (c.is_none(), Input::CapacityCold),
                    (k.is_none(), Input::K),
                ]
                .into_iter()
                .filter_map(|(gone, i)| gone.then_some(i))
                .collect(),
            }),
        }
    }
}

/// For a run nobody can be asked in (a rehearsal): where k is unknown (the verdict says
/// why) and neither the operator nor the runbook gives it, the plan is sized from what is
/// known, the cold capacity and the arrival rate, with the shed for `k_max`, the most the
/// detector accepts: too much shed only costs the time until the ramp's first check, which
/// raises at once when the service shows headroom; too little leaves it stuck. The input
/// says so, and why k is unknown. A run with an operator asks instead (`MissingInputs`).
pub fn assume_k_max_where_unknown(verdict: &mut Verdict, declared: &DetectorConfig) {
    if verdict.k.is_some() || declared.k.is_some() {
        return;
    }
    let Some(why) = verdict.k_unknown.clone() else {
        return;
    };
    verdict.k = Some(declared.k_max);
    verdict.sources.k = Some(Source::Assumed);
    verdict.k_range = None;
    verdict.k_from = Some(format!(
        "k unknown ({why}); the shed is sized for k_max {} instead, the most the detector accepts (the ramp raises as soon as the service shows headroom)",
        declared.k_max
    ));
}

/// A measured k is uncertain by the range of its candidates: the plan sizes its shed for
/// the top of it. A k too low admits more than the service can clear and it stays stuck;
/// one too high only sheds more until the ramp's first check, which raises the rate at
/// once if the service shows the headroom. A declared or given k is taken as it is.
fn pessimistic(k: Sourced) -> Sourced {
    match (k.source, k.range) {
        (Source::Measured, Some([lo, hi])) if hi > k.value => Sourced {
            value: hi,
            from: format!(
                "top of the measured range {lo:.2} .. {hi:.2} (estimate {:.2}: {})",
                k.value, k.from
            ),
            ..k
        },
        _ => k,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::EstimateSources;

    fn stuck() -> Verdict {
        Verdict {
            arrival_rate: Some(500.0),
            capacity: Some(200.0),
            capacity_cold: Some(100.0),
            k: Some(4.0),
            k_from: Some("service time now / healthy".into()),
            sources: EstimateSources {
                arrival_rate: Some(Source::Measured),
                capacity: Some(Source::Declared),
                capacity_cold: Some(Source::Assumed),
                k: Some(Source::Measured),
                ..EstimateSources::default()
            },
            ..Verdict::default()
        }
    }

    #[test]
    fn the_verdict_gives_what_it_estimated_with_its_sources() {
        let declared = DetectorConfig {
            demand_per_s: Some(17.0),
            ..DetectorConfig::default()
        };
        let s = PlanInputs::from_verdict(&stuck(), &declared, &Overrides::default()).unwrap();
        assert_eq!(
            s.values(),
            PlanInputs {
                arrival_rate: 500.0,
                capacity_cold: 100.0,
                k: 4.0,
                capacity: Some(200.0),
                demand: Some(17.0),
            }
        );
        assert_eq!(s.arrival_rate.source, Source::Measured);
        assert_eq!(s.capacity.unwrap().source, Source::Declared);
        assert_eq!(s.capacity_cold.source, Source::Assumed);
        assert_eq!(s.k.from, "service time now / healthy");
        assert_eq!(s.demand.unwrap().from, "spec.detect.demand_per_s");
    }

    #[test]
    fn the_operator_wins_input_by_input() {
        let op = Overrides {
            k: Some(2.0),
            ..Overrides::default()
        };
        let s = PlanInputs::from_verdict(&stuck(), &DetectorConfig::default(), &op).unwrap();
        assert_eq!((s.k.value, s.k.source), (2.0, Source::Operator));
        assert_eq!(s.arrival_rate.value, 500.0);
        assert!(!op.is_complete());
    }

    #[test]
    fn declarations_fill_what_the_verdict_lacks() {
        let declared = DetectorConfig {
            capacity_per_s: Some(200.0),
            cold_factor: Some(4.0),
            k: Some(2.0),
            ..DetectorConfig::default()
        };
        let v = Verdict {
            arrival_rate: Some(300.0),
            ..Verdict::default()
        };
        let s = PlanInputs::from_verdict(&v, &declared, &Overrides::default()).unwrap();
        assert_eq!(s.capacity_cold.value, 50.0);
        assert_eq!(s.capacity_cold.source, Source::Declared);
        assert_eq!((s.k.value, s.k.source), (2.0, Source::Declared));
    }

    #[test]
    fn missing_inputs_name_the_runbook_field_and_the_flag() {
        let e = PlanInputs::from_verdict(
            &Verdict::default(),
            &DetectorConfig::default(),
            &Overrides::default(),
        )
        .unwrap_err();
        assert_eq!(
            e.missing,
            [Input::ArrivalRate, Input::CapacityCold, Input::K]
        );
        let text = e.to_string();
        for needle in [
            "--assume-arrival-rate",
            "spec.detect.capacity_per_replica (or capacity_per_s) and spec.detect.cold_factor",
            "--assume-capacity-cold",
            "spec.detect.k",
            "--assume-k",
        ] {
            assert!(text.contains(needle), "{needle}: {text}");
        }
    }

    #[test]
    fn a_measured_k_is_planned_at_the_top_of_its_range() {
        let v = Verdict {
            k_range: Some([3.0, 5.2]),
            ..stuck()
        };
        let s = PlanInputs::from_verdict(&v, &DetectorConfig::default(), &Overrides::default())
            .unwrap();
        assert_eq!((s.k.value, s.k.range), (5.2, Some([3.0, 5.2])));
        assert!(
            s.k.from
                .starts_with("top of the measured range 3.00 .. 5.20 (estimate 4.00"),
            "{}",
            s.k.from
        );
        // A declared k is taken as it is, whatever was measured beside it.
        let declared = Verdict {
            k_range: Some([2.0, 9.0]),
            sources: EstimateSources {
                k: Some(Source::Declared),
                ..stuck().sources
            },
            ..stuck()
        };
        let s =
            PlanInputs::from_verdict(&declared, &DetectorConfig::default(), &Overrides::default())
                .unwrap();
        assert_eq!(s.k.value, 4.0);
    }

    #[test]
    fn an_unknown_k_is_sized_for_k_max_and_says_why() {
        let mut v = stuck();
        v.k = None;
        v.k_range = None;
        v.k_unknown = Some("no retry evidence: attempts per first attempt = 1.00".into());
        let declared = DetectorConfig {
            capacity_per_s: Some(100.0),
            cold_factor: Some(2.0),
            ..DetectorConfig::default()
        };
        assert!(PlanInputs::from_verdict(&v, &declared, &Overrides::default()).is_err());
        assume_k_max_where_unknown(&mut v, &declared);
        let s = PlanInputs::from_verdict(&v, &declared, &Overrides::default()).unwrap();
        assert_eq!(s.k.value, declared.k_max);
        assert_eq!(s.k.source, Source::Assumed);
        assert!(s.k.from.contains("no retry evidence"), "{}", s.k.from);
        assert!(s.k.from.contains("k_max"), "{}", s.k.from);
        // A declared k is what the runbook knows: it stands.
        let mut v = stuck();
        v.k = None;
        v.k_unknown = Some("no evidence".into());
        let with_k = DetectorConfig {
            k: Some(3.0),
            ..declared
        };
        assume_k_max_where_unknown(&mut v, &with_k);
        assert_eq!(v.k, None);
    }
}
