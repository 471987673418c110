//! Binding and running a gate: both listeners, the limit control, the extra limit
//! sources, and a clean stop on cancellation. Binding is separate from running so that
//! callers (tests, the rehearsal) can ask for port 0 and learn the real addresses.

use super::admin::{self, AdminState};
use super::admission::Admission;
use super::attempts::Attempts;
use super::balance::Replicas;
use super::config::{parse_upstream, GateConfig};
use super::conn_table::ConnectionTable;
use super::connection::Timeouts;
use super::control::LimitControl;
use super::error::GateError;
use super::limit_source::{LimitSource, Meaning, PeerSource};
use super::limits::{self, ClientLimits};
use super::state::{self, Origin};
use super::telemetry::GateMetrics;
use super::validate;
use super::workers::{spawn_proxy_workers, ProxyParts};
use crate::util::http_server;
use std::net::SocketAddr;

use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// A gate with both listeners bound and its starting limit resolved, not yet serving.
pub struct BoundGate {
    proxy_listener: TcpListener,
    admin_listener: TcpListener,
    admission: Arc<Admission>,
    replicas: Arc<Replicas>,
    upstream_timeout: Duration,
    client_timeouts: Timeouts,
    connections: Arc<ConnectionTable>,
    control: Arc<LimitControl>,
    metrics: Arc<GateMetrics>,
    token: Option<String>,
    admin_writes: bool,
    origin: Origin,
    peers: Option<Box<dyn PeerSource>>,
    workers: usize,
}

impl BoundGate {
    /// Check the config, resolve the starting limit (state file wins; one that cannot be
    /// applied is set aside, see [`state`]), bind both listeners.
    pub async fn bind(cfg: GateConfig) -> Result<BoundGate, GateError> {
        if cfg.upstreams.is_empty() {
            return Err(GateError::NoUpstream);
        }
        let upstreams = cfg
            .upstreams
            .iter()
            .map(|u| parse_upstream(u))
            .collect::<Result<Vec<_>, _>>()?;
        validate::check(&cfg.limit).map_err(GateError::Limit)?;
        let metrics = Arc::new(GateMetrics::new());
        let stored = match &cfg.state_file {
            Some(p) => state::load(p).map_err(|reason| state::reject(p, reason)),
            None => Ok(None),
        };
        if let Err(rejected) = &stored {
            metrics.state_file_rejected();
            tracing::error!(
                state_file = %rejected.path.display(),
                "{}",
                rejected.note()
            );
        }
        let (limit, origin) = state::resolve(cfg.limit.clone(), &stored);
        if origin == Origin::StateFile {
            if let Some(p) = &cfg.state_file {
                tracing::warn!(
                    state_file = %p.display(),
                    limit = %serde_json::to_string(&limit).unwrap_or_default(),
                    "restoring the last limit from the state file; it overrides --rate, --burst and --max-in-flight"
                );
            }
        }
        let bind = |flag: &'static str, addr: SocketAddr| async move {
            TcpListener::bind(addr)
                .await
                .map_err(|source| GateError::Bind { flag, addr, source })
        };
        let connections = ConnectionTable::new(fit_file_limit(cfg.client_limits, upstreams.len()));
        let proxy_listener = bind("--listen", cfg.listen).await?;
        let admin_listener = bind("--admin-listen", cfg.admin_listen).await?;

        let admission = Arc::new(
            Admission::new(&limit, metrics.in_flight.clone())
                .with_shadow_gauge(metrics.shadow_in_flight.clone()),
        );
        let control = Arc::new(LimitControl::new(
            limit,
            admission.clone(),
            metrics.clone(),
            cfg.state_file.clone(),
        ));
        if let Ok(Some(st)) = &stored {
            control.restore(st);
        }
        Ok(BoundGate {
            proxy_listener,
            admin_listener,
            admission,
            replicas: Arc::new(Replicas::new(&upstreams, &cfg.balance, &metrics)),
            upstream_timeout: cfg.upstream_timeout,
            client_timeouts: Timeouts {
                first_byte: cfg.client_limits.first_byte_timeout,
                idle: cfg.client_idle_timeout,
                head: cfg.client_limits.request_head_timeout,
            },
            connections,
            control,
            metrics,
            token: cfg.admin_token,
            admin_writes: cfg.admin_writes,
            origin,
            peers: None,
            workers: cfg.workers.map_or_else(
                || std::thread::available_parallelism().map_or(1, |n| n.get()),
                |n| n.get(),
            ),
        })
    }

    pub fn proxy_addr(&self) -> SocketAddr {
        self.proxy_listener
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 0)))
    }

    pub fn admin_addr(&self) -> SocketAddr {
        self.admin_listener
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 0)))
    }

    /// Share the limit with the replicas `source` reports (each enforces its share);
    /// without one, this gate enforces the whole limit.
    pub fn with_peer_source(mut self, source: Box<dyn PeerSource>) -> Self {
        self.peers = Some(source);
        self
    }

    /// Whether the starting limit came from the flags or the state file.
    pub fn limit_origin(&self) -> Origin {
        self.origin
    }

    /// Serve until `shutdown` is cancelled, then let open requests finish (up to 5 s).
    pub async fn run(
        self,
        extra_sources: Vec<Box<dyn LimitSource>>,
        shutdown: CancellationToken,
    ) -> Result<(), GateError> {
        tracing::info!(
            listen = %self.proxy_addr(),
            admin = %self.admin_addr(),
            limit = %serde_json::to_string(&self.control.current().limit).unwrap_or_default(),
            "gate serving"
        );
        // Our own child token: a failed worker stops this gate, never the caller's token.
        let shutdown = shutdown.child_token();
        // Fail static: a gate that follows a source and has no state file (or one it set
        // aside) knows no limit until the source answers, and refuses everything meanwhile.
        let no_state = matches!(self.origin, Origin::Flags | Origin::FlagsAfterRejectedFile);
        if !extra_sources.is_empty() && no_state {
            self.control.await_source();
        }
        let mut sources = spawn_sources(extra_sources, self.control.clone(), &shutdown);
        let needs_peers = self.peers.is_some();
        if let Some(peers) = self.peers {
            spawn_peers(&mut sources, peers, self.control.clone(), &shutdown);
        }
        let admin_state = Arc::new(AdminState {
            control: self.control.clone(),
            metrics: self.metrics.clone(),
            token: self.token,
            writes: self.admin_writes,
            needs_peers,
        });
        let admin_timeouts = http_server::Timeouts {
            header_read: self.client_timeouts.head,
            write_stall: self.client_timeouts.idle,
        };
        let admin = http_server::serve(
            self.admin_listener,
            admin::router(admin_state),
            admin_timeouts,
            shutdown.clone().cancelled_owned(),
        );
        let admin = tokio::spawn(admin);
        let parts = ProxyParts {
            admission: self.admission,
            metrics: self.metrics,
            replicas: self.replicas,
            timeout: self.upstream_timeout,
            attempts: Arc::new(Attempts::default()),
            client_timeouts: self.client_timeouts,
            connections: self.connections,
        };
        let workers = spawn_proxy_workers(self.proxy_listener, parts, self.workers, &shutdown);
        let joined = tokio::task::spawn_blocking(move || {
            workers.map(|ws| {
                for w in ws {
                    let _ = w.join();
                }
            })
        })
        .await;
        shutdown.cancel(); // a worker that failed to start stops the rest, admin included
        sources.abort_all();
        if let Ok(Err(source)) = joined {
            return Err(GateError::Io {
                what: "proxy worker threads",
                source,
            });
        }
        match admin.await {
            Ok(Ok(())) | Err(_) => Ok(()),
            Ok(Err(source)) => Err(GateError::Io {
                what: "admin listener",
                source,
            }),
        }
    }
}

/// Bind and run in one call: the library entry point the CLI and the engine use.
pub async fn serve(
    cfg: GateConfig,
    extra_sources: Vec<Box<dyn LimitSource>>,
    shutdown: CancellationToken,
) -> Result<(), GateError> {
    BoundGate::bind(cfg)
        .await?
        .run(extra_sources, shutdown)
        .await
}

/// Each source pushes limits into one channel; one task applies them in arrival order.
fn spawn_sources(
    sources: Vec<Box<dyn LimitSource>>,
    control: Arc<LimitControl>,
    shutdown: &CancellationToken,
) -> JoinSet<()> {
    let mut tasks = JoinSet::new();
    if sources.is_empty() {
        return tasks;
    }
    let (tx, mut rx) = mpsc::channel(16);
    for source in sources {
        let name = source.name();
        let tx = tx.clone();
        let token = shutdown.child_token();
        tasks.spawn(async move {
            match source.run(tx, token).await {
                Ok(()) => tracing::info!(source = name, "limit source stopped"),
                Err(e) => tracing::error!(source = name, "limit source failed: {e}"),
            }
        });
    }
    drop(tx);
    tasks.spawn(async move {
        while let Some(update) = rx.recv().await {
            let version = update.version.clone();
            let applied = match update.meaning {
                Meaning::Confirm => {
                    control.confirm(&version);
                    continue;
                }
                Meaning::Fallback => match control.fallback(update) {
                    Ok(None) => continue,
                    Ok(Some(a)) => Ok(a),
                    Err(e) => Err(e),
                },
                Meaning::New => control.apply_versioned(update),
            };
            match applied {
                Ok(applied) => tracing::info!(
                    %version,
                    limit = %serde_json::to_string(&applied.limit).unwrap_or_default(),
                    "limit changed by a limit source"
                ),
                Err(e) => tracing::error!(%version, "limit from a source refused, keeping the last one: {e}"),
            }
        }
    });
    tasks
}

/// The peer source pushes counts into a channel; one task puts each new share in force.
/// The gate is ready (`/readyz`) once it has its first count and a limit.
fn spawn_peers(
    tasks: &mut JoinSet<()>,
    source: Box<dyn PeerSource>,
    control: Arc<LimitControl>,
    shutdown: &CancellationToken,
) {
    let (tx, mut rx) = mpsc::channel(16);
    let name = source.name();
    let token = shutdown.child_token();
    tasks.spawn(async move {
        match source.run(tx, token).await {
            Ok(()) => tracing::info!(source = name, "peer source stopped"),
            Err(e) => tracing::error!(
                source = name,
                "peer source failed; the last share stays in force: {e}"
            ),
        }
    });
    tasks.spawn(async move {
        while let Some(peers) = rx.recv().await {
            let before = control.current().peers;
            let applied = control.set_peers(peers);
            if before == peers.count {
                continue;
            }
            tracing::info!(
                peers = peers.count,
                rank = peers.rank,
                share = %serde_json::to_string(&applied.share).unwrap_or_default(),
                "gate replicas sharing the limit changed"
            );
        }
    });
}

/// Raise the open-file limit to the hard limit, and lower the connection cap to what the
/// descriptors allow, saying so: a cap the file limit cannot honour turns into accept
/// failures that lock out every new client instead of refusing the extra ones.
fn fit_file_limit(mut limits: ClientLimits, replicas: usize) -> ClientLimits {
    let nofile = match crate::util::rlimit::raise_nofile() {
        Ok(n) => {
            if n.after > n.before {
                tracing::info!(
                    from = n.before,
                    to = n.after,
                    "raised the open file limit to the hard limit"
                );
            } else {
                tracing::info!(limit = n.after, "open file limit (already the hard limit)");
            }
            n.after
        }
        Err(e) => {
            let now = crate::util::rlimit::nofile().unwrap_or(1024);
            tracing::warn!(limit = now, "cannot raise the open file limit: {e}");
            now
        }
    };
    let fit = limits::connections_that_fit(nofile, replicas);
    if limits.max_connections > fit {
        tracing::info!(
            max_connections = limits.max_connections,
            open_file_limit = nofile,
            lowered_to = fit,
            "--max-connections is more than the open file limit allows (each client connection may also hold one per upstream); lowering it"
        );
        limits.max_connections = fit;
    }
    limits
}
