//! `recover detect --prometheus`: judge a window of Prometheus history (ending now or at
//! `--at`), with the windows following the data's scrape interval.

use super::{Judge, Setup, Watch};
use recover::detect::windows::{self, Windows};
use recover::detect::{observe, Verdict};
use recover::metrics::promql::interval::ScrapeInterval;
use recover::metrics::promql::PromqlSource;
use recover::metrics::source::MetricError;
use std::time::{Duration, SystemTime};

fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

/// Judge a window of Prometheus history ending now or at `--at`.
pub(super) async fn from_prometheus(
    args: &Watch,
    url: &str,
    setup: &Setup,
) -> Result<(Verdict, Windows), Judge> {
    let mut src = PromqlSource::new(url, args.timeout)
        .map_err(|e| MetricError::Fetch {
            target: url.to_string(),
            message: e.to_string(),
        })?
        .with_roles(setup.roles.clone());
    if let Some(s) = args.prom.scrape_interval {
        if s.is_zero() {
            return Err(Judge::Usage(anyhow::anyhow!(
                "--scrape-interval must be above zero"
            )));
        }
        src = src.with_scrape_interval(s, "--scrape-interval");
    }
    src.check_roles(args.prom.at).await?;
    let scrape = src.scrape_interval(args.prom.at).await?;
    let end = args.prom.at.unwrap_or_else(SystemTime::now);
    let at = windows::at_scrape(
        &setup.config,
        &setup.fields,
        &setup.signals,
        scrape.value,
        args.interval,
        args.observe,
    )?;
    let (cfg, step, span) = (at.config, at.step, at.span);
    let w = src.window(&setup.signals, end, span, step).await?;
    let windows = report(
        &scrape,
        at.rate_window,
        at.rate_window_from,
        step,
        at.grace,
        at.persist,
        span,
        end,
    );
    Ok((
        observe::judge(&src, &setup.signals, &cfg, &w, end).await,
        windows,
    ))
}

#[allow(clippy::too_many_arguments)]
pub(super) fn report(
    scrape: &ScrapeInterval,
    rate_window: Duration,
    rate_window_from: String,
    step: Duration,
    grace: windows::Stretched,
    persist: windows::Stretched,
    span: Duration,
    at: SystemTime,
) -> Windows {
    Windows {
        scrape_interval_s: scrape.value.as_secs_f64(),
        scrape_interval_from: scrape.from.clone(),
        rate_window_s: rate_window.as_secs_f64(),
        rate_window_from,
        step_s: step.as_secs_f64(),
        grace,
        persist,
        span_s: span.as_secs_f64(),
        at: rfc3339(at),
    }
}
