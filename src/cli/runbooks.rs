//! `recover runbooks validate|list|show|new`: check runbooks before an incident needs them,
//! and start one's own from a runbook that works.

use super::{CliResult, Failure, Output};
use anyhow::Context;
use recover::exit::Exit;
use recover::runbook;
use recover::util::table::Table;
use serde_json::json;
use std::path::PathBuf;

#[derive(Debug, clap::Subcommand)]
pub enum RunbooksCommand {
    /// Validate runbook files; print every error, exit 2 on any (also for a runbook
    /// whose signals leave the detector unable to say stuck: its runs would be refused).
    Validate {
        /// Runbook YAML files to check.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
        /// Result format on stdout (errors name file:line:column either way).
        #[arg(long, value_enum, default_value_t = Output::Text)]
        output: Output,
    },
    /// List the runbooks found (--runbook-dir, ./runbooks/, built in).
    List {
        /// Extra directory to look for runbooks in, before ./runbooks/ (repeatable).
        #[arg(long, value_name = "DIR")]
        runbook_dir: Vec<PathBuf>,
        /// Table for people or JSON for scripts.
        #[arg(long, value_enum, default_value_t = Output::Text)]
        output: Output,
    },
    /// Write a starter runbook to adapt: every signal the detector needs, commented; it
    /// runs on the demo system as written.
    ///
    /// Example: `recover runbooks new mine`, then `recover runbooks validate
    /// runbooks/mine.yaml` and `recover --runbook mine --target local --inventory
    /// recover-demo/inventory.yaml --dry-run`.
    New {
        /// The runbook's name (lowercase letters, digits and dashes); the file is NAME.yaml.
        name: String,
        /// Directory to write it in (created if missing); `--runbook NAME` looks in
        /// ./runbooks/ by itself.
        #[arg(long, value_name = "DIR", default_value = "runbooks")]
        dir: PathBuf,
        /// Replace a file that is already there.
        #[arg(long)]
        force: bool,
    },
    /// Show one runbook's source and where it was found.
    Show {
        /// Runbook name (as `runbooks list` shows it) or path to a YAML file.
        name: String,
        /// Extra directory to look for runbooks in, before ./runbooks/ (repeatable).
        #[arg(long, value_name = "DIR")]
        runbook_dir: Vec<PathBuf>,
        /// The YAML with a `# from:` line, or JSON with name, origin and source.
        #[arg(long, value_enum, default_value_t = Output::Text)]
        output: Output,
    },
}

pub fn run(cmd: RunbooksCommand) -> CliResult {
    match cmd {
        RunbooksCommand::Validate { files, output } => validate(&files, output),
        RunbooksCommand::New { name, dir, force } => new(&name, &dir, force),
        RunbooksCommand::List {
            runbook_dir,
            output,
        } => {
            let found = runbook::list(&runbook_dir);
            let state = |r: &runbook::ListedRunbook| match (&r.error, r.active) {
                (Some(_), _) => "INVALID",
                (None, false) => "shadowed",
                (None, true) => "ok",
            };
            match output {
                Output::Json => {
                    let list: Vec<_> = found
                        .iter()
                        .map(|r| {
                            json!({
                                "name": r.name,
                                "state": state(r).to_lowercase(),
                                "origin": r.origin.to_string(),
                                "description": r.description,
                                "error": r.error,
                            })
                        })
                        .collect();
                    print_json(&json!({ "runbooks": list }))?;
                }
                Output::Text => {
                    let mut t = Table::new(["name", "state", "from", "description"]);
                    for r in &found {
                        t.row([
                            r.name.clone(),
                            state(r).to_string(),
                            r.origin.to_string(),
                            r.description.clone().unwrap_or_default(),
                        ]);
                    }
                    print!("{}", t.render());
                }
            }
            Ok(Exit::Done)
        }
        RunbooksCommand::Show {
            name,
            runbook_dir,
            output,
        } => {
            let l = runbook::find(&name, &runbook_dir).map_err(Failure::usage)?;
            match output {
                Output::Json => print_json(&json!({
                    "name": l.runbook.name,
                    "origin": l.origin.to_string(),
                    "source": l.source,
                }))?,
                Output::Text => {
                    println!("# from: {}", l.origin);
                    print!("{}", l.source);
                }
            }
            Ok(Exit::Done)
        }
    }
}

fn new(name: &str, dir: &std::path::Path, force: bool) -> CliResult {
    let text = runbook::starter(name).map_err(|e| Failure::usage(anyhow::Error::new(e)))?;
    let path = dir.join(format!("{name}.yaml"));
    if path.exists() && !force {
        return Err(Failure::usage(anyhow::anyhow!(
            "{} exists; pick another name, or --force to replace it",
            path.display()
        )));
    }
    std::fs::create_dir_all(dir)
        .with_context(|| format!("creating {}", dir.display()))
        .map_err(|e| Failure::new(Exit::Refused, e))?;
    std::fs::write(&path, text)
        .with_context(|| format!("writing {}", path.display()))
        .map_err(|e| Failure::new(Exit::Refused, e))?;
    let file = recover::util::shell::quote(&path.display().to_string());
    println!("wrote {file}");
    println!("next: recover runbooks validate {file}");
    println!(
        "      recover --runbook {file} --target local --inventory recover-demo/inventory.yaml --dry-run"
    );
    Ok(Exit::Done)
}

fn validate(files: &[PathBuf], output: Output) -> CliResult {
    let mut bad = 0;
    let mut results = Vec::new();
    for f in files {
        let loaded = runbook::load_file(f).and_then(|l| {
            let gaps = runbook::detection_gaps(&f.display().to_string(), &l);
            if gaps.is_empty() {
                Ok(l)
            } else {
                Err(runbook::RunbookError::Invalid(gaps))
            }
        });
        match loaded {
            Ok(l) => {
                if output == Output::Text {
                    println!(
                        "{}: ok ({} steps, {} on_failure)",
                        f.display(),
                        l.runbook.steps.len(),
                        l.runbook.on_failure.len()
                    );
                }
                results.push(json!({
                    "file": f.display().to_string(),
                    "ok": true,
                    "steps": l.runbook.steps.len(),
                    "on_failure": l.runbook.on_failure.len(),
                }));
            }
            Err(e) => {
                bad += 1;
                eprintln!("{e}");
                results.push(json!({
                    "file": f.display().to_string(),
                    "ok": false,
                    "error": e.to_string(),
                }));
            }
        }
    }
    if output == Output::Json {
        print_json(&json!({ "runbooks": results }))?;
    }
    if bad > 0 {
        return Err(Failure::usage(anyhow::anyhow!(
            "{bad} of {} runbook(s) invalid",
            files.len()
        )));
    }
    Ok(Exit::Done)
}

fn print_json(v: &serde_json::Value) -> Result<(), Failure> {
    let text = serde_json::to_string_pretty(v).context("encoding JSON")?;
    println!("{text}");
    Ok(())
}
