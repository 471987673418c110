//! When the trigger did not leave the system stuck: say so, and say which of the
//! scenario's numbers to change, from the arithmetic that makes the demo metastable.
//!
//! Why it exists: a rehearsal whose system never got stuck has nothing to recover; calling
//! that a failed recovery sends people looking for a bug in the procedure. The two
//! conditions (see `demo::defaults`): the outage must catch more clients in the retry loop
//! than the cold service can answer within one timeout-plus-retry cycle (the trigger), and
//! the retry loop must offer more than the overloaded warm service can do (stuck: k > 1).

use super::scenario::Scenario;
use serde::{Deserialize, Serialize};

/// Aim this far past each threshold: on the threshold itself a run gets stuck or not by
/// chance.
const MARGIN: f64 = 1.5;

/// What the report says when the trigger left the system healthy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NotStuck {
    /// One line: what happened and what to do.
    pub message: String,
    /// Scenario fields to change, each with the number to try and the arithmetic.
    pub suggestions: Vec<String>,
}

/// The message and the numbers to try for `sc`, whose trigger left the system healthy.
pub fn not_stuck(sc: &Scenario) -> NotStuck {
    let cycle = (sc.workers.timeout + sc.retry_delay())
        .as_secs_f64()
        .max(1e-3);
    let interval = sc.workers.interval.as_secs_f64();
    let (warm, cold) = (sc.capacity_per_s(), sc.capacity_cold_per_s());
    let k = sc.service.overload_factor.max(1.0);
    let n = sc.workers.count as f64;
    let mut out = Vec::new();

    // Stuck: the retry loop N / cycle must exceed the overloaded warm capacity.
    let loop_rate = n / cycle;
    let mut workers = n;
    if loop_rate < MARGIN * warm / k - 1e-9 {
        workers = (MARGIN * warm / k * cycle).ceil();
        out.push(format!(
            "workers.count: {workers:.0} (the retry loop offers {n:.0} / {cycle:.1} s = {loop_rate:.0} req/s, \
             not above what the overloaded service does warm, capacity / overload_factor = {warm:.0} / {k} = {:.0} req/s; \
             or service.overload_factor: {:.1})",
            warm / k,
            (MARGIN * warm * cycle / n).max(k + 0.5)
        ));
    }
    // Trigger: demand x outage must exceed what the cold service answers in one cycle.
    let demand = workers / interval;
    let caught = (demand * sc.outage.as_secs_f64()).min(workers);
    let needed = cold * cycle;
    if caught < MARGIN * needed - 1e-9 {
        let outage = (MARGIN * needed / demand).ceil();
        out.push(format!(
            "outage: {outage:.0}s (it catches demand x outage = {demand:.1} req/s x {:.0} s = {caught:.0} clients in the retry loop, \
             not above what the cold service answers in one timeout plus retry delay, {cold:.0} req/s x {cycle:.1} s = {needed:.0})",
            sc.outage.as_secs_f64()
        ));
    }
    if demand >= cold {
        out.push(format!(
            "workers.interval: longer than {:.1}s (demand {demand:.1} req/s must stay below the cold capacity {cold:.0} req/s, or no procedure can recover it)",
            workers / cold
        ));
    }
    if out.is_empty() {
        out.push(format!(
            "the numbers get stuck on paper but not in this run (a loaded machine serves the retry burst slower or faster): \
             outage: {:.0}s or service.overload_factor: {:.1}",
            (sc.outage.as_secs_f64() * MARGIN).ceil(),
            k + 1.0
        ));
    }
    NotStuck {
        message: format!(
            "the trigger did not leave the system stuck; nothing to recover; make the scenario harsher: {}",
            out.iter()
                .map(|s| s.split(" (").next().unwrap_or(s))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        suggestions: out,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn three_replicas_with_the_default_fleet_need_more_workers_and_a_longer_outage() {
        let sc = Scenario {
            replicas: 3,
            ..Scenario::default()
        };
        let n = not_stuck(&sc);
        assert!(
            n.message.starts_with(
                "the trigger did not leave the system stuck; nothing to recover; make the scenario harsher: "
            ),
            "{}",
            n.message
        );
        // 3 x 100 req/s warm, k = 2: the loop must offer over 1.5 x 150 req/s, 2 s a cycle.
        assert!(n.message.contains("workers.count: 450"), "{}", n.message);
        // 450 workers / 8 s = 56.25 req/s; 1.5 x 150 x 2 s / 56.25 = 8 s.
        assert!(n.message.contains("outage: 8s"), "{}", n.message);
        // The suggested numbers are harsh enough by the same arithmetic.
        let harsher = Scenario {
            workers: crate::rehearse::scenario::WorkersSpec {
                count: 450,
                ..sc.workers.clone()
            },
            outage: Duration::from_secs(8),
            ..sc
        };
        assert!(not_stuck(&harsher).suggestions[0].contains("on paper"));
    }

    #[test]
    fn a_short_outage_alone_asks_for_a_longer_one() {
        let sc = Scenario {
            outage: Duration::from_secs(1),
            ..Scenario::default()
        };
        let n = not_stuck(&sc);
        assert_eq!(n.suggestions.len(), 1, "{:?}", n.suggestions);
        // 20 req/s demand, 50 req/s cold x 2 s = 100 clients; 1.5 x 100 / 20 = 7.5 -> 8 s.
        assert!(n.suggestions[0].starts_with("outage: 8s"), "{:?}", n);
    }
}
