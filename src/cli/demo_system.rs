//! `recover demo up | trigger | down`: flags onto `recover::demo::system`, and what to do
//! next, printed for the engineer who just started the demo.

use super::{CliResult, Failure};
use recover::demo::defaults;
use recover::demo::system::{self, DemoError, UpOptions, BASE_PORT, DIR};
use recover::demo::workers::AttemptHeader;
use recover::exit::Exit;
use recover::util::duration;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub struct UpArgs {
    /// Directory for inventory.yaml, the tokens, prometheus.yml, serve.yaml, pid files and logs.
    #[arg(long, default_value = DIR)]
    pub dir: PathBuf,
    /// First port: gate +0, gate admin +1, workers' metrics +2, replica i +10+i.
    #[arg(long, default_value_t = BASE_PORT)]
    pub base_port: u16,
    /// Config-service replicas.
    #[arg(long, default_value_t = 1)]
    pub replicas: u32,
    /// Pollers in the worker fleet.
    #[arg(long, default_value_t = defaults::WORKERS as u32)]
    pub workers: u32,
    /// How the workers mark their attempts (`none`: not at all, like most clients).
    #[arg(long, value_enum, default_value_t = AttemptHeader::XAttempt)]
    pub attempt_header: AttemptHeader,
    /// The workers send an Idempotency-Key, the same for a poll and its retries.
    #[arg(long)]
    pub idempotency_key: bool,
}

#[derive(Debug, clap::Args)]
pub struct TriggerArgs {
    /// The directory `recover demo up --dir` used.
    #[arg(long, default_value = DIR)]
    pub dir: PathBuf,
    /// How long the restarted service is unavailable.
    #[arg(long, value_parser = duration::parse, default_value = "5s")]
    pub outage: Duration,
}

#[derive(Debug, clap::Args)]
pub struct DownArgs {
    /// The directory `recover demo up --dir` used; its pid files name what to stop.
    #[arg(long, default_value = DIR)]
    pub dir: PathBuf,
}

fn failure(e: DemoError) -> Failure {
    match e {
        DemoError::Ports(_) => Failure::new(Exit::Refused, e),
        DemoError::Inventory(_) => Failure::usage(e),
        other => Failure::new(Exit::Failed, other),
    }
}

pub fn up(a: UpArgs) -> CliResult {
    let exe = std::env::current_exe().map_err(|e| Failure::new(Exit::Failed, e))?;
    let opts = UpOptions {
        dir: a.dir,
        base_port: a.base_port,
        replicas: a.replicas,
        workers: a.workers,
        attempt_header: a.attempt_header,
        idempotency_key: a.idempotency_key,
        exe,
    };
    let up = super::runtime()?
        .block_on(system::up(&opts))
        .map_err(failure)?;
    let p = &up.addrs;
    let replicas: Vec<String> = p.replicas.iter().map(|r| r.to_string()).collect();
    println!("demo system up (detached), files in {}:", up.dir.display());
    println!(
        "  gate            http://{}  (admin API and /metrics on {})",
        p.gate, p.gate_admin
    );
    println!("  config service  {}", replicas.join(", "));
    println!(
        "  workers         {} polling through the gate (/metrics on {})",
        a.workers, p.workers_metrics
    );
    println!("  inventory       {}", up.inventory.display());
    println!("next: recover demo trigger   (a deploy: the service goes down, comes back and stays stuck)");
    Ok(Exit::Done)
}

pub fn trigger(a: TriggerArgs) -> CliResult {
    super::runtime()?
        .block_on(system::trigger(&a.dir, a.outage))
        .map_err(failure)?;
    println!(
        "triggered: the config service was unavailable for {} and is back; it stays stuck until someone acts",
        duration::format(a.outage)
    );
    Ok(Exit::Done)
}

pub fn down(a: DownArgs) -> CliResult {
    let stopped = system::down(&a.dir).map_err(failure)?;
    if stopped.is_empty() {
        println!("nothing was running");
    } else {
        println!("stopped: {}", stopped.join(", "));
    }
    Ok(Exit::Done)
}
