//! What a continuous-model run produced: the per-second series and the summary a user
//! asks about (did it recover, how fast, how bad was the peak), read off the series by the
//! kernel's one recovery rule ([`Recovery`]).

use crate::gate::limit::Fill;
use crate::simulate::kernel::record::Recovery;
use serde::Serialize;

/// One simulated second.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Second {
    /// Start of the second, in seconds since the run began.
    pub t: u32,
    /// Attempts arriving at the edge (first attempts + retries).
    pub arriving: u64,
    pub first: u64,
    pub retries: u64,
    /// Turned away fast: by the gate, by shedding, or refused while down.
    pub rejected: u64,
    /// Answered within the client timeout (goodput).
    pub useful: u64,
    /// Served after the client had left (wasted work).
    pub abandoned: u64,
    /// Attempts whose client timed out.
    pub timeouts: u64,
    /// Polls given up (max attempts or retry budget).
    pub given_up: u64,
    /// Attempts sent in this second that failed (rejected, or timed out later).
    pub sent_failed: u64,
    /// Server queue depth at the end of the second.
    pub queue: u64,
    /// Clients whose current poll has failed at least once, at the end of the second.
    pub in_retry: u64,
    /// Useful requests per second the server can do right now (cold, overloaded: lower).
    pub capacity: f64,
    /// The gate's rate limit, if any.
    pub gate_rate: Option<f64>,
}

impl Second {
    /// Attempts sent in this second that were not served in time: the second is clean
    /// when every call arriving in it was served.
    pub fn failures(&self) -> u64 {
        self.sent_failed
    }
}

/// Calls (polls) accounted for: every poll started is served, given up or still pending.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    pub calls: u64,
    pub served: u64,
    pub given_up: u64,
    pub pending: u64,
    pub attempts: u64,
    pub abandoned_work: u64,
}

/// The summary and series of a `config-deploy`-style run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SystemReport {
    /// Times from the reference (trigger end, or the procedure start); the settle window
    /// is the parameters' `settle_window`.
    #[serde(flatten)]
    pub recovery: Recovery,
    /// What the times are measured from: "trigger_end" or "plan_start".
    pub reference: &'static str,
    pub reference_s: f64,
    /// Procedure relapses (0 without a plan).
    pub relapses: u32,
    /// What the procedure's drain found and did (none without a plan).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drain: Option<DrainSeen>,
    pub totals: Totals,
    pub series: Vec<Second>,
}

/// The procedure's drain: how synchronized the clients were when it came, and what it
/// dropped and kept.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DrainSeen {
    /// Clients waiting on an attempt still queued (not yet taken by a slot).
    pub clients_queued: u64,
    /// Queued requests taken out and answered with an error (a restart's lost work included).
    pub dropped: u64,
    /// Queued requests kept (`keep: answerable`).
    pub kept: u64,
    /// How the readmission's first limit started its bucket (`engine::restart::fill_reason`:
    /// full into a queue the drain left empty, the room the kept requests leave after one
    /// that kept some).
    pub fill: Fill,
}
