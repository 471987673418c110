//! The demo workers as a model: each client polls, waits for an answer up to its timeout,
//! and on failure retries under its policy (the crate's one [`crate::retry::RetryPolicy`],
//! max attempts, and a fleet-wide [`crate::retry::RetryBudget`], as the workers do).
//! State is a small plain struct per client so a run of 10,000 clients allocates nothing
//! per request.

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
