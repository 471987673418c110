//! The scrape source: read signals straight from `/metrics` endpoints, no Prometheus
//! needed. It is the embedded default, so `recover` works on a laptop with nothing else.
//!
//! Split so the logic is testable without I/O: [`text`] parses pages, [`history`] keeps
//! the scrapes and [`series`] the values they read, [`eval`] computes an [`expr`] at an
//! instant; [`Scraper`] ties those together purely, and [`ScrapeSource`] adds the fetching
//! (over the [`Fetch`] trait, so URLs and a platform's endpoints work alike) and the clock.
//!
//! A target is not trusted to be small: of each page only the series of the metric names
//! the signals read are kept, at most [`SERIES_CAP`] of them, with at most
//! [`KEY_BYTES_CAP`] bytes of names and labels a target over the window.

pub mod eval;
pub mod expr;
pub mod fetch;
pub mod history;
pub mod pattern;
pub mod series;
pub mod text;

pub use fetch::{Fetch, UrlFetch};

use super::signal::{replica_key, Reading, SignalSpec, Snapshot};
use super::source::{MetricError, MetricSource};
use history::History;
use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// One signal's parsed scrape expression.
#[derive(Debug, Clone, PartialEq)]
pub struct Compiled {
    pub expr: expr::Expr,
    /// Evaluated once per service replica (see [`SignalSpec::per_replica`]).
    pub per_replica: bool,
}

/// The role whose targets are the replicas of a per-replica signal.
pub const REPLICA_ROLE: &str = "service";

/// Parse every signal's scrape expression; the first bad one is an error naming it.
pub fn compile(
    signals: &BTreeMap<String, SignalSpec>,
) -> Result<BTreeMap<String, Compiled>, MetricError> {
    let mut out = BTreeMap::new();
    for (name, spec) in signals {
        let src = spec.scrape.as_deref().ok_or(MetricError::NoExpression {
            signal: name.clone(),
            needs: "scrape",
        })?;
        let e = expr::parse(src).map_err(|e| MetricError::BadExpression {
            signal: name.clone(),
            message: e.to_string(),
        })?;
        out.insert(
            name.clone(),
            Compiled {
                expr: e,
                per_replica: spec.per_replica,
            },
        );
    }
    Ok(out)
}

/// Something a metric source can scrape (`/metrics` in Prometheus text format).
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct ScrapeEndpoint {
    /// "gate", "service" or "clients": lets signals select whose metrics they read.
    pub role: String,
    /// Replica id or component name.
    pub instance: String,
    /// A URL for direct scrapes, or a platform-specific locator (pod proxy path).
    pub locator: String,
}

/// The most series of the metrics the signals read that one page may hold; a page with
/// more is refused like a page that does not parse, naming the count. Every kept series
/// costs its names and labels once and 16 bytes a scrape, and every snapshot reads each
/// selected one: 50,000 is over four times a service with 100 routes, 10 status codes and
/// a 12-bucket latency histogram (12,000 series), and keeps a target's store under
/// 50,000 x 16 B x 60 scrapes = 48 MB plus the labels at one scrape a second. Measured
/// in docs/reference/limits.md (scripts/bench-detect-series.sh).
pub const SERIES_CAP: usize = 50_000;

/// The most bytes of series names and labels kept for one target over the window. A
/// page is at most 16 MiB (the body cap), so twice that lets every kept series be
/// replaced once within the window (a restart that changes a label); labels that change
/// on every scrape would otherwise grow memory with the window.
pub const KEY_BYTES_CAP: usize = 32 * 1024 * 1024;

/// The pure core of the scrape source: record pages, evaluate signals at an instant.
#[derive(Debug, Clone)]
pub struct Scraper {
    history: History,
    /// The metric names kept of each page; every name while `None`.
    wanted: Option<HashSet<String>>,
}

impl Default for Scraper {
    /// Keeps every series of a page, for a minute: for tests and tools that record pages
    /// before they know what they will ask.
    fn default() -> Self {
        Scraper {
            history: History::new(Duration::from_secs(60), KEY_BYTES_CAP),
            wanted: None,
        }
    }
}

impl Scraper {
    /// A scraper that keeps only the series `compiled` reads, for as long as its longest
    /// rate window needs ([`Scraper::want`] adds more).
    pub fn for_signals(compiled: &BTreeMap<String, Compiled>) -> Self {
        let mut s = Scraper {
            history: History::new(Duration::ZERO, KEY_BYTES_CAP),
            wanted: Some(HashSet::new()),
        };
        s.want(compiled);
        s
    }

    /// Keep the series `compiled` reads from now on, and scrapes for its longest window
    /// (both only grow: a signal read earlier still finds its history).
    pub fn want(&mut self, compiled: &BTreeMap<String, Compiled>) {
        for c in compiled.values() {
            self.history.keep_at_least(c.expr.max_window());
            if let Some(names) = self.wanted.as_mut() {
                c.expr.metric_names(names);
            }
        }
    }

    /// Record one target's fetch result (the page text, or why it could not be fetched).
    /// A page that does not parse, or holds more than [`SERIES_CAP`] series the signals
    /// read, counts as a failed fetch, with the reason.
    pub fn record(
        &mut self,
        endpoint: &ScrapeEndpoint,
        at: SystemTime,
        page: Result<&str, String>,
    ) {
        let keep = text::Keep {
            names: self.wanted.as_ref(),
            cap: SERIES_CAP,
        };
        let kept = page.and_then(|t| text::parse_kept(t, keep).map_err(|e| e.to_string()));
        self.history.record(endpoint, at, kept);
    }

    /// Evaluate one expression over the whole history at `at`, with the work it took.
    pub fn eval_counted(
        &self,
        e: &expr::Expr,
        at: SystemTime,
    ) -> (Result<f64, String>, eval::Work) {
        eval::eval_counted(e, self.history.view(), at)
    }

    /// What the history holds now (series, samples, bytes of names and labels).
    pub fn retained(&self) -> series::Retained {
        self.history.retained()
    }

    /// Forget targets that are no longer listed.
    pub fn retain_targets(&mut self, current: &[ScrapeEndpoint]) {
        self.history.retain_targets(current);
    }

    /// Evaluate compiled signals at `at`; a per-replica signal gives one reading per
    /// service target, evaluated against that target's pages alone.
    pub fn snapshot(&mut self, compiled: &BTreeMap<String, Compiled>, at: SystemTime) -> Snapshot {
        self.snapshot_since(compiled, at, None)
    }

    /// As [`Scraper::snapshot`], rates over nothing scraped before `since` when given.
    pub fn snapshot_since(
        &mut self,
        compiled: &BTreeMap<String, Compiled>,
        at: SystemTime,
        since: Option<SystemTime>,
    ) -> Snapshot {
        for c in compiled.values() {
            self.history.keep_at_least(c.expr.max_window());
        }
        let view = match since {
            Some(t) => self.history.view().since(t),
            None => self.history.view(),
        };
        let reading = |r: Result<f64, String>| match r {
            Ok(value) => Reading::Value { value },
            Err(reason) => Reading::Missing { reason },
        };
        let mut readings = BTreeMap::new();
        for (name, c) in compiled {
            if !c.per_replica {
                readings.insert(name.clone(), reading(eval::eval(&c.expr, view, at)));
                continue;
            }
            for instance in view.instances(REPLICA_ROLE) {
                let alone = view.only_instance(REPLICA_ROLE, &instance);
                let r = reading(eval::eval(&c.expr, alone, at));
                readings.insert(replica_key(name, &instance), r);
            }
        }
        Snapshot { at, readings }
    }
}

/// A [`MetricSource`] that scrapes `/metrics` pages itself.
pub struct ScrapeSource {
    fetch: Arc<dyn Fetch>,
    state: Mutex<Scraper>,
}

impl ScrapeSource {
    pub fn new(fetch: Arc<dyn Fetch>) -> Self {
        ScrapeSource {
            fetch,
            state: Mutex::new(Scraper::for_signals(&BTreeMap::new())),
        }
    }

    /// Scrape `ROLE=URL` targets directly.
    pub fn from_urls(targets: Vec<ScrapeEndpoint>, timeout: Duration) -> Result<Self, MetricError> {
        Ok(Self::new(Arc::new(UrlFetch::new(targets, timeout)?)))
    }
}

#[async_trait::async_trait]
impl MetricSource for ScrapeSource {
    fn kind(&self) -> &'static str {
        "scrape"
    }

    async fn snapshot(
        &self,
        signals: &BTreeMap<String, SignalSpec>,
    ) -> Result<Snapshot, MetricError> {
        self.read(signals, None).await
    }

    async fn snapshot_since(
        &self,
        signals: &BTreeMap<String, SignalSpec>,
        since: SystemTime,
    ) -> Result<Snapshot, MetricError> {
        self.read(signals, Some(since)).await
    }
}

impl ScrapeSource {
    /// Scrape every target now, record the pages, evaluate the signals (rates cut at
    /// `since` when given).
    async fn read(
        &self,
        signals: &BTreeMap<String, SignalSpec>,
        since: Option<SystemTime>,
    ) -> Result<Snapshot, MetricError> {
        let compiled = compile(signals)?;
        let targets = self.fetch.targets().await?;
        let pages = futures::future::join_all(targets.iter().map(|t| async move {
            let page = self.fetch.fetch(t).await.map_err(|e| e.to_string());
            (t, SystemTime::now(), page)
        }))
        .await;
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.want(&compiled);
        state.retain_targets(&targets);
        for (t, at, page) in &pages {
            state.record(t, *at, page.as_deref().map_err(Clone::clone));
        }
        Ok(state.snapshot_since(&compiled, SystemTime::now(), since))
    }
}

/// Parse a `ROLE=URL` flag value into an endpoint.
pub fn parse_target(s: &str) -> Result<ScrapeEndpoint, String> {
    let (role, url) = s.split_once('=').ok_or_else(|| {
        format!("{s:?}: expected ROLE=URL, like gate=http://127.0.0.1:8080/metrics")
    })?;
    if role.is_empty()
        || !role
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(format!(
            "{s:?}: the role must be a word like gate, service or clients"
        ));
    }
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(format!(
            "{s:?}: the URL must start with http:// or https://"
        ));
    }
    Ok(ScrapeEndpoint {
        role: role.to_string(),
        instance: url.to_string(),
        locator: url.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(role: &str, instance: &str) -> ScrapeEndpoint {
        ScrapeEndpoint {
            role: role.into(),
            instance: instance.into(),
            locator: format!("http://{instance}/metrics"),
        }
    }

    fn one_signal(name: &str, scrape: &str, per_replica: bool) -> BTreeMap<String, Compiled> {
        let spec = SignalSpec {
            scrape: Some(scrape.into()),
            promql: None,
            help: None,
            per_replica,
        };
        compile(&BTreeMap::from([(name.to_string(), spec)])).unwrap()
    }

    #[test]
    fn a_per_replica_signal_reads_each_service_target_alone() {
        let compiled = one_signal(
            "st",
            "rate(t_sum@service[10s]) / rate(t_count@service[10s])",
            true,
        );
        let mut s = Scraper::default();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let t1 = t0 + Duration::from_secs(10);
        // r0: 10 requests of 0.1 s; r1: 10 of 0.5 s; r2: no requests (no figure).
        for (r, sum) in [("r0", 1.0), ("r1", 5.0), ("r2", 0.0)] {
            let n = if r == "r2" { 0 } else { 10 };
            s.record(&ep("service", r), t0, Ok("t_sum 0\nt_count 0\n"));
            let page = format!("t_sum {sum}\nt_count {n}\n");
            s.record(&ep("service", r), t1, Ok(&page));
        }
        s.record(&ep("gate", "gate"), t1, Ok("t_sum 100\nt_count 1\n"));
        let snap = s.snapshot(&compiled, t1);
        let per = snap.per_replica("st");
        assert_eq!(per.len(), 2, "{snap:?}");
        assert!((per["r0"] - 0.1).abs() < 1e-9 && (per["r1"] - 0.5).abs() < 1e-9);
        assert!(matches!(
            snap.readings.get("st{r2}"),
            Some(Reading::Missing { .. })
        ));
        assert!(!snap.readings.contains_key("st"));
    }

    /// A window cut at `since` sees nothing of what came before: a drain's burst of slow
    /// answers no longer counts, and one scrape after the cut is no rate at all.
    #[test]
    fn a_window_cut_at_since_sees_only_what_came_after() {
        let compiled = one_signal("r", "rate(done@service[5s])", false);
        let mut s = Scraper::default();
        let t = |secs: u64| SystemTime::UNIX_EPOCH + Duration::from_secs(1_000 + secs);
        // 100 answers between 0 and 1 s (the drain), then 10/s.
        for (at, total) in [(0, 0), (1, 100), (2, 110), (3, 120), (4, 130)] {
            s.record(&ep("service", "r0"), t(at), Ok(&format!("done {total}\n")));
        }
        let value = |snap: &Snapshot| match snap.readings.get("r") {
            Some(Reading::Value { value }) => Some(*value),
            _ => None,
        };
        assert_eq!(value(&s.snapshot(&compiled, t(4))), Some(130.0 / 4.0));
        assert_eq!(
            value(&s.snapshot_since(&compiled, t(4), Some(t(1)))),
            Some(10.0)
        );
        assert_eq!(value(&s.snapshot_since(&compiled, t(4), Some(t(4)))), None);
    }
}
