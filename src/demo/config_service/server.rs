//! The service's I/O: the HTTP routes, the worker pool that takes jobs off the queue and
//! spends their (simulated) work time, and the startup phases.

use super::drain::{self, DrainQuery};
use super::metrics::{KindLabel, ServiceMetrics};
use super::queue::{Answerable, CostModel, FifoQueue, Job, Moment, Overrun, Reply};
use super::{ServiceConfig, ServiceError};
use crate::platform::admin::{DrainKeep, DrainReply, WarmReply};
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::{oneshot, Notify};
use tokio_util::sync::CancellationToken;

struct Inner {
    queue: FifoQueue,
    served: u64,
    warmed: bool,
    /// Cost multiplier of a slow replica (1: normal), from `--slow-factor` or
    /// `POST /admin/slow`.
    slow: f64,
    /// Per member of the worker pool, when the job it works on is done (its start plus
    /// its cost); `None` while it waits for work.
    busy_until: Vec<Option<Instant>>,
    /// Per member, whether its job in service ends before its client stops waiting (a
    /// job started for a client already gone, or too late for it, answers nobody).
    busy_live: Vec<bool>,
    /// How much longer than their costs the jobs held their servers.
    overrun: Overrun,
}

struct Shared {
    model: CostModel,
    cfg: ServiceConfig,
    inner: Mutex<Inner>,
    work: Notify,
    ready: AtomicBool,
    metrics: ServiceMetrics,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A poisoned lock only means a panic elsewhere; the queue itself is still sound.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn warm_fraction(&self, inner: &Inner) -> f64 {
        self.model.warm_fraction(inner.served, inner.warmed)
    }

    /// What a drain keeping the answerable requests needs, at `now`.
    fn answerable(&self, inner: &Inner, now: Moment) -> Answerable {
        let warm = self.warm_fraction(inner);
        Answerable::at(
            now,
            self.cfg.client_timeout,
            self.model.cost(warm, false, inner.slow),
            inner.overrun,
            &inner.busy_until,
        )
    }

    /// Count `job` if a drain kept it and it is answered (or skipped) only now that its
    /// client no longer waits.
    fn kept_late(&self, job: &Job) {
        let now = Moment::now();
        if job.kept_late(now, self.cfg.client_timeout) {
            self.metrics.drain_kept_late.inc();
            let past = job
                .deadline
                .and_then(|d| now.wall.duration_since(d).ok())
                .map(|d| d.as_secs_f64());
            // At most one line per request a drain kept, themselves at most what the
            // replica answers within the clients' timeout.
            tracing::info!(
                past_deadline_s = past,
                client_gone = job.reply.is_closed(),
                "a request the drain kept was answered after its client stopped waiting"
            );
        }
    }

    fn set_slow(&self, factor: f64) {
        self.lock().slow = factor;
        self.metrics.slow_factor.set(factor);
        tracing::warn!(factor, "config service slowdown changed");
    }
}

/// Run the service until `shutdown` is cancelled.
pub async fn serve(cfg: ServiceConfig, shutdown: CancellationToken) -> Result<(), ServiceError> {
    cfg.validate()?;
    let admin_token = match &cfg.admin_token_file {
        Some(path) => Some(super::admin_auth::read_token(path)?),
        None => {
            tracing::warn!("the admin API (/admin/*) is open to anyone who reaches this port, through the gate too: start with --admin-token-file to require a token");
            None
        }
    };
    let model = CostModel {
        concurrency: cfg.concurrency,
        service_time: cfg.service_time,
        cold_factor: cfg.cold_factor,
        overload_factor: cfg.overload_factor,
        warm_after_requests: cfg.warm_after_requests,
        client_timeout: cfg.client_timeout,
    };
    let shared = Arc::new(Shared {
        model,
        cfg: cfg.clone(),
        inner: Mutex::new(Inner {
            queue: FifoQueue::default(),
            served: 0,
            warmed: false,
            slow: 1.0,
            busy_until: vec![None; cfg.concurrency],
            busy_live: vec![false; cfg.concurrency],
            overrun: Overrun::default(),
        }),
        work: Notify::new(),
        ready: AtomicBool::new(false),
        metrics: ServiceMetrics::new(),
    });
    shared
        .metrics
        .warm_fraction
        .set(shared.warm_fraction(&shared.lock()));
    shared.metrics.slow_factor.set(1.0);
    shared.metrics.concurrency_limit.set(cfg.concurrency as i64);

    let half = cfg.startup_delay / 2;
    tokio::select! {
        _ = tokio::time::sleep(half) => {}
        _ = shutdown.cancelled() => return Ok(()),
    }
    let listener = tokio::net::TcpListener::bind(cfg.listen)
        .await
        .map_err(|source| ServiceError::Bind {
            addr: cfg.listen,
            source,
        })?;
    tracing::info!(addr = %cfg.listen, "config service listening");

    let ready_after = cfg.startup_delay - half;
    let s = shared.clone();
    let stop = shutdown.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = tokio::time::sleep(ready_after) => {
                s.ready.store(true, Ordering::SeqCst);
                s.metrics.ready.set(1);
                tracing::info!("config service ready");
            }
            _ = stop.cancelled() => {}
        }
    });
    for member in 0..cfg.concurrency {
        tokio::spawn(pool_worker(shared.clone(), member, shutdown.clone()));
    }
    if cfg.slow_factor != 1.0 {
        tokio::spawn(slow_down_later(shared.clone(), shutdown.clone()));
    }

    let admin = Router::new()
        .route("/admin/drain", post(drain))
        .route("/admin/warm", post(warm))
        .route("/admin/slow", post(slow));
    let admin = match admin_token {
        Some(token) => admin.route_layer(axum::middleware::from_fn_with_state(
            token,
            super::admin_auth::require,
        )),
        None => admin,
    };
    let app = Router::new()
        .route("/config", get(config))
        .merge(admin)
        .route("/readyz", get(readyz))
        .route("/healthz", get(|| async { "ok" }))
        .route("/metrics", get(metrics))
        .with_state(shared.clone());
    // No graceful shutdown: queued requests would hold it open; on stop they are cut off,
    // as a killed process would.
    let timeouts = crate::util::http_server::Timeouts::default();
    let never = std::future::pending::<()>();
    tokio::select! {
        r = crate::util::http_server::serve(listener, app, timeouts, never) => r.map_err(ServiceError::Serve),
        _ = shutdown.cancelled() => Ok(()),
    }
}

/// One member of the worker pool: FIFO, no shedding, works for clients that have left.
async fn pool_worker(shared: Arc<Shared>, member: usize, shutdown: CancellationToken) {
    loop {
        let (job, cost) = loop {
            let popped = {
                let mut inner = shared.lock();
                let job = inner.queue.pop();
                shared.metrics.queue_depth.set(inner.queue.len() as i64);
                job.map(|j| {
                    if shared.cfg.honour_deadline && j.expired(SystemTime::now()) {
                        return (j, None);
                    }
                    let warm = shared.warm_fraction(&inner);
                    let overloaded = shared.model.overloaded(inner.queue.len(), warm, inner.slow);
                    shared.metrics.overloaded.set(i64::from(overloaded));
                    let cost = shared.model.cost(warm, overloaded, inner.slow);
                    // Its cost is fixed from here: a drain reads when this member is free.
                    inner.busy_until[member] = Some(Instant::now() + cost);
                    inner.busy_live[member] = j
                        .waits_for(Moment::now(), shared.cfg.client_timeout)
                        .is_some_and(|left| left >= cost);
                    (j, Some(cost))
                })
            };
            if let Some(j) = popped {
                break j;
            }
            tokio::select! {
                _ = shared.work.notified() => {}
                _ = shutdown.cancelled() => return,
            }
        };
        let Some(cost) = cost else {
            shared.kept_late(&job);
            shared.metrics.skipped.inc();
            let _ = job.reply.send(Reply::Skipped);
            continue;
        };
        shared.metrics.in_flight.inc();
        let started = Instant::now();
        tokio::select! {
            _ = tokio::time::sleep(cost) => {}
            _ = shutdown.cancelled() => return,
        }
        shared.metrics.in_flight.dec();
        shared.metrics.service_seconds.observe(cost.as_secs_f64());
        {
            let mut inner = shared.lock();
            inner.served += 1;
            inner.busy_until[member] = None;
            inner.overrun.record(started.elapsed(), cost);
            let m = &shared.metrics;
            m.overrun_mean.set(inner.overrun.mean().as_secs_f64());
            m.overrun_sd.set(inner.overrun.sd_s());
            m.overrun_jobs.set(inner.overrun.jobs() as i64);
            shared
                .metrics
                .warm_fraction
                .set(shared.warm_fraction(&inner));
        }
        shared.kept_late(&job);
        // The client's connection dropped its receiver if it left: the work was wasted.
        let kind = if job.reply.is_closed() || job.reply.send(Reply::Served).is_err() {
            "abandoned"
        } else {
            "useful"
        };
        shared
            .metrics
            .completions
            .get_or_create(&KindLabel { kind })
            .inc();
    }
}

/// Parse `x-deadline-ms` (Unix epoch milliseconds); a malformed value is ignored.
fn deadline(headers: &HeaderMap) -> Option<SystemTime> {
    let ms: u64 = headers
        .get("x-deadline-ms")?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    SystemTime::UNIX_EPOCH.checked_add(Duration::from_millis(ms))
}

async fn config(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    if !shared.ready.load(Ordering::SeqCst) {
        return (StatusCode::SERVICE_UNAVAILABLE, "starting\n").into_response();
    }
    shared.metrics.requests.inc();
    let (tx, rx) = oneshot::channel();
    {
        let mut inner = shared.lock();
        inner
            .queue
            .push(Job::new(Instant::now(), deadline(&headers), tx));
        let depth = inner.queue.len();
        shared.metrics.queue_depth.set(depth as i64);
        let warm = shared.warm_fraction(&inner);
        shared
            .metrics
            .overloaded
            .set(i64::from(shared.model.overloaded(depth, warm, inner.slow)));
    }
    shared.work.notify_one();
    match rx.await {
        Ok(Reply::Served) => Json(serde_json::json!({
            "version": 1,
            "feature_flags": {"new_checkout": true}
        }))
        .into_response(),
        Ok(Reply::Drained) => (StatusCode::SERVICE_UNAVAILABLE, "drained\n").into_response(),
        Ok(Reply::Skipped) => (StatusCode::GATEWAY_TIMEOUT, "deadline passed\n").into_response(),
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, "shutting down\n").into_response(),
    }
}

/// `POST /admin/drain[?keep=none|answerable]`: answer the dropped requests 503 at once.
async fn drain(
    State(shared): State<Arc<Shared>>,
    query: Result<Query<DrainQuery>, QueryRejection>,
) -> Response {
    let query = query
        .as_ref()
        .map(|q| q.0.as_slice())
        .map_err(|e| e.body_text());
    let keep = match drain::keep(query) {
        Ok(keep) => keep,
        Err(refused) => return (StatusCode::BAD_REQUEST, Json(refused)).into_response(),
    };
    let (jobs, kept) = {
        let mut inner = shared.lock();
        let (jobs, kept) = match keep {
            DrainKeep::None => (inner.queue.drain_all(), None),
            DrainKeep::Answerable => {
                let at = shared.answerable(&inner, Moment::now());
                let jobs = inner.queue.drain_keeping(&at);
                (jobs, Some(inner.queue.len() as u64))
            }
        };
        shared.metrics.queue_depth.set(inner.queue.len() as i64);
        (jobs, kept)
    };
    let n = jobs.len();
    for job in jobs {
        let _ = job.reply.send(Reply::Drained);
    }
    shared.metrics.drained.inc_by(n as u64);
    shared.metrics.drain_kept.inc_by(kept.unwrap_or(0));
    tracing::info!(drained = n, kept, keep = keep.as_str(), "backlog drained");
    Json(DrainReply {
        drained: n as u64,
        kept,
    })
    .into_response()
}

async fn warm(State(shared): State<Arc<Shared>>) -> Json<WarmReply> {
    // Warming (loading caches) takes a moment of its own.
    tokio::time::sleep(shared.cfg.warm_duration).await;
    let fraction = {
        let mut inner = shared.lock();
        inner.warmed = true;
        shared.warm_fraction(&inner)
    };
    shared.metrics.warm_fraction.set(fraction);
    Json(WarmReply {
        warm_fraction: fraction,
    })
}

/// `--slow-factor` from `--slow-after` on.
async fn slow_down_later(shared: Arc<Shared>, shutdown: CancellationToken) {
    tokio::select! {
        _ = tokio::time::sleep(shared.cfg.slow_after) => shared.set_slow(shared.cfg.slow_factor),
        _ = shutdown.cancelled() => {}
    }
}

/// `POST /admin/slow {"factor": F}`: every request from now on costs F times its normal
/// work (1 restores normal speed). Health and readiness are untouched, as on a real bad
/// node.
async fn slow(State(shared): State<Arc<Shared>>, body: axum::body::Bytes) -> Response {
    let factor = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v.get("factor").and_then(serde_json::Value::as_f64));
    match factor {
        Some(f) if super::valid_slow_factor(f) => {
            shared.set_slow(f);
            Json(serde_json::json!({ "slow_factor": f })).into_response()
        }
        _ => (
            StatusCode::BAD_REQUEST,
            Json(serde_json::json!({
                "error": "factor: expected {\"factor\": F} with F a number >= 1 (1: normal speed)",
                "field": "factor",
            })),
        )
            .into_response(),
    }
}

async fn readyz(State(shared): State<Arc<Shared>>) -> Response {
    if shared.ready.load(Ordering::SeqCst) {
        "ready\n".into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready\n").into_response()
    }
}

async fn metrics(State(shared): State<Arc<Shared>>, headers: axum::http::HeaderMap) -> Response {
    // Where the servers stand is read now, relative to this scrape.
    {
        let inner = shared.lock();
        shared.metrics.busy.set(&inner.busy_until, &inner.busy_live);
    }
    crate::util::text_format::respond(&headers, &shared.metrics.encode())
}
