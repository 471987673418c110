//! The simulated system as a scrape sees it: `/metrics` pages of the gate, each service
//! replica and the workers, written from the simulator's per-second series at the
//! scenario's scrape interval, read by the runbook's own signal expressions
//! ([`crate::metrics::scrape::Scraper`]) and judged by the detector at every scrape from
//! the moment it attaches until it says Stuck, as the rehearsal's detection does. Every
//! scrape from the start is kept, as a Prometheus retains them: where the window leaves
//! the healthy reference unknown or to a declaration, the detector looks back over them
//! ([`crate::detect::observe::needs_history`], [`crate::detect::lookback::find`]), as the
//! engine's look-back does over a source's history.
//!
//! Why it exists: the grid report measures the estimator, so the estimator must read what
//! it reads on a real system (counters it turns into rates, gauges at an instant), not the
//! simulator's internals. The pages export what the demo components export, computed from
//! the series by the demo's own definitions:
//!
//! - counters between two whole seconds rise linearly (the simulator counts per second);
//!   gauges read the last whole second;
//! - the service is one simulated server: each replica exports its share (completions,
//!   queue), the concurrency limit, `ready`, and a failed scrape while it is down;
//! - the work time of a request is the service's concurrency over the useful capacity it
//!   has at that second (`concurrency / service time` is its capacity, cold and overloaded
//!   included); a replica's warm fraction is its share of the completions since it started
//!   (cold, as the demo service starts) or restarted over `service.warm_after`, as the demo
//!   service and the model warm;
//! - the gate admits everything (no limit before the procedure) and counts first attempts
//!   and retries by the attempt header; without one, by the client address all the
//!   rehearsal's workers share, each failure the gate saw within 10 s owing one retry
//!   (`gate::attempts`);
//! - the workers' attempts by outcome (ok, error, timeout), those in a retry loop, their
//!   timeout.
//!
//! The gate's latency histogram is not written: the detector's rules do not read p99 with
//! the shipped runbook (no `latency_limit`), and the simulator records no latencies.

use crate::detect::observe::needs_history;
use crate::detect::windows::{at_resolution, Fields};
use crate::detect::{detect_with, lookback, DetectorConfig, Verdict, VerdictKind};
use crate::metrics::scrape::{compile, ScrapeEndpoint, Scraper};
use crate::metrics::signal::{SignalSpec, Snapshot};
use crate::rehearse::detection::WINDOW;
use crate::rehearse::scenario::Scenario;
use crate::simulate::Second;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::{Duration, UNIX_EPOCH};

/// A failure the gate saw predicts a retry from the same address within this long.
const RETRY_HORIZON_S: usize = 10;

/// What the simulated run looked like from outside, up to the detector's verdict.
#[derive(Debug, Clone)]
pub struct Observed {
    /// The Stuck verdict and when (simulated seconds), or the last verdict when it never
    /// came within the scenario's `detect_timeout`.
    pub verdict: Verdict,
    pub at_s: Option<f64>,
    /// The warm fraction the service exported at the verdict (for the warm step).
    pub warm_fraction: f64,
}

/// Per-second values the pages are written from, prefix-summed for counters.
struct Counters {
    cum: Vec<f64>,
    per: Vec<f64>,
}

impl Counters {
    fn of(series: &[Second], f: impl Fn(usize, &Second) -> f64) -> Self {
        let per: Vec<f64> = series.iter().enumerate().map(|(i, s)| f(i, s)).collect();
        let mut cum = Vec::with_capacity(per.len() + 1);
        let mut total = 0.0;
        cum.push(0.0);
        for v in &per {
            total += v;
            cum.push(total);
        }
        Counters { cum, per }
    }

    /// The running total at `t` seconds: linear within a second.
    fn at(&self, t: f64) -> f64 {
        let i = (t.floor() as usize).min(self.per.len());
        let frac = t - i as f64;
        self.cum[i] + self.per.get(i).map_or(0.0, |v| v * frac)
    }
}

/// The gate's first attempts and retries per second as it counts them.
fn gate_kinds(series: &[Second], header: bool) -> (Vec<f64>, Vec<f64>) {
    if header {
        return (
            series.iter().map(|s| s.first as f64).collect(),
            series.iter().map(|s| s.retries as f64).collect(),
        );
    }
    let (mut first, mut retry) = (Vec::new(), Vec::new());
    let (mut owed, mut last_failure) = (0.0f64, None::<usize>);
    for (i, s) in series.iter().enumerate() {
        if last_failure.is_some_and(|l| i - l > RETRY_HORIZON_S) {
            owed = 0.0;
        }
        let failures = (s.rejected + s.timeouts) as f64;
        let arriving = s.arriving as f64;
        let r = (owed + failures).min(arriving);
        owed = (owed + failures - r).min(65_535.0);
        if failures > 0.0 {
            last_failure = Some(i);
        }
        first.push(arriving - r);
        retry.push(r);
    }
    (first, retry)
}

/// Watch the simulated `series` (trigger over at `trigger_end_s`, the service down over
/// `down`) through the runbook's `signals` with the detector settings `cfg`, from
/// `attach_s` on, until Stuck or the scenario's `detect_timeout`.
pub fn observe(
    sc: &Scenario,
    series: &[Second],
    down: (f64, f64),
    attach_s: f64,
    signals: &BTreeMap<String, SignalSpec>,
    cfg: &DetectorConfig,
) -> Result<Observed, String> {
    let compiled = compile(signals).map_err(|e| e.to_string())?;
    let (config, _, _) =
        at_resolution(cfg, sc.scrape_interval, &Fields::runbook()).map_err(|e| e.to_string())?;
    let replicas = f64::from(sc.replicas);
    let conc = f64::from(sc.service.concurrency);
    let completions = Counters::of(series, |_, s| (s.useful + s.abandoned) as f64);
    let useful = Counters::of(series, |_, s| s.useful as f64);
    let abandoned = Counters::of(series, |_, s| s.abandoned as f64);
    // Work seconds: every completion of a second cost the concurrency over the capacity.
    let work = Counters::of(series, |_, s| {
        if s.capacity > 0.0 {
            (s.useful + s.abandoned) as f64 * conc * replicas / s.capacity
        } else {
            0.0
        }
    });
    let arriving = Counters::of(series, |_, s| s.arriving as f64);
    let (first, retry) = gate_kinds(
        series,
        sc.workers.attempt_header != crate::demo::workers::AttemptHeader::None,
    );
    let first = Counters::of(series, |i, _| first[i]);
    let retry = Counters::of(series, |i, _| retry[i]);
    let ok = Counters::of(series, |_, s| s.useful as f64);
    let error = Counters::of(series, |_, s| s.rejected as f64);
    let timeout = Counters::of(series, |_, s| s.timeouts as f64);
    let gauge = |t: f64| &series[(t.floor() as usize).saturating_sub(1).min(series.len() - 1)];
    let warm = |t: f64| {
        if sc.service.warm_after == 0 {
            return 1.0;
        }
        let since = if t < down.0 { 0.0 } else { down.1 };
        replica_warm(
            completions.at(t) - completions.at(since.min(t)),
            sc.replicas,
            sc.service.warm_after,
        )
    };

    let base = UNIX_EPOCH + Duration::from_secs(1_000_000);
    let at = |t: f64| base + Duration::from_secs_f64(t);
    let endpoint = |role: &str, instance: String| ScrapeEndpoint {
        role: role.into(),
        locator: format!("sim://{instance}"),
        instance,
    };
    let gate = endpoint("gate", "gate".into());
    let clients = endpoint("clients", "workers".into());
    let services: Vec<ScrapeEndpoint> = (0..sc.replicas)
        .map(|i| endpoint("service", crate::demo::topology::replica_name(i as usize)))
        .collect();
    let mut scraper = Scraper::for_signals(&compiled);
    let mut window: Vec<Snapshot> = Vec::new();
    let mut history: Vec<Snapshot> = Vec::new();
    let step = sc.scrape_interval.as_secs_f64();
    let end = series.len() as f64 - 1.0;
    let deadline = attach_s.max(down.1) + sc.detect_timeout.as_secs_f64();
    let mut last = Verdict::default();
    // Scraped from the start at the phase that puts a scrape at the attach.
    let phase = attach_s - step * (attach_s / step).floor();
    let mut n = 0u64;
    loop {
        let t = phase + step * n as f64;
        n += 1;
        if t > end || t > deadline {
            break;
        }
        let g = gauge(t);
        let mut page = String::new();
        counter(
            &mut page,
            "recover_gate_admissions_total",
            &[("decision", "admitted")],
            arriving.at(t),
        );
        counter(
            &mut page,
            "recover_gate_admissions_total",
            &[("decision", "rejected_rate")],
            0.0,
        );
        let method = if sc.workers.attempt_header == crate::demo::workers::AttemptHeader::None {
            "client-address"
        } else {
            "x-attempt"
        };
        counter(
            &mut page,
            "recover_gate_attempts_total",
            &[("kind", "first"), ("method", method)],
            first.at(t),
        );
        counter(
            &mut page,
            "recover_gate_attempts_total",
            &[("kind", "retry"), ("method", method)],
            retry.at(t),
        );
        counter(&mut page, "recover_gate_upstream_ejected", &[], 0.0);
        scraper.record(&gate, at(t), Ok(&page));

        let mut page = String::new();
        counter(
            &mut page,
            "recover_demo_workers_attempts_total",
            &[("outcome", "ok")],
            ok.at(t),
        );
        counter(
            &mut page,
            "recover_demo_workers_attempts_total",
            &[("outcome", "error")],
            error.at(t),
        );
        counter(
            &mut page,
            "recover_demo_workers_attempts_total",
            &[("outcome", "timeout")],
            timeout.at(t),
        );
        counter(
            &mut page,
            "recover_demo_workers_in_retry_loop",
            &[],
            g.in_retry as f64,
        );
        counter(
            &mut page,
            "recover_demo_workers_client_timeout_seconds",
            &[],
            sc.workers.timeout.as_secs_f64(),
        );
        scraper.record(&clients, at(t), Ok(&page));

        let is_down = t >= down.0 && t < down.1;
        let w = warm(t);
        for s in &services {
            if is_down {
                scraper.record(s, at(t), Err("connection refused".into()));
                continue;
            }
            let share = |v: f64| v / replicas;
            let mut page = String::new();
            counter(
                &mut page,
                "recover_demo_service_completions_total",
                &[("kind", "useful")],
                share(useful.at(t)),
            );
            counter(
                &mut page,
                "recover_demo_service_completions_total",
                &[("kind", "abandoned")],
                share(abandoned.at(t)),
            );
            counter(
                &mut page,
                "recover_demo_service_queue_depth",
                &[],
                share(g.queue as f64),
            );
            counter(
                &mut page,
                "recover_demo_service_service_seconds_sum",
                &[],
                share(work.at(t)),
            );
            counter(
                &mut page,
                "recover_demo_service_service_seconds_count",
                &[],
                share(completions.at(t)),
            );
            counter(&mut page, "recover_demo_service_warm_fraction", &[], w);
            counter(&mut page, "recover_demo_service_ready", &[], 1.0);
            counter(
                &mut page,
                "recover_demo_service_concurrency_limit",
                &[],
                conc,
            );
            scraper.record(s, at(t), Ok(&page));
        }
        let snap = scraper.snapshot(&compiled, at(t));
        history.push(snap.clone());
        if t + 1e-9 < attach_s {
            continue;
        }
        window.push(snap);
        let from = at(t).checked_sub(WINDOW).unwrap_or(base);
        window.retain(|s| s.at >= from);
        last = detect_with(&window, &config, None, at(t));
        if needs_history(&last) {
            let lb = lookback::find(&history, &config, config.lookback, sc.scrape_interval);
            last = detect_with(&window, &config, Some(&lb), at(t));
        }
        if last.verdict == VerdictKind::Stuck {
            return Ok(Observed {
                verdict: last,
                at_s: Some(t),
                warm_fraction: w,
            });
        }
    }
    Ok(Observed {
        verdict: last,
        at_s: None,
        warm_fraction: 1.0,
    })
}

/// A replica's warm fraction after the service completed `since_restart` requests since
/// the restart: each of the `replicas` warms on its own share of the work, as the demo
/// service does (and the model, `rehearse::predict::system_params`).
fn replica_warm(since_restart: f64, replicas: u32, warm_after: u64) -> f64 {
    let own = since_restart / f64::from(replicas.max(1));
    (own / warm_after.max(1) as f64).min(1.0)
}

/// One sample line (counters and gauges alike: the signals read values, not types).
fn counter(page: &mut String, name: &str, labels: &[(&str, &str)], v: f64) {
    let labels = labels
        .iter()
        .map(|(k, v)| format!("{k}=\"{v}\""))
        .collect::<Vec<_>>()
        .join(",");
    if labels.is_empty() {
        let _ = writeln!(page, "{name} {v}");
    } else {
        let _ = writeln!(page, "{name}{{{labels}}} {v}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_replica_warms_on_its_share_of_the_work() {
        // 300 completions over 3 replicas: each has done 100 of its 300.
        assert!((replica_warm(300.0, 3, 300) - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(replica_warm(900.0, 3, 300), 1.0);
        assert_eq!(replica_warm(5_000.0, 1, 300), 1.0);
    }
}
