//! The PromQL source: read signals from a Prometheus server's HTTP API, for sites that
//! already run one (and for looking back: `query_range` gives a whole detection window at
//! once, so `recover detect --prometheus` need not wait to observe).
//!
//! An error, a timeout and an empty result are three different answers and stay apart:
//! [`PromqlError::Query`] (the server refused the query), [`PromqlError::Timeout`],
//! [`PromqlError::Unreachable`] (no answer, or not an API answer), and
//! [`QueryResult::Empty`] (the query ran and matched nothing). None of them is a zero.
//! A vector result with several series is summed, like the scrape source does.
//!
//! Expressions may use `$__rate_interval` ([`template`]): the source finds the scrape
//! interval of the data ([`interval`]) on first use and fills in the rate window. Roles
//! ([`roles`]) are bound earlier, when the runbook is loaded; given them, the source also
//! checks that each role selects something, so a missing role is an error and not a zero.

mod discover;
mod history;
pub mod interval;
pub mod roles;
pub mod template;

use super::signal::{Reading, SignalSpec, Snapshot};
use super::source::{MetricError, MetricSource};
use crate::util::http_body::{read_response_text, BodyCaps, BodyError};
use interval::ScrapeInterval;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

type Labels = BTreeMap<String, String>;

/// What a query that ran returned.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum QueryResult {
    /// The sum over the result's series (may be NaN or infinite).
    Value(f64),
    /// The query ran and matched no series.
    Empty,
}

/// Why a query gave no result.
#[derive(Debug, thiserror::Error)]
pub enum PromqlError {
    #[error("{url}: no answer within {after:?}")]
    Timeout { url: String, after: Duration },
    #[error("{url}: {message}")]
    Unreachable { url: String, message: String },
    #[error("query {query:?} failed: {error_type}: {message}")]
    Query {
        query: String,
        error_type: String,
        message: String,
    },
}

#[derive(Deserialize)]
struct ApiReply {
    status: String,
    #[serde(default)]
    data: Option<ApiData>,
    #[serde(default, rename = "errorType")]
    error_type: Option<String>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Deserialize)]
#[serde(tag = "resultType", content = "result", rename_all = "lowercase")]
enum ApiData {
    Vector(Vec<VectorItem>),
    Matrix(Vec<MatrixItem>),
    Scalar((f64, String)),
    String(serde::de::IgnoredAny),
}

#[derive(Deserialize)]
struct VectorItem {
    #[serde(default)]
    metric: Labels,
    value: (f64, String),
}

#[derive(Deserialize)]
struct MatrixItem {
    #[serde(default)]
    metric: Labels,
    values: Vec<(f64, String)>,
}

fn parse_num(s: &str) -> f64 {
    match s {
        "+Inf" | "Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        _ => s.parse().unwrap_or(f64::NAN),
    }
}

/// application/x-www-form-urlencoded value encoding (reqwest's `form` is not enabled).
fn form_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn unix(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// The largest query answer read: a range query over a long window at a fine step is a
/// few MiB; more means a query that selects far too many series.
const MAX_ANSWER_BYTES: usize = 32 * 1024 * 1024;

/// A Prometheus server's query API.
pub struct PromqlSource {
    base: String,
    client: reqwest::Client,
    timeout: Duration,
    /// Role -> label matchers, for finding the scrape interval and checking roles.
    roles: BTreeMap<String, String>,
    /// The scrape interval, given or found on first use.
    scrape: tokio::sync::OnceCell<ScrapeInterval>,
}

impl PromqlSource {
    /// `base` is the server URL, like `http://127.0.0.1:9090`.
    pub fn new(base: &str, timeout: Duration) -> Result<Self, PromqlError> {
        let client = crate::util::http::client(timeout).map_err(|e| PromqlError::Unreachable {
            url: base.to_string(),
            message: e.to_string(),
        })?;
        Ok(PromqlSource {
            base: base.trim_end_matches('/').to_string(),
            client,
            timeout,
            roles: BTreeMap::new(),
            scrape: tokio::sync::OnceCell::new(),
        })
    }

    /// The roles the signals were bound with: their targets' scrape interval is the one
    /// that matters, and each must select something.
    pub fn with_roles(mut self, roles: BTreeMap<String, String>) -> Self {
        self.roles = roles;
        self
    }

    /// Use this scrape interval instead of finding it; `from` says who gave it.
    pub fn with_scrape_interval(mut self, value: Duration, from: &str) -> Self {
        self.scrape = tokio::sync::OnceCell::new_with(Some(ScrapeInterval {
            value,
            from: from.to_string(),
        }));
        self
    }

    /// A request or its body that did not arrive: a timeout is told apart because the fix
    /// differs (a slow query, not a server that is down).
    fn transport_error(&self, url: &str, e: reqwest::Error) -> PromqlError {
        if e.is_timeout() {
            PromqlError::Timeout {
                url: url.to_string(),
                after: self.timeout,
            }
        } else {
            PromqlError::Unreachable {
                url: url.to_string(),
                message: e.to_string(),
            }
        }
    }

    async fn call(
        &self,
        path: &str,
        query: &str,
        params: &[(&str, String)],
    ) -> Result<ApiData, PromqlError> {
        let url = format!("{}{path}", self.base);
        let mut form: Vec<(&str, String)> = vec![("query", query.to_string())];
        form.extend(params.iter().cloned());
        let body: Vec<String> = form
            .iter()
            .map(|(k, v)| format!("{k}={}", form_encode(v)))
            .collect();
        let resp = self
            .client
            .post(&url)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body.join("&"))
            .send()
            .await
            .map_err(|e| self.transport_error(&url, e))?;
        let status = resp.status();
        let body = read_response_text(resp, BodyCaps::new(MAX_ANSWER_BYTES, self.timeout))
            .await
            .map_err(|e| match e {
                BodyError::TooSlow { .. } => PromqlError::Timeout {
                    url: url.clone(),
                    after: self.timeout,
                },
                e => PromqlError::Unreachable {
                    url: url.clone(),
                    message: e.to_string(),
                },
            })?;
        let reply: ApiReply =
            serde_json::from_str(&body).map_err(|_| PromqlError::Unreachable {
                url: url.clone(),
                message: format!(
                    "HTTP {status}: not a Prometheus API reply: {}",
                    body.chars().take(120).collect::<String>()
                ),
            })?;
        if reply.status != "success" {
            let error_type = reply.error_type.unwrap_or_else(|| "error".into());
            if error_type == "timeout" {
                return Err(PromqlError::Timeout {
                    url,
                    after: self.timeout,
                });
            }
            return Err(PromqlError::Query {
                query: query.to_string(),
                error_type,
                message: reply.error.unwrap_or_default(),
            });
        }
        reply.data.ok_or_else(|| PromqlError::Unreachable {
            url,
            message: "reply without data".into(),
        })
    }

    fn instant_params(&self, at: Option<SystemTime>) -> Vec<(&'static str, String)> {
        let mut params = vec![("timeout", format!("{}ms", self.timeout.as_millis().max(1)))];
        if let Some(t) = at {
            params.push(("time", format!("{:.3}", unix(t))));
        }
        params
    }

    /// Instant query at `at` (the server's now when `None`).
    pub async fn query(
        &self,
        query: &str,
        at: Option<SystemTime>,
    ) -> Result<QueryResult, PromqlError> {
        let params = self.instant_params(at);
        Ok(match self.call("/api/v1/query", query, &params).await? {
            ApiData::Vector(items) if items.is_empty() => QueryResult::Empty,
            ApiData::Vector(items) => {
                QueryResult::Value(items.iter().map(|i| parse_num(&i.value.1)).sum())
            }
            ApiData::Scalar((_, v)) => QueryResult::Value(parse_num(&v)),
            ApiData::Matrix(_) | ApiData::String(_) => {
                return Err(PromqlError::Query {
                    query: query.to_string(),
                    error_type: "bad_data".into(),
                    message: "an instant query must return a vector or scalar".into(),
                })
            }
        })
    }

    /// Range query: `(time, value)` points from `start` to `end` every `step`, each the sum
    /// over the series that have a point then. Empty when nothing matched.
    pub async fn query_range(
        &self,
        query: &str,
        start: SystemTime,
        end: SystemTime,
        step: Duration,
    ) -> Result<Vec<(SystemTime, f64)>, PromqlError> {
        let params = vec![
            ("start", format!("{:.3}", unix(start))),
            ("end", format!("{:.3}", unix(end))),
            ("step", format!("{:.3}", step.as_secs_f64().max(0.001))),
            ("timeout", format!("{}ms", self.timeout.as_millis().max(1))),
        ];
        let items = match self.call("/api/v1/query_range", query, &params).await? {
            ApiData::Matrix(items) => items,
            _ => {
                return Err(PromqlError::Query {
                    query: query.to_string(),
                    error_type: "bad_data".into(),
                    message: "a range query must return a matrix".into(),
                })
            }
        };
        let mut sums: BTreeMap<i64, f64> = BTreeMap::new();
        for item in items {
            for (t, v) in item.values {
                *sums.entry((t * 1000.0).round() as i64).or_insert(0.0) += parse_num(&v);
            }
        }
        Ok(sums
            .into_iter()
            .map(|(ms, v)| (UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64), v))
            .collect())
    }

    /// Instant query keeping each series' labels.
    pub async fn query_series(
        &self,
        query: &str,
        at: Option<SystemTime>,
    ) -> Result<Vec<(Labels, f64)>, PromqlError> {
        let params = self.instant_params(at);
        match self.call("/api/v1/query", query, &params).await? {
            ApiData::Vector(items) => Ok(items
                .into_iter()
                .map(|i| (i.metric, parse_num(&i.value.1)))
                .collect()),
            _ => Err(PromqlError::Query {
                query: query.to_string(),
                error_type: "bad_data".into(),
                message: "expected an instant vector".into(),
            }),
        }
    }
}

fn queries(signals: &BTreeMap<String, SignalSpec>) -> Result<Vec<(&String, &str)>, MetricError> {
    signals
        .iter()
        .map(|(name, spec)| {
            spec.promql
                .as_deref()
                .map(|q| (name, q))
                .ok_or(MetricError::NoExpression {
                    signal: name.clone(),
                    needs: "promql",
                })
        })
        .collect()
}

/// A per-replica signal's series as readings `NAME{REPLICA}`, the replica named by the
/// series' `pod` label, else its `instance` (a series with neither is left out).
fn per_replica_readings(
    name: &str,
    query: &str,
    series: Vec<(Labels, f64)>,
) -> Vec<(String, Reading)> {
    series
        .into_iter()
        .filter_map(|(labels, v)| {
            let replica = labels.get("pod").or_else(|| labels.get("instance"))?;
            let reading = if v.is_nan() {
                Reading::Missing {
                    reason: format!("{query:?} returned NaN for {replica}"),
                }
            } else {
                Reading::Value { value: v }
            };
            Some((crate::metrics::signal::replica_key(name, replica), reading))
        })
        .collect()
}

fn to_metric_error(signal: &str, e: PromqlError) -> MetricError {
    match e {
        PromqlError::Timeout { url, after } => MetricError::Timeout { target: url, after },
        PromqlError::Unreachable { url, message } => MetricError::Fetch {
            target: url,
            message,
        },
        PromqlError::Query {
            error_type,
            message,
            ..
        } => MetricError::BadExpression {
            signal: signal.to_string(),
            message: format!("{error_type}: {message}"),
        },
    }
}

#[async_trait::async_trait]
impl MetricSource for PromqlSource {
    fn kind(&self) -> &'static str {
        "promql"
    }

    async fn snapshot(
        &self,
        signals: &BTreeMap<String, SignalSpec>,
    ) -> Result<Snapshot, MetricError> {
        let at = SystemTime::now();
        let mut readings = BTreeMap::new();
        for (name, query) in self.bound_queries(signals, None, None).await? {
            if signals.get(&name).is_some_and(|s| s.per_replica) {
                let series = self
                    .query_series(&query, Some(at))
                    .await
                    .map_err(|e| to_metric_error(&name, e))?;
                readings.extend(per_replica_readings(&name, &query, series));
                continue;
            }
            let reading = match self.query(&query, Some(at)).await {
                Ok(QueryResult::Value(v)) if v.is_nan() => Reading::Missing {
                    reason: format!("{query:?} returned NaN"),
                },
                Ok(QueryResult::Value(value)) => Reading::Value { value },
                Ok(QueryResult::Empty) => Reading::Missing {
                    reason: format!("{query:?} returned an empty result"),
                },
                Err(e) => return Err(to_metric_error(&name, e)),
            };
            readings.insert(name, reading);
        }
        Ok(Snapshot { at, readings })
    }

    async fn resolution(&self) -> Result<Option<Duration>, MetricError> {
        self.scrape_interval(None).await.map(|s| Some(s.value))
    }

    async fn history(
        &self,
        signals: &BTreeMap<String, SignalSpec>,
        start: SystemTime,
        end: SystemTime,
        step: Duration,
    ) -> Result<Option<Vec<Snapshot>>, MetricError> {
        let span = end.duration_since(start).unwrap_or_default();
        self.window(signals, end, span, step).await.map(Some)
    }
}
