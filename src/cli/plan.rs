//! `recover plan`: the shed and the readmission ramp from numbers, with the arithmetic.

use super::detect::{judge, Tuning, Watch};
use super::{CliResult, Failure, Output};
use recover::detect::{DetectorConfig, Verdict};
use recover::exit::Exit;
use recover::plan::inputs::Input;
use recover::plan::{make_plan, Overrides, Plan, PlanConfig, PlanInputs};
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    /// Requests per second arriving now (first attempts and retries). Measured when a
    /// source is given.
    #[arg(long, value_name = "REQ_PER_S", allow_negative_numbers = true)]
    pub arrival: Option<f64>,
    /// Capacity right after a restart (cold caches), requests per second.
    #[arg(long, value_name = "REQ_PER_S", allow_negative_numbers = true)]
    pub capacity_cold: Option<f64>,
    /// Work amplification: work per useful response now / when healthy (>= 1).
    #[arg(long, allow_negative_numbers = true)]
    pub k: Option<f64>,
    /// Healthy capacity, requests per second (the ramp ends there at the latest).
    #[arg(long, value_name = "REQ_PER_S", allow_negative_numbers = true)]
    pub capacity: Option<f64>,
    /// Healthy demand, first attempts per second (the ramp ends there when lower).
    #[arg(long, value_name = "REQ_PER_S", allow_negative_numbers = true)]
    pub demand: Option<f64>,
    /// Admit this fraction of capacity_cold / k (0..1]. Default: the runbook's, else 0.9.
    #[arg(long)]
    pub headroom: Option<f64>,
    /// Each ramp step multiplies the admitted rate by this (> 1). Default 1.5.
    #[arg(long)]
    pub step_factor: Option<f64>,
    /// How long each ramp step is held and checked. Default 5s.
    #[arg(long, value_parser = recover::util::duration::parse)]
    pub step_hold: Option<Duration>,
    /// Runbook whose signals, `spec.detect` and `spec.plan` to use (name or path).
    #[arg(long, value_name = "NAME")]
    pub runbook: Option<String>,
    /// Extra directory to look for runbooks in.
    #[arg(long, value_name = "DIR")]
    pub runbook_dir: Vec<std::path::PathBuf>,
    /// Measure the inputs by scraping ROLE=URL targets (as `recover detect`).
    #[arg(long = "metrics-url", value_name = "ROLE=URL", value_parser = recover::metrics::scrape::parse_target, conflicts_with = "prometheus")]
    pub metrics_urls: Vec<recover::platform::ScrapeEndpoint>,
    /// Measure the inputs by querying a Prometheus server.
    #[arg(long, value_name = "URL")]
    pub prometheus: Option<String>,
    /// How long a window to measure (as `recover detect --observe`).
    #[arg(long, value_parser = recover::util::duration::parse)]
    pub observe: Option<Duration>,
    /// Also predict with the simulator whether this plan recovers without relapse.
    #[arg(long)]
    pub check_with_sim: bool,
    /// Simulator parameter for --check-with-sim (as `recover simulate --set`); repeatable.
    #[arg(
        long = "sim-set",
        value_name = "KEY=VALUE",
        requires = "check_with_sim"
    )]
    pub sim_set: Vec<String>,
    /// The plan with its arithmetic in words, or as JSON.
    #[arg(long, value_enum, default_value_t = Output::Text)]
    pub output: Output,
    /// Put the plan's limit on the gate in shadow: the gate counts what the shed would
    /// refuse of today's traffic and refuses nothing. Needs the gate (--admin and
    /// --token-file, or --target kube --namespace NS); refused (exit 3) while the gate
    /// enforces a limit.
    #[arg(long)]
    pub shadow: bool,
    #[command(flatten)]
    pub gate: super::gate_limit::GateArgs,
}

pub fn run(args: PlanArgs) -> CliResult {
    let gate_named = args.gate.admin.is_some()
        || args.gate.token_file.is_some()
        || args.gate.namespace.is_some();
    if gate_named && !args.shadow {
        return Err(Failure::usage(anyhow::anyhow!(
            "--admin, --token-file and --namespace name the gate for --shadow; add --shadow or leave them out"
        )));
    }
    if args.shadow {
        args.gate.address()?;
    }
    let measuring = !args.metrics_urls.is_empty() || args.prometheus.is_some();
    let mut cfg = PlanConfig::default();
    let mut declared = DetectorConfig::default();
    if let Some(name) = &args.runbook {
        let loaded = recover::runbook::find(name, &args.runbook_dir)
            .map_err(|e| Failure::usage(anyhow::anyhow!(e)))?;
        cfg = loaded.runbook.plan;
        declared = loaded.runbook.detect;
    }
    let verdict = if measuring {
        let watch = Watch {
            runbook: args.runbook.clone(),
            runbook_dir: args.runbook_dir.clone(),
            metrics_urls: args.metrics_urls.clone(),
            prometheus: args.prometheus.clone(),
            observe: args.observe,
            interval: Duration::from_secs(1),
            timeout: Duration::from_secs(2),
            prom: Default::default(),
        };
        let tuning = Tuning {
            capacity: args.capacity,
            k: args.k,
            ..Tuning::default()
        };
        let verdict = judge(&watch, &tuning)?;
        eprintln!(
            "measured: {} ({})",
            verdict.verdict.as_str(),
            verdict.summary
        );
        verdict
    } else if args.runbook.is_some() {
        return Err(Failure::usage(anyhow::anyhow!(
            "--runbook needs a source to measure with: --metrics-url ROLE=URL or --prometheus URL (or give --arrival, --capacity-cold and --k)"
        )));
    } else {
        Verdict::default()
    };
    // Numbers given on the command line win over measured ones.
    let operator = Overrides {
        arrival_rate: args.arrival,
        capacity_cold: args.capacity_cold,
        k: args.k,
        capacity: args.capacity,
        demand: args.demand,
    };
    let sourced = match PlanInputs::from_verdict(&verdict, &declared, &operator) {
        Ok(sourced) => sourced,
        Err(missing) => {
            let what = missing
                .missing
                .iter()
                .map(|i| flag_for(*i))
                .collect::<Vec<_>>()
                .join(", ");
            return Err(if measuring {
                Failure::new(
                    Exit::Unknown,
                    anyhow::anyhow!("could not measure {what}; give them as flags"),
                )
            } else {
                Failure::usage(anyhow::anyhow!(
                    "give {what} (or a source: --metrics-url / --prometheus)"
                ))
            });
        }
    };
    let inputs = sourced.values();
    inputs
        .validate()
        .map_err(|e| Failure::usage(anyhow::anyhow!("{}", flag_error(&e.to_string()))))?;
    if let Some(h) = args.headroom {
        if !(h > 0.0 && h <= 1.0) {
            return Err(Failure::usage(anyhow::anyhow!(
                "--headroom must be in (0, 1], got {h}"
            )));
        }
        cfg.headroom = h;
    }
    if let Some(f) = args.step_factor {
        if !(f.is_finite() && f > 1.0) {
            return Err(Failure::usage(anyhow::anyhow!(
                "--step-factor must be above 1, got {f}"
            )));
        }
        cfg.step_factor = f;
    }
    if let Some(h) = args.step_hold {
        cfg.step_hold = h;
    }
    let plan = make_plan(&inputs, &cfg);
    let shadow = args
        .shadow
        .then(|| super::plan_shadow::shadow_limit(plan.admit_rate, plan.shed_fraction));
    if let Some(limit) = &shadow {
        recover::gate::validate::check(limit)
            .map_err(|e| Failure::usage(anyhow::anyhow!("the plan's limit: {e}")))?;
    }
    if args.output == Output::Text {
        println!("inputs (measured, declared, given or assumed):");
        for line in sourced.describe() {
            println!("  {line}");
        }
        println!();
    }
    if !args.check_with_sim {
        print_plan_with(&plan, &sourced, args.output)?;
        if let Some(limit) = shadow {
            super::plan_shadow::apply(&args.gate, limit, args.output)?;
        }
        return Ok(Exit::Done);
    }
    let check = sim_check(&inputs, &plan, &args.sim_set)?;
    match args.output {
        Output::Json => {
            let mut v = serde_json::to_value(&plan).map_err(|e| Failure::new(Exit::Failed, e))?;
            v["inputs"] =
                serde_json::to_value(&sourced).map_err(|e| Failure::new(Exit::Failed, e))?;
            v["predicted"] =
                serde_json::to_value(&check).map_err(|e| Failure::new(Exit::Failed, e))?;
            println!(
                "{}",
                serde_json::to_string_pretty(&v).map_err(|e| Failure::new(Exit::Failed, e))?
            );
        }
        Output::Text => {
            print_plan(&plan, args.output)?;
            println!("{}", check_text(&check));
        }
    }
    if let Some(limit) = shadow {
        super::plan_shadow::apply(&args.gate, limit, args.output)?;
    }
    Ok(Exit::Done)
}

/// Run the plan through the deterministic model of the same system.
fn sim_check(
    inputs: &PlanInputs,
    plan: &Plan,
    sets: &[String],
) -> Result<recover::simulate::PlanCheck, Failure> {
    let mut base = recover::simulate::SystemParams::default();
    for kv in sets {
        let (k, v) = recover::simulate::overrides::split_set(kv)
            .map_err(|e| Failure::usage(anyhow::anyhow!("--sim-set: {e}")))?;
        base = recover::simulate::overrides::apply(&base, "config-deploy", k, v)
            .map_err(|e| Failure::usage(anyhow::anyhow!("--sim-set {kv:?}: {e}")))?;
    }
    let system = recover::simulate::from_plan::system_for(inputs, &base);
    recover::simulate::model::Params::validate(&system)
        .map_err(|e| Failure::usage(anyhow::anyhow!("--sim-set: {e}")))?;
    Ok(recover::simulate::check_plan(
        &system,
        plan,
        recover::simulate::DEFAULT_SEED,
    ))
}

fn check_text(c: &recover::simulate::PlanCheck) -> String {
    match (c.recovers, c.time_to_recover_s) {
        (true, Some(t)) => format!(
            "\nsimulator: recovers in {t:.0} s from the first action, {} relapse(s)",
            c.relapses
        ),
        (true, None) => format!("\nsimulator: recovers, {} relapse(s)", c.relapses),
        (false, _) => format!(
            "\nsimulator: does NOT recover with this plan ({} relapse(s)); shed more or ramp slower",
            c.relapses
        ),
    }
}

/// The `recover plan` flag that gives an input.
fn flag_for(input: Input) -> &'static str {
    match input {
        Input::ArrivalRate => "--arrival",
        Input::CapacityCold => "--capacity-cold",
        Input::K => "--k",
    }
}

/// Name the flag, not the library field.
fn flag_error(msg: &str) -> String {
    msg.replacen("arrival_rate", "--arrival", 1)
        .replacen("capacity_cold", "--capacity-cold", 1)
        .replacen("demand", "--demand", 1)
        .replacen("capacity ", "--capacity ", 1)
        .replacen("k must", "--k must", 1)
}

/// The plan, and in JSON the inputs it came from with their sources.
fn print_plan_with(
    plan: &Plan,
    sourced: &recover::plan::SourcedInputs,
    output: Output,
) -> Result<(), Failure> {
    if output == Output::Text {
        return print_plan(plan, output);
    }
    let mut v = serde_json::to_value(plan).map_err(|e| Failure::new(Exit::Failed, e))?;
    v["inputs"] = serde_json::to_value(sourced).map_err(|e| Failure::new(Exit::Failed, e))?;
    let text = serde_json::to_string_pretty(&v).map_err(|e| Failure::new(Exit::Failed, e))?;
    println!("{text}");
    Ok(())
}

pub fn print_plan(plan: &Plan, output: Output) -> Result<(), Failure> {
    match output {
        Output::Json => {
            let text =
                serde_json::to_string_pretty(plan).map_err(|e| Failure::new(Exit::Failed, e))?;
            println!("{text}");
        }
        Output::Text => println!("{}", plan_text(plan)),
    }
    Ok(())
}

fn plan_text(plan: &Plan) -> String {
    let mut out = format!(
        "shed {:.1}% of the arrival; set the gate to admit {:.1} req/s\n\narithmetic:\n",
        100.0 * plan.shed_fraction,
        plan.admit_rate
    );
    for l in &plan.arithmetic {
        out.push_str(&format!("  {l}\n"));
    }
    out.push_str("\nreadmission ramp:\n");
    for (i, s) in plan.ramp.iter().enumerate() {
        out.push_str(&format!(
            "  step {}: admit {:.1} req/s, hold {}\n",
            i + 1,
            s.rate_per_s,
            recover::util::duration::format(s.hold)
        ));
    }
    out.push_str(concat!(
        "  a step may jump ahead to what the gate is offered (admitted + rejected, +10%);\n",
        "  the limit is lifted after the first step at which the gate rejects nothing,\n",
        "  and held at the last step while it still rejects\n\nbetween steps, check:\n"
    ));
    for c in &plan.checks {
        out.push_str(&format!("  - {c}\n"));
    }
    out.trim_end().to_string()
}
