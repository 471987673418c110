//! Process exit codes, in one place, because hooks and scripts branch on them.
//!
//! 0 done, 1 recovery failed or aborted, 2 bad input or usage, 3 refused or could not
//! start, nothing changed (lock held, precondition unmet, metrics or target unreachable).
//! `recover rehearse` adds 4: the trigger did not leave the system stuck, nothing to
//! recover. `recover detect` adds 10 stuck, 11 triggered, 12 unknown, 13 slow replica.

/// Every exit code `recover` uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Exit {
    /// The command did what was asked (for `detect`: the service is healthy).
    Done = 0,
    /// A recovery failed or was aborted.
    Failed = 1,
    /// Bad input or usage: nothing was changed.
    Usage = 2,
    /// Refused or could not start (a lock is held, a precondition is unmet, the metrics or
    /// the target cannot be reached, cancelled before acting); nothing was changed.
    Refused = 3,
    /// `rehearse`: the trigger did not leave the system stuck; nothing was recovered because
    /// nothing needed recovering (the report says which numbers to make harsher).
    NotStuck = 4,
    /// `detect`: the service is stuck (trigger gone, failure persists).
    Stuck = 10,
    /// `detect`: the trigger is still active.
    Triggered = 11,
    /// `detect`: data missing or stale; no verdict.
    Unknown = 12,
    /// `detect`: one replica far slower than its peers, the rest healthy; not a stuck
    /// overload (a code of its own so a hook does not run the stuck-overload runbook).
    SlowReplica = 13,
}

impl Exit {
    pub fn code(self) -> u8 {
        self as u8
    }
}

impl From<Exit> for std::process::ExitCode {
    fn from(e: Exit) -> Self {
        std::process::ExitCode::from(e.code())
    }
}
