//! `recover detect`: read the signals, judge them, exit 0 healthy, 10 stuck, 11 triggered,
//! 12 unknown, 13 slow replica, so hooks can branch on the exit code.

mod history;
mod show;

use super::{runtime, CliResult, Failure, Output};
use history::{from_prometheus, report};
use recover::detect::windows::{self, Fields, Windows};
use recover::detect::{default_signals, observe, DetectorConfig, Verdict};
use recover::metrics::promql::interval::ScrapeInterval;
use recover::metrics::promql::roles;
use recover::metrics::scrape::{parse_target, ScrapeSource};
use recover::metrics::signal::{SignalSpec, Snapshot};
use recover::metrics::source::MetricError;
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

/// What a detection reads: the signals, the settings, the roles, and how to name the
/// settings in messages.
pub struct Setup {
    pub signals: BTreeMap<String, SignalSpec>,
    pub config: DetectorConfig,
    pub roles: BTreeMap<String, String>,
    pub fields: Fields,
}

/// The signals and detection settings: the runbook's, or the built-in demo set; `roles`
/// (from --role) replace the declared ones.
pub fn signals_and_config(
    runbook: Option<&str>,
    dirs: &[std::path::PathBuf],
    roles: &BTreeMap<String, String>,
) -> Result<Setup, Failure> {
    match runbook {
        Some(name) => {
            let loaded = recover::runbook::find_with_roles(name, dirs, roles)
                .map_err(|e| Failure::usage(anyhow::anyhow!(e)))?;
            Ok(Setup {
                signals: loaded.runbook.signals,
                config: loaded.runbook.detect,
                roles: loaded.runbook.roles,
                fields: Fields::runbook(),
            })
        }
        None => {
            let mut all = roles::default_roles();
            all.extend(roles.clone());
            let signals = default_signals::demo_signals_with_roles(&all)
                .map_err(|e| Failure::usage(anyhow::anyhow!("--role: {e}")))?;
            Ok(Setup {
                signals,
                config: default_signals::detector_config(),
                roles: all,
                fields: Fields {
                    grace: "the built-in grace".into(),
                    grace_scrapes: "a runbook's spec.detect.grace_scrapes".into(),
                    persist: "the built-in persist".into(),
                    persist_scrapes: "a runbook's spec.detect.persist_scrapes".into(),
                },
            })
        }
    }
}

/// Apply the flags; a flag replaces the runbook's time and its scrape count alike.
fn config(args: &Tuning, setup: &mut Setup) -> Result<(), Failure> {
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
    let overrides: BTreeMap<String, String> = args.prom.roles.iter().cloned().collect();
    let mut setup = signals_and_config(args.runbook.as_deref(), &args.runbook_dir, &overrides)?;
    config(tuning, &mut setup)?;
    let rt = runtime()?;
    let judged = match &args.prometheus {
        Some(url) => rt.block_on(from_prometheus(args, url, &setup)),
        None => rt.block_on(from_scrapes(args, &setup)),
    };
    match judged {
        Ok((v, w)) => Ok((v, Some(w))),
        Err(Judge::Usage(e)) => Err(Failure::usage(e)),
        Err(Judge::Metrics(
            e @ (MetricError::BadExpression { .. }
            | MetricError::NoExpression { .. }
            | MetricError::RoleMissing { .. }
            | MetricError::NoScrapeInterval { .. }),
        )) => Err(Failure::usage(anyhow::anyhow!(e))),
        // The source as a whole is unusable: no data, so no verdict (never a guess).
        Err(Judge::Metrics(e)) => Ok((unknown(format!("no data: {e}")), None)),
    }
}

/// Why a detection gave no verdict.
enum Judge {
    /// A setting that cannot work (a window the data cannot measure).
    Usage(anyhow::Error),
    Metrics(MetricError),
}

impl From<MetricError> for Judge {
    fn from(e: MetricError) -> Self {
        Judge::Metrics(e)
    }
}

impl From<windows::WindowError> for Judge {
    fn from(e: windows::WindowError) -> Self {
        Judge::Usage(anyhow::anyhow!(e))
    }
}

/// Observe the targets directly, one scrape per snapshot.
async fn from_scrapes(args: &Watch, setup: &Setup) -> Result<(Verdict, Windows), Judge> {
    let scrape = ScrapeInterval {
        value: args.interval,
        from: "--interval: each snapshot is one scrape of every target".into(),
    };
    let (cfg, grace, persist) = windows::at_resolution(&setup.config, scrape.value, &setup.fields)?;
    let rate_window = scrape_rate_window(&setup.signals);
    let span = args
        .observe
        .unwrap_or_else(|| observe::span_needed(&cfg, rate_window, args.interval));
    let src = ScrapeSource::from_urls(args.metrics_urls.clone(), args.timeout)?;
    tracing::info!(
        "observing for {} every {}",
        recover::util::duration::format(span),
        recover::util::duration::format(args.interval)
    );
    let w: Vec<Snapshot> = observe::observe(&src, &setup.signals, span, args.interval, |s| {
        let missing = s.readings.values().filter(|r| r.value().is_none()).count();
        tracing::debug!(
            "snapshot: {} signals, {missing} without a value",
            s.readings.len()
        );
    })
    .await?;
    let now = SystemTime::now();
    let windows = report(
        &scrape,
        rate_window,
        "the longest range written in the signals' scrape expressions".into(),
        args.interval,
        grace,
        persist,
        span,
        now,
    );
    Ok((
        observe::judge(&src, &setup.signals, &cfg, &w, now).await,
        windows,
    ))
}

/// The longest rate window the scrape expressions use (the first rates need that much
/// history).
fn scrape_rate_window(signals: &BTreeMap<String, SignalSpec>) -> Duration {
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

fn unknown(summary: String) -> Verdict {
    Verdict {
        summary,
        ..Verdict::default()
    }
}
