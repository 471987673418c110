//! What a client connection may hold, so slow or many clients cannot lock the others out
//! (slowloris): a total deadline for each request head, a cap on open connections per
//! client address and in all, and accept failures logged at most once a second.
//!
//! A connection over a cap is refused the moment it is accepted: a fixed 503 written
//! without waiting, then closed. It never gets a task, a buffer or upstream connections.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The default total time for a request head, from its first byte (nginx's
/// client_header_timeout is 60 s per read; a total of 10 s serves any real client).
pub const DEFAULT_REQUEST_HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// The default cap on open client connections.
pub const DEFAULT_MAX_CONNECTIONS: usize = 10_000;
/// The default cap on open connections from one address. High, because a load balancer
/// or a NAT in front of the gate brings many clients from one address.
pub const DEFAULT_MAX_CONNECTIONS_PER_ADDRESS: usize = 1_000;
/// File descriptors kept apart from client connections: listeners, the admin port, the
/// state file, logs.
const RESERVED_FDS: u64 = 64;

/// The limits on client connections (flags `--request-head-timeout`, `--max-connections`,
/// `--max-connections-per-address`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientLimits {
    /// A request head must be complete this long after its first byte arrived (408 and
    /// close otherwise). A deadline, not an idle timer: one byte a second does not extend it.
    pub request_head_timeout: Duration,
    pub max_connections: usize,
    pub max_connections_per_address: usize,
}

impl Default for ClientLimits {
    fn default() -> Self {
        ClientLimits {
            request_head_timeout: DEFAULT_REQUEST_HEAD_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_connections_per_address: DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
        }
    }
}

/// Pure: how many client connections fit in `nofile` descriptors when each may also hold
/// one idle connection per upstream replica.
pub fn connections_that_fit(nofile: u64, replicas: usize) -> usize {
    let per_client = 1 + replicas as u64;
    (nofile.saturating_sub(RESERVED_FDS) / per_client).max(1) as usize
}

/// Why a connection was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    Total,
    PerAddress,
}

impl Refused {
    pub fn as_str(self) -> &'static str {
        match self {
            Refused::Total => "max_connections",
            Refused::PerAddress => "max_connections_per_address",
        }
    }
}

/// Pure: may one more connection open, with `total` open and `from_addr` from its address?
pub fn admit(total: usize, from_addr: usize, limits: &ClientLimits) -> Result<(), Refused> {
    if total >= limits.max_connections {
        Err(Refused::Total)
    } else if from_addr >= limits.max_connections_per_address {
        Err(Refused::PerAddress)
    } else {
        Ok(())
    }
}

/// The answer to a refused connection, written without waiting: the socket's send buffer
/// is empty, so it goes out whole or not at all.
pub const REFUSAL: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nretry-after: 1\r\ncontent-length: 25\r\nconnection: close\r\ncontent-type: text/plain\r\n\r\ntoo many open connections";

#[derive(Default)]
struct Open {
    total: usize,
    by_addr: HashMap<IpAddr, usize>,
}

/// Open client connections, shared by every proxy worker.
pub struct ConnectionTable {
    limits: ClientLimits,
    open: Mutex<Open>,
    refusals: Mutex<RateLimitedLog>,
    accept_errors: Mutex<RateLimitedLog>,
}

/// One open connection's place in the table, given back when it drops.
pub struct Slot {
    table: Arc<ConnectionTable>,
    addr: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.table.lock_open();
        open.total = open.total.saturating_sub(1);
        if let Some(n) = open.by_addr.get_mut(&self.addr) {
            *n -= 1;
            if *n == 0 {
                open.by_addr.remove(&self.addr);
            }
        }
    }
}

impl ConnectionTable {
    pub fn new(limits: ClientLimits) -> Arc<Self> {
        Arc::new(ConnectionTable {
            limits,
            open: Mutex::new(Open::default()),
            refusals: Mutex::new(RateLimitedLog::new(Duration::from_secs(1))),
            accept_errors: Mutex::new(RateLimitedLog::new(Duration::from_secs(1))),
        })
    }

    pub fn limits(&self) -> &ClientLimits {
        &self.limits
    }

    fn lock_open(&self) -> std::sync::MutexGuard<'_, Open> {
        // The counts stay consistent even if a holder panicked: each update is one step.
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Take a slot for a connection from `addr`, or say which cap refuses it.
    pub fn open(self: &Arc<Self>, addr: IpAddr) -> Result<Slot, Refused> {
        let mut open = self.lock_open();
        let from_addr = open.by_addr.get(&addr).copied().unwrap_or(0);
        admit(open.total, from_addr, &self.limits)?;
        open.total += 1;
        *open.by_addr.entry(addr).or_insert(0) += 1;
        Ok(Slot {
            table: self.clone(),
            addr,
        })
    }

    /// Open connections now (all addresses).
    pub fn open_count(&self) -> usize {
        self.lock_open().total
    }

    /// Log a refusal, at most once a second with how many there were.
    pub fn log_refusal(&self, why: Refused, addr: IpAddr) {
        let due = self
            .refusals
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .record(Instant::now());
        if let Some(count) = due {
            let limits = &self.limits;
            tracing::warn!(
                count,
                last_address = %addr,
                cap = why.as_str(),
                max_connections = limits.max_connections,
                max_connections_per_address = limits.max_connections_per_address,
                "refused client connections over a connection cap"
            );
        }
    }

    /// Log a failed accept (out of file descriptors and the like), at most once a second
    /// with how many failed: a full table fails every accept, thousands of times a second.
    pub fn log_accept_error(&self, e: &std::io::Error) {
        let due = self
            .accept_errors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .record(Instant::now());
        if let Some(count) = due {
            tracing::warn!(count, "accept failed: {e}");
        }
    }
}

/// Counts events and says when to log them: the first at once, then at most one line per
/// `every`, carrying how many happened since the last line.
#[derive(Debug)]
pub struct RateLimitedLog {
    every: Duration,
    last: Option<Instant>,
    pending: u64,
}

impl RateLimitedLog {
    pub fn new(every: Duration) -> Self {
        RateLimitedLog {
            every,
            last: None,
            pending: 0,
        }
    }

    /// Count one event at `now`; `Some(n)` when a line is due, covering `n` events.
    pub fn record(&mut self, now: Instant) -> Option<u64> {
        self.pending += 1;
        let due = self
            .last
            .is_none_or(|last| now.saturating_duration_since(last) >= self.every);
        if !due {
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.pending))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(total: usize, per: usize) -> ClientLimits {
        ClientLimits {
            max_connections: total,
            max_connections_per_address: per,
            ..ClientLimits::default()
        }
    }

    #[test]
    fn caps_refuse_the_connection_that_would_pass_them() {
        let l = limits(3, 2);
        assert_eq!(admit(0, 0, &l), Ok(()));
        assert_eq!(admit(2, 1, &l), Ok(()));
        assert_eq!(admit(2, 2, &l), Err(Refused::PerAddress));
        assert_eq!(admit(3, 0, &l), Err(Refused::Total));
    }

    #[test]
    fn slots_are_given_back_when_dropped() {
        let t = ConnectionTable::new(limits(3, 2));
        let a: IpAddr = "127.0.0.2".parse().unwrap();
        let b: IpAddr = "127.0.0.3".parse().unwrap();
        let s1 = t.open(a).unwrap();
        let _s2 = t.open(a).unwrap();
        assert_eq!(t.open(a).err(), Some(Refused::PerAddress));
        let _s3 = t.open(b).unwrap();
        assert_eq!(t.open(b).err(), Some(Refused::Total));
        drop(s1);
        assert_eq!(t.open_count(), 2);
        let _s4 = t.open(a).unwrap();
        assert_eq!(t.open_count(), 3);
    }

    #[test]
    fn descriptors_bound_the_connections() {
        assert_eq!(connections_that_fit(1024, 1), 480);
        assert_eq!(connections_that_fit(1024, 3), 240);
        assert_eq!(connections_that_fit(10, 1), 1);
    }

    #[test]
    fn log_lines_come_at_most_once_per_period_with_the_count() {
        let mut log = RateLimitedLog::new(Duration::from_secs(1));
        let t0 = Instant::now();
        assert_eq!(log.record(t0), Some(1));
        for i in 1..=40 {
            assert_eq!(log.record(t0 + Duration::from_millis(i * 20)), None);
        }
        assert_eq!(log.record(t0 + Duration::from_millis(1000)), Some(41));
        assert_eq!(log.record(t0 + Duration::from_millis(1001)), None);
    }
}
