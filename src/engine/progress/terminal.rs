//! Progress on stderr for a person: on a TTY a spinner per step and, below it, the live
//! line ([`super::live`]); otherwise plain lines, one per event worth a line, and no live
//! line (a log file does not want a line a second, nor the escape codes that redraw it).
//! Stdout stays for the report.

use super::live::LiveView;
use super::{Observer, ProgressEvent};
use crate::util::logging;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Writes progress to stderr (see the module documentation).
pub struct TerminalObserver {
    tty: Option<Mutex<Tty>>,
}

/// The bars on a TTY.
struct Tty {
    multi: MultiProgress,
    step: Option<ProgressBar>,
    /// The live line's bar; None when the live view is off.
    live: Option<ProgressBar>,
    view: LiveView,
    live_on: bool,
}

impl TerminalObserver {
    /// Spinners on a TTY, plain lines otherwise; the live line on a TTY when `live`
    /// (callers turn it off when the report goes out as JSON).
    pub fn new(live: bool) -> Self {
        Self::with(std::io::stderr().is_terminal(), live)
    }

    /// Plain lines whatever stderr is.
    pub fn plain() -> Self {
        Self::with(false, false)
    }

    fn with(tty: bool, live: bool) -> Self {
        TerminalObserver {
            tty: tty.then(|| {
                let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
                let bars = multi.clone();
                logging::set_pause(Some(Arc::new(move |write: &mut dyn FnMut()| {
                    bars.suspend(write)
                })));
                Mutex::new(Tty {
                    multi,
                    step: None,
                    live: None,
                    view: LiveView::default(),
                    live_on: live,
                })
            }),
        }
    }
}

impl Drop for TerminalObserver {
    fn drop(&mut self) {
        if self.tty.is_some() {
            logging::set_pause(None);
        }
    }
}

impl Default for TerminalObserver {
    fn default() -> Self {
        Self::new(true)
    }
}

impl Observer for TerminalObserver {
    fn event(&self, _run_id: &str, e: &ProgressEvent) {
        let Some(tty) = &self.tty else {
            if let Some(text) = e.words() {
                eprintln!("{text}");
            }
            return;
        };
        let Ok(mut t) = tty.lock() else { return };
        t.show(e);
    }
}

impl Tty {
    fn show(&mut self, e: &ProgressEvent) {
        let text = e.words();
        match e {
            ProgressEvent::StepStarted { .. } => {
                if let Some(b) = self.step.take() {
                    b.finish_and_clear();
                }
                let b = ProgressBar::new_spinner().with_style(
                    ProgressStyle::with_template("{spinner} {msg} [{elapsed}]")
                        .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                );
                let b = match &self.live {
                    Some(live) => self.multi.insert_before(live, b),
                    None => self.multi.add(b),
                };
                b.enable_steady_tick(Duration::from_millis(120));
                b.set_message(text.unwrap_or_default());
                self.step = Some(b);
            }
            ProgressEvent::StepFinished { .. } => {
                // The step's line moves above the bars for good: a finished bar left in
                // place is redrawn away as the bars below it change.
                let took = self.step.take().map(|b| {
                    b.finish_and_clear();
                    b.elapsed()
                });
                let took = took.map(|t| format!(" [{}s]", t.as_secs()));
                self.println(text.map(|t| t + &took.unwrap_or_default()));
            }
            ProgressEvent::Finished { .. } => {
                if let Some(b) = self.live.take() {
                    b.finish_and_clear();
                }
                self.println(text);
            }
            ProgressEvent::Observed { .. }
            | ProgressEvent::CheckMeasured { .. }
            | ProgressEvent::RampHolding { .. } => {}
            _ => self.println(text),
        }
        self.view.apply(e);
        self.redraw_live();
    }

    /// A line of its own above the bars.
    fn println(&self, text: Option<String>) {
        if let Some(text) = text {
            let _ = self.multi.println(text);
        }
    }

    fn redraw_live(&mut self) {
        if !self.live_on {
            return;
        }
        let Some(line) = self.view.line() else {
            return;
        };
        let bar = self.live.get_or_insert_with(|| {
            let b = ProgressBar::new_spinner().with_style(
                ProgressStyle::with_template("  {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            self.multi.add(b)
        });
        // Figures on one row, the check and the next move on the next: a terminal 80
        // columns wide still shows the decision whole.
        bar.set_message(line.replace(" | ", "\n  "));
    }
}
