//! `recover simulate`: flags onto `recover::simulate`. Bad scenario names, parameters and
//! files exit 2 with the key or file position named; a run that completes exits 0 whether
//! or not the modelled system recovered (that is the answer, not a failure).

use super::{CliResult, Failure, Output};
use anyhow::anyhow;
use recover::exit::Exit;
use recover::simulate::{compare, overrides, plot, text, Report, Scenario, DEFAULT_SEED};
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Debug, clap::Args)]
pub struct SimulateArgs {
    /// Built-in scenario (retry-storm, config-deploy; the drills slow-replica,
    /// provider-outage, retry-layers, breaker, bulkhead) or a YAML scenario file.
    #[arg(long, value_name = "NAME|FILE")]
    pub scenario: String,
    /// Retry policy: immediate, backoff or backoff-jitter (provider-outage: exponential,
    /// fixed or full-jitter).
    #[arg(long, value_name = "P")]
    pub policy: Option<String>,
    /// Change one parameter (repeatable), by its scenario-file name: --set overload_factor=1.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Print one table of variants that each change one thing, and which recover.
    #[arg(long)]
    pub compare: bool,
    /// The run summary in words, or as JSON.
    #[arg(long, value_enum, default_value_t = Output::Text)]
    pub output: Output,
    /// Draw the series to an SVG file.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// PRNG seed (client phases, jitter); same seed, same output byte for byte.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Benchmark: run the scenario N times and print simulated client-seconds per wall second.
    #[arg(long, hide = true, value_name = "N")]
    pub bench_runs: Option<u32>,
}

pub fn run(args: SimulateArgs) -> CliResult {
    let mut scenario = Scenario::resolve(&args.scenario).map_err(Failure::usage)?;
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
    if let (true, Scenario::Drill { drill, .. }) = (args.compare, &scenario) {
        let c = drill.compare(seed);
        match args.output {
            Output::Text => emit(&drill.compare_text(seed, &c)),
            Output::Json => emit(&(to_json(&c)? + "\n")),
        }
        return Ok(Exit::Done);
    }
    if args.compare {
        let rows = compare::compare(&scenario, seed).map_err(Failure::usage)?;
        match args.output {
            Output::Text => emit(&compare::render(&scenario, seed, &rows)),
            Output::Json => emit(&(to_json(&rows)? + "\n")),
        }
        return Ok(Exit::Done);
    }
    let report = scenario.run(seed);
    if let Some(path) = &args.plot {
        plot::write(&report, path).map_err(|e| Failure::new(Exit::Failed, e))?;
    }
    match args.output {
        Output::Text => emit(&text::render(&report)),
        Output::Json => emit(&(to_json(&report)? + "\n")),
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
    let Scenario::System { params, .. } = scenario else {
        return Err(Failure::usage(anyhow!(
            "--bench-runs needs the continuous model (config-deploy or a file with model: config-deploy)"
        )));
    };
    let client_s = f64::from(params.clients) * params.duration.as_secs_f64();
    let mut walls = Vec::new();
    let mut calls = 0;
    for _ in 0..n.max(1) {
        let start = Instant::now();
        let r = scenario.run(seed);
        walls.push(start.elapsed().as_secs_f64());
        if let Report::System(r) = r {
            calls = r.totals.attempts;
        }
    }
    walls.sort_by(f64::total_cmp);
    let best = walls[0];
    let median = walls[walls.len() / 2];
    println!(
        "clients {} x {} s = {client_s:.0} client-seconds, {calls} attempts per run, {} runs",
        params.clients,
        params.duration.as_secs_f64(),
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
