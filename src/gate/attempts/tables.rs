//! The bounded memories behind [`super::Attempts`]: request keys seen recently, and the
//! retries each client address is owed after a failure. Fixed tables of hashed entries,
//! each packed into one atomic, so memory is flat under any traffic and no lock is taken;
//! collisions and evictions only make the estimate rougher. Pure over a millisecond clock.

use std::hash::{BuildHasher, RandomState};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

fn table(slots: usize) -> Box<[AtomicU64]> {
    (0..slots.next_power_of_two())
        .map(|_| AtomicU64::new(0))
        .collect()
}

/// Request keys seen recently. Each slot packs a 24-bit tag of the key's hash and the
/// time it was last seen (40 bits of milliseconds, plus one so 0 means empty); a key may
/// sit in either slot of its pair.
pub struct RecentKeys {
    slots: Box<[AtomicU64]>,
    hasher: RandomState,
    window_ms: u64,
}

const TIME_BITS: u32 = 40;
const TIME_MASK: u64 = (1 << TIME_BITS) - 1;

impl RecentKeys {
    pub fn new(slots: usize, window: Duration) -> Self {
        RecentKeys {
            slots: table(slots.max(2)),
            hasher: RandomState::new(),
            window_ms: window.as_millis() as u64,
        }
    }

    /// True when `key` was seen within the window (so this request is a retry); the key
    /// is remembered as seen now either way.
    pub fn seen(&self, key: &[u8], now_ms: u64) -> bool {
        let h = self.hasher.hash_one(key);
        let tag = (h >> TIME_BITS) | 1; // never 0: an empty slot has tag 0
        let pair = (h as usize) & (self.slots.len() - 1) & !1;
        let stamp = (now_ms & TIME_MASK) + 1;
        let entry = (tag << TIME_BITS) | stamp;
        let fresh = |e: u64| {
            let t = (e & TIME_MASK).saturating_sub(1);
            e != 0 && now_ms.saturating_sub(t) <= self.window_ms
        };
        let slots = [&self.slots[pair], &self.slots[pair + 1]];
        let now: [u64; 2] = slots.map(|s| s.load(Ordering::Relaxed));
        if let Some(i) = (0..2).find(|&i| now[i] >> TIME_BITS == tag && fresh(now[i])) {
            slots[i].store(entry, Ordering::Relaxed);
            return true;
        }
        // Replace whichever slot holds the older (or no, or a stale) entry.
        let victim =
            if !fresh(now[0]) || (fresh(now[1]) && now[0] & TIME_MASK <= now[1] & TIME_MASK) {
                0
            } else {
                1
            };
        slots[victim].store(entry, Ordering::Relaxed);
        false
    }
}

/// Failures the gate gave each client address recently, as retries owed. Each slot packs
/// a 16-bit tag of the address's hash, a 16-bit count of failures not yet matched by a
/// retry, and the time of the last failure (32 bits of 10 ms ticks, plus one).
pub struct FailedClients {
    slots: Box<[AtomicU64]>,
    hasher: RandomState,
    horizon_ticks: u64,
}

const TICK_MS: u64 = 10;

/// One client address's place in [`FailedClients`], from [`FailedClients::locate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientSlot {
    index: usize,
    tag: u64,
}

impl FailedClients {
    pub fn new(slots: usize, horizon: Duration) -> Self {
        FailedClients {
            slots: table(slots.max(1)),
            hasher: RandomState::new(),
            horizon_ticks: horizon.as_millis() as u64 / TICK_MS,
        }
    }

    /// Where `client`'s failures are kept: hash the address once per request, for its
    /// look-up and for the failure it may end in.
    pub fn locate(&self, client: IpAddr) -> ClientSlot {
        let h = self.hasher.hash_one(client);
        ClientSlot {
            index: (h as usize) & (self.slots.len() - 1),
            tag: (h >> 48) | 1,
        }
    }

    fn slot(&self, at: ClientSlot) -> (&AtomicU64, u64) {
        (&self.slots[at.index & (self.slots.len() - 1)], at.tag)
    }

    /// `(tag, owed)` of a slot value still inside the horizon at tick `now`.
    fn live(&self, v: u64, now: u64) -> Option<(u64, u64)> {
        let t = (v & 0xFFFF_FFFF).checked_sub(1)?;
        (now.saturating_sub(t) <= self.horizon_ticks).then_some((v >> 48, (v >> 32) & 0xFFFF))
    }

    fn update(&self, slot: &AtomicU64, f: impl Fn(u64) -> Option<u64>) -> bool {
        slot.fetch_update(Ordering::Relaxed, Ordering::Relaxed, f)
            .is_ok()
    }

    /// The gate answered the client at `at` with a 429, a 5xx or a timeout at `now_ms`.
    pub fn failed(&self, at: ClientSlot, now_ms: u64) {
        let (slot, tag) = self.slot(at);
        let now = now_ms / TICK_MS;
        let stamp = (now & 0xFFFF_FFFF) + 1;
        self.update(slot, |v| {
            let owed = match self.live(v, now) {
                Some((t, owed)) if t == tag => (owed + 1).min(0xFFFF),
                _ => 1,
            };
            Some((tag << 48) | (owed << 32) | stamp)
        });
    }

    /// True when the client at `at` is owed a retry (a failure within the horizon not yet matched):
    /// this request is taken to be that retry.
    pub fn take_retry(&self, at: ClientSlot, now_ms: u64) -> bool {
        let (slot, tag) = self.slot(at);
        let now = now_ms / TICK_MS;
        self.update(slot, |v| match self.live(v, now) {
            Some((t, owed)) if t == tag && owed > 0 => Some(v - (1 << 32)),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::attempts::{KEY_SLOTS, KEY_WINDOW};

    #[test]
    fn a_key_seen_within_the_window_is_a_retry() {
        let keys = RecentKeys::new(64, Duration::from_secs(30));
        assert!(!keys.seen(b"poll-1", 1_000));
        assert!(keys.seen(b"poll-1", 3_000));
        assert!(!keys.seen(b"poll-2", 3_000));
        // Seen again after the window: a new request with a reused key.
        assert!(!keys.seen(b"poll-1", 3_000 + 30_001));
    }

    #[test]
    fn memory_stays_flat_and_false_retries_stay_rare_under_a_flood_of_keys() {
        let keys = RecentKeys::new(KEY_SLOTS, KEY_WINDOW);
        let mut false_retries = 0;
        let n = 1_000_000u64;
        for i in 0..n {
            // A million distinct keys within one second: the table is far too small to
            // hold them, and must neither grow nor call them retries.
            if keys.seen(&i.to_le_bytes(), i / 1000) {
                false_retries += 1;
            }
        }
        assert_eq!(keys.slots.len(), KEY_SLOTS);
        assert!(
            false_retries < n / 10_000,
            "{false_retries} false retries in {n}"
        );
    }

    #[test]
    fn each_failure_predicts_one_retry_from_that_client_within_the_horizon() {
        let c = FailedClients::new(64, Duration::from_secs(10));
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let (a, b) = (c.locate(a), c.locate(b));
        assert!(!c.take_retry(a, 0));
        c.failed(a, 100);
        c.failed(a, 200);
        assert!(!c.take_retry(b, 300));
        assert!(c.take_retry(a, 1_200));
        assert!(c.take_retry(a, 1_300));
        assert!(!c.take_retry(a, 1_400), "two failures, two retries");
        c.failed(a, 2_000);
        assert!(!c.take_retry(a, 2_000 + 10_100), "past the horizon");
    }
}
