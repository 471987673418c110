//! `recover runbooks validate|list|show`: check runbooks before an incident needs them.

use super::{CliResult, Failure};
use recover::exit::Exit;
use recover::runbook::{self, RunbookError};
use std::path::PathBuf;

#[derive(Debug, clap::Subcommand)]
pub enum RunbooksCommand {
    /// Validate runbook files; print every error, exit 2 on any.
    Validate {
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// List the runbooks found (--runbook-dir, ./runbooks/, built in).
    List {
        #[arg(long)]
        runbook_dir: Vec<PathBuf>,
    },
    /// Show one runbook's source and where it was found.
    Show {
        name: String,
        #[arg(long)]
        runbook_dir: Vec<PathBuf>,
    },
}

pub fn run(cmd: RunbooksCommand) -> CliResult {
    match cmd {
        RunbooksCommand::Validate { files } => {
            let mut bad = 0;
            for f in &files {
                match runbook::load_file(f) {
                    Ok(l) => println!(
                        "{}: ok ({} steps, {} on_failure)",
                        f.display(),
                        l.runbook.steps.len(),
                        l.runbook.on_failure.len()
                    ),
                    Err(e) => {
                        bad += 1;
                        eprintln!("{e}");
                    }
                }
            }
            if bad > 0 {
                return Err(Failure::usage(anyhow::anyhow!(
                    "{bad} of {} runbook(s) invalid",
                    files.len()
                )));
            }
            Ok(Exit::Done)
        }
        RunbooksCommand::List { runbook_dir } => {
            for r in runbook::list(&runbook_dir) {
                let state = match (&r.error, r.active) {
                    (Some(_), _) => "INVALID",
                    (None, false) => "shadowed",
                    (None, true) => "ok",
                };
                println!(
                    "{:<20} {:<9} {:<40} {}",
                    r.name,
                    state,
                    r.origin.to_string(),
                    r.description.clone().unwrap_or_default()
                );
            }
            Ok(Exit::Done)
        }
        RunbooksCommand::Show { name, runbook_dir } => {
            let l = runbook::find(&name, &runbook_dir).map_err(|e| match e {
                RunbookError::Invalid(_) => Failure::usage(e),
                other => Failure::usage(other),
            })?;
            println!("# from: {}", l.origin);
            print!("{}", l.source);
            Ok(Exit::Done)
        }
    }
}
