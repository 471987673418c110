//! Observe a source and judge what it shows: the one way `recover detect`, a run, `recover
//! serve` and the rehearsal turn a metric source into a verdict, so that they cannot read
//! the same data differently.
//!
//! In order: the windows at the data's resolution ([`super::windows`]: the source's scrape
//! interval, or each read a scrape of its own), the window of snapshots (out of the
//! source's history when it keeps one, else observed live, see [`super::observe`]), a look
//! back over the history when the window leaves inputs unknown, and the verdict, returned
//! with the windows it used and the snapshots it judged.

use super::history::Lookback;
use super::observe::{judge_looking_back, recent_window};
use super::windows::{self, Fields, Stretched, WindowError, Windows};
use super::{default_signals, detect_with, DetectorConfig, Verdict};
use crate::metrics::promql::interval::ScrapeInterval;
use crate::metrics::signal::{SignalSpec, Snapshot};
use crate::metrics::source::{MetricError, MetricSource};
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

/// What to watch and how to judge it.
#[derive(Debug, Clone)]
pub struct Watch<'a> {
    pub signals: &'a BTreeMap<String, SignalSpec>,
    pub config: &'a DetectorConfig,
    /// How messages name the settings (a runbook's fields, or the flags that replaced them).
    pub fields: &'a Fields,
    /// Time between snapshots; at least one scrape of the data.
    pub interval: Duration,
    /// How long a window; `None`: what the detector needs to say Stuck.
    pub span: Option<Duration>,
    /// The instant judged, out of the source's history; `None`: now.
    pub at: Option<SystemTime>,
    /// The data's scrape interval and where it was found, when the caller knows it better
    /// than the source's own answer (a flag; the targets around `at`).
    pub scrape: Option<ScrapeInterval>,
    /// Look back over the history for inputs the window leaves unknown (capacity, the
    /// healthy service time, the demand baseline). Off when they are given already.
    pub look_back: bool,
}

/// A verdict with what it was judged on.
#[derive(Debug, Clone)]
pub struct Watched {
    pub verdict: Verdict,
    pub windows: Windows,
    /// The detector's settings as judged: grace and persist at the data's resolution.
    pub config: DetectorConfig,
    /// The snapshots judged, oldest first.
    pub window: Vec<Snapshot>,
    /// What the look back found; `None` when it was not needed or not asked for.
    pub lookback: Option<Lookback>,
}

/// One snapshot of a live observation, for progress lines.
#[derive(Debug, Clone, Copy)]
pub struct Seen<'a> {
    pub snapshot: &'a Snapshot,
    /// This is snapshot `n` (from 1) of about `of`.
    pub n: u32,
    pub of: u32,
}

/// Why there is no verdict.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// A window the data cannot measure.
    #[error(transparent)]
    Window(#[from] WindowError),
    #[error(transparent)]
    Metrics(#[from] MetricError),
}

impl WatchError {
    /// True when a setting is at fault (a window, an expression, a role, the scrape
    /// interval), not the data: the same call fails again until someone changes it.
    pub fn is_setting(&self) -> bool {
        match self {
            WatchError::Window(_) => true,
            WatchError::Metrics(e) => matches!(
                e,
                MetricError::BadExpression { .. }
                    | MetricError::NoExpression { .. }
                    | MetricError::RoleMissing { .. }
                    | MetricError::NoScrapeInterval { .. }
            ),
        }
    }
}

/// The windows a watch reads, before it reads anything. Pure.
#[derive(Debug, Clone)]
struct Reading {
    config: DetectorConfig,
    grace: Stretched,
    persist: Stretched,
    scrape: ScrapeInterval,
    step: Duration,
    rate_window: Duration,
    rate_window_from: String,
    span: Duration,
}

/// The windows for data sampled every `scrape` (None: each read is a scrape of its own,
/// so the reads set the resolution).
fn reading(w: &Watch, scrape: Option<ScrapeInterval>) -> Result<Reading, WindowError> {
    if let Some(scrape) = scrape.filter(|s| !s.value.is_zero()) {
        let at = windows::at_scrape(
            w.config,
            w.fields,
            w.signals,
            scrape.value,
            w.interval,
            w.span,
        )?;
        return Ok(Reading {
            config: at.config,
            grace: at.grace,
            persist: at.persist,
            scrape,
            step: at.step,
            rate_window: at.rate_window,
            rate_window_from: at.rate_window_from,
            span: at.span,
        });
    }
    let (config, grace, persist) = windows::at_resolution(w.config, w.interval, w.fields)?;
    let rate_window = scrape_rate_window(w.signals);
    let span = w
        .span
        .unwrap_or_else(|| super::observe::span_needed(&config, rate_window, w.interval));
    Ok(Reading {
        config,
        grace,
        persist,
        scrape: ScrapeInterval {
            value: w.interval,
            from: format!(
                "{}: each snapshot is one scrape of every target",
                w.fields.interval
            ),
        },
        step: w.interval,
        rate_window,
        rate_window_from: "the longest range written in the signals' scrape expressions".into(),
        span,
    })
}

/// The longest rate window the signals' scrape expressions use (the first rates need that
/// much history); the built-in signals' when none is written.
pub fn scrape_rate_window(signals: &BTreeMap<String, SignalSpec>) -> Duration {
    let fallback = crate::util::duration::parse(default_signals::RATE_WINDOW)
        .unwrap_or(Duration::from_secs(5));
    signals
        .values()
        .filter_map(|s| s.scrape.as_deref())
        .filter_map(|src| crate::metrics::scrape::expr::parse(src).ok())
        .map(|e| e.max_window())
        .max()
        .filter(|w| !w.is_zero())
        .unwrap_or(fallback)
}

/// Observe `source` as `w` says and judge it. `on_snapshot` sees each snapshot of a live
/// observation as it arrives (a window out of the history comes at once).
pub async fn watch(
    source: &dyn MetricSource,
    w: &Watch<'_>,
    mut on_snapshot: impl FnMut(Seen),
) -> Result<Watched, WatchError> {
    let scrape = match &w.scrape {
        Some(s) => Some(s.clone()),
        None => source.resolution().await?.map(|value| ScrapeInterval {
            value,
            from: format!("the {} source's scrape interval", source.kind()),
        }),
    };
    let r = reading(w, scrape)?;
    let window = match w.at {
        Some(at) => {
            let start = at.checked_sub(r.span).unwrap_or(SystemTime::UNIX_EPOCH);
            source
                .history(w.signals, start, at, r.step)
                .await?
                .ok_or_else(|| MetricError::Fetch {
                    target: source.kind().into(),
                    message: "keeps no history to judge an instant in the past from".into(),
                })?
        }
        None => {
            let of = (r.span.as_secs_f64() / r.step.as_secs_f64()).ceil() as u32 + 1;
            let mut n = 0;
            recent_window(source, w.signals, r.span, r.step, |snapshot| {
                n += 1;
                on_snapshot(Seen { snapshot, n, of });
            })
            .await?
        }
    };
    let end = w.at.unwrap_or_else(SystemTime::now);
    let windows = Windows {
        scrape_interval_s: r.scrape.value.as_secs_f64(),
        scrape_interval_from: r.scrape.from.clone(),
        rate_window_s: r.rate_window.as_secs_f64(),
        rate_window_from: r.rate_window_from.clone(),
        step_s: r.step.as_secs_f64(),
        grace: r.grace.clone(),
        persist: r.persist.clone(),
        span_s: r.span.as_secs_f64(),
        at: humantime::format_rfc3339_seconds(end).to_string(),
    };
    let (verdict, lookback) = if w.look_back {
        judge_looking_back(source, w.signals, &r.config, &window, end).await
    } else {
        (detect_with(&window, &r.config, None, end), None)
    };
    Ok(Watched {
        verdict,
        windows,
        config: r.config,
        window,
        lookback,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::signal::Reading as Value;

    /// A source that keeps a recorded history (as Prometheus does) and reads nothing live.
    struct Recorded(Vec<Snapshot>);

    #[async_trait::async_trait]
    impl MetricSource for Recorded {
        fn kind(&self) -> &'static str {
            "recorded"
        }
        async fn snapshot(
            &self,
            _: &BTreeMap<String, SignalSpec>,
        ) -> Result<Snapshot, MetricError> {
            Err(MetricError::Fetch {
                target: "recorded".into(),
                message: "no live reads".into(),
            })
        }
        async fn resolution(&self) -> Result<Option<Duration>, MetricError> {
            Ok(Some(Duration::from_secs(15)))
        }
        async fn history(
            &self,
            _: &BTreeMap<String, SignalSpec>,
            start: SystemTime,
            end: SystemTime,
            _: Duration,
        ) -> Result<Option<Vec<Snapshot>>, MetricError> {
            Ok(Some(
                self.0
                    .iter()
                    .filter(|s| s.at >= start && s.at <= end)
                    .cloned()
                    .collect(),
            ))
        }
    }

    #[tokio::test]
    async fn a_past_instant_is_judged_out_of_the_history_with_windows_at_its_scrape() {
        let (signals, config) = (
            default_signals::demo_signals(),
            default_signals::detector_config(),
        );
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let history: Vec<Snapshot> = (0..100u64)
            .map(|i| Snapshot {
                at: t0 + Duration::from_secs(15 * i),
                readings: [("offered_rate".to_string(), Value::Value { value: 10.0 })].into(),
            })
            .collect();
        let at = t0 + Duration::from_secs(15 * 99);
        let fields = Fields::runbook();
        let w = Watch {
            signals: &signals,
            config: &config,
            fields: &fields,
            interval: Duration::from_secs(1),
            span: None,
            at: Some(at),
            scrape: None,
            look_back: false,
        };
        let out = watch(&Recorded(history), &w, |_| panic!("no live reads"))
            .await
            .unwrap();
        assert_eq!(out.windows.scrape_interval_s, 15.0);
        assert_eq!(out.windows.step_s, 15.0, "one snapshot per scrape");
        let persist_scrapes = config.persist_scrapes.expect("the default counts scrapes");
        assert_eq!(
            out.config.persist,
            persist_scrapes * Duration::from_secs(15)
        );
        let span = Duration::from_secs_f64(out.windows.span_s);
        assert!(span >= out.config.persist, "{span:?}");
        assert_eq!(out.window.last().unwrap().at, at);
        assert!(out.window.first().unwrap().at >= at - span);
        assert!(out.lookback.is_none());

        // A live-only source has no past to judge.
        let e = watch(&NoPast, &w, |_| {}).await.unwrap_err();
        assert!(e.to_string().contains("keeps no history"), "{e}");
    }

    struct NoPast;

    #[async_trait::async_trait]
    impl MetricSource for NoPast {
        fn kind(&self) -> &'static str {
            "scrape"
        }
        async fn snapshot(
            &self,
            _: &BTreeMap<String, SignalSpec>,
        ) -> Result<Snapshot, MetricError> {
            Ok(Snapshot {
                at: SystemTime::now(),
                readings: BTreeMap::new(),
            })
        }
    }
}
