//! Checks every bearer token `recover` is started with (the gate's admin token, serve's
//! tokens): a token that is empty, short, or one of the values that appear in examples and
//! old manifests is no secret at all, so the process refuses to start and says how to
//! make a real one.

/// Values that have been published as examples or defaults; compared without regard to
/// case and surrounding blanks.
pub const WELL_KNOWN: &[&str] = &[
    "change-me-recover-demo",
    "change-me",
    "changeme",
    "secret",
    "password",
    "token",
    "admin",
    "recover",
    "test",
];

/// How to make a token, for the error message.
pub const HOW_TO_CREATE: &str = "create one with `openssl rand -hex 24` (on Kubernetes: \
     kubectl -n recover-demo create secret generic NAME --from-literal=token=$(openssl rand -hex 24))";

/// Why a token is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WeakToken {
    #[error("the token is empty; {HOW_TO_CREATE}")]
    Empty,
    #[error("the token is {len} bytes; use at least {min}; {HOW_TO_CREATE}")]
    Short { len: usize, min: usize },
    #[error("the token is a published example value ({0:?}), not a secret; {HOW_TO_CREATE}")]
    WellKnown(String),
}

/// Check one token (already trimmed of its trailing newline). Pure.
pub fn check(token: &str, min_len: usize) -> Result<(), WeakToken> {
    let t = token.trim();
    if t.is_empty() {
        return Err(WeakToken::Empty);
    }
    if let Some(known) = WELL_KNOWN.iter().find(|k| k.eq_ignore_ascii_case(t)) {
        return Err(WeakToken::WellKnown(known.to_string()));
    }
    if t.len() < min_len {
        return Err(WeakToken::Short {
            len: t.len(),
            min: min_len,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_short_and_published_tokens_are_refused() {
        assert_eq!(check("  \n", 16), Err(WeakToken::Empty));
        assert!(matches!(
            check("Change-Me-Recover-Demo", 8),
            Err(WeakToken::WellKnown(_))
        ));
        assert_eq!(check("abc", 16), Err(WeakToken::Short { len: 3, min: 16 }));
        assert_eq!(check("9f86d081884c7d659a2feaa0c55ad015", 16), Ok(()));
        assert!(WeakToken::Empty.to_string().contains("openssl rand"));
    }
}
