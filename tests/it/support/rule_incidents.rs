//! Incidents as `promtool test rules` input: the demo system's rates second by second
//! (healthy, a 5 s outage, the stuck retry loop, a run's limit and readmission), sampled at
//! any scrape interval as Prometheus would (counters at each scrape, gauges read at the
//! scrape's instant, so an outage shorter than a scrape may go unseen), written as the
//! series of one test group. The alert tests built on it check properties of the shipped
//! rules at scrape and evaluation intervals the hand-written unit tests do not cover.

use std::collections::BTreeMap;
use std::fmt::Write;

/// Counter rates (per second) by series key, and gauge values that differ from healthy.
#[derive(Clone, Debug, Default)]
pub struct Second {
    pub rates: BTreeMap<&'static str, f64>,
    pub gauges: BTreeMap<&'static str, f64>,
}

fn second(rates: &[(&'static str, f64)], gauges: &[(&'static str, f64)]) -> Second {
    Second {
        rates: rates.iter().copied().collect(),
        gauges: gauges.iter().copied().collect(),
    }
}

/// 20 req/s offered and answered.
pub fn healthy() -> Second {
    second(
        &[
            ("admitted", 20.0),
            ("first", 20.0),
            ("useful", 20.0),
            ("ok", 20.0),
        ],
        &[],
    )
}

/// The replica not listening: admitted requests failing fast at the gate and the clients,
/// `rate` a second.
pub fn outage(rate: f64) -> Second {
    second(
        &[("admitted", rate), ("first", 20.0), ("failed", rate)],
        &[("up_service", 0.0)],
    )
}

/// The second the replica is back: the retries of the outage answered.
pub fn back() -> Second {
    second(
        &[
            ("admitted", 120.0),
            ("first", 20.0),
            ("useful", 120.0),
            ("ok", 120.0),
        ],
        &[],
    )
}

/// Every client in the 1 s retry loop: 80 req/s admitted, none answered in time.
pub fn stuck() -> Second {
    second(&[("admitted", 80.0), ("failed", 80.0)], &[])
}

/// A run's limit (with a review deadline at `deadline`): `admit` of the 80 req/s admitted.
pub fn limited(admit: f64, deadline: f64) -> Second {
    second(
        &[
            ("admitted", admit),
            ("rejected", 80.0 - admit),
            ("useful", admit),
            ("ok", admit),
            ("failed", 80.0 - admit),
        ],
        &[("deadline", deadline)],
    )
}

impl Second {
    /// This second with a gauge changed.
    pub fn with(mut self, gauge: &'static str, value: f64) -> Self {
        self.gauges.insert(gauge, value);
        self
    }
}

const SERIES: &[(&str, &str)] = &[
    (
        "admitted",
        r#"recover_gate_admissions_total{decision="admitted", app_kubernetes_io_name="recover-gate", namespace="shop", instance="g"}"#,
    ),
    (
        "rejected",
        r#"recover_gate_admissions_total{decision="rejected_rate", app_kubernetes_io_name="recover-gate", namespace="shop", instance="g"}"#,
    ),
    (
        "first",
        r#"recover_gate_attempts_total{kind="first", app_kubernetes_io_name="recover-gate", namespace="shop", instance="g"}"#,
    ),
    (
        "useful",
        r#"recover_demo_service_completions_total{kind="useful", app_kubernetes_io_name="config-service", namespace="shop", instance="a"}"#,
    ),
    (
        "ok",
        r#"recover_demo_workers_attempts_total{outcome="ok", app_kubernetes_io_name="workers", namespace="shop", instance="w"}"#,
    ),
    (
        "failed",
        r#"recover_demo_workers_attempts_total{outcome="timeout", app_kubernetes_io_name="workers", namespace="shop", instance="w"}"#,
    ),
];

const GAUGES: &[(&str, &str, f64)] = &[
    (
        "up_service",
        r#"up{app_kubernetes_io_name="config-service", namespace="shop", instance="a"}"#,
        1.0,
    ),
    (
        "ready",
        r#"recover_demo_service_ready{app_kubernetes_io_name="config-service", namespace="shop", instance="a"}"#,
        1.0,
    ),
    (
        "up_gate",
        r#"up{app_kubernetes_io_name="recover-gate", namespace="shop", instance="g"}"#,
        1.0,
    ),
    (
        "up_workers",
        r#"up{app_kubernetes_io_name="workers", namespace="shop", instance="w"}"#,
        1.0,
    ),
    (
        "deadline",
        r#"recover_gate_limit_review_deadline_timestamp_seconds{app_kubernetes_io_name="recover-gate", namespace="shop", instance="g"}"#,
        f64::INFINITY,
    ),
];

/// An incident: phases of (seconds, what each of them looks like).
pub struct Incident(pub Vec<(u64, Second)>);

impl Incident {
    fn seconds(&self) -> Vec<&Second> {
        self.0
            .iter()
            .flat_map(|(n, s)| std::iter::repeat_n(s, *n as usize))
            .collect()
    }

    /// `input_series` sampled every `scrape` seconds, in promtool's notation.
    pub fn input_series(&self, scrape: u64) -> String {
        let secs = self.seconds();
        let samples = secs.len() as u64 / scrape;
        let mut out = String::from("    input_series:\n");
        for (key, name) in SERIES {
            let mut total = 0.0;
            let mut t = 0;
            let mut values = Vec::new();
            for i in 0..=samples {
                while t < (i * scrape).min(secs.len() as u64) {
                    total += secs[t as usize].rates.get(key).copied().unwrap_or(0.0);
                    t += 1;
                }
                values.push(total);
            }
            if values.iter().any(|v| *v != 0.0) {
                series(&mut out, name, &values);
            }
        }
        for (key, name, default) in GAUGES {
            let values: Vec<f64> = (0..=samples)
                .map(|i| {
                    let at = ((i * scrape) as usize).min(secs.len() - 1);
                    secs[at].gauges.get(key).copied().unwrap_or(*default)
                })
                .collect();
            series(&mut out, name, &values);
        }
        out
    }
}

fn series(out: &mut String, name: &str, values: &[f64]) {
    let text: Vec<String> = values.iter().map(|v| number(*v)).collect();
    let _ = writeln!(
        out,
        "      - series: '{name}'\n        values: '{}'",
        text.join(" ")
    );
}

fn number(v: f64) -> String {
    if v.is_infinite() {
        "+Inf".into()
    } else {
        format!("{v}")
    }
}
