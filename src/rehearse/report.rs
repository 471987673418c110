//! `report.json`: what a rehearsal found, in stable, documented fields.
//!
//! Why it exists: scripts, CI and people compare rehearsals over time, so the field names
//! and their meaning are a contract (schema version 1). Add fields; never rename or
//! repurpose one.
//!
//! Time: every `*_s` field that names an instant (`trigger_end_s`, `steps[].start_s`,
//! `phases[].start_s`, ...) is seconds on the rehearsal clock, where 0 is the moment the
//! trigger fired (so steady state before it has negative times). Fields that name a
//! duration say after what: `detected_stuck_s` is seconds after `trigger_end_s`;
//! `time_to_recover_s` is seconds from the first runbook action to steady state.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Version of the report's field set; bumped only if a field changes meaning.
pub const SCHEMA_VERSION: u32 = 1;

/// The whole report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub schema_version: u32,
    /// Runbook run against the stuck system (`stuck-overload`).
    pub runbook: String,
    /// Scenario name and the numbers that matter for reading the report.
    pub scenario: ScenarioFacts,
    /// True when steady state was reached after the runbook and held for the hold period.
    pub recovered: bool,
    /// Why the rehearsal did not recover (a failed step, no steady state, ...); else null.
    pub failure: Option<String>,
    /// When the service was back (listening and ready) after the trigger.
    pub trigger_end_s: f64,
    /// Seconds after `trigger_end_s` when the detector first said Stuck; null if never.
    pub detected_stuck_s: Option<f64>,
    /// With `attach_after`: when detection (and the engine) started, rehearsal clock, its
    /// window starting there and the scrapes from before read only as metrics history;
    /// null when the detector watched from the start.
    #[serde(default)]
    pub attached_s: Option<f64>,
    /// The plan's inputs, each with its source (measured, declared, assumed) and what it
    /// came from; null when the runbook did not run.
    #[serde(default)]
    pub plan_inputs: Option<crate::plan::SourcedInputs>,
    /// How the detector reached Stuck; null if it never did.
    pub detection: Option<DetectionFacts>,
    /// Seconds from the first runbook action until steady state was reached (and then
    /// held); null if never.
    pub time_to_recover_s: Option<f64>,
    /// The fastest recovery physically possible for this system (formula in
    /// docs/design/arithmetic.md, inputs in `lower_bound`); null when its inputs could not
    /// be measured.
    pub lower_bound_s: Option<f64>,
    pub lower_bound: Option<LowerBound>,
    /// Set when the run recovered faster than the lower bound: no run can, so the bound or
    /// the clock is wrong; the rehearsal then exits 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub under_lower_bound: Option<String>,
    /// Why the scrape the bound is on (`lower_bound.sample_s`) did not read the run steady:
    /// the steady check's words and, with clients in a retry loop, how many the gate turned
    /// away over the retry delay before it. Absent when it read steady or no scrape reached
    /// the bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsteady_at_bound: Option<String>,
    /// Times the measured system fell back into the stuck state after it had started to
    /// recover: goodput under half of what the gate let through (capped at demand) after it
    /// had served well, or steady state lost after it was reached (each for at least two
    /// samples). Measured from the recorder, not taken from the engine.
    pub relapses: u32,
    /// Seconds after the runbook's start, once client p99 had fallen under the client
    /// timeout, that it spent at or above it again (wasted answers, e.g. the burst of the
    /// last retrying clients when the gate opens), even if goodput stayed up.
    pub p99_over_timeout_s: f64,
    /// Times the engine's readmission ramp stepped back because a check failed. A step-back
    /// without a measured relapse means the check judged on stale or noisy signals.
    pub ramp_step_backs: u32,
    /// Work amplification the detector estimated when it said Stuck.
    pub k: Option<f64>,
    /// Why `k` is null: the evidence that was missing (never a stand-in number).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k_unknown: Option<String>,
    /// The scenario's true overload factor (`service.overload_factor`), beside the estimate.
    #[serde(default)]
    pub k_true: Option<f64>,
    /// When the trigger left the system healthy (nothing to recover; exit 4): what to make
    /// harsher; else null.
    #[serde(default)]
    pub not_stuck: Option<super::harsher::NotStuck>,
    /// Fraction of arrivals the plan shed: `max(0, 1 - (capacity_cold / k) / arrival)`.
    pub shed_fraction: Option<f64>,
    /// The gate rate the plan admitted first, requests/s.
    pub admit_rate_per_s: Option<f64>,
    /// Requests destroyed on purpose during recovery: `dropped.drained + dropped.rejected_at_gate`.
    pub dropped_requests: u64,
    pub dropped: Dropped,
    /// Runbook steps as the engine ran them.
    pub steps: Vec<StepRecord>,
    /// steady, trigger, stuck, recovery, hold: what the timeline shades.
    pub phases: Vec<PhaseRecord>,
    /// Baseline name -> outcome, with `--baselines` (`no-intervention`, `plain-restart`,
    /// `shed-20pct`); empty otherwise.
    pub baselines: BTreeMap<String, BaselineOutcome>,
    /// The simulator's predicted time to recover for the same plan, when available.
    pub predicted_time_to_recover_s: Option<f64>,
    /// Why there is no prediction, when there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_unknown: Option<String>,
    /// Wall time of the whole rehearsal, seconds.
    pub wall_time_s: f64,
    /// Files written next to the report.
    pub files: Files,
    /// Where the main system's processes listened (component -> address), so a run can
    /// be matched with its logs and checked for leftovers.
    pub endpoints: BTreeMap<String, String>,
    /// The slow-replica rehearsal's own figures (a scenario with a `slow_replica:`
    /// section, whose trigger is one replica made slower); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slow_replica: Option<SlowReplicaFacts>,
    /// Set when the report is of a real run (`recover report RUN_ID`), not a rehearsal:
    /// which run, its clock, and every figure above it could not know, with why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<RunFacts>,
}

/// A real run's report (`recover report`): the same fields as a rehearsal's, read on the
/// run's clock. There is no trigger a run knows the end of: `trigger_end_s` is 0, the
/// clock's zero, which is the run's start (its first journal line), so every duration
/// "after `trigger_end_s`" is after the run's start. Fields a real run cannot know keep
/// their type (a rehearsal's reader must still read them) and are listed in `unknown`
/// with the reason: read them through it, never as measurements.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunFacts {
    pub run_id: String,
    pub target: String,
    /// succeeded | failed | aborted, or failed with `message` saying the journal ends early.
    pub outcome: String,
    pub message: Option<String>,
    /// RFC 3339: the run's start (t = 0) and end.
    pub started_at: String,
    pub finished_at: String,
    /// When the trouble started, seconds on the run's clock (negative: before the run),
    /// and how it was found; null when there is no series from before the run.
    pub onset_s: Option<f64>,
    pub onset_from: String,
    /// What the run left on the gate and the commands that change it (from the journal).
    pub gate: Option<crate::engine::report::GateLeft>,
    /// Field name (`scenario.workers`, `lower_bound_s`, ...) -> why it is not known.
    pub unknown: BTreeMap<String, String>,
    /// Where the evidence came from: the journal, the observed series, Prometheus.
    pub sources: Vec<String>,
}

/// What the slow-replica rehearsal measured. Every p99 is the median of the recorder's
/// windowed p99 of the clients' attempts over a phase, in seconds; null when that phase
/// had no sample.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SlowReplicaFacts {
    /// The replica made slow (`replica-1`), and how many times slower.
    pub slowed: String,
    pub factor: f64,
    /// The replica the detector named (should be `slowed`); null if it never did.
    pub detected: Option<String>,
    /// Seconds from the slowdown (t = 0) to the detector's `slow_replica`.
    pub detected_after_s: Option<f64>,
    /// Seconds the runbook took.
    pub runbook_s: Option<f64>,
    /// Healthy, before the slowdown.
    pub healthy_p99_s: Option<f64>,
    /// Slowed, with the gate's balancing, before the runbook.
    pub slowed_p99_s: Option<f64>,
    /// After the runbook.
    pub after_p99_s: Option<f64>,
    /// Slowed behind round robin with no runbook (the baseline).
    pub baseline_p99_s: Option<f64>,
}

/// The scenario numbers a reader needs to interpret the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioFacts {
    pub name: String,
    pub replicas: u32,
    pub workers: u32,
    /// Normal demand, requests/s (workers / poll interval).
    pub demand_per_s: f64,
    /// Warm capacity of all replicas together, requests/s.
    pub capacity_per_s: f64,
    /// How long the trigger kept the service unavailable, seconds.
    pub unavailable_s: f64,
    /// Client timeout, seconds (the p99 line on the timeline is drawn against it).
    pub client_timeout_s: f64,
    /// `attach_after`, seconds: detection started this long after the trigger ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attach_after_s: Option<f64>,
    /// How the workers marked their attempts (`x-attempt`, `none`, ...).
    #[serde(default)]
    pub attempt_header: String,
}

/// The true lower bound (docs/design/arithmetic.md, "The lower bound"): the least, over
/// every way of recovering the system allows, of the time from the runbook's start to
/// steady state at best (`rehearse::bound`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LowerBound {
    /// A replica's own start-to-ready time (measured when the rehearsal started the system,
    /// never a runbook step), seconds; 0 when it could not be measured.
    pub restart_s: f64,
    /// Where `restart_s` came from.
    #[serde(default)]
    pub restart_from: String,
    /// Clients in a retry loop when the runbook starts, less those steady state lets stay
    /// in it: each needs one useful answer. Queued requests are not counted: draining them
    /// is instant.
    pub backlog: f64,
    /// Capacity right after a restart, requests/s.
    pub capacity_cold_per_s: f64,
    /// Warm capacity, requests/s.
    #[serde(default)]
    pub capacity_warm_per_s: f64,
    /// Normal demand, requests/s (for reading; the bound leaves polls from clients outside
    /// the loop out, see `rehearse::bound`).
    pub demand_per_s: f64,
    /// The clients' retry delay. It counts in the bound only for the clients in
    /// `held_back` (`rehearse::bound::RetryLoop`); the rest of the loop may be waiting out
    /// their delays at any phase when recovery starts.
    pub retry_delay_s: f64,
    /// Clients no procedure can answer before they send again, a retry delay after the
    /// scrape before the runbook: those in flight beyond the most the servers answer, at
    /// their healthy cost, before the clients' timeout. 0 when that cannot be shown.
    #[serde(default)]
    pub held_back: f64,
    /// The state the bound starts from (the clients in the loop, their split) was scraped
    /// this long before the runbook's start, seconds. The loop's clients may be answered
    /// in between, so every path counts from the scrape, and `paths[].time_s` and
    /// `fluid_s` are from the runbook's start: a path's time from the scrape less this.
    #[serde(default)]
    pub scraped_before_s: f64,
    /// How long a warm call takes, seconds.
    #[serde(default)]
    pub warm_s: f64,
    /// The replicas' mean warm fraction when the runbook started (null: not measured; the
    /// bound then takes them as warm).
    #[serde(default)]
    pub warm_fraction_at_start: Option<f64>,
    /// The bound on the recorder's scrape grid, seconds after the runbook's start: the
    /// time of the first scrape that can read the backlog answered (its pages read at or
    /// after the runbook's start + `fluid_s`), since the time to recover is read on that
    /// grid (`rehearse::bound_grid`). `fluid_s` where no scrape reached it.
    pub lower_bound_s: f64,
    /// The fluid bound: the least of `paths`, a continuous time after the runbook's start.
    #[serde(default)]
    pub fluid_s: f64,
    /// The scrape `lower_bound_s` is, rehearsal clock (0 = the trigger fired); null when
    /// no scrape reached the fluid bound (then `lower_bound_s` is `fluid_s`).
    #[serde(default)]
    pub sample_s: Option<f64>,
    /// The recorder's scrape step (the scenario's `record_interval`), seconds.
    #[serde(default, alias = "scrape_interval_s")]
    pub record_interval_s: f64,
    /// How `lower_bound_s` was taken from `fluid_s`, in words.
    #[serde(default)]
    pub on_grid: String,
    /// The name of the path the bound is (`paths[].name`).
    #[serde(default)]
    pub lowest: String,
    /// Every path with its best time.
    #[serde(default)]
    pub paths: Vec<BoundPath>,
    /// The lowest path, in words.
    #[serde(default)]
    pub capacity_used: String,
    /// Whether the bound read where each client of the retry loop stood at the scrape it
    /// counts from: the workers' ladders `recover_demo_workers_next_attempt_within` and
    /// `recover_demo_workers_attempt_left_within` (`rehearse::client_phases`). False in
    /// reports written before this field.
    #[serde(default)]
    pub client_phases_read: bool,
    /// Why the bound did not read them, when it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_phases_unknown: Option<String>,
    /// The retry loop's release steps that bound the paths (`rehearse::bound_retry`), in
    /// time order: with the phases, clients waiting out their delay sent no sooner than
    /// their bucket's lower edge; with or without them, the attempts out no procedure
    /// answers in time sent again a retry delay after the scrape. Empty when none binds or
    /// no retry loop was read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub releases: Vec<ReleaseStep>,
    /// How much longer than its cost a job held its server, as the service measured it at
    /// the scrape the bound counts from (the least mean and widest spread over the
    /// replicas); the bound counts what a run of jobs cannot come in under. Absent where
    /// the service does not measure it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_overrun: Option<HoldOver>,
}

/// A job's hold of its server beyond its cost, as the service measures it over the jobs it
/// served (`recover_demo_service_overrun_{mean,sd}_seconds`): the runtime's timer and
/// scheduling, which no procedure removes. The drain keeps by its mean; the bound takes
/// only what a run of jobs cannot come in under (`HoldOver::least_over`, beside the bound's
/// count in `rehearse::bound_retry`). Seconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HoldOver {
    pub mean_s: f64,
    pub sd_s: f64,
}

/// One step of the retry loop's release as the bound used it. Times are seconds after the
/// scrape the bound counts from (`scraped_before_s` before the runbook's start; negative:
/// before that scrape, where the loop was read earlier).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReleaseStep {
    /// No work for this step's clients can start before this.
    pub at_s: f64,
    /// The most clients of the loop that can have been answered before `at_s`.
    pub answerable: f64,
    /// Clients of the loop released at `at_s`.
    pub released: f64,
    /// A path that needs a client released here or later is done no sooner than this.
    pub answered_from_s: f64,
}

/// The detector's view when it said Stuck. It says Stuck once the failure has lasted
/// `persist_s` and the trigger has been gone `grace_s` (as it perceives them, through the
/// signals' rate windows); `after_window_s` is how long after the later of the two it
/// said so: the detection loop's own latency (goal: at most two scrape intervals).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DetectionFacts {
    pub summary: String,
    pub persist_s: f64,
    pub grace_s: f64,
    /// How long the detector had seen the failure, at detection.
    pub failing_for_s: Option<f64>,
    /// How long the detector had seen no trigger, at detection.
    pub trigger_gone_for_s: Option<f64>,
    /// `min(failing_for_s - persist_s, trigger_gone_for_s - grace_s)`.
    pub after_window_s: Option<f64>,
    /// `detected_stuck_s - trigger_gone_for_s`: how late the signals showed the trigger's end.
    pub trigger_end_seen_after_s: Option<f64>,
    pub scrape_interval_s: f64,
    /// k, arrival, capacity and cold capacity as the detector estimated them, with sources.
    pub k_from: Option<String>,
    pub arrival_rate: Option<f64>,
    pub capacity_cold: Option<f64>,
    pub capacity_cold_from: Option<String>,
}

/// Work dropped on purpose.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Dropped {
    /// Queued requests the drain step threw away.
    pub drained: u64,
    /// Requests the gate answered 429 between the first runbook action and the end.
    pub rejected_at_gate: u64,
    /// Field (`drained`, `rejected_at_gate`) -> why it was not measured: its number is
    /// then 0 and counts for nothing, and `dropped_requests` holds only the known parts.
    /// Empty when both were measured (and in reports written before this field).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub unknown: BTreeMap<String, String>,
}

/// One runbook step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    pub name: String,
    pub start_s: f64,
    pub end_s: f64,
    /// "ok", "failed: ...", "skipped", ...
    pub outcome: String,
}

/// A shaded span of the timeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseRecord {
    /// steady | trigger | stuck | recovery | hold
    pub name: String,
    pub start_s: f64,
    pub end_s: f64,
    /// One line for the summary ("config service unavailable", ...).
    pub note: String,
}

/// How one baseline ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BaselineOutcome {
    /// Steady state reached by the end of the observation window.
    pub recovered: bool,
    /// Goodput over demand in the last seconds of the observation window.
    pub goodput_ratio_end: Option<f64>,
    /// What was done ("nothing", "restart all replicas", "gate at 80% of arrival").
    pub intervention: String,
    /// How long it was watched after the trigger ended, seconds.
    pub observed_s: f64,
}

/// File names (relative to the report directory).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Files {
    pub report: String,
    pub timeline: String,
    /// The recorded series, one row per scrape.
    pub series: String,
}

impl Default for Files {
    fn default() -> Self {
        Files {
            report: "report.json".into(),
            timeline: "timeline.svg".into(),
            series: "series.csv".into(),
        }
    }
}

impl Report {
    /// The phase named `name`, if it happened.
    pub fn phase(&self, name: &str) -> Option<&PhaseRecord> {
        self.phases.iter().find(|p| p.name == name)
    }
}

/// One way of recovering and how long it would take at best.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BoundPath {
    /// `readmit_cold`, `warm_first`, `readmit_cold_while_warming`, `drain_no_restart`.
    pub name: String,
    /// What it does.
    pub what: String,
    /// Seconds from the runbook's start to steady state at best; null if it never gets
    /// there (capacity below demand).
    pub time_s: Option<f64>,
}
