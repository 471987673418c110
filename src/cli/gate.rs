//! `recover gate`: flags onto [`recover::gate::GateConfig`], then serve until SIGINT or
//! SIGTERM. The state file wins over the limit flags when it exists (see
//! `recover::gate::state`).

use super::{CliResult, Failure};
use anyhow::{anyhow, Context};
use recover::exit::Exit;
use recover::gate::balance::outlier::{LatencyStat, OutlierConfig};
use recover::gate::balance::policy::BalancePolicy;
use recover::gate::balance::BalanceConfig;
use recover::gate::limit::{default_burst, Limit};
use recover::gate::{self, GateConfig};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct GateArgs {
    #[command(subcommand)]
    pub command: Option<GateCommand>,
    /// Proxy listener; every path on it is forwarded to an upstream.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Upstream replica (http://host:port); repeat for several (see --balance).
    #[arg(long = "upstream", required = true, value_name = "URL")]
    pub upstreams: Vec<String>,
    /// How requests are spread over the upstreams: least-outstanding, p2c (power of two
    /// choices) or round-robin.
    #[arg(long, default_value = "least-outstanding", value_parser = parse_balance)]
    pub balance: BalancePolicy,
    #[command(flatten)]
    pub outlier: OutlierArgs,
    /// Admitted requests per second (GCRA); 0 blocks everything; absent: unlimited.
    #[arg(long, value_parser = parse_rate, allow_negative_numbers = true)]
    pub rate: Option<f64>,
    /// Requests admitted back to back above the rate [default: half a second of the rate, at least 1].
    #[arg(long, requires = "rate", value_parser = clap::value_parser!(u32).range(1..))]
    pub burst: Option<u32>,
    /// Requests admitted and not yet answered; 0 blocks everything; absent: unlimited.
    #[arg(long)]
    pub max_in_flight: Option<u32>,
    /// Start with --rate / --max-in-flight in shadow: every request decided by them and
    /// counted (recover_gate_shadow_refusals_total), none refused.
    #[arg(long)]
    pub shadow: bool,
    /// How long to wait for an upstream's response (then 504); sent on as x-deadline-ms.
    #[arg(long, default_value = "2s", value_parser = parse_timeout)]
    pub upstream_timeout: Duration,
    /// How long a client connection may stay idle (or send a request head) before the
    /// gate closes it.
    #[arg(long, default_value = "60s", value_parser = parse_timeout)]
    pub client_idle_timeout: Duration,
    /// Admin listener: /metrics and /healthz (open), /admin/limit (bearer token).
    #[arg(long, default_value = "127.0.0.1:8081")]
    pub admin_listen: SocketAddr,
    /// File holding the admin API's bearer token; without it the admin API answers 401.
    #[arg(long, value_name = "PATH")]
    pub admin_token_file: Option<PathBuf>,
    /// Where the last limit is kept (atomically); restored at start, winning over --rate,
    /// --burst and --max-in-flight.
    #[arg(long, value_name = "PATH")]
    pub state_file: Option<PathBuf>,
    /// Also follow a Kubernetes ConfigMap (`NS/NAME`, key `limit.json`) for the limit;
    /// the applied resourceVersion shows in `recover_gate_limit_applied_info`.
    #[arg(long, value_name = "NS/NAME")]
    pub limit_configmap: Option<String>,
    /// The limit is a total shared with the other replicas of this gate: follow the ready
    /// endpoints of this Kubernetes Service (`NS/NAME` or `NAME`) and enforce this
    /// replica's share (rate, burst and in-flight cap divided by the ready replicas).
    #[arg(long, value_name = "NS/NAME")]
    pub peers_service: Option<String>,
    /// This replica's pod name, as the Service's endpoints name it.
    #[arg(long, value_name = "NAME", env = "POD_NAME")]
    pub peer_name: Option<String>,
    /// Refuse PUT /admin/limit (403): the limit comes only from --limit-configmap or the
    /// flags. GET /admin/limit, /metrics and /healthz still answer.
    #[arg(long)]
    pub admin_read_only: bool,
    /// Proxy worker threads (default: one per CPU the gate may use; with exactly one per
    /// usable CPU each is bound to its own).
    #[arg(long, value_name = "N")]
    pub workers: Option<std::num::NonZeroUsize>,
    #[command(flatten)]
    pub connections: ConnectionArgs,
}

/// What `recover gate` does besides running a gate.
#[derive(Debug, clap::Subcommand)]
pub enum GateCommand {
    /// Read, set or lift a running gate's limit.
    #[command(subcommand)]
    Limit(super::gate_limit::LimitCommand),
}

/// What one client connection may hold (slow or many clients must not lock out the rest).
#[derive(Debug, clap::Args)]
pub struct ConnectionArgs {
    /// A new connection must send its first byte this soon, or it is closed (it held a
    /// connection slot for the whole idle timeout otherwise).
    #[arg(long, default_value = "5s", value_parser = parse_timeout)]
    pub first_byte_timeout: Duration,
    /// Total time a request head may take from its first byte (then 408 and close); a
    /// client sending a byte now and then does not extend it.
    #[arg(long, default_value = "10s", value_parser = parse_timeout)]
    pub request_head_timeout: Duration,
    /// Open client connections in all; past it a connection waiting with no request begun
    /// is closed to make room (from the address holding the most), else the new one gets
    /// 503 and is closed at once. Lowered to what the open file limit allows.
    #[arg(long, default_value_t = recover::gate::limits::DEFAULT_MAX_CONNECTIONS, value_parser = at_least_one)]
    pub max_connections: usize,
    /// Open client connections from one address; past it one of that address's waiting
    /// connections makes room, else 503. A load balancer in front is one address: set this
    /// to --max-connections there.
    #[arg(long, default_value_t = recover::gate::limits::DEFAULT_MAX_CONNECTIONS_PER_ADDRESS, value_parser = at_least_one)]
    pub max_connections_per_address: usize,
}

impl ConnectionArgs {
    fn limits(&self) -> recover::gate::limits::ClientLimits {
        recover::gate::limits::ClientLimits {
            first_byte_timeout: self.first_byte_timeout,
            request_head_timeout: self.request_head_timeout,
            max_connections: self.max_connections,
            max_connections_per_address: self.max_connections_per_address,
        }
    }
}

fn at_least_one(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("must be a whole number of at least 1, got {s}")),
    }
}

/// Latency outlier ejection; defaults are `OutlierConfig::default()`.
#[derive(Debug, clap::Args)]
pub struct OutlierArgs {
    /// Turn latency outlier ejection off.
    #[arg(long)]
    pub no_outlier_ejection: bool,
    /// The latency compared with the peers': mean or p99 over the window.
    #[arg(long, default_value = "mean", value_parser = parse_stat)]
    pub outlier_stat: LatencyStat,
    /// Eject a replica whose latency exceeds this multiple of its peers' median.
    #[arg(long, default_value_t = 3.0)]
    pub outlier_factor: f64,
    /// Window length, and how often replicas are judged.
    #[arg(long, default_value = "2s", value_parser = parse_timeout)]
    pub outlier_interval: Duration,
    /// Requests in the window a replica needs to be judged (or to count as a peer).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    pub outlier_min_requests: u64,
    /// First ejection time; the n-th ejection in a row lasts n times this.
    #[arg(long, default_value = "10s", value_parser = parse_timeout)]
    pub outlier_base_ejection: Duration,
    /// Longest ejection.
    #[arg(long, default_value = "300s", value_parser = parse_timeout)]
    pub outlier_max_ejection: Duration,
    /// Share of the replicas that may be ejected at once (at least one, never all).
    #[arg(long, default_value_t = 25, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub outlier_max_ejected_percent: u32,
    /// Time for a readmitted replica's share to ramp from 10% back to 100%.
    #[arg(long, default_value = "10s", value_parser = recover::util::duration::parse)]
    pub outlier_ramp: Duration,
}

impl OutlierArgs {
    fn config(&self) -> Result<Option<OutlierConfig>, Failure> {
        if self.no_outlier_ejection {
            return Ok(None);
        }
        let cfg = OutlierConfig {
            stat: self.outlier_stat,
            interval: self.outlier_interval,
            factor: self.outlier_factor,
            min_requests: self.outlier_min_requests,
            base_ejection: self.outlier_base_ejection,
            max_ejection: self.outlier_max_ejection,
            max_ejected_percent: self.outlier_max_ejected_percent,
            ramp: self.outlier_ramp,
        };
        cfg.check().map_err(|(field, why)| {
            Failure::usage(anyhow!("--outlier-{}: {why}", field.replace('_', "-")))
        })?;
        Ok(Some(cfg))
    }
}

fn parse_balance(s: &str) -> Result<BalancePolicy, String> {
    s.parse()
}

fn parse_stat(s: &str) -> Result<LatencyStat, String> {
    s.parse()
}

fn parse_rate(s: &str) -> Result<f64, String> {
    let r: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number"))?;
    if !r.is_finite() || r < 0.0 {
        return Err(format!("must be a number >= 0, got {s}"));
    }
    if r > recover::gate::validate::MAX_RATE_PER_S {
        return Err(format!(
            "must be at most 1e9 (leave --rate out for unlimited), got {s}"
        ));
    }
    Ok(r)
}

fn parse_timeout(s: &str) -> Result<Duration, String> {
    let d = recover::util::duration::parse(s)?;
    if d.is_zero() {
        return Err("must be more than 0".to_string());
    }
    Ok(d)
}

/// The shortest admin token the gate accepts.
const MIN_TOKEN_BYTES: usize = 12;

fn read_token(path: &Path) -> Result<String, Failure> {
    let text = std::fs::read_to_string(path)
        .with_context(|| {
            format!(
                "--admin-token-file {}: cannot read; {}",
                path.display(),
                recover::util::secret::HOW_TO_CREATE
            )
        })
        .map_err(Failure::usage)?;
    let token = text.trim().to_string();
    recover::util::secret::check(&token, MIN_TOKEN_BYTES)
        .map_err(|e| Failure::usage(anyhow!("--admin-token-file {}: {e}", path.display())))?;
    Ok(token)
}

pub fn config(args: GateArgs) -> Result<GateConfig, Failure> {
    if let Some(spec) = &args.limit_configmap {
        recover::platform::kube::limit_source::parse_spec("--limit-configmap", spec)
            .map_err(Failure::usage)?;
    }
    let admin_token = args
        .admin_token_file
        .as_deref()
        .map(read_token)
        .transpose()?;
    let limit = Limit {
        rate_per_s: args.rate,
        burst: args
            .burst
            .unwrap_or_else(|| args.rate.map_or(1, default_burst)),
        max_in_flight: args.max_in_flight,
        note: None,
        shadow: args.shadow,
    };
    recover::gate::validate::check(&limit).map_err(|e| {
        let flag = match e.field.as_str() {
            "shadow" => "--shadow",
            "burst" => "--burst",
            "max_in_flight" => "--max-in-flight",
            _ => "--rate",
        };
        Failure::usage(anyhow!("{flag}: {}", e.message))
    })?;
    let balance = BalanceConfig {
        policy: args.balance,
        outlier: args.outlier.config()?,
    };
    Ok(GateConfig {
        listen: args.listen,
        admin_listen: args.admin_listen,
        upstreams: args.upstreams,
        limit,
        balance,
        upstream_timeout: args.upstream_timeout,
        client_idle_timeout: args.client_idle_timeout,
        client_limits: args.connections.limits(),
        admin_token,
        admin_writes: !args.admin_read_only,
        state_file: args.state_file,
        workers: args.workers,
    })
}

/// The Kubernetes sources a gate follows, from its flags.
struct KubeSources {
    configmap: Option<String>,
    peers: Option<(String, String)>,
}

fn kube_sources(args: &GateArgs) -> Result<KubeSources, Failure> {
    let peers = match &args.peers_service {
        None => None,
        Some(svc) => {
            let me = args
                .peer_name
                .clone()
                .or_else(|| std::env::var("HOSTNAME").ok())
                .filter(|n| !n.is_empty())
                .ok_or_else(|| {
                    Failure::usage(anyhow!(
                        "--peers-service needs this replica's pod name: --peer-name, POD_NAME or HOSTNAME"
                    ))
                })?;
            recover::platform::kube::limit_source::parse_spec("--peers-service", svc)
                .map_err(Failure::usage)?;
            Some((svc.clone(), me))
        }
    };
    Ok(KubeSources {
        configmap: args.limit_configmap.clone(),
        peers,
    })
}

pub fn run(args: GateArgs) -> CliResult {
    if let Some(GateCommand::Limit(cmd)) = args.command {
        return super::gate_limit::run(cmd);
    }
    let kube = kube_sources(&args)?;
    let cfg = config(args)?;
    let rt = super::runtime()?;
    rt.block_on(async move {
        let shutdown = CancellationToken::new();
        let bound = gate::BoundGate::bind(cfg).await.map_err(failure)?;
        let stop = shutdown.clone();
        tokio::spawn(async move {
            wait_for_signal().await;
            tracing::info!("signal received, stopping the gate");
            stop.cancel();
        });
        let mut sources: Vec<Box<dyn recover::gate::limit_source::LimitSource>> = Vec::new();
        let mut bound = bound;
        if kube.configmap.is_some() || kube.peers.is_some() {
            use recover::platform::kube::{limit_source, peers::EndpointSlicePeers};
            let client = limit_source::gate_client()
                .await
                .map_err(|e| Failure::new(Exit::Refused, e))?;
            if let Some(spec) = &kube.configmap {
                let source =
                    recover::platform::kube::ConfigMapLimitSource::from_spec(client.clone(), spec)
                        .map_err(Failure::usage)?;
                sources.push(Box::new(source));
            }
            if let Some((svc, me)) = &kube.peers {
                let (ns, name) =
                    limit_source::parse_spec("--peers-service", svc).map_err(Failure::usage)?;
                let ns = ns.unwrap_or_else(|| client.default_namespace().to_string());
                bound = bound
                    .with_peer_source(Box::new(EndpointSlicePeers::new(client, &ns, &name, me)));
            }
        }
        bound.run(sources, shutdown).await.map_err(failure)?;
        Ok(Exit::Done)
    })
}

fn failure(e: gate::GateError) -> Failure {
    if e.is_bad_input() {
        Failure::usage(e)
    } else {
        Failure::new(Exit::Failed, e)
    }
}

async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_ranges() {
        assert!(parse_rate("-1").unwrap_err().contains(">= 0"));
        assert!(parse_rate("fast").is_err());
        assert_eq!(parse_rate("0").unwrap(), 0.0);
        assert!(parse_timeout("0s").is_err());
        assert_eq!(default_burst(100.0), 50);
        assert_eq!(default_burst(0.5), 1);
    }

    fn parse(args: &[&str]) -> Result<GateConfig, String> {
        use crate::cli::{Cli, Command};
        use clap::Parser;
        let mut argv = vec!["recover", "gate", "--upstream", "http://127.0.0.1:1"];
        argv.extend_from_slice(args);
        let cli = Cli::try_parse_from(argv).map_err(|e| e.to_string())?;
        match cli.command {
            Some(Command::Gate(a)) => config(*a).map_err(|f| format!("{:#}", f.error)),
            other => panic!("not the gate command: {other:?}"),
        }
    }

    #[test]
    fn balancing_flags_default_to_the_library_defaults() {
        assert_eq!(parse(&[]).unwrap().balance, BalanceConfig::default());
        let c = parse(&["--balance", "p2c", "--no-outlier-ejection"]).unwrap();
        assert_eq!(c.balance.policy, BalancePolicy::P2c);
        assert_eq!(c.balance.outlier, None);
        let c = parse(&["--outlier-stat", "p99", "--outlier-factor", "2.5"]).unwrap();
        let o = c.balance.outlier.unwrap();
        assert_eq!((o.stat, o.factor), (LatencyStat::P99, 2.5));
        assert!(parse(&["--balance", "random"]).unwrap_err().contains("p2c"));
        let e = parse(&["--outlier-factor", "1"]).unwrap_err();
        assert!(e.contains("--outlier-factor"), "{e}");
    }
}
