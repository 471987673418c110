//! `recover simulate --grid`: the scenario grid's report (the estimator's k and the
//! prediction from estimates at every point), or with `--write DIR` the grid's points as
//! rehearsal scenario files (what `scripts/bench-rehearse.sh --sample` rehearses).
//! Exit 0 when the report or the files are written, whatever the figures say; 2 on bad
//! flags.

use super::{CliResult, Failure, Output};
use anyhow::anyhow;
use recover::exit::Exit;
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

/// The grid's points when `--points` is not given: enough that one point is a third of a
/// percent of the share, few enough for seconds in a release build.
pub const DEFAULT_POINTS: usize = 300;

#[derive(Debug, Clone, clap::Args)]
pub struct GridArgs {
    /// Measure k and the prediction over the scenario grid (cold factor 1.5-4, overload
    /// factor 1.5-5, replicas 1-4, concurrency 4-16, with and without attempt headers,
    /// attached at the trigger or 60 s late), seeded by --seed (default 1).
    #[arg(long, conflicts_with_all = ["scenario", "compare", "set", "policy", "plot", "bench_runs"])]
    pub grid: bool,
    /// How many grid points (--grid).
    #[arg(long, visible_alias = "draw", value_name = "N", requires = "grid", default_value_t = DEFAULT_POINTS)]
    pub points: usize,
    /// Write the points as rehearsal scenario files DIR/grid-<i>.yaml instead of measuring
    /// them (--grid).
    #[arg(long, value_name = "DIR", requires = "grid")]
    pub write: Option<PathBuf>,
    /// The runbook the points are planned with, by name or path.
    #[arg(
        long,
        value_name = "NAME|FILE",
        requires = "grid",
        default_value = "stuck-overload"
    )]
    pub runbook: String,
}

pub fn run(args: &GridArgs, seed: Option<u64>, output: Output) -> CliResult {
    let seed = seed.unwrap_or(recover::simulate::DEFAULT_SEED);
    if args.points == 0 {
        return Err(Failure::usage(anyhow!("--points: must be at least 1")));
    }
    if let Some(dir) = &args.write {
        let files = recover::rehearse::grid::write(dir, args.points, seed)
            .map_err(|e| Failure::usage(anyhow!("--write {}: {e}", dir.display())))?;
        eprintln!(
            "seed {seed}: {} scenario file(s) written under {}",
            files.len(),
            dir.display()
        );
        return Ok(Exit::Done);
    }
    let rb = recover::runbook::find(&args.runbook, &[])
        .map_err(|e| Failure::usage(anyhow!("--runbook {}: {e}", args.runbook)))?;
    let start = Instant::now();
    let report = recover::rehearse::grid::run(&rb.runbook, args.points, seed);
    let text = match output {
        Output::Text => report.text(),
        Output::Json => report.json().map_err(|e| Failure::new(Exit::Failed, e))?,
    };
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
    eprintln!(
        "{} points in {:.1} s wall",
        args.points,
        start.elapsed().as_secs_f64()
    );
    Ok(Exit::Done)
}
