//! Every Kubernetes API call with its own deadline and its own, logged retry policy.
//!
//! kube-client's default stack retries 429, 503 and 504 up to 15 times with backoff,
//! silently: a PodDisruptionBudget refusal came back after minutes, a pod proxy call to an
//! unreachable pod hung past every timeout, and a POST could be sent again and again. The
//! platform's client runs with that layer off ([`client_config`]); what is retried, how
//! often and after how long is decided here, per call, by [`next_try`], a pure function.
//! A retry is logged with what was being done and why; the server's Retry-After wins over
//! our own backoff; a call that is not idempotent is never sent twice; and a call has an
//! overall deadline across its retries (`total`): three attempts of 10 s each plus their
//! waits would hold a step for half a minute.

use super::api::call_error;
use super::rbac::Permission;
use crate::platform::PlatformError;
use std::future::Future;
use std::time::{Duration, Instant};

/// How one kind of call may be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallPolicy {
    /// The deadline of one attempt, its body included.
    pub timeout: Duration,
    /// Attempts in all (1: never retried).
    pub attempts: u32,
    /// Wait before the second attempt; doubled each time up to `max_backoff`.
    pub backoff: Duration,
    pub max_backoff: Duration,
    /// The deadline of the whole call, every attempt and wait included (at least one
    /// attempt's `timeout`).
    pub total: Duration,
    /// Whether sending it twice is harmless. A call that is not is never retried after it
    /// may have reached the server (a timeout, a broken connection, a 5xx); a 429 is
    /// retried, because the server says it did not process the request.
    pub idempotent: bool,
}

/// Reads: `get`, `list`.
pub const READ: CallPolicy = CallPolicy {
    timeout: Duration::from_secs(10),
    total: Duration::from_secs(15),
    attempts: 3,
    backoff: Duration::from_millis(200),
    max_backoff: Duration::from_secs(2),
    idempotent: true,
};

/// Writes that may be repeated: merge patches, replaces guarded by resourceVersion,
/// creates of a named object (a repeat answers 409, never a second object).
pub const WRITE: CallPolicy = CallPolicy {
    timeout: Duration::from_secs(10),
    total: Duration::from_secs(15),
    attempts: 3,
    backoff: Duration::from_millis(200),
    max_backoff: Duration::from_secs(2),
    idempotent: true,
};

/// One eviction attempt: the eviction loop retries on its own schedule, within its own
/// deadline, and names the budget that blocks it.
pub const EVICT: CallPolicy = CallPolicy {
    timeout: Duration::from_secs(10),
    total: Duration::from_secs(10),
    attempts: 1,
    backoff: Duration::ZERO,
    max_backoff: Duration::ZERO,
    idempotent: false,
};

/// A scrape through the pod proxy: one attempt; a target that does not answer in time is
/// missing data for this round, not a stalled run.
pub const PROXY_GET: CallPolicy = CallPolicy {
    timeout: Duration::from_secs(5),
    total: Duration::from_secs(5),
    attempts: 1,
    backoff: Duration::ZERO,
    max_backoff: Duration::ZERO,
    idempotent: true,
};

/// `POST /admin/drain` and `/admin/warm`: drain drops queued work, so it is sent once.
pub const PROXY_POST: CallPolicy = CallPolicy {
    timeout: Duration::from_secs(10),
    total: Duration::from_secs(10),
    attempts: 1,
    backoff: Duration::ZERO,
    max_backoff: Duration::ZERO,
    idempotent: false,
};

/// The lease renewal: short enough that a stalled renewal is noticed well inside a third
/// of the lease (see [`super::lease`]).
pub fn lease_policy(lease: Duration) -> CallPolicy {
    let timeout = (lease / 5).max(Duration::from_millis(200));
    CallPolicy {
        timeout,
        total: timeout,
        attempts: 1,
        backoff: Duration::ZERO,
        max_backoff: Duration::ZERO,
        idempotent: true,
    }
}

/// How one attempt failed, as the retry decision sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// No answer within the attempt's deadline.
    TimedOut,
    /// The API server answered with this status code, and maybe a Retry-After.
    Status {
        code: u16,
        retry_after: Option<Duration>,
    },
    /// No answer at all (connection refused or broken, TLS, a body cut short).
    Transport,
}

impl Failure {
    pub fn of(e: &kube::Error) -> Failure {
        match e {
            kube::Error::Api(s) => Failure::Status {
                code: s.code,
                retry_after: retry_after(e),
            },
            _ => Failure::Transport,
        }
    }
}

/// The server's Retry-After for this error (`details.retryAfterSeconds`), if it gave one.
pub fn retry_after(e: &kube::Error) -> Option<Duration> {
    match e {
        kube::Error::Api(s) => s
            .details
            .as_ref()
            .map(|d| d.retry_after_seconds)
            .filter(|s| *s > 0)
            .map(|s| Duration::from_secs(u64::from(s))),
        _ => None,
    }
}

/// After attempt number `attempt` (1-based) failed as `failure`, with `left` until the
/// caller's own deadline: how long to wait before trying again, or `None` to give up.
/// Pure.
pub fn next_try(
    policy: &CallPolicy,
    attempt: u32,
    failure: Failure,
    left: Option<Duration>,
) -> Option<Duration> {
    if attempt >= policy.attempts {
        return None;
    }
    let (retryable, server_wait) = match failure {
        // The server did not process it: safe to send again whatever it does.
        Failure::Status {
            code: 429,
            retry_after,
        } => (true, retry_after),
        // Maybe processed: only calls that may be repeated.
        Failure::Status {
            code: 503 | 504,
            retry_after,
        } => (policy.idempotent, retry_after),
        Failure::Status { .. } => (false, None),
        Failure::TimedOut | Failure::Transport => (policy.idempotent, None),
    };
    if !retryable {
        return None;
    }
    let exp = policy
        .backoff
        .saturating_mul(1 << (attempt - 1).min(16))
        .min(policy.max_backoff);
    let wait = server_wait.unwrap_or(exp);
    match left {
        Some(left) if wait >= left => None,
        _ => Some(wait),
    }
}

/// Make one call under `policy`: each attempt cut at its deadline, retried as
/// [`next_try`] says, each retry logged. A timeout is [`PlatformError::Timeout`]; an API
/// error is wrapped by [`call_error`] with `perm`, so a 403 names the missing rule.
pub async fn call<T, F, Fut>(
    policy: &CallPolicy,
    perm: &Permission,
    what: impl Fn() -> String,
    mut attempt_once: F,
) -> Result<T, PlatformError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let started = Instant::now();
    let deadline = started + policy.total.max(policy.timeout);
    let mut attempt = 0;
    loop {
        attempt += 1;
        let left = deadline.saturating_duration_since(Instant::now());
        let this_try = policy.timeout.min(left).max(Duration::from_millis(1));
        let failure = match tokio::time::timeout(this_try, attempt_once()).await {
            Ok(Ok(v)) => return Ok(v),
            Ok(Err(e)) => {
                let f = Failure::of(&e);
                let left = deadline.saturating_duration_since(Instant::now());
                match next_try(policy, attempt, f, Some(left)) {
                    Some(wait) => (f, wait, e.to_string()),
                    None => return Err(call_error(perm, what(), e)),
                }
            }
            Err(_) => match next_try(
                policy,
                attempt,
                Failure::TimedOut,
                Some(deadline.saturating_duration_since(Instant::now())),
            ) {
                Some(wait) => (Failure::TimedOut, wait, "no answer".to_string()),
                None => {
                    return Err(PlatformError::Timeout {
                        what: format!(
                            "{} (each attempt {:?}, {:?} in all)",
                            what(),
                            policy.timeout,
                            policy.total.max(policy.timeout)
                        ),
                        after: started.elapsed(),
                    })
                }
            },
        };
        let (f, wait, error) = failure;
        tracing::warn!(
            what = %what(),
            attempt,
            of = policy.attempts,
            ?wait,
            failure = ?f,
            %error,
            "API call failed; retrying"
        );
        tokio::time::sleep(wait).await;
    }
}

/// The in-cluster or kubeconfig client with [`client_config`]: for the gate's sources and
/// serve's state, which need no context flag.
pub async fn infer_client() -> Result<kube::Client, String> {
    let config = kube::Config::infer().await.map_err(|e| e.to_string())?;
    kube::Client::try_from(client_config(config)).map_err(|e| e.to_string())
}

/// The client configuration every platform client gets: no hidden retry layer (this
/// module retries, visibly), and a read timeout on the connection as a last resort behind
/// the per-call deadlines.
pub fn client_config(mut config: kube::Config) -> kube::Config {
    config.default_retry = false;
    config.read_timeout = Some(Duration::from_secs(300));
    config
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16, secs: Option<u64>) -> Failure {
        Failure::Status {
            code,
            retry_after: secs.map(Duration::from_secs),
        }
    }

    #[test]
    fn reads_retry_with_growing_backoff_and_the_servers_wait_wins() {
        assert_eq!(
            next_try(&READ, 1, status(503, None), None),
            Some(Duration::from_millis(200))
        );
        assert_eq!(
            next_try(&READ, 2, Failure::TimedOut, None),
            Some(Duration::from_millis(400))
        );
        assert_eq!(next_try(&READ, 3, Failure::TimedOut, None), None);
        assert_eq!(
            next_try(&READ, 1, status(429, Some(7)), None),
            Some(Duration::from_secs(7))
        );
        // Not worth waiting past the caller's deadline.
        assert_eq!(
            next_try(&READ, 1, status(429, Some(7)), Some(Duration::from_secs(5))),
            None
        );
        for code in [400, 403, 404, 409, 422, 500] {
            assert_eq!(next_try(&READ, 1, status(code, None), None), None, "{code}");
        }
    }

    #[test]
    fn a_call_that_is_not_idempotent_is_never_sent_twice() {
        let post = CallPolicy {
            attempts: 5,
            ..PROXY_POST
        };
        for f in [
            Failure::TimedOut,
            Failure::Transport,
            status(503, None),
            status(504, Some(1)),
        ] {
            assert_eq!(next_try(&post, 1, f, None), None, "{f:?}");
        }
        // A 429 was refused before processing: that one may be sent again.
        assert_eq!(
            next_try(&post, 1, status(429, Some(2)), None),
            Some(Duration::from_secs(2))
        );
        assert_eq!(next_try(&PROXY_POST, 1, status(429, Some(2)), None), None);
    }

    #[tokio::test]
    async fn a_call_never_outlasts_its_overall_deadline_across_retries() {
        let policy = CallPolicy {
            timeout: Duration::from_millis(300),
            total: Duration::from_millis(500),
            ..READ
        };
        let started = Instant::now();
        let r: Result<(), PlatformError> = call(
            &policy,
            &crate::platform::kube::rbac::PODS_GET,
            || "a read that never answers".into(),
            || async {
                tokio::time::sleep(Duration::from_secs(60)).await;
                Ok(())
            },
        )
        .await;
        assert!(matches!(r, Err(PlatformError::Timeout { .. })), "{r:?}");
        // Three attempts of 300 ms would take 900 ms and more; the call gives up at 500.
        assert!(
            started.elapsed() < Duration::from_millis(850),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn a_lease_renewal_gives_up_well_inside_a_third_of_the_lease() {
        let p = lease_policy(Duration::from_secs(15));
        assert!(p.timeout < Duration::from_secs(5));
        assert_eq!(p.attempts, 1);
    }
}
