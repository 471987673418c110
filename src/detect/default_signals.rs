//! The built-in signal set for the demo system (gate + config service + workers), so
//! `recover detect --metrics-url gate=... --metrics-url service=... --metrics-url clients=...`
//! works without a runbook. The shipped runbooks mirror these definitions (a test keeps
//! them equal).
//!
//! Scrape expressions select targets by role (`@gate`, `@service`, `@clients`) and read
//! 0.5-1 s scrapes over a fixed 5 s window. PromQL expressions select each role by the
//! label matchers declared for it (`$gate`, see `metrics::promql::roles::default_roles`)
//! and rate over `$__rate_interval`, so they work at any scrape interval. A rate that may
//! legitimately be absent (no request of that kind yet, the service down) falls back to
//! zero only while the role's targets exist (`or 0 * sum(up{$service})`): a role that
//! selects nothing reads as missing, never as zero.

use crate::detect::DetectorConfig;
use crate::metrics::promql::{roles::default_roles, template};
use crate::metrics::signal::{names, SignalSpec};
use std::collections::BTreeMap;
use std::time::Duration;

/// The rate window every default scrape expression uses.
pub const RATE_WINDOW: &str = "5s";

/// The short window of the `*_recent` signals readmission judges by (`$R`): a check that
/// gates each ramp rate must stop seeing the drain and the restart before it within a
/// few seconds, not five; three seconds still hold two 1 s scrapes. PromQL keeps
/// `$__rate_interval` (a rate needs four scrape intervals there).
pub const RECENT_WINDOW: &str = "3s";

fn spec(scrape: &str, promql: &str, help: &str) -> SignalSpec {
    SignalSpec {
        scrape: Some(
            scrape
                .replace("$W", RATE_WINDOW)
                .replace("$R", RECENT_WINDOW),
        ),
        promql: Some(
            promql
                .replace("$W", "$__rate_interval")
                .replace("$R", "$__rate_interval"),
        ),
        help: Some(help.to_string()),
        per_replica: false,
    }
}

/// The window of the per-replica service time: longer than the other rates', so a replica
/// the gate ejects keeps its figure a while (the detector reads a gap without one as no
/// news, see `detect::slow_replica::persisting`), short enough that a replica turned slow
/// stands out within seconds.
pub const REPLICA_WINDOW: &str = "10s";

/// The detection settings that go with the built-in signals (and the shipped runbooks):
/// grace and persist of 5 s and 10 s on 0.5-1 s scrapes, stretched on coarser data to one
/// rate window (4 scrapes) for grace, counted from the first snapshot that sees the
/// trigger gone (the trigger ended before it, so no later window holds it), and for
/// persist to that window plus the scrape that bounds when the failure began (a blip
/// shows in the windows for up to one window) (docs/guide/prometheus.md).
pub fn detector_config() -> DetectorConfig {
    DetectorConfig {
        grace: Duration::from_secs(5),
        grace_scrapes: Some(4),
        persist: Duration::from_secs(10),
        persist_scrapes: Some(5),
        ..DetectorConfig::default()
    }
}

/// Signal name -> definition with the default roles bound in.
pub fn demo_signals() -> BTreeMap<String, SignalSpec> {
    demo_signals_with_roles(&default_roles()).expect("the default roles bind every signal")
}

/// Signal name -> definition with `roles` (the default ones, some replaced) bound in.
pub fn demo_signals_with_roles(
    roles: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, SignalSpec>, template::TemplateError> {
    demo_signal_templates()
        .into_iter()
        .map(|(name, mut spec)| {
            if let Some(q) = spec.promql.as_mut() {
                *q = template::bind_roles(q, roles)?;
            }
            Ok((name, spec))
        })
        .collect()
}

/// Signal name -> definition as written, with `$ROLE` placeholders in the PromQL.
pub fn demo_signal_templates() -> BTreeMap<String, SignalSpec> {
    let defs = [
        (
            names::OFFERED_RATE,
            "rate(recover_gate_admissions_total@gate[$W])",
            "sum(rate(recover_gate_admissions_total{$gate}[$W]))",
            "requests/s arriving at the gate (first attempts and retries)",
        ),
        (
            names::FIRST_ATTEMPT_RATE,
            r#"rate(recover_gate_attempts_total{kind="first"}@gate[$W]) or 0"#,
            r#"sum(rate(recover_gate_attempts_total{kind="first", $gate}[$W])) or 0 * sum(up{$gate})"#,
            "first attempts/s at the gate: the clients' real demand",
        ),
        (
            names::GOODPUT,
            r#"rate(recover_demo_service_completions_total{kind="useful"}@service[$W]) or 0"#,
            r#"sum(rate(recover_demo_service_completions_total{kind="useful", $service}[$W])) or 0 * sum(up{$service})"#,
            "useful completions/s at the service (a client was still waiting)",
        ),
        (
            names::WORK_RATE,
            "rate(recover_demo_service_completions_total@service[$W]) or 0",
            "sum(rate(recover_demo_service_completions_total{$service}[$W])) or 0 * sum(up{$service})",
            "completions/s at the service, useful plus abandoned",
        ),
        (
            names::ERROR_RATIO,
            r#"(rate(recover_demo_workers_attempts_total{outcome!="ok"}@clients[$W]) or 0) / rate(recover_demo_workers_attempts_total@clients[$W])"#,
            r#"(sum(rate(recover_demo_workers_attempts_total{outcome!="ok", $clients}[$W])) or 0 * sum(up{$clients})) / sum(rate(recover_demo_workers_attempts_total{$clients}[$W]))"#,
            "fraction of the workers' attempts that failed (error or timeout)",
        ),
        (
            names::LATENCY_P99,
            "histogram_quantile(0.99, rate(recover_gate_upstream_latency_seconds_bucket@gate[$W]))",
            "histogram_quantile(0.99, sum by (le) (rate(recover_gate_upstream_latency_seconds_bucket{$gate}[$W])))",
            "p99 of the service's latency as the gate sees it, seconds",
        ),
        (
            names::LATENCY_P99_RECENT,
            "histogram_quantile(0.99, rate(recover_gate_upstream_latency_seconds_bucket@gate[$R]))",
            "histogram_quantile(0.99, sum by (le) (rate(recover_gate_upstream_latency_seconds_bucket{$gate}[$R])))",
            "p99 of the service's latency as the gate sees it over the last few seconds (readmission)",
        ),
        (
            names::GOODPUT_RECENT,
            r#"rate(recover_demo_service_completions_total{kind="useful"}@service[$R]) or 0"#,
            r#"sum(rate(recover_demo_service_completions_total{kind="useful", $service}[$R])) or 0 * sum(up{$service})"#,
            "useful completions/s over the last few seconds (readmission)",
        ),
        (
            names::GATE_ADMITTED_RECENT,
            r#"rate(recover_gate_admissions_total{decision="admitted"}@gate[$R]) or 0"#,
            r#"sum(rate(recover_gate_admissions_total{decision="admitted", $gate}[$R])) or 0 * sum(up{$gate})"#,
            "requests/s the gate admits over the last few seconds (readmission)",
        ),
        (
            names::QUEUE_DEPTH,
            "sum(recover_demo_service_queue_depth@service)",
            "sum(recover_demo_service_queue_depth{$service})",
            "requests queued at the service",
        ),
        (
            names::SERVICE_TIME,
            "rate(recover_demo_service_service_seconds_sum@service[$W]) / rate(recover_demo_service_service_seconds_count@service[$W])",
            "sum(rate(recover_demo_service_service_seconds_sum{$service}[$W])) / sum(rate(recover_demo_service_service_seconds_count{$service}[$W]))",
            "mean work time per request at the service, seconds",
        ),
        (
            names::WARM_FRACTION,
            "avg(recover_demo_service_warm_fraction@service)",
            "avg(recover_demo_service_warm_fraction{$service})",
            "fraction of the service's cache that is warm",
        ),
        (
            names::REPLICAS_NOT_READY,
            "count(up@service) - sum(up@service) + (sum(1 - alive(recover_demo_service_ready@service)) or 0)",
            "sum(up{$service} == bool 0) + (sum(recover_demo_service_ready{$service} == bool 0) or 0 * sum(up{$service}))",
            "service replicas down or not ready",
        ),
        (
            names::REPLICAS_READY,
            "sum(recover_demo_service_ready@service)",
            "sum(recover_demo_service_ready{$service})",
            "service replicas ready now",
        ),
        (
            names::CONCURRENCY_LIMIT,
            "sum(recover_demo_service_concurrency_limit@service)",
            "sum(recover_demo_service_concurrency_limit{$service})",
            "requests the service replicas work on at once, summed (Little's law: capacity = this / healthy service time)",
        ),
        (
            names::GATE_REJECTED_RATE,
            r#"(rate(recover_gate_admissions_total{decision="rejected_rate"}@gate[$W]) or 0) + (rate(recover_gate_admissions_total{decision="rejected_in_flight"}@gate[$W]) or 0)"#,
            r#"sum(rate(recover_gate_admissions_total{decision=~"rejected_.*", $gate}[$W])) or 0 * sum(up{$gate})"#,
            "requests/s the gate rejects",
        ),
        (
            names::GATE_ADMITTED_RATE,
            r#"rate(recover_gate_admissions_total{decision="admitted"}@gate[$W]) or 0"#,
            r#"sum(rate(recover_gate_admissions_total{decision="admitted", $gate}[$W])) or 0 * sum(up{$gate})"#,
            "requests/s the gate admits, counted when it decides (answered or not)",
        ),
        (
            names::CLIENTS_RETRYING,
            "sum(recover_demo_workers_in_retry_loop@clients)",
            "sum(recover_demo_workers_in_retry_loop{$clients})",
            "workers currently in a retry loop",
        ),
        (
            names::CLIENT_TIMEOUT,
            "max(recover_demo_workers_client_timeout_seconds@clients)",
            "max(recover_demo_workers_client_timeout_seconds{$clients})",
            "the workers' timeout per attempt, seconds",
        ),
    ];
    let mut out: BTreeMap<String, SignalSpec> = defs
        .into_iter()
        .map(|(name, scrape, promql, help)| (name.to_string(), spec(scrape, promql, help)))
        .collect();
    out.insert(
        names::UPSTREAMS_EJECTED.to_string(),
        spec(
            "sum(recover_gate_upstream_ejected@gate)",
            "sum(recover_gate_upstream_ejected{$gate})",
            "service replicas the gate has ejected as latency outliers now",
        ),
    );
    let mut per = spec(
        "rate(recover_demo_service_service_seconds_sum@service[$P]) / rate(recover_demo_service_service_seconds_count@service[$P])",
        "sum by (pod, instance) (rate(recover_demo_service_service_seconds_sum{$service}[$W])) / sum by (pod, instance) (rate(recover_demo_service_service_seconds_count{$service}[$W]))",
        "mean work time per request at each service replica, seconds",
    );
    // `$P`, not `$R`: spec() already gives `$R` the readmission's short window.
    per.scrape = per.scrape.map(|s| s.replace("$P", REPLICA_WINDOW));
    per.per_replica = true;
    out.insert(names::REPLICA_SERVICE_TIME.to_string(), per);
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_default_scrape_expression_parses() {
        for (name, s) in super::demo_signals() {
            let src = s.scrape.unwrap_or_default();
            if let Err(e) = crate::metrics::scrape::expr::parse(&src) {
                panic!("{name}: {src}: {e}");
            }
        }
    }
}
