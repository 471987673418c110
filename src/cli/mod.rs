//! Command-line surface: one module per subcommand. Each maps its flags onto a library
//! call and returns an [`Exit`]; errors carry the exit code they deserve.

use clap::{Parser, Subcommand};
use recover::engine::progress::{Fanout, LogObserver, Observer, TerminalObserver};
use recover::exit::Exit;
use recover::util::logging::{self, LogFormat};
use std::io::IsTerminal;
use std::sync::Arc;

pub mod ask;
pub mod demo;
pub mod demo_system;
pub mod detect;
pub mod docs;
pub mod gate;
mod gate_limit;
pub mod history;
pub mod plan;
mod plan_shadow;
pub mod rehearse;
pub mod report;
pub mod resume;
pub mod run;
pub mod runbooks;
pub mod serve;
pub mod simulate;
pub mod simulate_grid;

/// Incident-response runbook engine and recovery controller for stuck overloads.
#[derive(Debug, Parser)]
#[command(name = "recover", version, args_conflicts_with_subcommands = true)]
pub struct Cli {
    /// Log line format on stderr.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Human)]
    pub log_format: LogFormat,
    /// More log detail (-v debug, -vv trace).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// What to do (without one: run a runbook, see --runbook).
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Run a runbook (`recover --runbook stuck-overload ...`).
    #[command(flatten)]
    pub run: run::RunArgs,
}

impl Cli {
    pub fn default_log_level(&self) -> &'static str {
        match self.verbose {
            0 => "info",
            1 => "debug",
            _ => "trace",
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// The admission gate: a rate-limiting reverse proxy whose limit changes at runtime.
    Gate(Box<gate::GateArgs>),
    /// The demo system: a config service that gets stuck, and the workers that poll it.
    #[command(subcommand)]
    Demo(demo::DemoCommand),
    /// Tell healthy, triggered, stuck, slow replica and unknown apart (exit 0, 11, 10, 13, 12).
    Detect(detect::DetectArgs),
    /// Compute the shed and the readmission ramp, with the arithmetic shown.
    Plan(plan::PlanArgs),
    /// Validate, list and show runbooks.
    #[command(subcommand)]
    Runbooks(runbooks::RunbooksCommand),
    /// Continue a run that was interrupted.
    Resume(resume::ResumeArgs),
    /// List past runs from the journal directory.
    History(history::HistoryArgs),
    /// Write a real run's postmortem draft, report.json and timeline.svg.
    Report(report::ReportArgs),
    /// Reproduce the failure with real local processes and recover from it.
    Rehearse(rehearse::RehearseArgs),
    /// Deterministic what-if model of clients, gate and server.
    Simulate(simulate::SimulateArgs),
    /// Alertmanager webhook receiver that runs runbooks safely.
    Serve(serve::ServeArgs),
    /// Shell completions for bash, zsh, fish, elvish or PowerShell, on stdout.
    Completions(docs::CompletionsArgs),
    /// Man pages: recover(1) on stdout, or one page per command with --dir.
    Man(docs::ManArgs),
}

/// What a command prints on stdout: text for people, JSON for machines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Output {
    #[default]
    Text,
    Json,
}

impl Output {
    /// Who shows a run's progress on stderr: the terminal for people (the live line on a
    /// TTY, unless the report goes out as JSON), JSON log lines with `--log-format json`
    /// (and the terminal too when stderr is one).
    pub fn progress_observer(self) -> Arc<dyn Observer> {
        let live = self == Output::Text;
        match logging::format() {
            LogFormat::Human => Arc::new(TerminalObserver::new(live)),
            LogFormat::Json if std::io::stderr().is_terminal() => Arc::new(Fanout(vec![
                Arc::new(TerminalObserver::new(live)),
                Arc::new(LogObserver),
            ])),
            LogFormat::Json => Arc::new(LogObserver),
        }
    }
}

/// A failed command: the error to print and the exit code it deserves.
pub struct Failure {
    pub code: Exit,
    pub error: anyhow::Error,
}

impl Failure {
    pub fn new(code: Exit, error: impl Into<anyhow::Error>) -> Self {
        Failure {
            code,
            error: error.into(),
        }
    }

    pub fn usage(error: impl Into<anyhow::Error>) -> Self {
        Self::new(Exit::Usage, error)
    }

    pub fn report(self) -> std::process::ExitCode {
        eprintln!("error: {}", chain(&self.error));
        self.code.into()
    }
}

/// The error and its causes joined with ": ", leaving out a cause whose text the message
/// before it already ends with: many messages name their source inline ("cannot listen:
/// {source}") so that they read whole on their own, and anyhow's `{:#}` would print that
/// source a second time.
pub fn chain(error: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if out.is_empty() {
            out = text;
        } else if !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
    }
    out
}

/// An error without a stated code is a failed run, not bad usage.
impl From<anyhow::Error> for Failure {
    fn from(error: anyhow::Error) -> Self {
        Failure::new(Exit::Failed, error)
    }
}

pub type CliResult = Result<Exit, Failure>;

/// Build the async runtime the long-running commands share.
pub fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::new(Exit::Failed, e))
}

pub fn dispatch(cli: Cli) -> CliResult {
    if matches!(
        cli.command,
        Some(
            Command::Detect(_)
                | Command::Plan(_)
                | Command::Runbooks(_)
                | Command::History(_)
                | Command::Simulate(_)
                | Command::Completions(_)
                | Command::Man(_)
        )
    ) {
        recover::util::pipe::end_quietly_on_closed_pipe();
    }
    match cli.command {
        Some(Command::Gate(a)) => gate::run(*a),
        Some(Command::Demo(c)) => demo::run(c),
        Some(Command::Detect(a)) => detect::run(a),
        Some(Command::Plan(a)) => plan::run(a),
        Some(Command::Runbooks(c)) => runbooks::run(c),
        Some(Command::Resume(a)) => resume::run(a),
        Some(Command::History(a)) => history::run(a),
        Some(Command::Report(a)) => report::run(a),
        Some(Command::Rehearse(a)) => rehearse::run(a),
        Some(Command::Simulate(a)) => simulate::run(a),
        Some(Command::Serve(a)) => serve::run(a),
        Some(Command::Completions(a)) => docs::completions(a),
        Some(Command::Man(a)) => docs::man(a),
        None => run::run(cli.run),
    }
}

#[cfg(test)]
mod tests {
    use super::chain;

    #[derive(Debug, thiserror::Error)]
    #[error("--listen 127.0.0.1:1: cannot listen: {source}")]
    struct Inline {
        source: std::io::Error,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("cannot start")]
    struct Wrapping {
        #[source]
        source: std::io::Error,
    }

    fn in_use() -> std::io::Error {
        std::io::Error::from(std::io::ErrorKind::AddrInUse)
    }

    #[test]
    fn a_source_the_message_already_names_is_printed_once() {
        let e = anyhow::Error::new(Inline { source: in_use() });
        let text = chain(&e);
        assert_eq!(text.matches(&in_use().to_string()).count(), 1, "{text}");
        assert!(
            text.starts_with("--listen 127.0.0.1:1: cannot listen: "),
            "{text}"
        );
    }

    #[test]
    fn a_source_the_message_does_not_name_still_follows_it() {
        let e = anyhow::Error::new(Wrapping { source: in_use() }).context("gate");
        assert_eq!(chain(&e), format!("gate: cannot start: {}", in_use()));
    }
}
