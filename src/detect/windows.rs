//! The detector's windows at the resolution of the data it judges. A state seen one
//! scrape apart can only be said to have lasted a whole number of scrape intervals: a
//! `persist` of 10 s on data scraped every 30 s cannot be measured, and would otherwise
//! turn into a silent "unknown" or, worse, a verdict on one sample. So:
//!
//! - `grace` and `persist` are stretched to `grace_scrapes` / `persist_scrapes` scrape
//!   intervals when the runbook asks for it (the shipped runbooks do: the same runbook
//!   judges 1 s and 60 s data);
//! - a window still shorter than one scrape interval is refused, naming the field;
//! - a PromQL range written as a fixed duration must span two scrape intervals at least
//!   (a rate needs two samples), else the runbook should write `[$__rate_interval]`.
//!
//! Pure: the scrape interval comes in, a configuration or an error naming the field
//! comes out. What was used is reported ([`Windows`]) with every verdict.

use super::DetectorConfig;
use crate::metrics::promql::template::{self, format_range};
use crate::metrics::signal::SignalSpec;
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// How messages name the settings: the runbook's fields, or the flags that replaced them.
#[derive(Debug, Clone)]
pub struct Fields {
    /// The time between snapshots.
    pub interval: String,
    pub grace: String,
    pub grace_scrapes: String,
    pub persist: String,
    pub persist_scrapes: String,
}

impl Fields {
    /// The runbook's own field names.
    pub fn runbook() -> Self {
        Fields {
            interval: "spec.observe.interval".into(),
            grace: "spec.detect.grace".into(),
            grace_scrapes: "spec.detect.grace_scrapes".into(),
            persist: "spec.detect.persist".into(),
            persist_scrapes: "spec.detect.persist_scrapes".into(),
        }
    }
}

/// A window that cannot be measured at the data's resolution.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WindowError {
    #[error("{field} = {value} cannot be measured on data scraped every {scrape}: the detector sees the data one scrape apart, so it can only tell that a state lasted {scrape} or more. Set {field} to {scrape} or more, or set {scrapes_field} (e.g. {suggest}) so that it follows the scrape interval")]
    TooShort {
        field: String,
        value: String,
        scrape: String,
        scrapes_field: String,
        suggest: u32,
    },
    #[error("spec.signals.{signal}.promql: the range [{window}] spans fewer than two scrape intervals ({scrape} each), so rate() has fewer than two samples and reads nothing; write [$__rate_interval] (at least 4 scrape intervals, {rate_interval} here)")]
    FixedWindow {
        signal: String,
        window: String,
        scrape: String,
        rate_interval: String,
    },
}

/// One stretched window and why it has that length.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stretched {
    #[serde(rename = "s", serialize_with = "secs")]
    pub value: Duration,
    pub from: String,
}

fn secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

fn human(d: Duration) -> String {
    crate::util::duration::format(d)
}

fn stretch(
    time: Duration,
    scrapes: Option<u32>,
    scrape: Duration,
    field: &str,
    scrapes_field: &str,
    suggest: u32,
) -> Result<Stretched, WindowError> {
    let by_scrapes = scrapes.map(|n| scrape * n);
    let out = match by_scrapes {
        Some(s) if s > time => Stretched {
            value: s,
            from: format!(
                "{scrapes_field} = {} x {} (at least {field} = {})",
                scrapes.unwrap_or_default(),
                human(scrape),
                human(time)
            ),
        },
        _ => Stretched {
            value: time,
            from: format!("{field} = {}", human(time)),
        },
    };
    if out.value < scrape {
        return Err(WindowError::TooShort {
            field: field.to_string(),
            value: human(time),
            scrape: human(scrape),
            scrapes_field: scrapes_field.to_string(),
            suggest,
        });
    }
    Ok(out)
}

/// `cfg` with grace and persist stretched for data scraped every `scrape`, or the error
/// naming the setting that cannot be measured there.
pub fn at_resolution(
    cfg: &DetectorConfig,
    scrape: Duration,
    fields: &Fields,
) -> Result<(DetectorConfig, Stretched, Stretched), WindowError> {
    let grace = stretch(
        cfg.grace,
        cfg.grace_scrapes,
        scrape,
        &fields.grace,
        &fields.grace_scrapes,
        4,
    )?;
    let persist = stretch(
        cfg.persist,
        cfg.persist_scrapes,
        scrape,
        &fields.persist,
        &fields.persist_scrapes,
        8,
    )?;
    let mut out = cfg.clone();
    out.grace = grace.value;
    out.persist = persist.value;
    Ok((out, grace, persist))
}

/// Everything reading data scraped every `scrape` follows from: the stretched detector
/// windows, the observation step, the signals' rate window and why, and the span an
/// observation must cover. One place for `recover detect --prometheus`, a run and serve.
#[derive(Debug, Clone)]
pub struct AtScrape {
    pub config: DetectorConfig,
    pub grace: Stretched,
    pub persist: Stretched,
    /// One observation per this: the asked interval, at least one scrape.
    pub step: Duration,
    pub rate_window: Duration,
    pub rate_window_from: String,
    /// The asked span, else what the detector's windows and the rate window need.
    pub span: Duration,
}

/// The detector's reading of data scraped every `scrape`, observed every `interval`
/// (stretched to a scrape): grace and persist stretched ([`at_resolution`]), every fixed
/// PromQL range checked ([`check_fixed_windows`]), the rate window `$__rate_interval` gives
/// (or the longest fixed range, when longer or when no signal uses the placeholder).
pub fn at_scrape(
    cfg: &DetectorConfig,
    fields: &Fields,
    signals: &BTreeMap<String, SignalSpec>,
    scrape: Duration,
    interval: Duration,
    span: Option<Duration>,
) -> Result<AtScrape, WindowError> {
    let step = interval.max(scrape);
    let queries = || signals.values().filter_map(|s| s.promql.as_deref());
    let uses_placeholder = queries().any(template::uses_rate_interval);
    let derived = crate::metrics::promql::interval::rate_interval(scrape, step);
    check_fixed_windows(signals, scrape, derived)?;
    let fixed = queries().flat_map(template::fixed_windows).max();
    let (rate_window, rate_window_from) = match (uses_placeholder, fixed) {
        (true, f) if f.is_none_or(|f| f <= derived) => (
            derived,
            format!(
                "$__rate_interval = max(4 x {s}, step {st} + {s})",
                s = human(scrape),
                st = human(step)
            ),
        ),
        (_, Some(f)) => (f, "the longest range written in the signals' promql".into()),
        (_, None) => (Duration::ZERO, "no signal reads a rate".into()),
    };
    let (config, grace, persist) = at_resolution(cfg, scrape, fields)?;
    let span = span.unwrap_or_else(|| super::observe::span_needed(&config, rate_window, step));
    Ok(AtScrape {
        config,
        grace,
        persist,
        step,
        rate_window,
        rate_window_from,
        span,
    })
}

/// Every fixed range in the signals' PromQL must hold two samples at least.
pub fn check_fixed_windows(
    signals: &BTreeMap<String, SignalSpec>,
    scrape: Duration,
    rate_interval: Duration,
) -> Result<(), WindowError> {
    for (name, spec) in signals {
        let Some(q) = spec.promql.as_deref() else {
            continue;
        };
        if let Some(w) = template::fixed_windows(q)
            .into_iter()
            .find(|w| *w < scrape * 2)
        {
            return Err(WindowError::FixedWindow {
                signal: name.clone(),
                window: format_range(w),
                scrape: human(scrape),
                rate_interval: human(rate_interval),
            });
        }
    }
    Ok(())
}

/// What the detector used, shown with its verdict (text and JSON).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Windows {
    pub scrape_interval_s: f64,
    /// Where the scrape interval came from (a flag, the target list, the samples).
    pub scrape_interval_from: String,
    /// The longest rate window the signals read.
    pub rate_window_s: f64,
    pub rate_window_from: String,
    /// Time between the snapshots judged.
    pub step_s: f64,
    pub grace: Stretched,
    pub persist: Stretched,
    /// How much history was judged.
    pub span_s: f64,
    /// The instant judged (RFC 3339).
    pub at: String,
}

impl Windows {
    /// One line for people.
    pub fn describe(&self) -> String {
        let d = |s: f64| human(Duration::from_secs_f64(s));
        format!(
            "windows at {}: scrape interval {} ({}); rate window {} ({}); a snapshot every {} over {}; persist {} ({}); grace {} ({})",
            self.at,
            d(self.scrape_interval_s),
            self.scrape_interval_from,
            d(self.rate_window_s),
            self.rate_window_from,
            d(self.step_s),
            d(self.span_s),
            human(self.persist.value),
            self.persist.from,
            human(self.grace.value),
            self.grace.from,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shipped() -> DetectorConfig {
        DetectorConfig {
            grace: Duration::from_secs(5),
            grace_scrapes: Some(4),
            persist: Duration::from_secs(10),
            persist_scrapes: Some(8),
            ..DetectorConfig::default()
        }
    }

    #[test]
    fn scrapes_stretch_the_windows_and_time_stays_the_floor() {
        let s = Duration::from_secs;
        let (c, g, p) =
            at_resolution(&shipped(), Duration::from_secs(1), &Fields::runbook()).unwrap();
        assert_eq!((c.grace, c.persist), (s(5), s(10)));
        assert_eq!(p.from, "spec.detect.persist = 10s");
        assert_eq!(g.value, s(5));
        let (c, _, p) = at_resolution(&shipped(), s(30), &Fields::runbook()).unwrap();
        assert_eq!((c.grace, c.persist), (s(120), s(240)));
        assert_eq!(
            p.from,
            "spec.detect.persist_scrapes = 8 x 30s (at least spec.detect.persist = 10s)"
        );
    }

    #[test]
    fn a_window_shorter_than_a_scrape_is_refused_by_name() {
        let cfg = DetectorConfig::default(); // 5s / 10s, no scrapes
        let e = at_resolution(&cfg, Duration::from_secs(30), &Fields::runbook()).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.starts_with("spec.detect.grace = 5s cannot be measured on data scraped every 30s"),
            "{msg}"
        );
        let mut cfg = cfg;
        cfg.grace = Duration::from_secs(60);
        let msg = at_resolution(&cfg, Duration::from_secs(30), &Fields::runbook())
            .unwrap_err()
            .to_string();
        assert!(
            msg.starts_with("spec.detect.persist = 10s cannot be measured"),
            "{msg}"
        );
        assert!(
            msg.contains("spec.detect.persist_scrapes (e.g. 8)"),
            "{msg}"
        );
        // Equal to one scrape interval is measurable: two samples, one interval apart.
        cfg.persist = Duration::from_secs(30);
        assert!(at_resolution(&cfg, Duration::from_secs(30), &Fields::runbook()).is_ok());
    }

    #[test]
    fn fixed_ranges_need_two_samples() {
        let sig = |q: &str| {
            BTreeMap::from([(
                "goodput".to_string(),
                SignalSpec {
                    scrape: None,
                    promql: Some(q.into()),
                    help: None,
                    per_replica: false,
                },
            )])
        };
        let s = Duration::from_secs;
        assert!(check_fixed_windows(&sig("sum(rate(x[5s]))"), s(1), s(4)).is_ok());
        let e = check_fixed_windows(&sig("sum(rate(x[5s]))"), s(15), s(60)).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("spec.signals.goodput.promql: the range [5s]"),
            "{e}"
        );
        assert!(check_fixed_windows(&sig("sum(rate(x[$__rate_interval]))"), s(60), s(240)).is_ok());
    }
}
