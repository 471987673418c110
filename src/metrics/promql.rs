//! The PromQL source: read signals from a Prometheus server's HTTP API, for sites that
//! already run one (and for looking back: `query_range` gives a whole detection window at
//! once, so `recover detect --prometheus` need not wait to observe).
//!
//! An error, a timeout and an empty result are three different answers and stay apart:
//! [`PromqlError::Query`] (the server refused the query), [`PromqlError::Timeout`],
//! [`PromqlError::Unreachable`] (no answer, or not an API answer), and
//! [`QueryResult::Empty`] (the query ran and matched nothing). None of them is a zero.
//! A vector result with several series is summed, like the scrape source does.

use super::signal::{Reading, SignalSpec, Snapshot};
use super::source::{MetricError, MetricSource};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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
    value: (f64, String),
}

#[derive(Deserialize)]
struct MatrixItem {
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

/// A Prometheus server's query API.
pub struct PromqlSource {
    base: String,
    client: reqwest::Client,
    timeout: Duration,
}

impl PromqlSource {
    /// `base` is the server URL, like `http://127.0.0.1:9090`.
    pub fn new(base: &str, timeout: Duration) -> Result<Self, PromqlError> {
        let client =
            crate::metrics::http::client(timeout).map_err(|e| PromqlError::Unreachable {
                url: base.to_string(),
                message: e.to_string(),
            })?;
        Ok(PromqlSource {
            base: base.trim_end_matches('/').to_string(),
            client,
            timeout,
        })
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
        let body = resp
            .text()
            .await
            .map_err(|e| self.transport_error(&url, e))?;
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

    /// Instant query at `at` (the server's now when `None`).
    pub async fn query(
        &self,
        query: &str,
        at: Option<SystemTime>,
    ) -> Result<QueryResult, PromqlError> {
        let mut params = vec![("timeout", format!("{}ms", self.timeout.as_millis().max(1)))];
        if let Some(t) = at {
            params.push(("time", format!("{:.3}", unix(t))));
        }
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

    /// A detection window from history: one snapshot every `step` over `span` up to `end`.
    /// A signal without a point at an instant is `Missing` there.
    pub async fn window(
        &self,
        signals: &BTreeMap<String, SignalSpec>,
        end: SystemTime,
        span: Duration,
        step: Duration,
    ) -> Result<Vec<Snapshot>, MetricError> {
        let start = end.checked_sub(span).unwrap_or(UNIX_EPOCH);
        let step_ms = step.as_millis().max(1) as u64;
        let count = (span.as_millis() as u64 / step_ms) + 1;
        let times: Vec<SystemTime> = (0..count)
            .map(|i| start + Duration::from_millis(i * step_ms))
            .collect();
        let mut snaps: Vec<Snapshot> = times
            .iter()
            .map(|&at| Snapshot {
                at,
                readings: BTreeMap::new(),
            })
            .collect();
        for (name, query) in queries(signals)? {
            let points = self
                .query_range(query, start, end, step)
                .await
                .map_err(|e| to_metric_error(name, e))?;
            let by_ms: BTreeMap<u128, f64> = points
                .iter()
                .map(|(t, v)| {
                    (
                        t.duration_since(UNIX_EPOCH).unwrap_or_default().as_millis(),
                        *v,
                    )
                })
                .collect();
            for s in snaps.iter_mut() {
                let ms =
                    s.at.duration_since(UNIX_EPOCH)
                        .unwrap_or_default()
                        .as_millis();
                // Prometheus aligns points to the requested times; allow rounding slack.
                let near = by_ms
                    .range(ms.saturating_sub(5)..=ms + 5)
                    .next()
                    .map(|(_, v)| *v);
                let reading = match near {
                    Some(v) if !v.is_nan() => Reading::Value { value: v },
                    Some(_) => Reading::Missing {
                        reason: format!("{query:?} returned NaN"),
                    },
                    None => Reading::Missing {
                        reason: format!("{query:?} had no data at this instant"),
                    },
                };
                s.readings.insert(name.clone(), reading);
            }
        }
        Ok(snaps)
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
        for (name, query) in queries(signals)? {
            let reading = match self.query(query, Some(at)).await {
                Ok(QueryResult::Value(v)) if v.is_nan() => Reading::Missing {
                    reason: format!("{query:?} returned NaN"),
                },
                Ok(QueryResult::Value(value)) => Reading::Value { value },
                Ok(QueryResult::Empty) => Reading::Missing {
                    reason: format!("{query:?} returned an empty result"),
                },
                Err(e) => return Err(to_metric_error(name, e)),
            };
            readings.insert(name.clone(), reading);
        }
        Ok(Snapshot { at, readings })
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
