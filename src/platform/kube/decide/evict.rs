//! What an eviction's answer means and what to do next. The API server refuses an
//! eviction in three ways that are not errors of ours: 429 while a PodDisruptionBudget
//! allows no disruption (its name in the causes, a Retry-After while the disruption
//! controller catches up), 403 when the budget's list of disrupted pods is full, and 500
//! for a pod covered by two budgets. Each is read from the Status here, so the retry loop
//! can honour the server's wait and the operator gets the budget's name and the fix.
//!
//! A 429 is not always a budget: API Priority and Fairness (and the max-in-flight filter)
//! answers 429 too, as plain text "Too many requests, please try again later." with a
//! Retry-After header and no Status causes (k8s.io/apiserver, server/filters
//! `tooManyRequests`). The budget's 429 carries a cause of type `DisruptionBudget`
//! (pkg/registry/core/pod/storage/eviction.go). Only that one is blamed on a budget; a
//! throttled or unanswered eviction is simply sent again after the server's wait, since
//! repeating an eviction is safe (it carries the pod's UID as a precondition).

use kube::core::Status;
use std::time::Duration;

/// Why an eviction was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockKind {
    /// 429: the budget allows no disruption now.
    Budget,
    /// 403: the budget's DisruptedPods map is full until its controller catches up.
    Congested,
    /// 500: more than one budget selects the pod; the Eviction API never evicts it.
    TwoBudgets,
}

/// A refused eviction, as the API server explained it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    pub kind: BlockKind,
    /// The PodDisruptionBudget named in the answer, if any.
    pub budget: Option<String>,
    pub message: String,
    /// The server's Retry-After.
    pub retry_after: Option<Duration>,
}

impl Blocked {
    /// Waiting can help (the budget may allow it later); not for two budgets.
    pub fn retryable(&self) -> bool {
        self.kind != BlockKind::TwoBudgets
    }

    /// The refusal and the exact fix, for the error and the Event.
    pub fn explain(&self, namespace: &str, pod: &str) -> String {
        let budget = self
            .budget
            .as_deref()
            .unwrap_or("<the pod's PodDisruptionBudget>");
        match self.kind {
            BlockKind::TwoBudgets => format!(
                "{}; pod {pod} is selected by more than one PodDisruptionBudget, which the Eviction API never evicts: make the budgets' selectors disjoint (kubectl -n {namespace} get pdb), or allow the delete fallback",
                self.message
            ),
            BlockKind::Budget | BlockKind::Congested => format!(
                "PodDisruptionBudget {budget}: {}; pods that fail readiness under overload count as disrupted, so the budget blocks the very pods that need a restart. Fix: kubectl -n {namespace} patch poddisruptionbudget {budget} --type=merge -p '{{\"spec\":{{\"unhealthyPodEvictionPolicy\":\"AlwaysAllow\"}}}}' (evicts pods that are not ready regardless of the budget); if the pods are ready and the budget still allows no disruption, raise its maxUnavailable",
                self.message
            ),
        }
    }
}

/// Read a refusal from an eviction's error Status; `None` if it is some other error.
pub fn blocked(status: &Status) -> Option<Blocked> {
    let details = status.details.as_ref();
    let causes: Vec<&str> = details
        .map(|d| d.causes.iter().map(|c| c.message.as_str()).collect())
        .unwrap_or_default();
    let retry_after = details
        .map(|d| d.retry_after_seconds)
        .filter(|s| *s > 0)
        .map(|s| Duration::from_secs(u64::from(s)));
    let budget = causes
        .iter()
        .chain(std::iter::once(&status.message.as_str()))
        .find_map(|m| budget_name(m))
        .or_else(|| {
            details
                .filter(|d| d.kind.starts_with("poddisruptionbudget") && !d.name.is_empty())
                .map(|d| d.name.clone())
        });
    let mut message = status.message.clone();
    if !causes.is_empty() {
        message = format!("{message} ({})", causes.join("; "));
    }
    let from_budget = details
        .is_some_and(|d| d.causes.iter().any(|c| c.reason == "DisruptionBudget"))
        || status.message.contains("disruption budget");
    let kind = match status.code {
        429 if from_budget => BlockKind::Budget,
        403 if status.message.contains("DisruptedPods") => BlockKind::Congested,
        500 if status.message.contains("more than one PodDisruptionBudget") => {
            BlockKind::TwoBudgets
        }
        _ => return None,
    };
    Some(Blocked {
        kind,
        budget,
        message,
        retry_after,
    })
}

/// `The disruption budget NAME needs 2 healthy pods...` -> `NAME`.
fn budget_name(message: &str) -> Option<String> {
    let rest = message.split("disruption budget ").nth(1)?;
    let name = rest.split_whitespace().next()?;
    Some(name.trim_end_matches([',', '.', ':']).to_string()).filter(|n| !n.is_empty())
}

/// An eviction attempt's result, as the retry loop sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EvictOutcome {
    /// Accepted: the pod is terminating.
    Evicted,
    /// The pod does not exist (any more), or a new pod has its name (the UID
    /// precondition failed): nothing left to do.
    Gone,
    Blocked(Blocked),
    /// Not processed, or not known to be: throttled by the API server, no answer in
    /// time, a 5xx. Sent again after `after` (the server's Retry-After) or our own wait.
    Retry {
        why: String,
        after: Option<Duration>,
    },
}

/// What to do after an eviction attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EvictNext {
    Done,
    RetryAfter(Duration),
    /// Still blocked at the deadline (or never evictable) and the caller allowed deleting.
    Delete,
    GiveUp,
}

/// The retry decision: the server's Retry-After wins over our own interval; no attempt is
/// made that could not finish before `timeout`. Pure.
pub fn after_evict(
    outcome: &EvictOutcome,
    elapsed: Duration,
    timeout: Duration,
    allow_delete: bool,
    retry_every: Duration,
) -> EvictNext {
    let b = match outcome {
        EvictOutcome::Evicted | EvictOutcome::Gone => return EvictNext::Done,
        EvictOutcome::Blocked(b) => b,
        EvictOutcome::Retry { after, .. } => {
            let wait = after.unwrap_or(retry_every);
            return if elapsed + wait < timeout {
                EvictNext::RetryAfter(wait)
            } else {
                EvictNext::GiveUp
            };
        }
    };
    let wait = b.retry_after.unwrap_or(retry_every);
    if b.retryable() && elapsed + wait < timeout {
        EvictNext::RetryAfter(wait)
    } else if allow_delete {
        EvictNext::Delete
    } else {
        EvictNext::GiveUp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16, message: &str, causes: &[&str], retry: u32) -> Status {
        serde_json::from_value(serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
            "message": message, "reason": "TooManyRequests",
            "details": {
                "causes": causes.iter().map(|m| serde_json::json!({"reason": "DisruptionBudget", "message": m})).collect::<Vec<_>>(),
                "retryAfterSeconds": retry
            }
        }))
        .unwrap()
    }

    #[test]
    fn the_budget_is_named_from_the_causes_with_the_servers_wait() {
        let b = blocked(&status(
            429,
            "Cannot evict pod as it would violate the pod's disruption budget.",
            &["The disruption budget config-service needs 3 healthy pods and has 2 currently"],
            0,
        ))
        .unwrap();
        assert_eq!(b.budget.as_deref(), Some("config-service"));
        assert_eq!((b.kind, b.retry_after), (BlockKind::Budget, None));
        let fix = b.explain("shop", "config-service-1");
        assert!(
            fix.contains("patch poddisruptionbudget config-service"),
            "{fix}"
        );
        assert!(fix.contains("AlwaysAllow"), "{fix}");

        let b = blocked(&status(
            429,
            "Cannot evict pod as it would violate the pod's disruption budget.",
            &["The disruption budget web is still being processed by the server."],
            10,
        ))
        .unwrap();
        assert_eq!(b.budget.as_deref(), Some("web"));
        assert_eq!(b.retry_after, Some(Duration::from_secs(10)));
    }

    #[test]
    fn two_budgets_are_never_retried_and_other_errors_are_not_refusals() {
        let b = blocked(&status(
            500,
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            &[],
            0,
        ))
        .unwrap();
        assert!(!b.retryable());
        let o = EvictOutcome::Blocked(b);
        let s = Duration::from_secs;
        assert_eq!(after_evict(&o, s(0), s(60), false, s(2)), EvictNext::GiveUp);
        assert_eq!(after_evict(&o, s(0), s(60), true, s(2)), EvictNext::Delete);
        assert!(blocked(&status(500, "etcd is down", &[], 0)).is_none());
        assert!(blocked(&status(403, "pods is forbidden: User cannot", &[], 0)).is_none());
        assert_eq!(
            blocked(&status(
                403,
                "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
                &[],
                0
            ))
            .map(|b| b.kind),
            Some(BlockKind::Congested)
        );
    }

    #[test]
    fn blocked_evictions_wait_as_the_server_says_within_the_deadline() {
        let s = Duration::from_secs;
        let b = |retry: Option<u64>| {
            EvictOutcome::Blocked(Blocked {
                kind: BlockKind::Budget,
                budget: Some("pdb".into()),
                message: "no".into(),
                retry_after: retry.map(s),
            })
        };
        assert_eq!(
            after_evict(&b(None), s(1), s(10), false, s(2)),
            EvictNext::RetryAfter(s(2))
        );
        assert_eq!(
            after_evict(&b(Some(5)), s(1), s(10), false, s(2)),
            EvictNext::RetryAfter(s(5))
        );
        assert_eq!(
            after_evict(&b(Some(10)), s(1), s(10), false, s(2)),
            EvictNext::GiveUp
        );
        assert_eq!(
            after_evict(&b(None), s(9), s(10), true, s(2)),
            EvictNext::Delete
        );
        assert_eq!(
            after_evict(&EvictOutcome::Gone, s(0), s(10), false, s(2)),
            EvictNext::Done
        );
        // Throttled or unanswered: sent again after the server's wait, never deleted.
        let throttled = EvictOutcome::Retry {
            why: "throttled".into(),
            after: Some(s(3)),
        };
        assert_eq!(
            after_evict(&throttled, s(1), s(10), true, s(2)),
            EvictNext::RetryAfter(s(3))
        );
        assert_eq!(
            after_evict(&throttled, s(8), s(10), true, s(2)),
            EvictNext::GiveUp
        );
    }

    #[test]
    fn a_throttled_429_is_not_blamed_on_a_budget() {
        // API Priority and Fairness: plain text, no causes (kube-rs makes a Status of it).
        let apf: Status = serde_json::from_value(serde_json::json!({
            "status": "Failure", "code": 429, "reason": "TooManyRequests",
            "message": "Too many requests, please try again later.",
            "details": {"retryAfterSeconds": 1}
        }))
        .unwrap();
        assert_eq!(blocked(&apf), None);
    }
}
