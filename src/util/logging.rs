//! Logging setup: tracing to stderr, human by default, JSON lines for machines. Stdout
//! stays free for results (reports, JSON output) so pipes and hooks can read them.
//!
//! Colour only when stderr is a terminal and `NO_COLOR` is not set: a log file or a pipe
//! gets plain text, never escape sequences.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex, OnceLock};
use tracing_subscriber::{fmt, EnvFilter};

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Default)]
pub enum LogFormat {
    /// Plain lines for people.
    #[default]
    Human,
    /// One JSON object per line, for log collectors.
    Json,
}

static FORMAT: OnceLock<LogFormat> = OnceLock::new();

/// The format [`init`] installed ([`LogFormat::Human`] before it ran).
pub fn format() -> LogFormat {
    FORMAT.get().copied().unwrap_or_default()
}

/// Whether to colour output on a stream: only a terminal, and never with `NO_COLOR` set
/// to anything but the empty string (<https://no-color.org>).
pub fn colour(is_terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    is_terminal && no_color.is_none_or(|v| v.is_empty())
}

/// Runs a write to stderr with whatever is drawn there (progress bars) out of the way.
pub type Pause = Arc<dyn Fn(&mut dyn FnMut()) + Send + Sync>;

static PAUSE: Mutex<Option<Pause>> = Mutex::new(None);

/// While progress bars are drawn on stderr, log lines must go around them, or every line
/// leaves a copy of the bars behind in the scrollback. The drawer installs how to step
/// aside (`Some`) and removes it when done (`None`).
pub fn set_pause(pause: Option<Pause>) {
    if let Ok(mut p) = PAUSE.lock() {
        *p = pause;
    }
}

/// Write `bytes` to stderr, stepping around progress bars.
pub fn write_stderr(bytes: &[u8]) -> std::io::Result<()> {
    let pause = PAUSE.lock().ok().and_then(|p| p.clone());
    let mut result = Ok(());
    let mut write = || result = std::io::stderr().lock().write_all(bytes);
    match pause {
        Some(pause) => pause(&mut write),
        None => write(),
    }
    result
}

/// Stderr for the log subscriber, through [`write_stderr`].
struct Stderr;

impl Write for Stderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        write_stderr(buf).map(|()| buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// Install the global subscriber. `RUST_LOG` overrides `default_level`.
pub fn init(format: LogFormat, default_level: &str) {
    let _ = FORMAT.set(format);
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level));
    // A log line that cannot be written (stderr a pipe nobody reads any more) is dropped.
    // tracing-subscriber would otherwise report it with eprintln!, which panics on the
    // same closed pipe and kills the task that logged: a gate whose supervisor went away
    // then ignored SIGTERM, its signal task dead before it could cancel anything.
    let ansi = colour(
        std::io::stderr().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
    );
    let builder = fmt()
        .with_env_filter(filter)
        .with_writer(|| Stderr)
        .with_ansi(ansi)
        .log_internal_errors(false);
    let _ = match format {
        LogFormat::Human => builder.with_target(false).try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(colour(true, None));
        assert!(colour(true, Some(OsStr::new(""))));
        assert!(!colour(true, Some(OsStr::new("1"))));
        assert!(!colour(false, None));
    }
}
