//! `recover completions SHELL` and `recover man [--dir DIR]`: shell completions and man
//! pages generated from the same clap definitions as `--help`, so they cannot drift from
//! the flags the binary takes.

use super::{CliResult, Failure};
use anyhow::Context;
use clap::CommandFactory;
use recover::exit::Exit;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell to write completions for (on stdout).
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, clap::Args)]
pub struct ManArgs {
    /// Write one page per command into DIR (recover.1, recover-gate.1,
    /// recover-demo-workers.1, ...), creating it if needed; without it, print recover(1)
    /// on stdout.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// The command tree as clap sees it, named as installed.
pub fn command() -> clap::Command {
    super::Cli::command().bin_name("recover")
}

pub fn completions(args: CompletionsArgs) -> CliResult {
    let mut cmd = command();
    clap_complete::generate(args.shell, &mut cmd, "recover", &mut std::io::stdout());
    Ok(Exit::Done)
}

pub fn man(args: ManArgs) -> CliResult {
    match args.dir {
        Some(dir) => {
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("--dir {}: cannot create it", dir.display()))
                .map_err(Failure::usage)?;
            clap_mangen::generate_to(command(), &dir)
                .with_context(|| format!("writing man pages into {}", dir.display()))?;
            let mut pages: Vec<String> = std::fs::read_dir(&dir)
                .with_context(|| format!("listing {}", dir.display()))?
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("recover") && n.ends_with(".1"))
                .collect();
            pages.sort();
            eprintln!("wrote {} man pages into {}", pages.len(), dir.display());
        }
        None => {
            let mut out = std::io::stdout().lock();
            clap_mangen::Man::new(command())
                .render(&mut out)
                .context("writing the man page")?;
        }
    }
    Ok(Exit::Done)
}

#[cfg(test)]
mod tests {
    use super::command;

    /// Every argument of every command says what it is for: `--help`, the man pages and
    /// the completions' descriptions all come from this text.
    #[test]
    fn every_argument_has_help_text() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in cmd.get_arguments() {
                let id = arg.get_id().as_str();
                if id == "help" || id == "version" {
                    continue;
                }
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{path} {id}"));
                }
            }
            for sub in cmd.get_subcommands() {
                if sub.get_about().is_none() && sub.get_long_about().is_none() {
                    missing.push(format!("{path} {} (the command)", sub.get_name()));
                }
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut cmd = command();
        cmd.build();
        let mut missing = Vec::new();
        walk(&cmd, "recover", &mut missing);
        assert!(
            missing.is_empty(),
            "arguments without help text: {missing:#?}"
        );
    }

    /// Flags a command cannot run without are required in the usage line, not only in the
    /// code that refuses to start.
    #[test]
    fn serve_shows_its_required_flags_as_required() {
        let mut cmd = command();
        cmd.build();
        let serve = cmd.find_subcommand_mut("serve").unwrap();
        let usage = serve.render_usage().to_string();
        assert!(usage.contains("--listen <ADDR> --config <FILE>"), "{usage}");
        let ok = command().try_get_matches_from(["recover", "serve", "reset", "local:demo"]);
        assert!(ok.is_ok(), "reset needs neither: {ok:?}");
        let err = command()
            .try_get_matches_from(["recover", "serve", "--listen", "127.0.0.1:0"])
            .unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::MissingRequiredArgument);
    }
}
