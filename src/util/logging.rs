//! Logging setup: tracing to stderr, human by default, JSON lines for machines. Stdout
//! stays free for results (reports, JSON output) so pipes and hooks can read them.

use tracing_subscriber::{fmt, EnvFilter};

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Default)]
pub enum LogFormat {
    #[default]
    Human,
    Json,
}

/// Install the global subscriber. `RUST_LOG` overrides `default_level`.
pub fn init(format: LogFormat, default_level: &str) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level));
    // A log line that cannot be written (stderr a pipe nobody reads any more) is dropped.
    // tracing-subscriber would otherwise report it with eprintln!, which panics on the
    // same closed pipe and kills the task that logged: a gate whose supervisor went away
    // then ignored SIGTERM, its signal task dead before it could cancel anything.
    let builder = fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .log_internal_errors(false);
    let _ = match format {
        LogFormat::Human => builder.with_target(false).try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}
