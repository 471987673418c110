//! `recover plan`: the shed and the readmission ramp from numbers, with the arithmetic.

use super::{CliResult, Failure};
use recover::exit::Exit;
use recover::plan::{make_plan, Plan, PlanConfig, PlanInputs};
use std::time::Duration;

/// How results are printed on stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Default)]
pub enum Output {
    #[default]
    Text,
    Json,
}

#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    /// Requests per second arriving now (first attempts and retries).
    #[arg(long, value_name = "REQ_PER_S")]
    pub arrival: f64,
    /// Capacity right after a restart (cold caches), requests per second.
    #[arg(long, value_name = "REQ_PER_S")]
    pub capacity_cold: f64,
    /// Work amplification: work per useful response now / when healthy (>= 1).
    #[arg(long)]
    pub k: f64,
    /// Healthy capacity, requests per second (the ramp ends there at the latest).
    #[arg(long, value_name = "REQ_PER_S")]
    pub capacity: Option<f64>,
    /// Healthy demand, first attempts per second (the ramp ends there when lower).
    #[arg(long, value_name = "REQ_PER_S")]
    pub demand: Option<f64>,
    /// Admit this fraction of capacity_cold / k (0..1).
    #[arg(long, default_value_t = PlanConfig::default().headroom)]
    pub headroom: f64,
    /// Each ramp step multiplies the admitted rate by this (> 1).
    #[arg(long, default_value_t = PlanConfig::default().step_factor)]
    pub step_factor: f64,
    /// How long each ramp step is held and checked.
    #[arg(long, value_parser = recover::util::duration::parse, default_value = "5s")]
    pub step_hold: Duration,
    #[arg(long, value_enum, default_value_t = Output::Text)]
    pub output: Output,
}

pub fn run(args: PlanArgs) -> CliResult {
    let inputs = PlanInputs {
        arrival_rate: args.arrival,
        capacity_cold: args.capacity_cold,
        k: args.k,
        capacity: args.capacity,
        demand: args.demand,
    };
    inputs
        .validate()
        .map_err(|e| Failure::usage(anyhow::anyhow!("{}", flag_error(&e.to_string()))))?;
    if !(args.headroom > 0.0 && args.headroom <= 1.0) {
        return Err(Failure::usage(anyhow::anyhow!(
            "--headroom must be in (0, 1], got {}",
            args.headroom
        )));
    }
    if !(args.step_factor.is_finite() && args.step_factor > 1.0) {
        return Err(Failure::usage(anyhow::anyhow!(
            "--step-factor must be above 1, got {}",
            args.step_factor
        )));
    }
    let cfg = PlanConfig {
        headroom: args.headroom,
        step_factor: args.step_factor,
        step_hold: args.step_hold,
        ..PlanConfig::default()
    };
    let plan = make_plan(&inputs, &cfg);
    print_plan(&plan, args.output)?;
    Ok(Exit::Done)
}

/// Name the flag, not the library field.
fn flag_error(msg: &str) -> String {
    msg.replacen("arrival_rate", "--arrival", 1)
        .replacen("capacity_cold", "--capacity-cold", 1)
        .replacen("demand", "--demand", 1)
        .replacen("capacity ", "--capacity ", 1)
        .replacen("k must", "--k must", 1)
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
    out.push_str("  then lift the limit once the gate rejects nothing\n\nbetween steps, check:\n");
    for c in &plan.checks {
        out.push_str(&format!("  - {c}\n"));
    }
    out.trim_end().to_string()
}
