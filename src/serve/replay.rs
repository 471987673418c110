//! Signed webhooks are good once. A signature carries its timestamp, so outside its
//! window it is refused by [`super::auth::check`]; inside it, this remembers every
//! signature already used, and refuses it the second time. Entries are dropped once
//! their window has passed, so memory is bounded by the signed requests of one window;
//! past [`MAX_REMEMBERED`] of those the guard refuses new ones (it cannot tell a replay
//! from a new request without remembering it).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// Signed requests remembered at most (about 50 bytes each).
pub const MAX_REMEMBERED: usize = 100_000;

/// The signatures used within their window.
pub struct ReplayGuard {
    window: Duration,
    max: usize,
    seen: Mutex<HashMap<[u8; 32], u64>>,
}

/// Why a signed request was not let through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    Replayed,
    Full,
}

impl ReplayGuard {
    pub fn new(window: Duration, max: usize) -> Self {
        ReplayGuard {
            window,
            max,
            seen: Mutex::new(HashMap::new()),
        }
    }

    /// Record the first use of signature `mac` signed at `timestamp`, at `now` (Unix
    /// seconds); refuse a second use.
    pub fn first_use(&self, mac: [u8; 32], timestamp: u64, now: u64) -> Result<(), Refusal> {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if seen.contains_key(&mac) {
            return Err(Refusal::Replayed);
        }
        if seen.len() >= self.max {
            // A signature is refused once its timestamp is a window away from now.
            let window = self.window.as_secs();
            seen.retain(|_, &mut t| t.saturating_add(window) >= now);
            if seen.len() >= self.max {
                return Err(Refusal::Full);
            }
        }
        seen.insert(mac, timestamp);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mac(i: u32) -> [u8; 32] {
        let mut m = [0u8; 32];
        m[..4].copy_from_slice(&i.to_be_bytes());
        m
    }

    #[test]
    fn a_signature_is_let_through_once() {
        let g = ReplayGuard::new(Duration::from_secs(300), 10);
        assert_eq!(g.first_use(mac(1), 1000, 1000), Ok(()));
        assert_eq!(g.first_use(mac(1), 1000, 1001), Err(Refusal::Replayed));
        assert_eq!(g.first_use(mac(2), 1000, 1001), Ok(()));
    }

    #[test]
    fn memory_is_bounded_by_one_window_of_signatures() {
        let g = ReplayGuard::new(Duration::from_secs(300), 3);
        for i in 0..3 {
            assert_eq!(g.first_use(mac(i), 1000, 1000), Ok(()));
        }
        // Full of signatures still in their window: refused, not forgotten.
        assert_eq!(g.first_use(mac(9), 1000, 1200), Err(Refusal::Full));
        // Once they are out of their window they make room.
        assert_eq!(g.first_use(mac(9), 1400, 1400), Ok(()));
        assert_eq!(g.first_use(mac(10), 1400, 1400), Ok(()));
    }
}
