//! Progress events as log records, for runs nobody watches on a terminal (`recover
//! serve`, a log collector reading `--log-format json`).
//!
//! People get the event in words (`step readmit: decision at 30.0 req/s, ...`), never a
//! Debug struct. Machines get the same facts as keys: with `--log-format json` each event
//! is one line shaped like the subscriber's own (`timestamp`, `level`, `target`,
//! `fields`), whose `fields` hold the message, the `run_id` and the event itself (`event`,
//! `step`, `action`, `figures`, `readings`, `decision`...) as nested JSON, which tracing's
//! flat fields could only carry as strings.

use super::{Observer, ProgressEvent};
use crate::engine::status::{Outcome, StepOutcome};
use crate::util::logging::{self, LogFormat};
use serde_json::{json, Value};
use tracing::Level;

/// The target these records carry, as `RUST_LOG` filters name it.
const TARGET: &str = "recover::engine::progress";

/// Logs every event (see the module documentation).
#[derive(Debug, Default, Clone, Copy)]
pub struct LogObserver;

impl Observer for LogObserver {
    fn event(&self, run_id: &str, e: &ProgressEvent) {
        log_event(run_id, e);
    }
}

/// How loud an event is: per-second figures are detail, failures are warnings.
pub fn level(e: &ProgressEvent) -> Level {
    match e {
        e if e.is_live_only() && !matches!(e, ProgressEvent::LimitSet { .. }) => Level::DEBUG,
        ProgressEvent::StepFinished { outcome, .. }
            if !matches!(
                outcome,
                StepOutcome::Succeeded | StepOutcome::AlreadyDone | StepOutcome::Planned
            ) =>
        {
            Level::WARN
        }
        ProgressEvent::Finished {
            outcome: Outcome::Failed | Outcome::Aborted,
            ..
        } => Level::WARN,
        _ => Level::INFO,
    }
}

/// The event in words, for a log line (no leading indent).
fn message(e: &ProgressEvent) -> String {
    e.describe().trim_start().to_string()
}

/// The JSON log line for an event: the subscriber's shape, the event's facts as keys.
pub fn json_line(timestamp: &str, run_id: &str, e: &ProgressEvent) -> Value {
    let mut fields = match serde_json::to_value(e) {
        Ok(Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    };
    fields.insert("message".into(), json!(message(e)));
    fields.insert("run_id".into(), json!(run_id));
    json!({
        "timestamp": timestamp,
        "level": level(e).as_str(),
        "fields": fields,
        "target": TARGET,
    })
}

/// Log one event in the format the process logs in.
pub fn log_event(run_id: &str, e: &ProgressEvent) {
    let lvl = level(e);
    if !enabled(lvl) {
        return;
    }
    match logging::format() {
        LogFormat::Json => {
            let line = json_line(&crate::util::time::now_rfc3339(), run_id, e);
            let _ = logging::write_stderr(format!("{line}\n").as_bytes());
        }
        LogFormat::Human => {
            let msg = message(e);
            let step = e.step().unwrap_or("");
            match lvl {
                Level::WARN => tracing::warn!(target: TARGET, run_id, step, "{msg}"),
                Level::DEBUG => tracing::debug!(target: TARGET, run_id, step, "{msg}"),
                _ => tracing::info!(target: TARGET, run_id, step, "{msg}"),
            }
        }
    }
}

fn enabled(lvl: Level) -> bool {
    match lvl {
        Level::WARN => tracing::enabled!(target: TARGET, Level::WARN),
        Level::DEBUG => tracing::enabled!(target: TARGET, Level::DEBUG),
        _ => tracing::enabled!(target: TARGET, Level::INFO),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::status::Figures;

    #[test]
    fn json_lines_carry_the_facts_as_keys() {
        let e = ProgressEvent::StepFinished {
            step: "batched-restart".into(),
            outcome: StepOutcome::Succeeded,
            message: None,
            figures: Figures::from([("restarted".to_string(), 2.0)]),
        };
        let v = json_line("2026-01-01T00:00:00.000Z", "run-1", &e);
        assert_eq!(v["level"], "INFO");
        assert_eq!(v["fields"]["run_id"], "run-1");
        assert_eq!(v["fields"]["event"], "step_finished");
        assert_eq!(v["fields"]["step"], "batched-restart");
        assert_eq!(v["fields"]["figures"]["restarted"], 2.0);
        assert_eq!(v["fields"]["message"], "batched-restart: succeeded");
    }
}
