//! What a run's actions share: the runbook, the platform, the metrics, the fixed plan
//! figures, the journal every action writes to before and after it acts, and the series
//! the run observed ([`super::super::observed`]): every snapshot an action reads and every
//! limit a gate action sees passes through here, so it is recorded here and nowhere else.

use super::super::batches::RestartProgress;
use super::super::journal::{ActionRecord, Event, Journal};
use super::super::observed::{self, Observed};
use super::super::progress::log::log_event;
use super::super::progress::ProgressEvent;
use super::super::vars::Fixed;
use super::super::RunOptions;
use super::handback::GateMemory;
use super::StepFailure;
use crate::gate::limit::Limit;
use crate::metrics::signal::Snapshot;
use crate::metrics::source::{MetricError, MetricSource};
use crate::platform::Known;
use crate::platform::Platform;
use crate::runbook::Runbook;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// How often the observed series is written while a run goes on (and once at its end).
const WRITE_EVERY: Duration = Duration::from_secs(2);

/// The series being recorded and where it goes.
struct Recorder {
    series: Observed,
    path: PathBuf,
    written: Option<Instant>,
}

/// A journal handle shared with actions that finish on a spawned task.
pub(crate) type SharedJournal = Arc<Mutex<Journal>>;

/// What a run's actions share.
pub struct Ctx {
    pub rb: Runbook,
    pub platform: Arc<dyn Platform>,
    pub metrics: Arc<dyn MetricSource>,
    pub fixed: Fixed,
    pub run_id: String,
    pub(crate) journal: SharedJournal,
    pub(crate) opts: RunOptions,
    /// Batched-restart progress from the journal of an interrupted run, by step name.
    pub(crate) restart: BTreeMap<String, RestartProgress>,
    /// What the run saw of the gate, for the hand-back.
    gate_memory: Mutex<GateMemory>,
    /// Replicas this run drained (their drain answered, with counts or without), each with
    /// what its drain kept queued.
    drained: Mutex<Vec<(String, Known<u64>)>>,
    /// Replicas this run restarted.
    restarted: Mutex<Vec<String>>,
    /// The rate a warm step opened the readmission at before its warm call (its first
    /// limit, bucket and all, already set), if one did.
    opened: Mutex<Option<f64>>,
    /// Tokens this run's `gate.limit` steps started their buckets with (`fill`): requests
    /// they may have let in after a drain, which no drain counted.
    filled: Mutex<u64>,
    observed: Mutex<Recorder>,
}

impl Ctx {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        rb: Runbook,
        platform: Arc<dyn Platform>,
        metrics: Arc<dyn MetricSource>,
        fixed: Fixed,
        run_id: String,
        journal: Journal,
        opts: RunOptions,
        restart: BTreeMap<String, RestartProgress>,
    ) -> Self {
        let dir = journal
            .path()
            .parent()
            .map(PathBuf::from)
            .unwrap_or_default();
        let path = observed::path_for(&dir, &run_id);
        // A resumed run carries on with what it had seen.
        let series = Observed::read(&path).unwrap_or_else(|_| Observed::new(&run_id));
        Ctx {
            observed: Mutex::new(Recorder {
                series,
                path,
                written: None,
            }),
            rb,
            platform,
            metrics,
            fixed,
            run_id,
            journal: Arc::new(Mutex::new(journal)),
            opts,
            restart,
            gate_memory: Mutex::new(GateMemory::default()),
            drained: Mutex::new(Vec::new()),
            restarted: Mutex::new(Vec::new()),
            opened: Mutex::new(None),
            filled: Mutex::new(0),
        }
    }

    /// A resumed run's memory of the gate, from its journal.
    pub fn remembering(self, memory: GateMemory) -> Self {
        if let Ok(mut m) = self.gate_memory.lock() {
            *m = memory;
        }
        self
    }

    /// Record snapshots observed before the run acted (its detection window).
    pub fn seeing(self, window: &[Snapshot]) -> Self {
        for s in window {
            self.saw(s);
        }
        self
    }

    /// Record one snapshot; written out every [`WRITE_EVERY`].
    fn saw(&self, snap: &Snapshot) {
        self.with_series(|o| o.push(snap));
    }

    /// Record the gate's limit from now on, as a gate action found or left it.
    fn saw_limit(&self, limit: &Known<Limit>) {
        let l = match limit {
            Known::Value(l) => Ok(l.rate_per_s),
            Known::Unknown { unknown } => Err(unknown.clone()),
        };
        self.with_series(|o| o.limit(SystemTime::now(), l));
    }

    fn with_series(&self, f: impl FnOnce(&mut Observed)) {
        let Ok(mut r) = self.observed.lock() else {
            return;
        };
        f(&mut r.series);
        if r.written.is_none_or(|w| w.elapsed() >= WRITE_EVERY) {
            write_series(&mut r);
        }
    }

    /// Write the observed series now (the run's end); its path.
    pub fn flush_observed(&self) -> Option<String> {
        let mut r = self.observed.lock().ok()?;
        write_series(&mut r).then(|| r.path.display().to_string())
    }

    /// Where the observed series is written.
    pub fn observed_path(&self) -> Option<PathBuf> {
        self.observed.lock().ok().map(|r| r.path.clone())
    }

    /// What the run saw of the gate so far.
    pub fn gate_memory(&self) -> GateMemory {
        self.gate_memory
            .lock()
            .map(|m| m.clone())
            .unwrap_or_default()
    }

    /// The limit before the run's first gate action (None: the run has not acted on the
    /// gate).
    pub fn limit_before_run(&self) -> Option<Known<Limit>> {
        self.gate_memory().before_run
    }

    /// `replica`'s queue was dropped by this run, all but `kept` (its latest drain counts).
    pub(crate) fn note_drained(&self, replica: &str, kept: Known<u64>) {
        if let Ok(mut d) = self.drained.lock() {
            d.retain(|(r, _)| r != replica);
            d.push((replica.to_string(), kept));
        }
    }

    /// Replicas this run drained (a resumed run knows none: it drains again or restarts).
    pub(crate) fn drained(&self) -> Vec<String> {
        self.drained
            .lock()
            .map(|d| d.iter().map(|(r, _)| r.clone()).collect())
            .unwrap_or_default()
    }

    /// What this run's drains kept queued on `replicas`, summed: None when one of them did
    /// not say (or was not drained), so an unknown is never read as nothing queued.
    pub(crate) fn kept(&self, replicas: &[String]) -> Option<u64> {
        let d = self.drained.lock().ok()?;
        replicas.iter().try_fold(0u64, |sum, r| {
            let (_, kept) = d.iter().find(|(id, _)| id == r)?;
            Some(sum + kept.value()?)
        })
    }

    /// A `gate.limit` step started its bucket with `tokens` (its `fill`).
    pub(crate) fn note_filled(&self, tokens: u32) {
        if let Ok(mut f) = self.filled.lock() {
            *f += u64::from(tokens);
        }
    }

    /// Requests queued at most on `replicas` once this run's drains are done: what the
    /// drains kept ([`Ctx::kept`]) and what a bucket this run filled may have let in
    /// since; None where a drain did not say.
    pub(crate) fn queued_after_drain(&self, replicas: &[String]) -> Option<u64> {
        let filled = self.filled.lock().map(|f| *f).unwrap_or(0);
        self.kept(replicas).map(|k| k + filled)
    }

    /// `replica` was restarted by this run.
    pub(crate) fn note_restarted(&self, replica: &str) {
        if let Ok(mut r) = self.restarted.lock() {
            r.push(replica.to_string());
        }
    }

    /// A warm step opened the readmission at `rate` (`engine::warm_readmit`).
    pub(crate) fn note_opened(&self, rate: f64) {
        if let Ok(mut o) = self.opened.lock() {
            *o = Some(rate);
        }
    }

    /// The rate a warm step opened the readmission at, if one did (a resumed run knows
    /// none: it drained nothing yet, so nothing was opened early).
    pub(crate) fn opened(&self) -> Option<f64> {
        self.opened.lock().ok().and_then(|o| *o)
    }

    /// This run drained every one of `replicas` and restarted none: the service has no
    /// queue and the warmth it had.
    pub(crate) fn drained_alone(&self, replicas: &[String]) -> bool {
        let drained = self.drained();
        let restarted = self.restarted.lock().map(|r| r.len()).unwrap_or(1);
        restarted == 0 && !replicas.is_empty() && replicas.iter().all(|r| drained.contains(r))
    }

    /// A readmission left its limit standing, for `why`.
    pub(crate) fn settled(&self, why: &str) {
        if let Ok(mut m) = self.gate_memory.lock() {
            m.settled = Some(why.to_string());
        }
    }

    /// Remember `before` if it is the first limit this run saw before acting on the gate.
    pub(crate) fn saw_limit_before(&self, before: &Known<Limit>) {
        if let Ok(mut m) = self.gate_memory.lock() {
            m.before_run.get_or_insert_with(|| before.clone());
        }
    }

    pub fn journal_path(&self) -> Option<String> {
        self.journal
            .lock()
            .ok()
            .map(|j| j.path().display().to_string())
    }

    /// Append a step boundary or a decision to the journal (fsync'd). One that cannot be
    /// written is logged loudly and the run goes on: it changes nothing on the target, and
    /// the next action's own record ([`Ctx::started`]) stops the run if the journal is gone.
    pub fn record(&self, event: Event) {
        record_to(&self.journal, event);
    }

    /// Publish a progress event to the run's observer, or to the log without one.
    pub fn emit(&self, e: ProgressEvent) {
        match &self.opts.observer {
            Some(o) => o.event(&self.run_id, &e),
            None => log_event(&self.run_id, &e),
        }
    }

    /// Whether anyone shows the figures live (without an observer they are not sampled
    /// between checks).
    pub(crate) fn watched(&self) -> bool {
        self.opts.observer.is_some()
    }

    pub(crate) fn info(&self, step: &str, message: String) {
        self.emit(ProgressEvent::Info {
            step: step.to_string(),
            message,
        });
    }

    pub(crate) async fn snapshot(&self) -> Result<Snapshot, MetricError> {
        let snap = self.metrics.snapshot(&self.rb.signals).await?;
        self.saw(&snap);
        Ok(snap)
    }

    /// The signals over what happened since `since` only (see
    /// [`MetricSource::snapshot_since`]); the plain snapshot without one.
    pub(crate) async fn snapshot_since(
        &self,
        since: Option<SystemTime>,
    ) -> Result<Snapshot, MetricError> {
        match since {
            Some(t) => {
                let snap = self.metrics.snapshot_since(&self.rb.signals, t).await?;
                self.saw(&snap);
                Ok(snap)
            }
            None => self.snapshot().await,
        }
    }

    /// Journal that an action is about to run, with what it knows before. Written and
    /// fsync'd before the action acts: an action whose record cannot be written must not
    /// run, so the error is the step's failure.
    pub(crate) fn started(&self, step: &str, action: ActionRecord) -> Result<(), StepFailure> {
        if let ActionRecord::SetLimit { before, .. } = &action {
            self.saw_limit(before);
        }
        append(
            &self.journal,
            Event::ActionStarted {
                step: step.into(),
                action,
            },
        )
    }

    /// Journal that an action ran, with what it observed after.
    pub(crate) fn finished(&self, step: &str, action: ActionRecord) -> Result<(), StepFailure> {
        if let ActionRecord::SetLimit {
            after: Some(after), ..
        } = &action
        {
            self.saw_limit(after);
        }
        append(
            &self.journal,
            Event::ActionFinished {
                step: step.into(),
                action,
            },
        )
    }
}

/// Write the series; a failure is logged (the journal, not this, is the run's record).
fn write_series(r: &mut Recorder) -> bool {
    r.written = Some(Instant::now());
    match r.series.write(&r.path) {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(path = %r.path.display(), error = %e, "could not write the observed series");
            false
        }
    }
}

/// Append an action's record, or say why it could not be written.
pub(crate) fn append(journal: &SharedJournal, event: Event) -> Result<(), StepFailure> {
    let mut j = journal.lock().map_err(|_| StepFailure::Journal {
        path: String::new(),
        source: std::io::Error::other("the journal's lock is poisoned"),
    })?;
    j.append(event)
        .map(|_| ())
        .map_err(|source| StepFailure::Journal {
            path: j.path().display().to_string(),
            source,
        })
}

pub(crate) fn record_to(journal: &SharedJournal, event: Event) {
    if let Err(e) = append(journal, event) {
        tracing::error!("{e}");
    }
}
