//! `recover detect`: read the signals, judge them, exit 0 healthy, 10 stuck, 11 triggered,
//! 12 unknown, 13 slow replica, so hooks can branch on the exit code.

mod show;

use super::{runtime, CliResult, Failure, Output};
use recover::detect::windows::Windows;
use recover::detect::{self, Verdict, WatchError, Watched};
use recover::metrics::promql::{roles, PromqlSource};
use recover::metrics::scrape::{parse_target, ScrapeSource};
use recover::metrics::source::MetricError;
use recover::runbook::{Detection, DetectionError};
use recover::util::duration::format as fmt;
pub use show::print_verdict;
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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
    /// Time between snapshots (with --prometheus: at least the scrape interval).
    #[arg(long, value_parser = recover::util::duration::parse, default_value = "1s")]
    pub interval: Duration,
    /// Per-request timeout for scrapes and queries.
    #[arg(long, value_parser = recover::util::duration::parse, default_value = "2s")]
    pub timeout: Duration,
    #[command(flatten)]
    pub prom: PromArgs,
}

/// Detection settings given on the command line; each wins over the runbook's.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Tuning {
    /// Trigger gone at least this long before "stuck" (replaces spec.detect.grace and
    /// grace_scrapes).
    #[arg(long, value_parser = recover::util::duration::parse)]
    pub grace: Option<Duration>,
    /// Failure lasting at least this long before "stuck" (replaces spec.detect.persist
    /// and persist_scrapes).
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
    /// How far back to search a Prometheus history for the last healthy period when the
    /// window has none [default: the runbook's spec.detect.lookback, 24h].
    #[arg(long, value_parser = recover::util::duration::parse)]
    pub lookback: Option<Duration>,
}

/// The flags that only mean something with `--prometheus`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct PromArgs {
    /// How often Prometheus scrapes the targets. Default: the targets' scrapeInterval
    /// (/api/v1/targets), or with --at the spacing of their `up` samples.
    #[arg(long, value_parser = recover::util::duration::parse, requires = "prometheus")]
    pub scrape_interval: Option<Duration>,
    /// Judge the window that ends at this instant (RFC 3339, or Unix seconds) instead of
    /// now: a past incident, or backfilled history.
    #[arg(long, value_name = "TIME", value_parser = parse_instant, requires = "prometheus")]
    pub at: Option<SystemTime>,
    /// The label matchers that select a role's series in Prometheus, replacing the
    /// runbook's spec.roles entry: ROLE=MATCHERS, e.g.
    /// service='job="config-service",namespace="shop"'. Repeatable.
    #[arg(long = "role", value_name = "ROLE=MATCHERS", value_parser = roles::parse_role_flag)]
    pub roles: Vec<(String, String)>,
}

/// An instant as RFC 3339 (`2025-01-31T12:00:00Z`) or Unix seconds (`1738324800`).
fn parse_instant(s: &str) -> Result<SystemTime, String> {
    if let Ok(secs) = s.trim().parse::<f64>() {
        if secs.is_finite() && secs >= 0.0 {
            return Ok(UNIX_EPOCH + Duration::from_secs_f64(secs));
        }
    }
    humantime::parse_rfc3339_weak(s.trim()).map_err(|e| {
        format!("{s:?}: {e}; write an RFC 3339 time (2025-01-31T12:00:00Z) or Unix seconds")
    })
}

/// Apply the flags; a flag replaces the runbook's time and its scrape count alike.
fn config(args: &Tuning, setup: &mut Detection) -> Result<(), Failure> {
    let cfg = &mut setup.config;
    if let Some(g) = args.grace {
        cfg.grace = g;
        cfg.grace_scrapes = None;
        setup.fields.grace = "--grace".into();
    }
    if let Some(p) = args.persist {
        cfg.persist = p;
        cfg.persist_scrapes = None;
        setup.fields.persist = "--persist".into();
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
    if let Some(l) = args.lookback {
        cfg.lookback = l;
    }
    Ok(())
}

pub fn run(args: DetectArgs) -> CliResult {
    let (verdict, windows) = judge_with_windows(&args.watch, &args.tuning)?;
    print_verdict(&verdict, windows.as_ref(), args.output)?;
    Ok(verdict.verdict.exit())
}

/// Read the window and judge it (shared with `recover plan` when it measures).
pub fn judge(args: &Watch, tuning: &Tuning) -> Result<Verdict, Failure> {
    judge_with_windows(args, tuning).map(|(v, _)| v)
}

/// [`judge`], with the windows it used (None when no data came at all).
pub fn judge_with_windows(
    args: &Watch,
    tuning: &Tuning,
) -> Result<(Verdict, Option<Windows>), Failure> {
    let usage = |m: &str| Err(Failure::usage(anyhow::anyhow!("{m}")));
    if args.metrics_urls.is_empty() && args.prometheus.is_none() {
        return usage(
            "say where the metrics are: --metrics-url ROLE=URL (repeatable) or --prometheus URL",
        );
    }
    if args.interval.is_zero() {
        return usage("--interval must be above zero");
    }
    if args.prom.scrape_interval.is_some_and(|s| s.is_zero()) {
        return usage("--scrape-interval must be above zero");
    }
    let roles: BTreeMap<String, String> = args.prom.roles.iter().cloned().collect();
    let mut setup = recover::runbook::detection(args.runbook.as_deref(), &args.runbook_dir, &roles)
        .map_err(|e| match e {
            DetectionError::Role(e) => Failure::usage(anyhow::anyhow!("--role: {e}")),
            e => Failure::usage(anyhow::anyhow!(e)),
        })?;
    setup.fields.interval = "--interval".into();
    config(tuning, &mut setup)?;
    match runtime()?.block_on(watch_source(args, &setup)) {
        Ok(w) => Ok((w.verdict, Some(w.windows))),
        Err(e) if e.is_setting() => Err(Failure::usage(anyhow::anyhow!(e))),
        // The source as a whole is unusable: no data, so no verdict (never a guess).
        Err(e) => Ok((unknown(format!("no data: {e}")), None)),
    }
}

/// The source the flags name, watched.
async fn watch_source(args: &Watch, setup: &Detection) -> Result<Watched, WatchError> {
    let watch_with = |scrape| detect::Watch {
        signals: &setup.signals,
        config: &setup.config,
        fields: &setup.fields,
        interval: args.interval,
        span: args.observe,
        at: args.prom.at,
        scrape,
        look_back: true,
    };
    let Some(url) = &args.prometheus else {
        let src = ScrapeSource::from_urls(args.metrics_urls.clone(), args.timeout)?;
        return detect::watch(&src, &watch_with(None), |s| {
            if s.n == 1 {
                tracing::info!(
                    "observing {} snapshots, one every {}",
                    s.of,
                    fmt(args.interval)
                );
            }
        })
        .await;
    };
    let mut src = PromqlSource::new(url, args.timeout)
        .map_err(|e| MetricError::Fetch {
            target: url.to_string(),
            message: e.to_string(),
        })?
        .with_roles(setup.roles.clone());
    if let Some(s) = args.prom.scrape_interval {
        src = src.with_scrape_interval(s, "--scrape-interval");
    }
    src.check_roles(args.prom.at).await?;
    let scrape = src.scrape_interval(args.prom.at).await?;
    detect::watch(&src, &watch_with(Some(scrape)), |_| {}).await
}

fn unknown(summary: String) -> Verdict {
    Verdict {
        summary,
        ..Verdict::default()
    }
}
