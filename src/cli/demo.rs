//! `recover demo config-service` and `recover demo workers`: flags onto
//! `recover::demo::{config_service, workers}`. Defaults are the laptop scenario of
//! `recover::demo::defaults` (see docs/reference/demo.md).

use super::{CliResult, Failure};
use recover::demo::config_service::{self, ServiceConfig};
use recover::demo::defaults;
use recover::demo::workers::{self, AttemptHeader, RetryPolicy, WorkersConfig};
use recover::exit::Exit;
use recover::util::duration;
use std::net::SocketAddr;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

#[derive(Debug, clap::Subcommand)]
pub enum DemoCommand {
    /// The victim: a FIFO config service without load shedding.
    ConfigService(ConfigServiceArgs),
    /// The clients: N pollers with a retry policy.
    Workers(WorkersArgs),
    /// Start the whole demo system detached (gate, config service, workers) on fixed
    /// ports, and write its inventory.yaml, prometheus.yml and serve.yaml.
    Up(super::demo_system::UpArgs),
    /// The outage: restart the config service, unavailable for a few seconds (a deploy).
    Trigger(super::demo_system::TriggerArgs),
    /// Stop everything `recover demo up` started.
    Down(super::demo_system::DownArgs),
}

#[derive(Debug, clap::Args)]
pub struct ConfigServiceArgs {
    /// Address to serve /config, the admin API and /metrics on.
    #[arg(long)]
    pub listen: SocketAddr,
    /// Worker pool size W (capacity is about W / service-time).
    #[arg(long, default_value_t = defaults::SERVICE_CONCURRENCY)]
    pub concurrency: usize,
    /// Warm, un-overloaded work per request T.
    #[arg(long, value_parser = duration::parse, default_value = "40ms")]
    pub service_time: Duration,
    /// Cost multiplier right after start, fading to 1 as the service warms.
    #[arg(long, default_value_t = defaults::COLD_FACTOR)]
    pub cold_factor: f64,
    /// Cost multiplier k while overloaded (queue longer than fits in the client timeout).
    #[arg(long, default_value_t = defaults::OVERLOAD_FACTOR)]
    pub overload_factor: f64,
    /// Requests served (useful or abandoned) until fully warm.
    #[arg(long, default_value_t = defaults::WARM_AFTER_REQUESTS)]
    pub warm_after: u64,
    /// How long POST /admin/warm takes.
    #[arg(long, value_parser = duration::parse, default_value = "500ms")]
    pub warm_duration: Duration,
    /// The clients' timeout; used only to judge overload (queue > capacity x this).
    #[arg(long, value_parser = duration::parse, default_value = "1s")]
    pub client_timeout: Duration,
    /// Not listening for the first half of this, then listening but not ready (503).
    #[arg(long, value_parser = duration::parse, default_value = "0s")]
    pub startup_delay: Duration,
    /// Skip queued requests whose x-deadline-ms has passed (counted as skipped).
    #[arg(long)]
    pub honour_deadline: bool,
    /// Make every request this many times more expensive from --slow-after on (one slow
    /// replica that still passes its health checks); POST /admin/slow changes it later.
    #[arg(long, default_value_t = 1.0, value_parser = parse_slow_factor)]
    pub slow_factor: f64,
    /// When --slow-factor starts to apply, counted from the service's start.
    #[arg(long, value_parser = duration::parse, default_value = "0s", requires = "slow_factor")]
    pub slow_after: Duration,
    /// File holding the token /admin/* requires (Authorization: Bearer); without it the
    /// admin API is open to anyone who reaches the port, through the gate too.
    #[arg(long, value_name = "FILE")]
    pub admin_token_file: Option<std::path::PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct WorkersArgs {
    /// URL to poll; a URL without a path polls /config on it.
    #[arg(long)]
    pub target: String,
    /// Number of pollers N.
    #[arg(long, default_value_t = defaults::WORKERS)]
    pub count: usize,
    /// Each worker polls once per interval (phases spread evenly).
    #[arg(long, value_parser = duration::parse, default_value = "8s")]
    pub interval: Duration,
    /// Client timeout per attempt.
    #[arg(long, value_parser = duration::parse, default_value = "1s")]
    pub timeout: Duration,
    /// fixed:1s | exp:base=100ms,max=10s | exp-jitter:base=100ms,max=10s
    #[arg(long, value_parser = parse_policy, default_value = defaults::RETRY_POLICY)]
    pub retry: RetryPolicy,
    /// Attempts per poll, first included; 0 = retry forever.
    #[arg(long, default_value_t = 0)]
    pub max_attempts: u32,
    /// Retries allowed as a fraction of successes (0.1 = 10%); none if absent.
    #[arg(long, value_parser = parse_budget)]
    pub retry_budget: Option<f64>,
    /// Address to serve the fleet's /metrics on.
    #[arg(long)]
    pub metrics_listen: Option<SocketAddr>,
    /// Run for this long, then exit 0 (default: until SIGINT/SIGTERM).
    #[arg(long, value_parser = duration::parse)]
    pub duration: Option<Duration>,
    /// How each attempt says which attempt it is (`none`: not at all, like most clients).
    #[arg(long, value_enum, default_value_t = AttemptHeader::XAttempt)]
    pub attempt_header: AttemptHeader,
    /// Send an Idempotency-Key header, the same for a poll and its retries.
    #[arg(long)]
    pub idempotency_key: bool,
}

fn parse_policy(s: &str) -> Result<RetryPolicy, String> {
    s.parse()
}

fn parse_slow_factor(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(f) if config_service::valid_slow_factor(f) => Ok(f),
        _ => Err(format!(
            "invalid slow factor {s:?}; write a number >= 1 (1: normal speed, 5: five times slower)"
        )),
    }
}

fn parse_budget(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(f) if f.is_finite() && f >= 0.0 => Ok(f),
        _ => Err(format!(
            "invalid retry budget {s:?}; write a fraction >= 0, like 0.1"
        )),
    }
}

fn service_config(a: ConfigServiceArgs) -> ServiceConfig {
    ServiceConfig {
        listen: a.listen,
        concurrency: a.concurrency,
        service_time: a.service_time,
        cold_factor: a.cold_factor,
        overload_factor: a.overload_factor,
        warm_after_requests: a.warm_after,
        warm_duration: a.warm_duration,
        client_timeout: a.client_timeout,
        startup_delay: a.startup_delay,
        honour_deadline: a.honour_deadline,
        slow_factor: a.slow_factor,
        slow_after: a.slow_after,
        admin_token_file: a.admin_token_file,
    }
}

fn workers_config(a: WorkersArgs) -> WorkersConfig {
    WorkersConfig {
        target: a.target,
        count: a.count,
        interval: a.interval,
        timeout: a.timeout,
        retry: a.retry,
        max_attempts: a.max_attempts,
        retry_budget: a.retry_budget,
        metrics_listen: a.metrics_listen,
        duration: a.duration,
        attempt_header: a.attempt_header,
        idempotency_key: a.idempotency_key,
    }
}

pub fn run(cmd: DemoCommand) -> CliResult {
    let cmd = match cmd {
        DemoCommand::Up(a) => return super::demo_system::up(a),
        DemoCommand::Trigger(a) => return super::demo_system::trigger(a),
        DemoCommand::Down(a) => return super::demo_system::down(a),
        other => other,
    };
    let rt = super::runtime()?;
    let shutdown = CancellationToken::new();
    rt.spawn(stop_on_signal(shutdown.clone()));
    match cmd {
        DemoCommand::ConfigService(a) => {
            let cfg = service_config(a);
            rt.block_on(config_service::serve(cfg, shutdown))
                .map_err(|e| match e {
                    config_service::ServiceError::Invalid(_) => Failure::usage(e),
                    other => Failure::new(Exit::Failed, other),
                })?;
        }
        DemoCommand::Workers(a) => {
            let cfg = workers_config(a);
            rt.block_on(workers::run(cfg, shutdown))
                .map_err(|e| match e {
                    workers::WorkersError::Invalid(_) => Failure::usage(e),
                    other => Failure::new(Exit::Failed, other),
                })?;
        }
        DemoCommand::Up(_) | DemoCommand::Trigger(_) | DemoCommand::Down(_) => {}
    }
    // Do not wait for tasks still parked on sockets.
    rt.shutdown_timeout(Duration::from_millis(200));
    Ok(Exit::Done)
}

/// Cancel `shutdown` on SIGINT or SIGTERM.
async fn stop_on_signal(shutdown: CancellationToken) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return;
    };
    tokio::select! {
        _ = int.recv() => {}
        _ = term.recv() => {}
    }
    tracing::info!("signal received, stopping");
    shutdown.cancel();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    fn parse(args: &[&str]) -> DemoCommand {
        match Cli::try_parse_from(args).expect("parses").command {
            Some(Command::Demo(c)) => c,
            other => panic!("not a demo command: {other:?}"),
        }
    }

    /// The flag defaults are the numbers of `recover::demo::defaults`, which the docs
    /// (docs/design/arithmetic.md) and the rehearsal reason with.
    #[test]
    fn flag_defaults_are_the_library_defaults() {
        let DemoCommand::ConfigService(a) = parse(&[
            "recover",
            "demo",
            "config-service",
            "--listen",
            "127.0.0.1:1",
        ]) else {
            panic!("config-service")
        };
        let want = ServiceConfig {
            listen: "127.0.0.1:1".parse().unwrap(),
            ..ServiceConfig::default()
        };
        assert_eq!(service_config(a), want);
        let DemoCommand::Workers(a) = parse(&[
            "recover",
            "demo",
            "workers",
            "--target",
            "http://127.0.0.1:1",
        ]) else {
            panic!("workers")
        };
        assert_eq!(workers_config(a), WorkersConfig::new("http://127.0.0.1:1"));
    }
}
