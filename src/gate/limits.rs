//! What a client connection may hold, so slow or many clients cannot lock the others out
//! (slowloris): a deadline for a new connection's first byte, a total deadline for each
//! request head, a cap on open connections per client address and in all, and accept
//! failures logged at most once a second. The table of open connections, and which one
//! makes room for a newcomer at a cap, is [`super::conn_table`].
//!
//! A connection over a cap with no room to be made is refused the moment it is accepted:
//! a fixed 503 written without waiting, then closed. It never gets a task, a buffer or
//! upstream connections.

use std::time::{Duration, Instant};

/// The default total time for a request head, from its first byte (nginx's
/// client_header_timeout is 60 s per read; a total of 10 s serves any real client).
pub const DEFAULT_REQUEST_HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// The default time a new connection has to send its first byte. A client opens a
/// connection to send a request and sends it at once; one that says nothing held its slot
/// for the whole idle timeout (60 s), so 170 new silent connections a second kept 10,000
/// slots full. At 5 s that takes 2,000 a second, and a full table closes silent
/// connections first anyway ([`super::conn_table`]).
pub const DEFAULT_FIRST_BYTE_TIMEOUT: Duration = Duration::from_secs(5);
/// The default cap on open client connections.
pub const DEFAULT_MAX_CONNECTIONS: usize = 10_000;
/// The default cap on open connections from one address. High, because a load balancer
/// or a NAT in front of the gate brings many clients from one address.
pub const DEFAULT_MAX_CONNECTIONS_PER_ADDRESS: usize = 1_000;
/// File descriptors kept apart from client connections: listeners, the admin port, the
/// state file, logs.
const RESERVED_FDS: u64 = 64;

/// The limits on client connections (flags `--first-byte-timeout`,
/// `--request-head-timeout`, `--max-connections`, `--max-connections-per-address`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientLimits {
    /// A new connection must send its first byte this soon after it was accepted (closed
    /// without an answer otherwise: there is nothing to answer).
    pub first_byte_timeout: Duration,
    /// A request head must be complete this long after its first byte arrived (408 and
    /// close otherwise). A deadline, not an idle timer: one byte a second does not extend it.
    pub request_head_timeout: Duration,
    pub max_connections: usize,
    pub max_connections_per_address: usize,
}

impl Default for ClientLimits {
    fn default() -> Self {
        ClientLimits {
            first_byte_timeout: DEFAULT_FIRST_BYTE_TIMEOUT,
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
