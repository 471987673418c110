//! The demo workers as a model: each client polls, waits for an answer up to its timeout,
//! and on failure retries under its policy (delay, backoff, jitter, max attempts, and a
//! fleet-wide retry budget). State is a small plain struct per client so a run of 10,000
//! clients allocates nothing per request.

/// Where a client is in its poll.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Between polls; `wake` is the next poll.
    Idle,
    /// An attempt is outstanding; `wake` is its timeout.
    Waiting,
    /// The last attempt failed; `wake` is the retry.
    Backoff,
}

#[derive(Debug, Clone, Copy)]
pub struct Client {
    /// The tick this client next acts at; wheel entries for other ticks are stale.
    pub wake: u32,
    /// Identifies the outstanding attempt, so a late answer to an abandoned one is wasted.
    pub seq: u32,
    /// When the outstanding attempt was sent (tick).
    pub sent: u32,
    /// Attempt number within the current poll (1 = first).
    pub attempt: u32,
    pub phase: Phase,
    /// The current poll has failed at least once.
    pub in_retry: bool,
}

impl Client {
    pub fn new(first_poll: u32) -> Self {
        Client {
            wake: first_poll,
            seq: 0,
            sent: 0,
            attempt: 0,
            phase: Phase::Idle,
            in_retry: false,
        }
    }
}

/// A fleet-wide retry budget (as in Finagle's RetryBudget and the demo workers): first
/// attempts deposit `ratio` tokens, a retry withdraws one, the pool is capped.
#[derive(Debug, Clone)]
pub struct RetryBudget {
    ratio: f64,
    tokens: f64,
    cap: f64,
}

impl RetryBudget {
    /// Pool capped at `ratio * clients` (at least one retry), starting full.
    pub fn new(ratio: f64, clients: u32) -> Self {
        let cap = (ratio * f64::from(clients)).max(1.0);
        RetryBudget {
            ratio,
            tokens: cap,
            cap,
        }
    }

    pub fn deposit(&mut self) {
        self.tokens = (self.tokens + self.ratio).min(self.cap);
    }

    pub fn try_withdraw(&mut self) -> bool {
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_allows_ratio_retries_per_first_attempt_once_the_pool_is_spent() {
        let mut b = RetryBudget::new(0.5, 2);
        assert!(b.try_withdraw());
        assert!(!b.try_withdraw());
        b.deposit();
        assert!(!b.try_withdraw());
        b.deposit();
        assert!(b.try_withdraw());
    }
}
