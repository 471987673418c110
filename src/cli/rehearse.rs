//! `recover rehearse`: flags onto `recover::rehearse::rehearse`, then the report files,
//! the summary (or JSON) on stdout, and exit 0 if recovered, 4 if the trigger did not leave
//! the system stuck (nothing to recover), 1 if not recovered.

use super::{CliResult, Failure, Output};
use anyhow::Context;
use recover::exit::Exit;
use recover::rehearse::scenario::Scenario;
use recover::rehearse::{output, rehearse, summary, Options};
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct RehearseArgs {
    /// Runbook to rehearse, by name (runbooks/, --runbook-dir) or path.
    #[arg(long, default_value = "stuck-overload")]
    pub runbook: String,
    /// Extra directory to look for runbooks in.
    #[arg(long, value_name = "DIR")]
    pub runbook_dir: Option<PathBuf>,
    /// Scenario YAML (system numbers, trigger, timings); fields it omits keep the laptop
    /// defaults.
    #[arg(long, value_name = "FILE")]
    pub scenario: Option<PathBuf>,
    /// Also run the same trigger with no intervention, a plain restart and a 20% shed.
    #[arg(long)]
    pub baselines: bool,
    /// Where report.json, timeline.svg, series.csv, summary.txt and the logs go
    /// [default: ./recover-runs/rehearsal-<timestamp>/].
    #[arg(long, value_name = "DIR")]
    pub report_dir: Option<PathBuf>,
    /// What to print on stdout.
    #[arg(long, value_enum, default_value_t = Output::Text)]
    pub output: Output,
}

pub fn run(args: RehearseArgs) -> CliResult {
    let scenario = match &args.scenario {
        Some(p) => Scenario::load(p).map_err(Failure::usage)?,
        None => Scenario::default(),
    };
    let dirs: Vec<PathBuf> = args.runbook_dir.iter().cloned().collect();
    let runbook = recover::runbook::find(&args.runbook, &dirs)
        .map_err(|e| Failure::usage(anyhow::anyhow!("--runbook {}: {e}", args.runbook)))?;
    let report_dir = args.report_dir.clone().unwrap_or_else(default_report_dir);
    if report_dir.join("report.json").exists() {
        return Err(Failure::usage(anyhow::anyhow!(
            "--report-dir {}: already holds a report.json; pick a new directory",
            report_dir.display()
        )));
    }
    std::fs::create_dir_all(&report_dir)
        .with_context(|| format!("--report-dir {}: cannot create it", report_dir.display()))
        .map_err(Failure::usage)?;
    let exe = std::env::current_exe().context("locating the recover binary")?;
    let opts = Options {
        scenario,
        runbook,
        baselines: args.baselines,
        report_dir: report_dir.clone(),
        exe,
        observer: Some(args.output.progress_observer()),
    };
    let rt = super::runtime()?;
    let result = rt.block_on(async {
        // Dropping the rehearsal future tears every process down (guards and a sweep).
        tokio::select! {
            r = rehearse(&opts) => Some(r),
            _ = interrupted() => None,
        }
    });
    rt.shutdown_timeout(std::time::Duration::from_millis(500));
    let outcome = match result {
        None => {
            return Err(Failure::new(
                Exit::Failed,
                anyhow::anyhow!("interrupted; every process the rehearsal started was stopped"),
            ))
        }
        Some(Err(e)) => return Err(Failure::new(Exit::Failed, e)),
        Some(Ok(o)) => o,
    };
    output::write(&report_dir, &outcome)
        .with_context(|| format!("writing the report into {}", report_dir.display()))?;
    match args.output {
        Output::Text => {
            print!("{}", summary::render(&outcome.report));
            println!(
                "  files: {}",
                [
                    &outcome.report.files.report,
                    &outcome.report.files.timeline,
                    &outcome.report.files.series
                ]
                .iter()
                .map(|f| report_dir.join(f).display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
            );
        }
        Output::Json => {
            let json =
                serde_json::to_string_pretty(&outcome.report).context("encoding the report")?;
            println!("{json}");
        }
    }
    Ok(
        if outcome.report.recovered && outcome.report.under_lower_bound.is_none() {
            Exit::Done
        } else if outcome.report.not_stuck.is_some() {
            Exit::NotStuck
        } else {
            Exit::Failed
        },
    )
}

fn default_report_dir() -> PathBuf {
    let stamp = humantime::format_rfc3339_seconds(std::time::SystemTime::now())
        .to_string()
        .replace(':', "-");
    PathBuf::from("recover-runs").join(format!("rehearsal-{stamp}"))
}

/// Resolves on SIGINT or SIGTERM.
async fn interrupted() {
    use tokio::signal::unix::{signal, SignalKind};
    match (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) {
        (Ok(mut int), Ok(mut term)) => {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
        }
        _ => std::future::pending::<()>().await,
    }
}
