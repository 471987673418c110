//! `backlog.drain`: each replica drops its queued requests, or all but those it still
//! answers before their clients' deadlines (`keep: answerable`). What each dropped and kept
//! is journaled and said; what each kept is remembered for the readmission, which fills
//! the gate's first bucket only into a queue known empty.

use super::super::journal::ActionRecord;
use super::{Act, Ctx, Preview, StepFailure, Tally};
use crate::platform::admin::DrainCounts;
use crate::platform::{AdminOp, AdminReply, DrainKeep, Known};
use crate::runbook::action::BacklogDrain;
use std::sync::Arc;

#[async_trait::async_trait]
impl Act for BacklogDrain {
    async fn perform(&self, ctx: &Arc<Ctx>, step: &str, tally: &Tally) -> Result<(), StepFailure> {
        let mut drains = Drains {
            keep: self.keep,
            ..Drains::default()
        };
        drains.tally(tally);
        // Every replica at once: the gate is blocked until the readmission, and each
        // replica the drain reaches later has turned more of its live requests into
        // clients that come back a retry delay later, while the block turns away more.
        let replicas = ctx.platform.replicas().await?;
        for r in &replicas {
            ctx.started(
                step,
                ActionRecord::Drain {
                    replica: r.id.clone(),
                    drained: None,
                    kept: None,
                },
            )?;
        }
        let replies = futures::future::join_all(
            replicas
                .iter()
                .map(|r| ctx.platform.admin(&r.id, AdminOp::Drain(self.keep))),
        )
        .await;
        let mut failed = None;
        for (r, reply) in replicas.iter().zip(replies) {
            let replica = &r.id;
            let counts = match &reply {
                Ok(AdminReply::Drained(d)) => d.clone(),
                Ok(other) => DrainCounts::unread(
                    self.keep,
                    format!("{replica} answered a drain with {other:?}"),
                ),
                Err(e) => DrainCounts::unread(self.keep, format!("the call failed: {e}")),
            };
            drains.add(replica, &counts);
            drains.tally(tally);
            if matches!(reply, Ok(AdminReply::Drained(_))) {
                ctx.note_drained(replica, counts.kept.clone());
            }
            ctx.finished(
                step,
                ActionRecord::Drain {
                    replica: replica.clone(),
                    drained: Some(counts.dropped.clone()),
                    kept: (self.keep != DrainKeep::None).then(|| counts.kept.clone()),
                },
            )?;
            match reply {
                Ok(_) => ctx.info(step, drained_line(replica, self.keep, &counts)),
                Err(e) => {
                    failed.get_or_insert(e);
                }
            }
        }
        if let Some(e) = failed {
            return Err(e.into());
        }
        tally.say(drains.said());
        Ok(())
    }

    fn describe(&self, p: &Preview) -> Vec<String> {
        let on = p.replicas.join(", ");
        vec![match self.keep {
            DrainKeep::None => format!("POST /admin/drain on {on} at once (drops their queued requests)"),
            DrainKeep::Answerable => format!(
                "POST {} on {on} at once (drops their queued requests but the youngest each answers before its clients' deadlines; a service that does not say how many it kept leaves the readmission's first bucket empty)",
                AdminOp::Drain(self.keep).path()
            ),
        }]
    }
}

/// The run log's line for one replica's drain. Pure.
fn drained_line(replica: &str, keep: DrainKeep, counts: &DrainCounts) -> String {
    let dropped = match &counts.dropped {
        Known::Value(n) => format!("{replica}: dropped {n} queued requests"),
        Known::Unknown { unknown } => {
            format!("{replica}: dropped its queued requests, how many is unknown: {unknown}")
        }
    };
    match (keep, &counts.kept) {
        (DrainKeep::None, _) => dropped,
        (DrainKeep::Answerable, Known::Value(n)) => {
            format!("{dropped}, kept {n} it answers before their deadlines")
        }
        (DrainKeep::Answerable, Known::Unknown { unknown }) => {
            format!("{dropped}; how many it kept is unknown: {unknown}")
        }
    }
}

/// What a drain step dropped and kept: the counts the replicas gave, and which gave none.
/// The step's `drained` figure is the total only while every replica said; otherwise it is
/// absent and `drain_counts_unknown` counts the replicas that did not. Likewise `kept`
/// (a step asked to keep the answerable requests) and `kept_counts_unknown`. Pure.
#[derive(Debug, Default)]
struct Drains {
    keep: DrainKeep,
    counted: u64,
    unknown: Vec<String>,
    kept: u64,
    kept_unknown: Vec<String>,
}

impl Drains {
    fn add(&mut self, replica: &str, counts: &DrainCounts) {
        match counts.dropped {
            Known::Value(n) => self.counted += n,
            Known::Unknown { .. } => self.unknown.push(replica.to_string()),
        }
        match counts.kept {
            Known::Value(n) => self.kept += n,
            Known::Unknown { .. } => self.kept_unknown.push(replica.to_string()),
        }
    }

    fn tally(&self, tally: &Tally) {
        if self.unknown.is_empty() {
            tally.set("drained", self.counted as f64);
        } else {
            tally.forget("drained");
            tally.set("drain_counts_unknown", self.unknown.len() as f64);
        }
        if self.keep == DrainKeep::None {
            return;
        }
        if self.kept_unknown.is_empty() {
            tally.set("kept", self.kept as f64);
        } else {
            tally.forget("kept");
            tally.set("kept_counts_unknown", self.kept_unknown.len() as f64);
        }
    }

    fn said(&self) -> String {
        let dropped = match self.unknown.as_slice() {
            [] => format!("dropped {} queued requests on purpose", self.counted),
            unknown => format!(
                "dropped {} queued requests on purpose, and an unknown number on {} (no count in the reply)",
                self.counted,
                unknown.join(", ")
            ),
        };
        if self.keep == DrainKeep::None {
            return dropped;
        }
        match self.kept_unknown.as_slice() {
            [] => format!(
                "{dropped}; kept {} the replicas answer before their clients' deadlines",
                self.kept
            ),
            unknown => format!(
                "{dropped}; kept {} the replicas answer before their clients' deadlines, and an unknown number on {} (no kept count in the reply)",
                self.kept,
                unknown.join(", ")
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::journal::unknown;
    use super::*;

    fn counts(dropped: u64, kept: Option<u64>) -> DrainCounts {
        DrainCounts {
            dropped: Known::Value(dropped),
            kept: kept.map_or_else(|| unknown("no kept count"), Known::Value),
        }
    }

    /// A step's `kept` figure is a sum only while every replica said; a replica that did
    /// not is counted apart, never as 0.
    #[test]
    fn kept_is_summed_only_while_every_replica_says() {
        let mut d = Drains {
            keep: DrainKeep::Answerable,
            ..Drains::default()
        };
        d.add("r0", &counts(40, Some(3)));
        let tally = Tally::default();
        d.tally(&tally);
        assert_eq!(tally.snapshot().figures.get("kept"), Some(&3.0));
        d.add("r1", &counts(10, None));
        d.tally(&tally);
        let figures = tally.snapshot().figures;
        assert_eq!(figures.get("kept"), None, "{figures:?}");
        assert_eq!(figures.get("kept_counts_unknown"), Some(&1.0));
        assert_eq!(figures.get("drained"), Some(&50.0));
        assert!(d.said().contains("an unknown number on r1"), "{}", d.said());
        // A drain that keeps nothing keeps 0 whatever its reply says, and has no `kept`.
        let mut none = Drains::default();
        none.add("r0", &counts(40, None));
        let tally = Tally::default();
        none.tally(&tally);
        assert_eq!(tally.snapshot().figures.get("kept"), None);
        assert_eq!(none.said(), "dropped 40 queued requests on purpose");
        assert_eq!(
            drained_line("r0", DrainKeep::Answerable, &counts(7, None)),
            "r0: dropped 7 queued requests; how many it kept is unknown: no kept count"
        );
    }
}
