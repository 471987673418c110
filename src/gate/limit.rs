//! The gate's limit: the one value every other part of `recover` reads or writes.
//!
//! Its JSON form is the admin API's wire format and the state file's content:
//! `{"rate_per_s": number|null, "burst": integer, "max_in_flight": integer|null, "note": string|null}`.

use serde::{Deserialize, Serialize};

/// How much the gate admits. `None` means unlimited on that axis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limit {
    /// Admitted requests per second (GCRA). `None`: unlimited. `Some(0.0)`: block all.
    pub rate_per_s: Option<f64>,
    /// Requests that may be admitted back to back above the rate. At least 1 when a rate is set.
    pub burst: u32,
    /// Requests admitted and not yet answered. `None`: unlimited.
    pub max_in_flight: Option<u32>,
    /// Who set this limit and what a human should do about it; shown by `GET /admin/limit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Limit {
    /// Pass-through: no rate limit, no in-flight cap.
    pub fn unlimited() -> Self {
        Limit {
            rate_per_s: None,
            burst: 1,
            max_in_flight: None,
            note: None,
        }
    }

    /// True when this limit rejects every request.
    pub fn blocks_all(&self) -> bool {
        self.rate_per_s == Some(0.0) || self.max_in_flight == Some(0)
    }
}
