//! What a run's actions share: the runbook, the platform, the metrics, the fixed plan
//! figures, and the journal every action writes to before and after it acts.

use super::super::batches::RestartProgress;
use super::super::journal::{Event, Figures, Journal};
use super::super::progress::log::log_event;
use super::super::progress::ProgressEvent;
use super::super::vars::Fixed;
use super::super::RunOptions;
use crate::metrics::signal::Snapshot;
use crate::metrics::source::{MetricError, MetricSource};
use crate::platform::Platform;
use crate::runbook::Runbook;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

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
        Ctx {
            rb,
            platform,
            metrics,
            fixed,
            run_id,
            journal: Arc::new(Mutex::new(journal)),
            opts,
            restart,
        }
    }

    pub fn journal_path(&self) -> Option<String> {
        self.journal
            .lock()
            .ok()
            .map(|j| j.path().display().to_string())
    }

    /// Append to the journal (fsync'd). A journal that cannot be written is logged loudly;
    /// the run goes on, because stopping halfway is worse than an incomplete record.
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
        self.metrics.snapshot(&self.rb.signals).await
    }

    /// The signals over what happened since `since` only (see
    /// [`MetricSource::snapshot_since`]); the plain snapshot without one.
    pub(crate) async fn snapshot_since(
        &self,
        since: Option<SystemTime>,
    ) -> Result<Snapshot, MetricError> {
        match since {
            Some(t) => self.metrics.snapshot_since(&self.rb.signals, t).await,
            None => self.snapshot().await,
        }
    }

    /// Journal that an action is about to act on `subject`, with the state before.
    pub(crate) fn started(&self, step: &str, action: &str, subject: Option<&str>, before: Value) {
        self.record(Event::ActionStarted {
            step: step.into(),
            action: action.into(),
            subject: subject.map(String::from),
            before,
        });
    }

    /// Journal that an action finished, with what it observed after.
    pub(crate) fn finished(
        &self,
        step: &str,
        action: &str,
        subject: Option<&str>,
        after: Value,
        figures: Figures,
    ) {
        record_to(
            &self.journal,
            finished_event(step, action, subject, after, figures),
        );
    }
}

pub(crate) fn finished_event(
    step: &str,
    action: &str,
    subject: Option<&str>,
    after: Value,
    figures: Figures,
) -> Event {
    Event::ActionFinished {
        step: step.into(),
        action: action.into(),
        subject: subject.map(String::from),
        after,
        figures,
    }
}

pub(crate) fn record_to(journal: &SharedJournal, event: Event) {
    match journal.lock() {
        Ok(mut j) => {
            if let Err(e) = j.append(event) {
                tracing::error!("journal write failed: {e}");
            }
        }
        Err(_) => tracing::error!("journal lock poisoned"),
    }
}

/// One figure, for an action's journal record.
pub(crate) fn figure(name: &str, value: f64) -> Figures {
    Figures::from([(name.to_string(), value)])
}
