//! The remediation budget and breaker per target: what stops an alert loop from becoming
//! a restart storm. At most N runs per target within a sliding window, and after M failed
//! or aborted runs the target is left alone until a human resets it. Kept as plain data
//! with a clock passed in, so every rule is unit-tested, and serialisable, so an open
//! breaker survives a restart of the receiver.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use super::config::BudgetConfig;
use super::standing::StandingLimit;

/// One target's record.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TargetBudget {
    /// When runs started (pruned to the window).
    #[serde(with = "crate::util::time::rfc3339::vec")]
    pub starts: Vec<SystemTime>,
    /// Failed or aborted runs since the last reset.
    pub failures: u32,
    /// Set when the breaker opened; cleared only by a reset.
    #[serde(with = "crate::util::time::rfc3339::option")]
    pub breaker_opened_at: Option<SystemTime>,
    /// The last failures, newest last, for the loud message.
    pub last_failures: Vec<String>,
    /// When the last run on this target ended (for the cooldown).
    #[serde(default, with = "crate::util::time::rfc3339::option")]
    pub last_finished: Option<SystemTime>,
    /// A limit a failed or aborted run left on the gate, until the gate is read without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub standing: Option<StandingLimit>,
}

/// What the decision logic needs to know about a target's budget now.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BudgetView {
    pub used: u32,
    pub limit: u32,
    pub remaining: u32,
    /// When the oldest counted run leaves the window (a slot frees up).
    #[serde(with = "crate::util::time::rfc3339::option")]
    pub next_slot_at: Option<SystemTime>,
    pub breaker_open: bool,
    pub failures: u32,
    pub breaker_after: u32,
    /// No new run before this time (the last run ended less than `cooldown` ago).
    #[serde(with = "crate::util::time::rfc3339::option")]
    pub cooldown_until: Option<SystemTime>,
    /// A failed or aborted run's limit still on the gate.
    pub standing: Option<StandingLimit>,
}

/// Budgets of all targets.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BudgetBook {
    pub targets: BTreeMap<String, TargetBudget>,
}

impl BudgetBook {
    pub fn view(&self, cfg: &BudgetConfig, target: &str, now: SystemTime) -> BudgetView {
        let t = self.targets.get(target).cloned().unwrap_or_default();
        let in_window: Vec<SystemTime> = t
            .starts
            .iter()
            .copied()
            .filter(|s| within(*s, now, cfg.window))
            .collect();
        let used = in_window.len() as u32;
        BudgetView {
            used,
            limit: cfg.runs_per_window,
            remaining: cfg.runs_per_window.saturating_sub(used),
            next_slot_at: in_window.iter().min().map(|s| *s + cfg.window),
            breaker_open: t.breaker_opened_at.is_some(),
            failures: t.failures,
            breaker_after: cfg.breaker_after_failures,
            cooldown_until: t
                .last_finished
                .map(|f| f + cfg.cooldown)
                .filter(|until| *until > now),
            standing: t.standing,
        }
    }

    /// Count a run against the budget.
    pub fn record_start(&mut self, cfg: &BudgetConfig, target: &str, now: SystemTime) {
        let t = self.targets.entry(target.to_string()).or_default();
        t.starts.retain(|s| within(*s, now, cfg.window));
        t.starts.push(now);
    }

    /// Take back the newest start of `target`: its run was refused before its first
    /// action, so it changed nothing and spends nothing (no budget, no cooldown).
    pub fn cancel_last_start(&mut self, target: &str) {
        if let Some(t) = self.targets.get_mut(target) {
            t.starts.pop();
        }
    }

    /// Record a finished run. Returns true if this outcome opened the breaker.
    pub fn record_outcome(
        &mut self,
        cfg: &BudgetConfig,
        target: &str,
        failed: bool,
        note: &str,
        now: SystemTime,
    ) -> bool {
        let t = self.targets.entry(target.to_string()).or_default();
        t.last_finished = Some(now);
        if !failed {
            return false;
        }
        t.failures += 1;
        t.last_failures.push(note.to_string());
        if t.last_failures.len() > 5 {
            t.last_failures.remove(0);
        }
        if t.breaker_opened_at.is_none() && t.failures >= cfg.breaker_after_failures {
            t.breaker_opened_at = Some(now);
            return true;
        }
        false
    }

    /// A human reset: close the breaker and forget failures; with `budget`, also free the
    /// run budget. Returns the state before the reset.
    pub fn reset(&mut self, target: &str, budget: bool) -> TargetBudget {
        let t = self.targets.entry(target.to_string()).or_default();
        let before = t.clone();
        t.failures = 0;
        t.breaker_opened_at = None;
        t.last_failures.clear();
        if budget {
            t.starts.clear();
        }
        before
    }
}

/// Is `start` inside the window ending at `now`? A clock that went backwards counts the
/// run (the safe side).
fn within(start: SystemTime, now: SystemTime, window: Duration) -> bool {
    match now.duration_since(start) {
        Ok(age) => age < window,
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> BudgetConfig {
        BudgetConfig {
            runs_per_window: 2,
            window: Duration::from_secs(3600),
            breaker_after_failures: 2,
            cooldown: Duration::from_secs(300),
        }
    }

    #[test]
    fn cooldown_follows_the_last_run() {
        let c = cfg();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let mut b = BudgetBook::default();
        assert_eq!(b.view(&c, "t", t0).cooldown_until, None);
        b.record_outcome(&c, "t", false, "ok", t0);
        let until = t0 + Duration::from_secs(300);
        assert_eq!(b.view(&c, "t", t0).cooldown_until, Some(until));
        assert_eq!(b.view(&c, "t", until).cooldown_until, None);
    }

    #[test]
    fn budget_is_a_sliding_window() {
        let c = cfg();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let mut b = BudgetBook::default();
        assert_eq!(b.view(&c, "t", t0).remaining, 2);
        b.record_start(&c, "t", t0);
        b.record_start(&c, "t", t0 + Duration::from_secs(600));
        let v = b.view(&c, "t", t0 + Duration::from_secs(1200));
        assert_eq!((v.used, v.remaining), (2, 0));
        assert_eq!(v.next_slot_at, Some(t0 + Duration::from_secs(3600)));
        // Other targets have their own budget.
        assert_eq!(b.view(&c, "u", t0).remaining, 2);
        // The first run leaves the window after an hour.
        assert_eq!(b.view(&c, "t", t0 + Duration::from_secs(3600)).remaining, 1);
    }

    #[test]
    fn breaker_opens_after_m_failures_and_only_reset_closes_it() {
        let c = cfg();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let mut b = BudgetBook::default();
        assert!(!b.record_outcome(&c, "t", false, "ok", t0));
        assert!(!b.record_outcome(&c, "t", true, "aborted", t0));
        assert!(!b.view(&c, "t", t0).breaker_open);
        assert!(b.record_outcome(&c, "t", true, "failed", t0));
        assert!(b.view(&c, "t", t0).breaker_open);
        // A later success does not close it.
        b.record_outcome(&c, "t", false, "ok", t0);
        assert!(
            b.view(&c, "t", t0 + Duration::from_secs(86400))
                .breaker_open
        );
        let before = b.reset("t", false);
        assert_eq!(before.failures, 2);
        let v = b.view(&c, "t", t0);
        assert!(!v.breaker_open);
        assert_eq!(v.failures, 0);
    }

    #[test]
    fn a_refused_run_gives_its_start_back_and_starts_no_cooldown() {
        let c = cfg();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let mut b = BudgetBook::default();
        b.record_start(&c, "t", t0);
        b.record_start(&c, "t", t0);
        b.cancel_last_start("t");
        let v = b.view(&c, "t", t0);
        assert_eq!((v.used, v.cooldown_until), (1, None));
        b.cancel_last_start("nobody");
    }

    #[test]
    fn reset_with_budget_frees_runs() {
        let c = cfg();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let mut b = BudgetBook::default();
        b.record_start(&c, "t", t0);
        b.record_start(&c, "t", t0);
        b.reset("t", false);
        assert_eq!(b.view(&c, "t", t0).remaining, 0);
        b.reset("t", true);
        assert_eq!(b.view(&c, "t", t0).remaining, 2);
    }
}
