//! Fencing: a controller acts on a target only while it holds the target's Lease, and
//! knows it holds it only until the renew deadline of its last successful renewal. The
//! deadline is kept on a timer of its own, not checked after each renewal attempt: two
//! renewals stuck in flight must not carry a controller past the point where another one
//! may take the lease over.
//!
//! Every mutating call of the platform (eviction, the limit ConfigMap, warm, drain, Events,
//! the journal mirror) goes through [`Fence::check`] or [`Fence::guard`]; once the lease is
//! lost they refuse without calling the API server, and the one Event that says what was
//! left where goes through [`Fence::last_word`], once. A platform that never took the lock
//! (an operator's `recover gate limit set`, a test) is not fenced.
//!
//! Timing is not the only fence: [`Token`] (the lease's holder and transitions) is written
//! on the objects another controller may also write, and the writes carry a resourceVersion
//! precondition, so the API server itself refuses a stale controller's write.

use crate::platform::PlatformError;
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Annotation carrying the [`Token`] of the controller that last wrote an object.
pub const FENCE_ANNOTATION: &str = "recover.dev/fence";

/// Who held the lease, and which holding of it (the Lease's `leaseTransitions`, raised by
/// every takeover): a later holding always has a higher number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    pub lease: String,
    pub holder: String,
    pub transitions: i32,
}

impl Token {
    /// `LEASE/TRANSITIONS/HOLDER`, as written in [`FENCE_ANNOTATION`].
    pub fn render(&self) -> String {
        format!("{}/{}/{}", self.lease, self.transitions, self.holder)
    }

    pub fn parse(text: &str) -> Option<Token> {
        let mut it = text.splitn(3, '/');
        let lease = it.next()?.to_string();
        let transitions = it.next()?.parse().ok()?;
        let holder = it.next()?.to_string();
        Some(Token {
            lease,
            holder,
            transitions,
        })
    }

    /// Whether an object last written under `found` may be written under `self`: not when
    /// a later holding of the same lease wrote it (we are the stale one). Pure.
    pub fn may_overwrite(&self, found: Option<&Token>) -> bool {
        match found {
            Some(f) if f.lease == self.lease => {
                f.transitions < self.transitions
                    || (f.transitions == self.transitions && f.holder == self.holder)
            }
            _ => true,
        }
    }
}

#[derive(Debug, Clone)]
enum State {
    /// No lock was taken through this platform: nothing to fence.
    Unlocked,
    Held {
        until: Instant,
        token: Token,
    },
    Lost {
        why: String,
        last_word_said: bool,
    },
}

/// The lease as the platform's calls see it.
#[derive(Debug)]
pub struct Fence {
    state: Mutex<State>,
    /// Cancelled when the current holding is lost; a new one for each holding.
    lost: Mutex<CancellationToken>,
}

impl Default for Fence {
    fn default() -> Self {
        Fence {
            state: Mutex::new(State::Unlocked),
            lost: Mutex::new(CancellationToken::new()),
        }
    }
}

impl Fence {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn cancel_lost(&self) {
        self.lost.lock().unwrap_or_else(|e| e.into_inner()).cancel();
    }

    /// The lease was just taken: held until `until`, a holding of its own.
    pub fn hold(&self, until: Instant, token: Token) {
        *self.lost.lock().unwrap_or_else(|e| e.into_inner()) = CancellationToken::new();
        *self.lock() = State::Held { until, token };
    }

    /// The lease was given back at the end of a run: nothing more to fence.
    pub fn release(&self) {
        *self.lock() = State::Unlocked;
    }

    /// A renewal that started at `started` succeeded: held until `started + deadline`.
    pub fn renewed(&self, started: Instant, deadline: Duration) {
        let mut s = self.lock();
        if let State::Held { until, .. } = &mut *s {
            *until = (*until).max(started + deadline);
        }
    }

    /// The lease is lost for good (taken, not renewed in time, released).
    pub fn lose(&self, why: impl Into<String>) {
        let mut s = self.lock();
        if !matches!(&*s, State::Held { .. }) {
            return;
        }
        *s = State::Lost {
            why: why.into(),
            last_word_said: false,
        };
        drop(s);
        self.cancel_lost();
    }

    /// Cancelled the moment the current holding of the lease is lost.
    pub fn lost(&self) -> CancellationToken {
        self.lost.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The deadline of the current holding, if the lease is held.
    pub fn deadline(&self) -> Option<Instant> {
        match &*self.lock() {
            State::Held { until, .. } => Some(*until),
            _ => None,
        }
    }

    /// The fencing token of the current holding (`None` when no lock was taken).
    pub fn token(&self) -> Option<Token> {
        match &*self.lock() {
            State::Held { token, .. } => Some(token.clone()),
            _ => None,
        }
    }

    /// Whether `what` may be done now: the lease is held and inside its renew deadline
    /// (or no lock was taken). Past the deadline the lease counts as lost from here on.
    pub fn check(&self, what: &str) -> Result<(), PlatformError> {
        let mut s = self.lock();
        let why = match &*s {
            State::Unlocked => return Ok(()),
            State::Held { until, .. } if Instant::now() < *until => return Ok(()),
            State::Held { .. } => {
                let why = "the lease was not renewed within its renew deadline".to_string();
                *s = State::Lost {
                    why: why.clone(),
                    last_word_said: false,
                };
                drop(s);
                self.cancel_lost();
                why
            }
            State::Lost { why, .. } => why.clone(),
        };
        Err(PlatformError::LockLost {
            what: what.to_string(),
            why,
        })
    }

    /// Run the mutating call `f` only if [`Fence::check`] allows it, and give up on it the
    /// moment the lease is lost (or its deadline passes) while it is in flight.
    pub async fn guard<T>(
        &self,
        what: &str,
        f: impl Future<Output = Result<T, PlatformError>>,
    ) -> Result<T, PlatformError> {
        self.check(what)?;
        let lost = self.lost();
        let mut f = std::pin::pin!(f);
        loop {
            let deadline = self.deadline();
            let expiry = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                r = &mut f => return r,
                _ = lost.cancelled() => return Err(self.refused(what)),
                // Renewed meanwhile: wait on; not renewed: lost from here on.
                _ = expiry => self.check(what)?,
            }
        }
    }

    /// The refusal of `what` once the lease is lost or its deadline has passed.
    fn refused(&self, what: &str) -> PlatformError {
        self.check(what)
            .err()
            .unwrap_or_else(|| PlatformError::LockLost {
                what: what.to_string(),
                why: "the lease's renew deadline passed while the call was in flight".into(),
            })
    }

    /// Sleep `d`, or less if the lease is lost meanwhile (then `Err`).
    pub async fn sleep(&self, what: &str, d: Duration) -> Result<(), PlatformError> {
        let lost = self.lost();
        tokio::select! {
            _ = tokio::time::sleep(d) => self.check(what),
            _ = lost.cancelled() => self.check(what),
        }
    }

    /// The one write allowed after the lease is lost: the Event saying what was left where.
    /// True once, and only once the lease is lost; a fence that still holds says true too.
    pub fn last_word(&self) -> bool {
        let mut s = self.lock();
        match &mut *s {
            State::Lost { last_word_said, .. } if !*last_word_said => {
                *last_word_said = true;
                true
            }
            State::Lost { .. } => false,
            _ => true,
        }
    }

    /// Whether the lease has been lost.
    pub fn is_lost(&self) -> bool {
        matches!(&*self.lock(), State::Lost { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(holder: &str, transitions: i32) -> Token {
        Token {
            lease: "recover-x".into(),
            holder: holder.into(),
            transitions,
        }
    }

    #[test]
    fn a_later_holding_is_never_overwritten_by_an_earlier_one() {
        let old = token("a", 1);
        let new = token("b", 2);
        assert!(new.may_overwrite(Some(&old)));
        assert!(!old.may_overwrite(Some(&new)));
        assert!(old.may_overwrite(Some(&old)));
        assert!(!old.may_overwrite(Some(&token("c", 1))));
        assert!(old.may_overwrite(None));
        assert_eq!(Token::parse(&new.render()), Some(new));
        assert_eq!(Token::parse("garbage"), None);
    }

    #[tokio::test]
    async fn past_its_deadline_a_fence_refuses_and_says_one_last_word() {
        let f = Fence::default();
        assert!(f.check("evict").is_ok(), "unlocked: not fenced");
        assert!(f.last_word(), "unlocked: nothing to hold back");
        let now = Instant::now();
        f.hold(now + Duration::from_secs(60), token("a", 0));
        assert!(f.check("evict").is_ok());
        assert!(!f.lost().is_cancelled());
        // Held until a deadline already behind us: lost from the next check on.
        f.hold(now - Duration::from_millis(1), token("a", 0));
        let lost = f.lost();
        assert!(matches!(
            f.check("evict"),
            Err(PlatformError::LockLost { .. })
        ));
        assert!(lost.is_cancelled());
        assert!(f.last_word());
        assert!(!f.last_word(), "only one");
        // A renewal arriving late does not bring it back.
        f.renewed(Instant::now(), Duration::from_secs(10));
        assert!(f.check("evict").is_err());
        // A renewal in time moves the deadline from when it was sent.
        let g = Fence::default();
        g.hold(now + Duration::from_secs(1), token("a", 0));
        g.renewed(now + Duration::from_secs(5), Duration::from_secs(10));
        assert_eq!(g.deadline(), Some(now + Duration::from_secs(15)));
    }

    #[tokio::test]
    async fn a_call_in_flight_is_dropped_at_the_deadline() {
        let f = Fence::default();
        f.hold(Instant::now() + Duration::from_millis(100), token("a", 0));
        let r = f
            .guard("patch", async {
                tokio::time::sleep(Duration::from_secs(60)).await;
                Ok(())
            })
            .await;
        assert!(matches!(r, Err(PlatformError::LockLost { .. })), "{r:?}");
        assert!(f.is_lost());
    }
}
