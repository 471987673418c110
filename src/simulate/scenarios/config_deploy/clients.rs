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
    /// The tick of its first poll: its polls keep this phase within the interval.
    pub first: u32,
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
            first: first_poll,
        }
    }

    /// Its next poll after a poll ended at `now`: the next of its slots `first + m x
    /// interval` after `now`, as a demo worker polls (`demo::workers::poller::next_slot`).
    /// A poll that outlived its slot skips the slots it missed, so polls keep their phases
    /// after an outage instead of coming back together one interval after it.
    pub fn next_slot(&self, interval: u32, now: u32) -> u32 {
        let interval = interval.max(1);
        if now < self.first {
            return self.first;
        }
        let n = (now - self.first) / interval + 1;
        self.first.saturating_add(n.saturating_mul(interval))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As `demo::workers::poller::next_slot`: the slot after `now`, keeping the phase.
    #[test]
    fn polls_keep_their_phase_and_skip_missed_slots() {
        let c = Client::new(3);
        assert_eq!(c.next_slot(10, 0), 3);
        assert_eq!(c.next_slot(10, 3), 13);
        assert_eq!(c.next_slot(10, 5), 13);
        // A retry loop of 25 ticks skipped two slots.
        assert_eq!(c.next_slot(10, 28), 33);
    }
}
