//! The webhook's answer, written as the alerts are decided: `{"mode", "group_key",
//! "decisions": [the first ANSWER_DECISIONS], "alerts": N, "counts": {decision: n}}`.
//! A decision is serialized the moment it is made and then dropped, and only the first
//! [`ANSWER_DECISIONS`] are listed: an answer listing every decision is about 350 bytes an
//! alert whatever the alert's size, so a notification of small alerts would make an
//! answer many times its own size. The counts say what happened to the rest; every
//! decision is in `GET /decisions` (the last 1000) and `recover_serve_decisions_total`.

use super::policy::Mode;
use super::runs::DecisionRecord;
use std::collections::BTreeMap;

/// Decisions listed in full in one answer.
pub const ANSWER_DECISIONS: usize = 1000;

/// An answer being written.
pub struct Answer {
    out: Vec<u8>,
    listed: usize,
    alerts: u64,
    counts: BTreeMap<String, u64>,
}

impl Answer {
    pub fn new(mode: Mode, group_key: &str) -> serde_json::Result<Self> {
        let mut out = Vec::with_capacity(4096);
        out.extend_from_slice(b"{\"mode\":");
        serde_json::to_writer(&mut out, &mode)?;
        out.extend_from_slice(b",\"group_key\":");
        serde_json::to_writer(&mut out, group_key)?;
        out.extend_from_slice(b",\"decisions\":[");
        Ok(Answer {
            out,
            listed: 0,
            alerts: 0,
            counts: BTreeMap::new(),
        })
    }

    /// Add one alert's decision.
    pub fn push(&mut self, d: &DecisionRecord) -> serde_json::Result<()> {
        self.alerts += 1;
        match self.counts.get_mut(&d.decision) {
            Some(n) => *n += 1,
            None => {
                self.counts.insert(d.decision.clone(), 1);
            }
        }
        if self.listed < ANSWER_DECISIONS {
            if self.listed > 0 {
                self.out.push(b',');
            }
            serde_json::to_writer(&mut self.out, d)?;
            self.listed += 1;
        }
        Ok(())
    }

    /// The JSON bytes.
    pub fn finish(mut self) -> serde_json::Result<Vec<u8>> {
        self.out.extend_from_slice(b"],\"alerts\":");
        serde_json::to_writer(&mut self.out, &self.alerts)?;
        self.out.extend_from_slice(b",\"counts\":");
        serde_json::to_writer(&mut self.out, &self.counts)?;
        self.out.push(b'}');
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::runs::Source;

    fn record(decision: &str, i: usize) -> DecisionRecord {
        DecisionRecord {
            seq: i as u64,
            at: "2026-01-01T00:00:00Z".into(),
            source: Source::Webhook,
            fingerprint: format!("f{i}"),
            alertname: "X".into(),
            status: "firing".into(),
            route: None,
            target: None,
            decision: decision.into(),
            message: "m".into(),
            run_id: None,
            check_id: None,
            verdict: None,
        }
    }

    #[test]
    fn lists_the_first_decisions_and_counts_them_all() {
        let mut a = Answer::new(Mode::Observe, "g\"k").unwrap();
        a.push(&record("checking", 0)).unwrap();
        for i in 1..=ANSWER_DECISIONS + 5 {
            a.push(&record("joined_check", i)).unwrap();
        }
        let v: serde_json::Value = serde_json::from_slice(&a.finish().unwrap()).unwrap();
        assert_eq!(v["group_key"], "g\"k");
        assert_eq!(v["decisions"].as_array().unwrap().len(), ANSWER_DECISIONS);
        assert_eq!(v["decisions"][0]["decision"], "checking");
        assert_eq!(v["alerts"], ANSWER_DECISIONS as u64 + 6);
        assert_eq!(v["counts"]["joined_check"], ANSWER_DECISIONS as u64 + 5);
        assert_eq!(v["counts"]["checking"], 1);
    }
}
