//! What the journal says of each action the engine takes on its target: one variant per
//! action, written (and fsync'd) as `action_started` before the action runs, and again as
//! `action_finished` with what it observed. The fields an action only knows afterwards
//! (a drain's count, a restart's duration, the limit in force after) are absent from the
//! first record, and a figure the target did not give is [`Known::Unknown`], never a zero.
//!
//! The names in the `action` field are written here and nowhere else: readers (resume,
//! history) match the variants.

use crate::gate::limit::{Limit, LimitChange};
use crate::platform::Known;
use serde::{Deserialize, Serialize};

/// One action on the target, as the journal records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action")]
pub enum ActionRecord {
    /// `POST /admin/drain` on one replica: drops its queued requests, or all but those it
    /// answers before their clients' deadlines (`?keep=answerable`).
    #[serde(rename = "replica.drain")]
    Drain {
        replica: String,
        /// How many it dropped, as the replica said (after).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        drained: Option<Known<u64>>,
        /// How many it kept, as the replica said (after; only for a drain asked to keep:
        /// one that keeps nothing has none to report).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kept: Option<Known<u64>>,
    },
    /// One replica taken down and its replacement started.
    #[serde(rename = "replica.restart")]
    Restart {
        replica: String,
        /// How long the restart took (after).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        seconds: Option<f64>,
    },
    /// A restarted replica seen ready again: recorded once, after the wait (waiting
    /// changes nothing on the target).
    #[serde(rename = "replica.ready")]
    Ready { replica: String, seconds: f64 },
    /// `POST /admin/warm` on one replica.
    #[serde(rename = "replica.warm")]
    Warm {
        replica: String,
        /// The warm fraction the replica answered, or why there is none (after).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        warm_fraction: Option<Known<f64>>,
    },
    /// The gate's limit set to `new` (with `"fill": true` when its bucket was asked to
    /// start full, `"fill": N` to start with N tokens; the limit's note says why).
    #[serde(rename = "gate.set_limit")]
    SetLimit {
        /// The limit in force before, as the gate said.
        before: Known<Limit>,
        new: LimitChange,
        /// The limit in force after, as the gate said (after).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        after: Option<Known<Limit>>,
    },
    /// People told (`notify`).
    #[serde(rename = "notify")]
    Notify { message: String },
}

impl ActionRecord {
    /// The replica acted on, for actions on one replica.
    pub fn replica(&self) -> Option<&str> {
        match self {
            ActionRecord::Drain { replica, .. }
            | ActionRecord::Restart { replica, .. }
            | ActionRecord::Ready { replica, .. }
            | ActionRecord::Warm { replica, .. } => Some(replica),
            ActionRecord::SetLimit { .. } | ActionRecord::Notify { .. } => None,
        }
    }
}

/// Why a figure is unknown, in the journal's words.
pub fn unknown<T>(why: impl Into<String>) -> Known<T> {
    Known::Unknown {
        unknown: why.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::limit::Fill;

    #[test]
    fn records_read_back_as_written_and_name_their_action() {
        let drained = ActionRecord::Drain {
            replica: "replica-0".into(),
            drained: Some(Known::Value(12)),
            kept: None,
        };
        let json = serde_json::to_value(&drained).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"action": "replica.drain", "replica": "replica-0", "drained": 12})
        );
        let not_counted = ActionRecord::Drain {
            replica: "replica-1".into(),
            drained: Some(unknown("the reply carries no drained count")),
            kept: None,
        };
        let json = serde_json::to_value(&not_counted).unwrap();
        assert_eq!(
            json["drained"]["unknown"],
            "the reply carries no drained count"
        );
        let kept = ActionRecord::Drain {
            replica: "replica-0".into(),
            drained: Some(Known::Value(4550)),
            kept: Some(Known::Value(200)),
        };
        let json = serde_json::to_value(&kept).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"action": "replica.drain", "replica": "replica-0", "drained": 4550, "kept": 200})
        );
        let kept_unsaid = ActionRecord::Drain {
            replica: "replica-1".into(),
            drained: Some(Known::Value(40)),
            kept: Some(unknown("the reply carries no kept count")),
        };
        let json = serde_json::to_value(&kept_unsaid).unwrap();
        assert_eq!(json["kept"]["unknown"], "the reply carries no kept count");
        let set = ActionRecord::SetLimit {
            before: unknown("gate unreachable"),
            new: LimitChange::carried(Limit::unlimited()),
            after: Some(Known::Value(Limit::unlimited())),
        };
        let json = serde_json::to_value(&set).unwrap();
        assert_eq!(
            json["new"],
            serde_json::json!({"rate_per_s": null, "burst": 1, "max_in_flight": null})
        );
        let filled = ActionRecord::SetLimit {
            before: unknown("gate unreachable"),
            new: LimitChange {
                limit: Limit {
                    rate_per_s: Some(90.0),
                    burst: 90,
                    ..Limit::unlimited()
                },
                fill: Fill::Full,
            },
            after: None,
        };
        let json = serde_json::to_value(&filled).unwrap();
        assert_eq!(json["new"]["fill"], true, "{json}");
        assert_eq!(json["new"]["burst"], 90, "{json}");
        let partly = ActionRecord::SetLimit {
            before: unknown("gate unreachable"),
            new: LimitChange {
                fill: Fill::Tokens(85),
                ..match &filled {
                    ActionRecord::SetLimit { new, .. } => new.clone(),
                    _ => unreachable!(),
                }
            },
            after: None,
        };
        let json = serde_json::to_value(&partly).unwrap();
        assert_eq!(json["new"]["fill"], 85, "{json}");
        for r in [drained, not_counted, kept, kept_unsaid, set, filled, partly] {
            let text = serde_json::to_string(&r).unwrap();
            assert_eq!(serde_json::from_str::<ActionRecord>(&text).unwrap(), r);
        }
    }
}
