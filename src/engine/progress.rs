//! Live progress: the engine emits [`ProgressEvent`]s; an [`Observer`] shows them. The
//! terminal observer draws a spinner per step on a TTY (indicatif) and plain lines
//! otherwise, always on stderr so stdout stays for the report.

use super::report::{Outcome, Phase, StepOutcome};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::Duration;

/// Something worth showing while a run goes on.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum ProgressEvent {
    Observing {
        sample: u32,
        of: u32,
    },
    Decided {
        summary: String,
    },
    StepStarted {
        index: usize,
        total: usize,
        phase: Phase,
        step: String,
        action: String,
    },
    Info {
        step: String,
        message: String,
    },
    StepFinished {
        step: String,
        outcome: StepOutcome,
        message: Option<String>,
    },
    Finished {
        run_id: String,
        outcome: Outcome,
    },
}

pub trait Observer: Send + Sync {
    fn event(&self, e: &ProgressEvent);
}

/// Writes progress to stderr: a spinner on a TTY, plain lines otherwise.
pub struct TerminalObserver {
    tty: bool,
    bar: Mutex<Option<ProgressBar>>,
}

impl TerminalObserver {
    pub fn new() -> Self {
        TerminalObserver {
            tty: std::io::stderr().is_terminal(),
            bar: Mutex::new(None),
        }
    }
}

impl Default for TerminalObserver {
    fn default() -> Self {
        Self::new()
    }
}

fn line(e: &ProgressEvent) -> String {
    match e {
        ProgressEvent::Observing { sample, of } => {
            format!("observing metrics: sample {sample}/{of}")
        }
        ProgressEvent::Decided { summary } => summary.clone(),
        ProgressEvent::StepStarted {
            index,
            total,
            phase,
            step,
            action,
        } => {
            let p = if *phase == Phase::OnFailure {
                " (on_failure)"
            } else {
                ""
            };
            format!("[{index}/{total}]{p} {step} ({action})")
        }
        ProgressEvent::Info { step, message } => format!("  {step}: {message}"),
        ProgressEvent::StepFinished {
            step,
            outcome,
            message,
        } => format!(
            "  {step}: {}{}",
            format!("{outcome:?}").to_lowercase(),
            message
                .as_ref()
                .map(|m| format!(" - {m}"))
                .unwrap_or_default()
        ),
        ProgressEvent::Finished { run_id, outcome } => format!("run {run_id}: {outcome:?}"),
    }
}

impl Observer for TerminalObserver {
    fn event(&self, e: &ProgressEvent) {
        let text = line(e);
        if !self.tty {
            eprintln!("{text}");
            return;
        }
        let Ok(mut bar) = self.bar.lock() else { return };
        match e {
            ProgressEvent::StepStarted { .. } => {
                if let Some(b) = bar.take() {
                    b.finish();
                }
                let b = ProgressBar::new_spinner();
                b.set_style(
                    ProgressStyle::with_template("{spinner} {msg} [{elapsed}]")
                        .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                );
                b.enable_steady_tick(Duration::from_millis(120));
                b.set_message(text);
                *bar = Some(b);
            }
            ProgressEvent::Info { .. } => match bar.as_ref() {
                Some(b) => b.println(text),
                None => eprintln!("{text}"),
            },
            ProgressEvent::StepFinished { .. } => match bar.take() {
                Some(b) => b.finish_with_message(text),
                None => eprintln!("{text}"),
            },
            _ => eprintln!("{text}"),
        }
    }
}
