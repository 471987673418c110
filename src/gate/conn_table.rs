//! The open client connections, shared by every proxy worker: the caps on them in all and
//! per address ([`super::limits::admit`]), and which connection makes room when a cap is
//! reached.
//!
//! A full table that refused every newcomer would let connections doing nothing (a
//! thousand silent ones from one address, or idle keep-alive ones) lock everyone else
//! out. So when a newcomer meets a cap, one
//! connection that waits with no request begun ([`Presence`]) is closed for it, the way
//! nginx reuses idle keep-alive connections when it runs out: from the newcomer's own
//! address when that address is at its cap, else from the address holding the most
//! connections, so no address keeps more than its share while others wait. Silent
//! connections go first, then the longest idle. A connection inside a request is never
//! closed; when there is none to claim the newcomer is refused as before.
//!
//! The claimed connection closes asynchronously, so for a moment the table holds one more
//! than its cap; at most [`MAX_CLOSING`] such connections are outstanding, well inside the
//! descriptors kept apart for the gate itself.

use super::limits::{admit, ClientLimits, RateLimitedLog, Refused};
use super::presence::Presence;
use std::collections::{BTreeSet, HashMap};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Claimed connections not yet closed, at most.
pub const MAX_CLOSING: usize = 8;
/// Addresses tried, heaviest first, for a connection to claim when the table is full.
const ADDRESSES_TRIED: usize = 8;

#[derive(Default)]
struct Open {
    total: usize,
    by_addr: HashMap<IpAddr, HashMap<u64, Arc<Presence>>>,
    /// (open connections, address), to find the heaviest address without a scan.
    by_count: BTreeSet<(usize, IpAddr)>,
    next_id: u64,
    /// Claimed and not yet dropped: already out of `total`.
    closing: usize,
}

impl Open {
    fn count(&self, addr: &IpAddr) -> usize {
        self.by_addr.get(addr).map_or(0, HashMap::len)
    }

    fn insert(&mut self, addr: IpAddr, id: u64, presence: Arc<Presence>) {
        let before = self.count(&addr);
        self.by_addr.entry(addr).or_default().insert(id, presence);
        self.recount(addr, before, before + 1);
        self.total += 1;
    }

    fn remove(&mut self, addr: IpAddr, id: u64) {
        let before = self.count(&addr);
        let Some(conns) = self.by_addr.get_mut(&addr) else {
            return;
        };
        if conns.remove(&id).is_none() {
            return;
        }
        if conns.is_empty() {
            self.by_addr.remove(&addr);
        }
        self.recount(addr, before, before - 1);
        self.total = self.total.saturating_sub(1);
    }

    fn recount(&mut self, addr: IpAddr, before: usize, after: usize) {
        self.by_count.remove(&(before, addr));
        if after > 0 {
            self.by_count.insert((after, addr));
        }
    }

    /// Claim one waiting connection of `addr` (silent first, then the longest idle) and
    /// take it out of the counts. False when none can be claimed.
    fn claim_from(&mut self, addr: IpAddr) -> bool {
        let Some(conns) = self.by_addr.get(&addr) else {
            return false;
        };
        let mut waiting: Vec<_> = conns
            .iter()
            .filter_map(|(id, p)| p.eligibility().map(|e| (e, *id)))
            .collect();
        waiting.sort_unstable();
        let claimed = waiting
            .into_iter()
            .find(|(_, id)| conns.get(id).is_some_and(|p| p.evict()));
        let Some((_, id)) = claimed else {
            return false;
        };
        self.remove(addr, id);
        self.closing += 1;
        true
    }

    /// Claim every connection waiting with no request begun (the gate is stopping).
    fn claim_all_waiting(&mut self) {
        let claimed: Vec<(IpAddr, u64)> = self
            .by_addr
            .iter()
            .flat_map(|(addr, conns)| {
                conns
                    .iter()
                    .filter(|(_, p)| p.evict())
                    .map(move |(id, _)| (*addr, *id))
            })
            .collect();
        for (addr, id) in claimed {
            self.remove(addr, id);
            self.closing += 1;
        }
    }

    /// Make room for a newcomer from `addr` that meets `cap`; true when a connection was
    /// claimed for it.
    fn make_room(&mut self, addr: IpAddr, cap: Refused) -> bool {
        if self.closing >= MAX_CLOSING {
            return false;
        }
        match cap {
            Refused::PerAddress => self.claim_from(addr),
            Refused::Total => {
                let heaviest: Vec<IpAddr> = self
                    .by_count
                    .iter()
                    .rev()
                    .take(ADDRESSES_TRIED)
                    .map(|(_, a)| *a)
                    .collect();
                heaviest.into_iter().any(|a| self.claim_from(a))
            }
        }
    }
}

/// Open client connections, shared by every proxy worker.
pub struct ConnectionTable {
    limits: ClientLimits,
    open: Mutex<Open>,
    epoch: Instant,
    refusals: Mutex<RateLimitedLog>,
    accept_errors: Mutex<RateLimitedLog>,
    /// The gate is stopping. Read by every connection after each request; a flag rather
    /// than a waiter each connection registers on every wait for a request: a waiting
    /// connection learns of the stop through its [`Presence`], claimed by [`Self::drain`].
    draining: AtomicBool,
}

/// One open connection's place in the table, given back when it drops.
pub struct Slot {
    table: Arc<ConnectionTable>,
    addr: IpAddr,
    id: u64,
    presence: Arc<Presence>,
}

impl Slot {
    /// What the connection tells the table (idle, busy) and learns from it (closed for room).
    pub fn presence(&self) -> &Presence {
        &self.presence
    }

    /// Whether the gate is stopping ([`ConnectionTable::drain`]).
    pub fn draining(&self) -> bool {
        self.table.is_draining()
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.table.lock_open();
        if self.presence.is_evicted() {
            open.closing = open.closing.saturating_sub(1);
        } else {
            open.remove(self.addr, self.id);
        }
    }
}

/// A new connection's place, and whether an idle one was closed to make it.
pub struct Opened {
    pub slot: Slot,
    pub made_room: bool,
}

impl ConnectionTable {
    pub fn new(limits: ClientLimits) -> Arc<Self> {
        Arc::new(ConnectionTable {
            limits,
            open: Mutex::new(Open::default()),
            epoch: Instant::now(),
            refusals: Mutex::new(RateLimitedLog::new(Duration::from_secs(1))),
            accept_errors: Mutex::new(RateLimitedLog::new(Duration::from_secs(1))),
            draining: AtomicBool::new(false),
        })
    }

    pub fn limits(&self) -> &ClientLimits {
        &self.limits
    }

    fn lock_open(&self) -> std::sync::MutexGuard<'_, Open> {
        // The counts stay consistent even if a holder panicked: each update is one step.
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Take a slot for a connection from `addr`, closing a waiting connection for it when
    /// a cap is reached, or say which cap refuses it.
    pub fn open(self: &Arc<Self>, addr: IpAddr) -> Result<Opened, Refused> {
        let mut open = self.lock_open();
        let mut made_room = false;
        if let Err(cap) = admit(open.total, open.count(&addr), &self.limits) {
            // An address at its own cap can only be helped from its own connections, which
            // frees a place in all too; otherwise any address's will do.
            let own = open.count(&addr) >= self.limits.max_connections_per_address;
            let from = if own {
                Refused::PerAddress
            } else {
                Refused::Total
            };
            if !open.make_room(addr, from) {
                return Err(cap);
            }
            made_room = true;
        }
        let id = open.next_id;
        open.next_id += 1;
        let presence = Arc::new(Presence::new(self.epoch));
        open.insert(addr, id, presence.clone());
        Ok(Opened {
            slot: Slot {
                table: self.clone(),
                addr,
                id,
                presence,
            },
            made_room,
        })
    }

    /// Stop: every connection waiting with no request begun is woken to close now, and
    /// every other one closes after the request in hand. The flag is set before the
    /// claims and read after a connection marks itself waiting (both sequentially
    /// consistent), so a connection either is claimed or sees the flag.
    pub fn drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
        self.lock_open().claim_all_waiting();
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
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
                "refused client connections over a connection cap, none waiting to close for them"
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

#[cfg(test)]
mod tests {
    use super::*;

    fn table(total: usize, per: usize) -> Arc<ConnectionTable> {
        ConnectionTable::new(ClientLimits {
            max_connections: total,
            max_connections_per_address: per,
            ..ClientLimits::default()
        })
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn busy(t: &Arc<ConnectionTable>, addr: IpAddr) -> Slot {
        let s = t.open(addr).ok().unwrap().slot;
        assert!(s.presence().busy());
        s
    }

    #[test]
    fn slots_are_given_back_when_dropped() {
        let t = table(3, 2);
        let (a, b) = (ip("127.0.0.2"), ip("127.0.0.3"));
        let s1 = busy(&t, a);
        let _s2 = busy(&t, a);
        assert_eq!(t.open(a).err(), Some(Refused::PerAddress));
        let _s3 = busy(&t, b);
        assert_eq!(t.open(b).err(), Some(Refused::Total));
        drop(s1);
        assert_eq!(t.open_count(), 2);
        let _s4 = busy(&t, a);
        assert_eq!(t.open_count(), 3);
    }

    #[test]
    fn a_full_table_closes_a_silent_connection_of_the_heaviest_address() {
        let t = table(4, 4);
        let (heavy, other, newcomer) = (ip("10.0.0.1"), ip("10.0.0.2"), ip("10.0.0.3"));
        let heavy_silent: Vec<Slot> = (0..3).map(|_| t.open(heavy).ok().unwrap().slot).collect();
        let other_silent = t.open(other).ok().unwrap().slot;
        let opened = t.open(newcomer).ok().unwrap();
        assert!(opened.made_room);
        assert!(
            !other_silent.presence().is_evicted(),
            "the lighter address keeps its own"
        );
        let claimed = heavy_silent
            .iter()
            .filter(|s| s.presence().is_evicted())
            .count();
        assert_eq!(claimed, 1);
        assert_eq!(t.open_count(), 4);
        drop(heavy_silent);
        assert_eq!(t.open_count(), 2, "a claimed slot is not given back twice");
        assert_eq!(t.lock_open().closing, 0);
    }

    #[test]
    fn a_connection_inside_a_request_is_never_closed_for_room() {
        let t = table(2, 2);
        let a = ip("10.0.0.1");
        let _busy = [busy(&t, a), busy(&t, a)];
        assert_eq!(t.open(ip("10.0.0.2")).err(), Some(Refused::Total));
        assert_eq!(t.open(a).err(), Some(Refused::Total));
        let t = table(10, 2);
        let _busy = [busy(&t, a), busy(&t, a)];
        assert_eq!(t.open(a).err(), Some(Refused::PerAddress));
    }

    #[test]
    fn at_its_own_cap_an_address_makes_room_from_its_own_longest_idle() {
        // One address, as behind a load balancer: idle connections yield to new ones.
        let t = table(100, 2);
        let a = ip("10.0.0.1");
        let first = busy(&t, a);
        let second = busy(&t, a);
        assert!(first.presence().idle());
        std::thread::sleep(Duration::from_millis(5));
        assert!(second.presence().idle());
        let opened = t.open(a).ok().unwrap();
        assert!(opened.made_room);
        assert!(first.presence().is_evicted(), "the longest idle goes");
        assert!(!second.presence().is_evicted());
    }

    #[test]
    fn claims_in_flight_are_bounded() {
        let t = table(1, 1);
        let a = ip("10.0.0.1");
        let mut held = vec![t.open(a).ok().unwrap().slot];
        for _ in 0..MAX_CLOSING {
            held.push(t.open(a).ok().unwrap().slot);
        }
        assert_eq!(t.open(a).err(), Some(Refused::Total));
        held.remove(0); // one claimed connection closes
        assert!(t.open(a).is_ok());
    }
}
