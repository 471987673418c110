//! The proxy's worker threads: one single-threaded runtime per core, each with its own
//! upstream connections, the way nginx runs one worker process per core, so that a
//! request and its upstream exchange stay on one thread with no cross-thread wake-ups.
//!
//! Every worker accepts on the one listening socket and the kernel wakes them all for a
//! new connection; the first to run takes it, and the next, and drains a burst of
//! connections while the others still wait for a core. Left to that race, a burst (a load
//! generator's, a retry storm's) lands on one worker: one core does all the work, and
//! each time the scheduler gives that core to another thread every connection stalls at
//! once. So the accepting worker places each connection ([`pick`]) and hands it, before
//! any byte is read, to the chosen worker through its inbox, the way HAProxy queues
//! accepted connections to a thread.
//!
//! When the workers are bound one to a CPU ([`super::placement`]), a connection goes to
//! the worker on the CPU its packets arrive on, while that worker is not much busier than
//! the least loaded. Spread evenly instead, each worker served connections from clients on
//! every CPU: a client thread sharing a CPU with a worker that the clients on the other
//! CPU kept busy waited for the scheduler to take that worker off the CPU, a whole slice,
//! on every request (`perf sched timehist`: about 2,000 context switches a second per
//! thread, with 7 ms tails). Kept together, the client and its worker take turns, tens of
//! thousands of times a second, and the tail is one turn. For a client across a network
//! the same rule keeps a connection on the CPU its receive queue interrupts. Where a
//! client thread runs when it connects is not always where it runs next, so every
//! [`connection::PLACE_EVERY`] requests, between two requests with nothing of the next
//! read, a connection not at home moves there if the home has room ([`moves_home`]),
//! leaving behind only its upstream connections.

use super::conn_table::{ConnectionTable, Slot};
use super::connection::{self, Ended, Timeouts};
use super::limits;
use super::placement;
use super::proxy::Proxy;
use super::telemetry::GateMetrics;
use super::{admission::Admission, attempts::Attempts, balance::Replicas};
use prometheus_client::metrics::gauge::Gauge;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// How long open connections get to finish their request after shutdown is asked for.
const DRAIN_GRACE: Duration = Duration::from_secs(5);

/// What each proxy worker needs; the limit state, the replica loads and the attempt
/// tables are shared by all (a client's next connection may land on another worker, and
/// its retry must still be seen as one).
#[derive(Clone)]
pub(super) struct ProxyParts {
    pub admission: Arc<Admission>,
    pub metrics: Arc<GateMetrics>,
    pub replicas: Arc<Replicas>,
    pub timeout: Duration,
    pub attempts: Arc<Attempts>,
    pub client_timeouts: Timeouts,
    pub connections: Arc<ConnectionTable>,
}

/// How many connections the worker on a connection's own CPU may hold past the least
/// loaded one (plus a quarter of that one's) and still be given it: enough for one client
/// thread's burst of connections to stay together on its CPU, not so many that a single
/// receive queue could put most of the load on one worker.
pub const HOME_SLACK: i64 = 16;

/// Which worker serves a connection that worker `own` accepted, given each worker's open
/// connections and `home`, the worker bound to the CPU the connection's packets arrive on
/// (when the workers are bound): `home` while it holds at most the least loaded's plus a
/// quarter plus [`HOME_SLACK`]; else `own` unless another holds fewer; else the first of
/// the least loaded.
pub fn pick(own: usize, home: Option<usize>, loads: &[i64]) -> usize {
    let least = loads
        .iter()
        .enumerate()
        .min_by_key(|&(i, load)| (*load, i))
        .map_or(own, |(i, _)| i);
    let least_load = loads.get(least).copied().unwrap_or(0);
    if let Some(h) = home.filter(|&h| h < loads.len()) {
        if loads[h] <= least_load + least_load / 4 + HOME_SLACK {
            return h;
        }
    }
    match loads.get(own) {
        Some(&mine) if mine <= least_load => own,
        _ => least,
    }
}

/// One open connection counted on the worker serving it, until dropped.
struct Load(Gauge);

impl Drop for Load {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// A connection accepted by one worker for another to serve.
struct Handed {
    stream: std::net::TcpStream,
    slot: Slot,
    load: Load,
    /// Served before by another worker (placed again between requests).
    moved: bool,
}

/// The workers' open connections and inboxes, shared by all of them.
struct Spread {
    loads: Vec<Gauge>,
    inboxes: Vec<mpsc::UnboundedSender<Handed>>,
    /// The CPU each worker is bound to, when they are.
    cpus: Option<Vec<usize>>,
}

impl Spread {
    /// Choose the worker for a connection `own` accepted and count it there at once, so
    /// the next choice (on any worker) sees it.
    fn place(&self, own: usize, stream: &TcpStream) -> (usize, Load) {
        let home = self.home(stream);
        let loads: Vec<i64> = self.loads.iter().map(Gauge::get).collect();
        let to = pick(own, home, &loads);
        (to, self.count_on(to))
    }

    fn count_on(&self, to: usize) -> Load {
        self.loads[to].inc();
        Load(self.loads[to].clone())
    }

    /// The worker bound to the CPU `stream`'s packets arrive on, when workers are bound.
    fn home(&self, stream: &TcpStream) -> Option<usize> {
        let cpus = self.cpus.as_ref()?;
        let cpu = placement::incoming_cpu(stream)?;
        cpus.iter().position(|&c| c == cpu)
    }

    /// Hand a connection that was served here to worker `to`, counted there.
    fn hand(&self, stream: TcpStream, slot: Slot, to: usize) {
        let load = self.count_on(to);
        self.send(stream, slot, load, to, true);
    }

    /// Out of this worker's reactor and into the other's; should that worker be gone
    /// (only when the gate stops) the connection closes with the message.
    fn send(&self, stream: TcpStream, slot: Slot, load: Load, to: usize, moved: bool) {
        match stream.into_std() {
            Ok(stream) => {
                let handed = Handed {
                    stream,
                    slot,
                    load,
                    moved,
                };
                let _ = self.inboxes[to].send(handed);
            }
            Err(e) => tracing::debug!("a connection could not be handed to worker {to}: {e}"),
        }
    }
}

/// A connection's view of where it is best served: its home worker, should it be
/// elsewhere and should that worker have room ([`moves_home`]).
struct Home {
    own: usize,
    spread: Arc<Spread>,
}

impl connection::Placement for Home {
    fn elsewhere(&self, client: &TcpStream) -> Option<usize> {
        let home = self.spread.home(client)?;
        let loads: Vec<i64> = self.spread.loads.iter().map(Gauge::get).collect();
        moves_home(self.own, home, &loads).then_some(home)
    }
}

/// Whether a connection served by `own` whose packets now arrive on worker `home`'s CPU
/// moves there: only to its home, and only while the home has room by [`pick`]'s measure
/// after taking it. A connection at home never leaves it, so none moves back and forth.
pub fn moves_home(own: usize, home: usize, loads: &[i64]) -> bool {
    if own == home || home >= loads.len() {
        return false;
    }
    let after = |w: usize| match w {
        w if w == home => loads[w] + 1,
        w if w == own => loads[w] - 1,
        w => loads[w],
    };
    let least = (0..loads.len()).map(after).min().unwrap_or(0);
    after(home) <= least + least / 4 + HOME_SLACK
}

/// Start `workers` proxy worker threads, all accepting on `listener`.
pub(super) fn spawn_proxy_workers(
    listener: TcpListener,
    parts: ProxyParts,
    workers: usize,
    shutdown: &CancellationToken,
) -> std::io::Result<Vec<std::thread::JoinHandle<()>>> {
    let listener = listener.into_std()?;
    let n = workers.max(1);
    let (inboxes, mut receivers): (Vec<_>, Vec<_>) =
        (0..n).map(|_| mpsc::unbounded_channel()).unzip();
    let cpus = placement::allowed_cpus().and_then(|allowed| placement::plan(&allowed, n));
    let spread = Arc::new(Spread {
        loads: (0..n)
            .map(|i| parts.metrics.worker_connections(i))
            .collect(),
        inboxes,
        cpus: cpus.clone(),
    });
    let mut threads = Vec::with_capacity(n);
    for (i, inbox) in receivers.drain(..).enumerate() {
        let cpu = cpus.as_ref().map(|cpus| cpus[i]);
        let listener = listener.try_clone()?;
        let parts = parts.clone();
        let shutdown = shutdown.clone();
        let spread = spread.clone();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let thread = std::thread::Builder::new()
            .name(format!("gate-proxy-{i}"))
            .spawn(move || {
                if let Some(cpu) = cpu {
                    match placement::bind_current_thread(cpu) {
                        Ok(()) => tracing::debug!("proxy worker {i} runs on CPU {cpu}"),
                        Err(e) => tracing::warn!("proxy worker {i} left unbound to CPU {cpu}: {e}"),
                    }
                }
                rt.block_on(async move {
                    let listener = match TcpListener::from_std(listener) {
                        Ok(l) => l,
                        Err(e) => {
                            tracing::error!("proxy worker {i} cannot use the listener: {e}");
                            shutdown.cancel();
                            return;
                        }
                    };
                    let proxy = Arc::new(Proxy::new(
                        parts.admission,
                        parts.metrics,
                        parts.replicas,
                        parts.timeout,
                        parts.attempts,
                    ));
                    tokio::spawn(keep_timer_armed(parts.timeout, shutdown.clone()));
                    let worker = Worker {
                        own: i,
                        proxy,
                        timeouts: parts.client_timeouts,
                        connections: parts.connections,
                        spread,
                    };
                    worker.accept_loop(listener, inbox, shutdown).await;
                });
            })?;
        threads.push(thread);
    }
    Ok(threads)
}

/// Every admitted request arms a timer (its upstream timeout). tokio wakes its driver
/// with an eventfd write whenever a new timer is due before every timer already armed,
/// which with idle moments in between is one syscall for every few requests (seen with
/// `perf`). A timer that is always armed and always due sooner than any request's keeps
/// those registrations silent; it costs this worker a few wake-ups per second.
async fn keep_timer_armed(upstream_timeout: Duration, shutdown: CancellationToken) {
    let period = (upstream_timeout / 2).clamp(Duration::from_millis(1), Duration::from_millis(100));
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
    }
}

/// One worker's share of the proxy: what its accept loop hands each connection it serves.
struct Worker {
    own: usize,
    proxy: Arc<Proxy>,
    timeouts: Timeouts,
    connections: Arc<ConnectionTable>,
    spread: Arc<Spread>,
}

impl Worker {
    async fn accept_loop(
        &self,
        listener: TcpListener,
        mut inbox: mpsc::UnboundedReceiver<Handed>,
        shutdown: CancellationToken,
    ) {
        let mut conns = JoinSet::new();
        loop {
            let (stream, slot, load, moved) = tokio::select! {
                _ = shutdown.cancelled() => break,
                Some(handed) = inbox.recv() => match TcpStream::from_std(handed.stream) {
                    Ok(stream) => (stream, handed.slot, handed.load, handed.moved),
                    Err(e) => {
                        tracing::debug!("a connection handed to worker {} was lost: {e}", self.own);
                        continue;
                    }
                },
                accepted = listener.accept() => match self.accepted(accepted).await {
                    Some((stream, slot, load)) => (stream, slot, load, false),
                    None => continue,
                },
            };
            while conns.try_join_next().is_some() {}
            let proxy = self.proxy.clone();
            let timeouts = self.timeouts;
            let home = Home {
                own: self.own,
                spread: self.spread.clone(),
            };
            conns.spawn(async move {
                let ended = connection::serve(stream, &proxy, timeouts, &slot, &home, moved).await;
                if let Ended::Move(stream, to) = ended {
                    drop(load);
                    home.spread.hand(stream, slot, to);
                }
            });
        }
        drop(listener);
        // Connections handed here and not yet taken are between requests or not begun:
        // they close now, like every waiting one, and any still on their way find the
        // inbox closed and close too, rather than wait unserved through the grace.
        inbox.close();
        while inbox.try_recv().is_ok() {}
        self.connections.drain();
        let _ = tokio::time::timeout(DRAIN_GRACE, async {
            while conns.join_next().await.is_some() {}
        })
        .await;
        conns.abort_all();
    }

    /// A connection this worker serves, or `None` when it was refused, failed, or went to
    /// another worker.
    async fn accepted(
        &self,
        accepted: std::io::Result<(TcpStream, SocketAddr)>,
    ) -> Option<(TcpStream, Slot, Load)> {
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors and the like: back off instead of spinning.
                self.connections.log_accept_error(&e);
                self.proxy.metrics.accept_error();
                tokio::time::sleep(Duration::from_millis(50)).await;
                return None;
            }
        };
        let slot = self.take_slot(&stream, peer)?;
        let _ = stream.set_nodelay(true);
        let (to, load) = self.spread.place(self.own, &stream);
        if to == self.own {
            return Some((stream, slot, load));
        }
        self.spread.send(stream, slot, load, to, false);
        None
    }

    /// A slot for a new connection (maybe after closing a waiting one for it), or `None`
    /// after refusing it at once: a 503 written only if the socket takes it now, then
    /// closed as `stream` drops.
    fn take_slot(&self, stream: &TcpStream, peer: SocketAddr) -> Option<Slot> {
        match self.connections.open(peer.ip()) {
            Ok(opened) => Some(opened.slot),
            Err(why) => {
                let _ = stream.try_write(limits::REFUSAL);
                self.proxy.metrics.connection_refused(why);
                self.connections.log_refusal(why, peer.ip());
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{moves_home, pick, HOME_SLACK};

    #[test]
    fn the_accepting_worker_keeps_a_connection_unless_another_holds_fewer() {
        assert_eq!(pick(0, None, &[0, 0]), 0);
        assert_eq!(pick(1, None, &[0, 0]), 1);
        assert_eq!(pick(0, None, &[1, 0]), 1);
        assert_eq!(pick(1, None, &[3, 3, 2, 2]), 2);
        assert_eq!(pick(3, None, &[3, 3, 2, 2]), 3);
        assert_eq!(pick(0, None, &[5]), 0);
    }

    #[test]
    fn a_burst_accepted_by_one_worker_ends_up_spread_evenly() {
        let mut loads = [0i64; 3];
        for _ in 0..31 {
            let to = pick(0, None, &loads);
            loads[to] += 1;
        }
        assert_eq!(loads, [11, 10, 10]);
    }

    #[test]
    fn two_client_threads_bursts_stay_each_on_its_own_cpus_worker() {
        let mut loads = [0i64; 2];
        for home in [0, 1] {
            for _ in 0..16 {
                let to = pick(0, Some(home), &loads);
                assert_eq!(to, home, "{loads:?}");
                loads[to] += 1;
            }
        }
        assert_eq!(loads, [16, 16]);
    }

    #[test]
    fn connections_all_arriving_on_one_cpu_still_reach_every_worker() {
        let mut loads = [0i64; 2];
        for _ in 0..1000 {
            let to = pick(0, Some(0), &loads);
            loads[to] += 1;
        }
        // The home worker holds at most a quarter over the other, plus the slack.
        assert!(loads[1] >= 400, "{loads:?}");
        assert!(
            loads[0] <= loads[1] + loads[1] / 4 + HOME_SLACK + 1,
            "{loads:?}"
        );
    }

    #[test]
    fn a_connection_moves_only_to_its_home_and_only_while_the_home_has_room() {
        assert!(moves_home(0, 1, &[16, 16]));
        assert!(!moves_home(1, 1, &[0, 40]), "at home: stays");
        assert!(!moves_home(0, 1, &[5, 5 + HOME_SLACK + 1]), "home full");
        assert!(!moves_home(0, 2, &[1, 1]), "no such worker");
    }

    #[test]
    fn connections_moving_home_settle_without_moving_back() {
        // 32 connections split evenly, all of whose clients now run on worker 0's CPU.
        let mut at = [vec![0usize; 16], vec![1usize; 16]].concat();
        for _round in 0..10 {
            for c in 0..at.len() {
                let loads = [0, 1].map(|w| at.iter().filter(|&&a| a == w).count() as i64);
                if moves_home(at[c], 0, &loads) {
                    at[c] = 0;
                }
            }
        }
        let on0 = at.iter().filter(|&&a| a == 0).count() as i64;
        let on1 = 32 - on0;
        assert!(
            on0 > 16 && on0 <= on1 + on1 / 4 + HOME_SLACK,
            "{on0} / {on1}"
        );
    }
}
