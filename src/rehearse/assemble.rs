//! Turns what a rehearsal observed into the [`Report`]: rebases every instant so 0 is the
//! trigger, names the phases, counts dropped work and relapses, computes the lower bound.
//!
//! Why it exists: the arithmetic of the report is pure and deserves tests of its own,
//! apart from the processes that produced the numbers.

use super::bound::{retry_loop_of, true_lower_bound, under_bound, RetryLoop};
use super::bound_grid::on_scrape_grid;
use super::client_phases::client_phases;
use super::detection::Detection;
use super::recorder::Recording;
use super::recovery::RunbookOutcome;
use super::report::*;
use super::scenario::Scenario;
use super::series::{RawScrape, Role, Sample};
use super::service_busy::servers_at;
use super::trigger::TriggerTimes;
use super::verify::{over_timeout_s, relapses, unsteady_at, SteadyCriteria};
use super::window_increase::{window_increase, Unmeasured};
use crate::plan::Plan;
use std::collections::BTreeMap;

/// Everything the rehearsal knows at the end (rehearsal clock).
pub struct Facts<'a> {
    pub scenario: &'a Scenario,
    pub runbook_name: &'a str,
    pub steady_from_s: f64,
    pub trigger: TriggerTimes,
    pub detection: Option<&'a Detection>,
    pub detector: &'a crate::detect::DetectorConfig,
    pub plan: Option<&'a Plan>,
    pub runbook: &'a RunbookOutcome,
    /// When the held steady state after the runbook began.
    pub steady_at_s: Option<f64>,
    pub end_s: f64,
    pub failure: Option<String>,
    pub baselines: BTreeMap<String, BaselineOutcome>,
    pub wall_time_s: f64,
    pub endpoints: BTreeMap<String, String>,
    pub predicted: Option<f64>,
    /// Why there is no prediction, when there is none.
    pub predicted_unknown: Option<String>,
    /// When detection started, if it started late (`attach_after`), rehearsal clock.
    pub attached_s: Option<f64>,
    /// The plan's inputs with their sources, when the runbook ran.
    pub inputs: Option<crate::plan::SourcedInputs>,
    /// The trigger left the system healthy: what to make harsher.
    pub not_stuck: Option<super::harsher::NotStuck>,
    /// A replica's own start-to-ready time, measured when the system started.
    pub start_to_ready_s: Option<f64>,
}

/// Build the report and the rebased series.
pub fn assemble(f: Facts, rec: &Recording) -> (Report, Vec<Sample>) {
    let sc = f.scenario;
    let zero = f.trigger.fired_s;
    let at = |t: f64| t - zero;
    let demand = sc.demand_per_s();
    let workers = sc.workers.count;
    let ran = f.runbook.error.is_none() || !f.runbook.steps.is_empty();
    let rb_start = f
        .runbook
        .steps
        .first()
        .map(|s| s.start_s)
        .unwrap_or(f.runbook.started_s);
    let recovered = f.steady_at_s.is_some() && f.failure.is_none();

    let samples = rebased(rec, zero);

    let mut phases = vec![
        phase(
            "steady",
            at(f.steady_from_s),
            0.0,
            format!("{workers} workers polling, goodput at demand ({demand:.1} req/s)"),
        ),
        phase(
            "trigger",
            0.0,
            at(f.trigger.ended_s),
            format!(
                "config service restarted, unavailable {:.0} s (a deploy)",
                sc.outage.as_secs_f64()
            ),
        ),
    ];
    let stuck_end = if ran && f.detection.is_some() {
        rb_start
    } else {
        f.end_s
    };
    let stuck_note = match f.detection {
        Some(d) => format!(
            "trigger gone, still down; detector said stuck {:.1} s after the trigger ended",
            d.at_s - f.trigger.ended_s
        ),
        None => "trigger gone; the detector never said stuck".into(),
    };
    phases.push(phase(
        "stuck",
        at(f.trigger.ended_s),
        at(stuck_end),
        stuck_note,
    ));
    if f.detection.is_some() && ran {
        let rec_end = f.steady_at_s.unwrap_or(f.end_s);
        phases.push(phase(
            "recovery",
            at(rb_start),
            at(rec_end),
            format!(
                "runbook {}: {} step(s)",
                f.runbook_name,
                f.runbook.steps.len()
            ),
        ));
        if let Some(t) = f.steady_at_s {
            phases.push(phase(
                "hold",
                at(t),
                at(f.end_s),
                "steady state held: goodput at demand, no client retrying, gate rejecting nothing"
                    .into(),
            ));
        }
    }

    let (dropped, lb, relapse_count, over_s) = if f.detection.is_some() && ran {
        let before = scrapes_before(rec, rb_start);
        // The clients in the loop at the last scrape before the runbook that read them,
        // and how long before it that scrape was (unread: every worker, at the start).
        let (backlog, scraped_before) = before
            .iter()
            .filter_map(|r| {
                r.sum(Role::Clients, "recover_demo_workers_in_retry_loop", &[])
                    .map(|n| (n, rb_start - r.t_s))
            })
            .next_back()
            .unwrap_or((workers as f64, 0.0));
        // Each replica's warmth at the last scrape before the runbook that has any.
        let warmth = before
            .iter()
            .map(|r| r.each(Role::Service, "recover_demo_service_warm_fraction"))
            .rfind(|w| !w.is_empty())
            .unwrap_or_default();
        let retry_loop = before.last().and_then(|r| retry_loop_at(sc, r, rb_start));
        let crit = SteadyCriteria::default();
        let mut lb = true_lower_bound(
            sc,
            backlog,
            scraped_before,
            f.start_to_ready_s,
            &warmth,
            &crit,
            retry_loop,
        );
        // On the grid the time to recover is read on: from the scrapes the steady check
        // reads (those from the runbook's launch on).
        if let Some(lb) = lb.as_mut() {
            let scrapes = rec.raws.iter().map(|r| (r.t_s, r.read_s));
            on_scrape_grid(lb, rb_start, f.runbook.started_s, zero, scrapes);
        }
        let (rel, over) = after_runbook(rec, sc, rb_start);
        (dropped(rec, f.runbook, rb_start, f.end_s), lb, rel, over)
    } else {
        (Dropped::default(), None, 0, 0.0)
    };

    let time_to_recover = f.steady_at_s.filter(|_| recovered).map(|t| t - rb_start);
    let report = Report {
        schema_version: SCHEMA_VERSION,
        runbook: f.runbook_name.to_string(),
        scenario: ScenarioFacts {
            name: sc.name.clone(),
            replicas: sc.replicas,
            workers,
            demand_per_s: demand,
            capacity_per_s: sc.capacity_per_s(),
            unavailable_s: at(f.trigger.ended_s),
            client_timeout_s: sc.workers.timeout.as_secs_f64(),
            attach_after_s: sc.attach_after.map(|d| d.as_secs_f64()),
            attempt_header: sc.workers.attempt_header.as_str().to_string(),
        },
        attached_s: f.attached_s.map(at),
        plan_inputs: f.inputs.clone(),
        recovered,
        failure: f.failure.clone(),
        trigger_end_s: at(f.trigger.ended_s),
        detected_stuck_s: f.detection.map(|d| d.at_s - f.trigger.ended_s),
        detection: f
            .detection
            .map(|d| detection_facts(d, f.detector, sc, d.at_s - f.trigger.ended_s)),
        time_to_recover_s: time_to_recover,
        lower_bound_s: lb.as_ref().map(|l| l.lower_bound_s),
        under_lower_bound: under_bound(time_to_recover, lb.as_ref()),
        unsteady_at_bound: lb.as_ref().and_then(|l| l.sample_s).and_then(|t| {
            let crit = SteadyCriteria::default();
            let delay = sc.retry_delay().as_secs_f64();
            unsteady_at(&rec.samples, t + zero, demand, workers, &crit, delay)
        }),
        lower_bound: lb,
        relapses: relapse_count,
        ramp_step_backs: f.runbook.relapses,
        p99_over_timeout_s: over_s,
        k: f.detection.and_then(|d| d.verdict.k),
        k_true: Some(sc.service.overload_factor),
        not_stuck: f.not_stuck.clone(),
        shed_fraction: f.plan.map(|p| p.shed_fraction),
        admit_rate_per_s: f.plan.map(|p| p.admit_rate),
        dropped_requests: dropped.drained + dropped.rejected_at_gate,
        dropped,
        steps: rebased_steps(f.runbook, zero),
        phases,
        baselines: f.baselines,
        predicted_time_to_recover_s: f.predicted,
        predicted_unknown: f.predicted_unknown.clone(),
        k_unknown: f.detection.and_then(|d| d.verdict.k_unknown.clone()),
        wall_time_s: f.wall_time_s,
        files: Files::default(),
        endpoints: f.endpoints.clone(),
        slow_replica: None,
        run: None,
    };
    (report, samples)
}

/// Work dropped on purpose from `from_s` to `to_s` (rehearsal clock): what the runbook's
/// drain reported, or the service's own count when larger or not reported, and the gate's
/// rejections. Each counter's increase covers the whole window ([`window_increase`]); one
/// the scrapes cannot cover is listed in `unknown` with why, its number 0.
pub fn dropped(rec: &Recording, runbook: &RunbookOutcome, from_s: f64, to_s: f64) -> Dropped {
    let scrapes: Vec<&RawScrape> = rec.raws.iter().chain(&rec.probes).collect();
    let count = |role, name, labels: &[(&str, &str)]| {
        window_increase(&scrapes, role, name, labels, from_s, to_s)
    };
    let mut unknown = BTreeMap::new();
    let gate_rej = ["rejected_rate", "rejected_in_flight"]
        .iter()
        .map(|o| count(Role::Gate, "recover_gate_requests_total", &[("outcome", o)]))
        .sum::<Result<f64, Unmeasured>>()
        .unwrap_or_else(|e| {
            unknown.insert("rejected_at_gate".into(), format!("not measured: {e}"));
            0.0
        });
    let drained_metric = count(Role::Service, "recover_demo_service_drained_total", &[]);
    let drained = match (runbook.drained, drained_metric) {
        (Some(d), Ok(m)) => (d as f64).max(m),
        (Some(d), Err(_)) => d as f64,
        (None, Ok(m)) => m,
        (None, Err(e)) => {
            unknown.insert(
                "drained".into(),
                format!("the drain gave no count and the service's was not measured: {e}"),
            );
            0.0
        }
    };
    Dropped {
        drained: drained.round() as u64,
        rejected_at_gate: gate_rej.round() as u64,
        unknown,
    }
}

/// Relapses and the seconds client p99 spent over the timeout, measured from the runbook's
/// start (`from_s`, rehearsal clock) on.
pub fn after_runbook(rec: &Recording, sc: &Scenario, from_s: f64) -> (u32, f64) {
    let timeout_s = sc.workers.timeout.as_secs_f64();
    let after: Vec<Sample> = rec
        .samples
        .iter()
        .filter(|s| s.t_s >= from_s)
        .cloned()
        .collect();
    let crit = SteadyCriteria::default();
    (
        relapses(
            &after,
            sc.demand_per_s(),
            sc.workers.count,
            &crit,
            relapse_samples(sc),
            timeout_s,
        ),
        over_timeout_s(&after, timeout_s),
    )
}

/// How many of the recorder's samples in a row make a relapse: as many as span two of the
/// monitoring's scrapes, one `scrape_interval` apart, the least an operator watching it
/// could see. The recorder scrapes finer (`record_interval`) to read the time to recover
/// closely, not to call a 0.2 s blip a relapse.
pub fn relapse_samples(sc: &Scenario) -> usize {
    let per_scrape = sc.scrape_interval.as_secs_f64() / sc.record_interval.as_secs_f64();
    1 + per_scrape.round().max(1.0) as usize
}

/// Pure: the detector's timing facts from its Stuck verdict.
pub fn detection_facts(
    d: &Detection,
    cfg: &crate::detect::DetectorConfig,
    sc: &Scenario,
    detected_stuck_s: f64,
) -> DetectionFacts {
    let for_s = |signal: &str| {
        d.verdict
            .evidence
            .iter()
            .filter(|e| e.signal == signal)
            .filter_map(|e| e.for_s)
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
    };
    let (persist_s, grace_s) = (cfg.persist.as_secs_f64(), cfg.grace.as_secs_f64());
    let failing = for_s("failure");
    let gone = for_s("trigger");
    DetectionFacts {
        summary: d.verdict.summary.clone(),
        persist_s,
        grace_s,
        failing_for_s: failing,
        trigger_gone_for_s: gone,
        after_window_s: match (failing, gone) {
            (Some(fl), Some(g)) => Some((fl - persist_s).min(g - grace_s)),
            _ => None,
        },
        trigger_end_seen_after_s: gone.map(|g| detected_stuck_s - g),
        scrape_interval_s: sc.scrape_interval.as_secs_f64(),
        k_from: d.verdict.k_from.clone(),
        arrival_rate: d.verdict.arrival_rate,
        capacity_cold: d.verdict.capacity_cold,
        capacity_cold_from: d.verdict.capacity_cold_from.clone(),
    }
}

/// The recorded series with `zero` (rehearsal clock) as 0.
pub fn rebased(rec: &Recording, zero: f64) -> Vec<Sample> {
    rec.samples
        .iter()
        .map(|s| Sample {
            t_s: s.t_s - zero,
            ..s.clone()
        })
        .collect()
}

/// The runbook's steps with `zero` (rehearsal clock) as 0.
pub fn rebased_steps(runbook: &RunbookOutcome, zero: f64) -> Vec<StepRecord> {
    runbook
        .steps
        .iter()
        .map(|s| StepRecord {
            start_s: s.start_s - zero,
            end_s: s.end_s - zero,
            ..s.clone()
        })
        .collect()
}

pub fn phase(name: &str, start_s: f64, end_s: f64, note: String) -> PhaseRecord {
    PhaseRecord {
        name: name.into(),
        start_s,
        end_s: end_s.max(start_s),
        note,
    }
}

/// The recorded series as CSV, one row per sample (empty cell = no data; `inf` = the gate
/// is unlimited).
pub fn series_csv(samples: &[Sample]) -> String {
    let mut out = String::from(
        "t_s,offered_per_s,admitted_per_s,rejected_per_s,goodput_per_s,first_attempt_per_s,p99_latency_s,gate_limit_per_s,queue_depth,workers_retrying,work_per_s,services_up\n",
    );
    let cell = |v: Option<f64>| {
        v.map(|x| {
            if x.is_infinite() {
                "inf".to_string()
            } else {
                format!("{x:.3}")
            }
        })
        .unwrap_or_default()
    };
    for s in samples {
        out.push_str(&format!(
            "{:.3},{},{},{},{},{},{},{},{},{},{},{}\n",
            s.t_s,
            cell(s.offered_per_s),
            cell(s.admitted_per_s),
            cell(s.rejected_per_s),
            cell(s.goodput_per_s),
            cell(s.first_attempt_per_s),
            cell(s.p99_latency_s),
            cell(s.gate_limit_per_s),
            cell(s.queue_depth),
            cell(s.workers_retrying),
            cell(s.work_per_s),
            s.services_up
        ));
    }
    out
}

/// The clients' retry loop as scrape `r` saw it, `rb_start - r.t_s` before the runbook's
/// first step: the split of the loop, where each client stood where the workers export it
/// ([`client_phases`]), and where the servers stood where the service does
/// ([`servers_at`]).
fn retry_loop_at(sc: &Scenario, r: &RawScrape, rb_start: f64) -> Option<RetryLoop> {
    let in_flight = r.sum(
        Role::Clients,
        "recover_demo_workers_retrying_in_flight",
        &[],
    );
    let l = retry_loop_of(sc, rb_start - r.t_s, in_flight)?;
    Some(RetryLoop {
        phases: client_phases(r),
        servers: servers_at(r),
        ..l
    })
}

/// The scrapes the runbook's state is read from: the grid's and the probes (the one taken at
/// the engine's decision) ticked at or before the runbook's first step `rb_start`, oldest
/// first. A probe that started after it (its task late on a loaded machine) is left out:
/// it may have read the procedure's first effects.
fn scrapes_before(rec: &Recording, rb_start: f64) -> Vec<&RawScrape> {
    let mut before: Vec<&RawScrape> = rec
        .raws
        .iter()
        .chain(&rec.probes)
        .filter(|r| r.t_s <= rb_start)
        .collect();
    before.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
    before
}

#[cfg(test)]
#[path = "assemble_tests.rs"]
mod tests;
