//! `recover simulate`: flags onto `recover::simulate`. Bad scenario names, parameters and
//! files exit 2 with the key or file position named; a run that completes exits 0 whether
//! or not the modelled system recovered (that is the answer, not a failure).

use super::{CliResult, Failure, Output};
use anyhow::anyhow;
use recover::exit::Exit;
use recover::simulate::{overrides, resolve, Scenario, Seeds, DEFAULT_SEED};
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Debug, clap::Args)]
pub struct SimulateArgs {
    /// Built-in scenario (retry-storm, config-deploy; the drills slow-replica,
    /// provider-outage, retry-layers, breaker, bulkhead) or a YAML scenario file.
    #[arg(long, value_name = "NAME|FILE", required_unless_present = "grid")]
    pub scenario: Option<String>,
    /// Retry policy, for the scenarios that have one: fixed, exponential or full-jitter
    /// (random() x the exponential delay).
    #[arg(long, value_name = "P")]
    pub policy: Option<String>,
    /// Change one parameter (repeatable), by its scenario-file name: --set overload_factor=1.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Print one table of the alternatives the scenario compares, each run over --seeds
    /// seeds: every figure's median and range.
    #[arg(long)]
    pub compare: bool,
    /// How many seeds --compare runs, from --seed on.
    #[arg(long, value_name = "N", default_value_t = Seeds::DEFAULT_COUNT)]
    pub seeds: u32,
    /// The run summary in words, or as JSON.
    #[arg(long, value_enum, default_value_t = Output::Text)]
    pub output: Output,
    /// Draw the series to an SVG file.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// PRNG seed (client phases, jitter), the first of --compare's; same seed, same output
    /// byte for byte.
    #[arg(long)]
    pub seed: Option<u64>,
    #[command(flatten)]
    pub grid: super::simulate_grid::GridArgs,
    /// Benchmark: run the scenario N times and print simulated client-seconds per wall second.
    #[arg(long, hide = true, value_name = "N")]
    pub bench_runs: Option<u32>,
}

pub fn run(args: SimulateArgs) -> CliResult {
    let Some(name) = args.scenario.as_deref().filter(|_| !args.grid.grid) else {
        return super::simulate_grid::run(&args.grid, args.seed, args.output);
    };
    let mut scenario = resolve(name).map_err(Failure::usage)?;
    if let Some(p) = &args.policy {
        scenario.set_policy_named(p).map_err(Failure::usage)?;
    }
    for s in &args.set {
        let (k, v) = overrides::split_set(s).map_err(Failure::usage)?;
        scenario.set(k, v).map_err(Failure::usage)?;
    }
    scenario.validate().map_err(Failure::usage)?;
    let seed = args.seed.or(scenario.file_seed()).unwrap_or(DEFAULT_SEED);

    if let Some(n) = args.bench_runs {
        return bench(&scenario, seed, n);
    }
    if args.compare {
        if args.seeds == 0 {
            return Err(Failure::usage(anyhow!("--seeds: must be at least 1")));
        }
        let c = scenario.compare(Seeds {
            first: seed,
            count: args.seeds,
        });
        match args.output {
            Output::Text => emit(&c.text()),
            Output::Json => emit(&(to_json(&c.rows)? + "\n")),
        }
        return Ok(Exit::Done);
    }
    let report = scenario.run(seed);
    if let Some(path) = &args.plot {
        report
            .write_plot(path)
            .map_err(|e| Failure::new(Exit::Failed, e))?;
    }
    match args.output {
        Output::Text => emit(&report.text()),
        Output::Json => emit(&(report.json().map_err(|e| Failure::new(Exit::Failed, e))? + "\n")),
    }
    Ok(Exit::Done)
}

/// Write results to stdout; a closed pipe (`| head`) is the reader's choice, not an error.
fn emit(s: &str) {
    let _ = std::io::stdout().lock().write_all(s.as_bytes());
}

fn to_json(v: &impl serde::Serialize) -> Result<String, Failure> {
    serde_json::to_string_pretty(v).map_err(|e| Failure::new(Exit::Failed, e))
}

/// Simulated client-seconds per wall second, best and median of `n` runs, printed beside
/// the goal (10,000 clients for 100 s in at most 1 s).
fn bench(scenario: &Scenario, seed: u64, n: u32) -> CliResult {
    let Some(client_s) = scenario.client_seconds() else {
        return Err(Failure::usage(anyhow!(
            "--bench-runs needs the continuous model (config-deploy or a file with model: config-deploy)"
        )));
    };
    let mut walls = Vec::new();
    let mut calls = 0;
    for _ in 0..n.max(1) {
        let start = Instant::now();
        let r = scenario.run(seed);
        walls.push(start.elapsed().as_secs_f64());
        calls = r.attempts().unwrap_or(0);
    }
    walls.sort_by(f64::total_cmp);
    let best = walls[0];
    let median = walls[walls.len() / 2];
    println!(
        "{client_s:.0} client-seconds, {calls} attempts per run, {} runs",
        walls.len()
    );
    println!("wall per run: best {:.3} s, median {:.3} s", best, median);
    println!(
        "simulated client-seconds per wall second: best {:.0}, median {:.0}   (goal >= 1000000)",
        client_s / best,
        client_s / median
    );
    println!(
        "attempts simulated per wall second: median {:.0}",
        calls as f64 / median
    );
    Ok(Exit::Done)
}
