//! `recover detect`: read the signals, judge them, exit 0 healthy, 10 stuck, 11 triggered,
//! 12 unknown, so hooks can branch on the exit code.

use super::Output;
use super::{runtime, CliResult, Failure};
use recover::detect::{default_signals, detect_at, observe, DetectorConfig, Verdict};
use recover::exit::Exit;
use recover::metrics::promql::PromqlSource;
use recover::metrics::scrape::{parse_target, ScrapeSource};
use recover::metrics::signal::{SignalSpec, Snapshot};
use recover::metrics::source::MetricError;
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

#[derive(Debug, clap::Args)]
pub struct DetectArgs {
    #[command(flatten)]
    pub watch: Watch,
    #[command(flatten)]
    pub tuning: Tuning,
    /// The verdict with its evidence in words, or as JSON.
    #[arg(long, value_enum, default_value_t = Output::Text)]
    pub output: Output,
}

/// Which signals to read, where from, and for how long (`recover plan` measures the same
/// way).
#[derive(Debug, Clone, clap::Args)]
pub struct Watch {
    /// Runbook whose signals and `spec.detect` to use (name or path). Without it, the
    /// built-in signal set for the demo system and default detection settings.
    #[arg(long, value_name = "NAME")]
    pub runbook: Option<String>,
    /// Extra directory to look for runbooks in (before ./runbooks and the built-in ones).
    #[arg(long, value_name = "DIR")]
    pub runbook_dir: Vec<std::path::PathBuf>,
    /// Scrape a `/metrics` endpoint directly: ROLE=URL (roles of the built-in signals:
    /// gate, service, clients). Repeat for each target.
    #[arg(long = "metrics-url", value_name = "ROLE=URL", value_parser = parse_target, conflicts_with = "prometheus")]
    pub metrics_urls: Vec<recover::platform::ScrapeEndpoint>,
    /// Query a Prometheus server instead (its history gives the window at once).
    #[arg(long, value_name = "URL")]
    pub prometheus: Option<String>,
    /// How long a window to judge. Default: long enough to say "stuck"
    /// (max(grace, persist) + the rate window + one interval).
    #[arg(long, value_parser = recover::util::duration::parse)]
    pub observe: Option<Duration>,
    /// Time between snapshots.
    #[arg(long, value_parser = recover::util::duration::parse, default_value = "1s")]
    pub interval: Duration,
    /// Per-request timeout for scrapes and queries.
    #[arg(long, value_parser = recover::util::duration::parse, default_value = "2s")]
    pub timeout: Duration,
}

/// Detection settings given on the command line; each wins over the runbook's.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Tuning {
    /// Trigger gone at least this long before "stuck".
    #[arg(long, value_parser = recover::util::duration::parse)]
    pub grace: Option<Duration>,
    /// Failure lasting at least this long before "stuck".
    #[arg(long, value_parser = recover::util::duration::parse)]
    pub persist: Option<Duration>,
    /// Known healthy capacity, requests/s.
    #[arg(long, value_name = "REQ_PER_S")]
    pub capacity: Option<f64>,
    /// Cold capacity = capacity / this.
    #[arg(long)]
    pub cold_factor: Option<f64>,
    /// Known work amplification (skips the estimate).
    #[arg(long)]
    pub k: Option<f64>,
    /// Failing when p99 latency is above this (e.g. the clients' timeout).
    #[arg(long, value_parser = recover::util::duration::parse)]
    pub latency_limit: Option<Duration>,
}

/// The signals and detection settings: the runbook's, or the built-in demo set.
pub fn signals_and_config(
    runbook: Option<&str>,
    dirs: &[std::path::PathBuf],
) -> Result<(BTreeMap<String, SignalSpec>, DetectorConfig), Failure> {
    match runbook {
        Some(name) => {
            let loaded = recover::runbook::find(name, dirs)
                .map_err(|e| Failure::usage(anyhow::anyhow!(e)))?;
            Ok((loaded.runbook.signals, loaded.runbook.detect))
        }
        None => Ok((default_signals::demo_signals(), DetectorConfig::default())),
    }
}

fn config(args: &Tuning, base: DetectorConfig) -> Result<DetectorConfig, Failure> {
    let mut cfg = base;
    if let Some(g) = args.grace {
        cfg.grace = g;
    }
    if let Some(p) = args.persist {
        cfg.persist = p;
    }
    for (flag, v) in [
        ("--capacity", args.capacity),
        ("--cold-factor", args.cold_factor),
        ("--k", args.k),
    ] {
        if let Some(x) = v {
            if !(x.is_finite() && x > 0.0) {
                return Err(Failure::usage(anyhow::anyhow!(
                    "{flag} must be a number above zero, got {x}"
                )));
            }
        }
    }
    cfg.capacity_per_s = args.capacity.or(cfg.capacity_per_s);
    cfg.cold_factor = args.cold_factor.or(cfg.cold_factor);
    cfg.k = args.k.or(cfg.k);
    cfg.latency_limit = args.latency_limit.or(cfg.latency_limit);
    Ok(cfg)
}

pub fn run(args: DetectArgs) -> CliResult {
    let verdict = judge(&args.watch, &args.tuning)?;
    print_verdict(&verdict, args.output)?;
    Ok(verdict.verdict.exit())
}

/// Read the window and judge it (shared with `recover plan` when it measures).
pub fn judge(args: &Watch, tuning: &Tuning) -> Result<Verdict, Failure> {
    if args.metrics_urls.is_empty() && args.prometheus.is_none() {
        return Err(Failure::usage(anyhow::anyhow!(
            "say where the metrics are: --metrics-url ROLE=URL (repeatable) or --prometheus URL"
        )));
    }
    if args.interval.is_zero() {
        return Err(Failure::usage(anyhow::anyhow!(
            "--interval must be above zero"
        )));
    }
    let (signals, base) = signals_and_config(args.runbook.as_deref(), &args.runbook_dir)?;
    let cfg = config(tuning, base)?;
    let span = args
        .observe
        .unwrap_or_else(|| observe::span_needed(&cfg, rate_window(&signals), args.interval));
    let rt = runtime()?;
    let window = rt.block_on(collect(args, &signals, span));
    Ok(match window {
        Ok(w) => detect_at(&w, &cfg, SystemTime::now()),
        Err(e @ (MetricError::BadExpression { .. } | MetricError::NoExpression { .. })) => {
            return Err(Failure::usage(anyhow::anyhow!(e)))
        }
        // The source as a whole is unusable: no data, so no verdict (never a guess).
        Err(e) => unknown(format!("no data: {e}")),
    })
}

/// The longest rate window the signals use (the first rates need that much history).
fn rate_window(signals: &BTreeMap<String, SignalSpec>) -> Duration {
    let fallback = recover::util::duration::parse(default_signals::RATE_WINDOW)
        .unwrap_or(Duration::from_secs(5));
    signals
        .values()
        .filter_map(|s| s.scrape.as_deref())
        .filter_map(|src| recover::metrics::scrape::expr::parse(src).ok())
        .map(|e| e.max_window())
        .max()
        .filter(|w| !w.is_zero())
        .unwrap_or(fallback)
}

async fn collect(
    args: &Watch,
    signals: &BTreeMap<String, SignalSpec>,
    span: Duration,
) -> Result<Vec<Snapshot>, MetricError> {
    if let Some(url) = &args.prometheus {
        let src = PromqlSource::new(url, args.timeout).map_err(|e| MetricError::Fetch {
            target: url.clone(),
            message: e.to_string(),
        })?;
        return src
            .window(signals, SystemTime::now(), span, args.interval)
            .await;
    }
    let src = ScrapeSource::from_urls(args.metrics_urls.clone(), args.timeout)?;
    tracing::info!(
        "observing for {} every {}",
        recover::util::duration::format(span),
        recover::util::duration::format(args.interval)
    );
    observe::observe(&src, signals, span, args.interval, |s| {
        let missing = s.readings.values().filter(|r| r.value().is_none()).count();
        tracing::debug!(
            "snapshot: {} signals, {missing} without a value",
            s.readings.len()
        );
    })
    .await
}

fn unknown(summary: String) -> Verdict {
    Verdict {
        summary,
        ..Verdict::default()
    }
}

pub fn print_verdict(v: &Verdict, output: Output) -> Result<(), Failure> {
    match output {
        Output::Json => {
            let text =
                serde_json::to_string_pretty(v).map_err(|e| Failure::new(Exit::Failed, e))?;
            println!("{text}");
        }
        Output::Text => {
            println!("{}: {}", v.verdict.as_str(), v.summary);
            let num = |x: Option<f64>| x.map_or("unknown".to_string(), |x| format!("{x:.2}"));
            println!(
                "arrival {} req/s, capacity {} req/s, capacity_cold {} req/s, k {}",
                num(v.arrival_rate),
                num(v.capacity),
                num(v.capacity_cold),
                num(v.k)
            );
            for e in &v.evidence {
                let val = e.value.map(|x| format!(" = {x:.3}")).unwrap_or_default();
                let since = e
                    .for_s
                    .map(|s| format!(" (for {s:.1}s)"))
                    .unwrap_or_default();
                println!("  {}{val}: {}{since}", e.signal, e.note);
            }
        }
    }
    Ok(())
}
