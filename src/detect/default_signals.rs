//! The built-in signal set for the demo system (gate + config service + workers), so
//! `recover detect --metrics-url gate=... --metrics-url service=... --metrics-url clients=...`
//! works without a runbook. The `stuck-overload` runbook mirrors these definitions.
//!
//! Scrape expressions select targets by role (`@gate`, `@service`, `@clients`); the PromQL
//! queries assume Prometheus labels the targets with `role` the same way.

use crate::metrics::signal::{names, SignalSpec};
use std::collections::BTreeMap;

/// The rate window every default signal uses.
pub const RATE_WINDOW: &str = "5s";

fn spec(scrape: &str, promql: &str, help: &str) -> SignalSpec {
    SignalSpec {
        scrape: Some(scrape.replace("$W", RATE_WINDOW)),
        promql: Some(promql.replace("$W", RATE_WINDOW)),
        help: Some(help.to_string()),
    }
}

/// Signal name -> definition, for the demo system's metric names (see TEAM.md).
pub fn demo_signals() -> BTreeMap<String, SignalSpec> {
    let defs = [
        (
            names::OFFERED_RATE,
            "rate(recover_gate_requests_total@gate[$W])",
            "sum(rate(recover_gate_requests_total[$W]))",
            "requests/s arriving at the gate (first attempts and retries)",
        ),
        (
            names::FIRST_ATTEMPT_RATE,
            r#"rate(recover_gate_attempts_total{kind="first"}@gate[$W]) or 0"#,
            r#"sum(rate(recover_gate_attempts_total{kind="first"}[$W])) or vector(0)"#,
            "first attempts/s at the gate: the clients' real demand",
        ),
        (
            names::GOODPUT,
            r#"rate(recover_demo_service_completions_total{kind="useful"}@service[$W]) or 0"#,
            r#"sum(rate(recover_demo_service_completions_total{kind="useful"}[$W])) or vector(0)"#,
            "useful completions/s at the service (a client was still waiting)",
        ),
        (
            names::WORK_RATE,
            "rate(recover_demo_service_completions_total@service[$W]) or 0",
            "sum(rate(recover_demo_service_completions_total[$W])) or vector(0)",
            "completions/s at the service, useful plus abandoned",
        ),
        (
            names::ERROR_RATIO,
            r#"(rate(recover_demo_workers_attempts_total{outcome!="ok"}@clients[$W]) or 0) / rate(recover_demo_workers_attempts_total@clients[$W])"#,
            r#"(sum(rate(recover_demo_workers_attempts_total{outcome!="ok"}[$W])) or vector(0)) / sum(rate(recover_demo_workers_attempts_total[$W]))"#,
            "fraction of the workers' attempts that failed (error or timeout)",
        ),
        (
            names::LATENCY_P99,
            "histogram_quantile(0.99, rate(recover_gate_upstream_latency_seconds_bucket@gate[$W]))",
            "histogram_quantile(0.99, sum by (le) (rate(recover_gate_upstream_latency_seconds_bucket[$W])))",
            "p99 of the service's latency as the gate sees it, seconds",
        ),
        (
            names::QUEUE_DEPTH,
            "sum(recover_demo_service_queue_depth@service)",
            "sum(recover_demo_service_queue_depth)",
            "requests queued at the service",
        ),
        (
            names::SERVICE_TIME,
            "rate(recover_demo_service_service_seconds_sum@service[$W]) / rate(recover_demo_service_service_seconds_count@service[$W])",
            "sum(rate(recover_demo_service_service_seconds_sum[$W])) / sum(rate(recover_demo_service_service_seconds_count[$W]))",
            "mean work time per request at the service, seconds",
        ),
        (
            names::WARM_FRACTION,
            "avg(recover_demo_service_warm_fraction@service)",
            "avg(recover_demo_service_warm_fraction)",
            "fraction of the service's cache that is warm",
        ),
        (
            names::REPLICAS_NOT_READY,
            "count(up@service) - sum(up@service) + (sum(1 - alive(recover_demo_service_ready@service)) or 0)",
            r#"(count(up{role="service"} == 0) or vector(0)) + (count(recover_demo_service_ready == 0) or vector(0))"#,
            "service replicas down or not ready",
        ),
        (
            names::REPLICAS_READY,
            "sum(recover_demo_service_ready@service)",
            "sum(recover_demo_service_ready)",
            "service replicas ready now",
        ),
        (
            names::CONCURRENCY_LIMIT,
            "sum(recover_demo_service_concurrency_limit@service)",
            "sum(recover_demo_service_concurrency_limit)",
            "requests the service replicas work on at once, summed (Little's law: capacity = this / healthy service time)",
        ),
        (
            names::GATE_REJECTED_RATE,
            r#"(rate(recover_gate_requests_total{outcome="rejected_rate"}@gate[$W]) or 0) + (rate(recover_gate_requests_total{outcome="rejected_in_flight"}@gate[$W]) or 0)"#,
            r#"sum(rate(recover_gate_requests_total{outcome=~"rejected_.*"}[$W])) or vector(0)"#,
            "requests/s the gate rejects",
        ),
        (
            names::GATE_ADMITTED_RATE,
            r#"rate(recover_gate_requests_total{outcome="admitted"}@gate[$W]) or 0"#,
            r#"sum(rate(recover_gate_requests_total{outcome="admitted"}[$W])) or vector(0)"#,
            "requests/s the gate admits and the service answers",
        ),
        (
            names::CLIENTS_RETRYING,
            "sum(recover_demo_workers_in_retry_loop@clients)",
            "sum(recover_demo_workers_in_retry_loop)",
            "workers currently in a retry loop",
        ),
    ];
    defs.into_iter()
        .map(|(name, scrape, promql, help)| (name.to_string(), spec(scrape, promql, help)))
        .collect()
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
