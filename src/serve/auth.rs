//! Who may make the receiver act: a bearer token or an HMAC-SHA256 signature of the body.
//! Both are compared in constant time so response timing leaks nothing about the secret.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The header carrying `sha256=<hex>` of the raw request body.
pub const SIGNATURE_HEADER: &str = "x-recover-signature";

/// Secrets the webhook accepts; built once at start-up.
#[derive(Clone, Default)]
pub struct Credentials {
    pub bearer_token: Option<String>,
    pub hmac_secret: Option<String>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("bearer_token", &self.bearer_token.as_ref().map(|_| "***"))
            .field("hmac_secret", &self.hmac_secret.as_ref().map(|_| "***"))
            .finish()
    }
}

/// Why a request was refused (all map to 401; the reason goes to the log, not the caller).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("no credentials")]
    Missing,
    #[error("wrong bearer token")]
    BadToken,
    #[error("bad signature")]
    BadSignature,
}

/// Constant-time equality: the loop always runs over the full length.
pub fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// Extract the token from an `Authorization: Bearer ...` value.
fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
}

/// The HMAC-SHA256 signature header value for `body` (what a sender computes).
pub fn sign(secret: &str, body: &[u8]) -> String {
    let mut mac = mac(secret);
    mac.update(body);
    let bytes = mac.finalize().into_bytes();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

fn mac(secret: &str) -> Hmac<Sha256> {
    // HMAC accepts keys of any length, so this cannot fail.
    match Hmac::<Sha256>::new_from_slice(secret.as_bytes()) {
        Ok(m) => m,
        Err(_) => unreachable!("HMAC-SHA256 takes keys of any length"),
    }
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Check a request: a valid bearer token or a valid signature admits it.
pub fn check(
    creds: &Credentials,
    authorization: Option<&str>,
    signature: Option<&str>,
    body: &[u8],
) -> Result<(), AuthError> {
    let mut failure = AuthError::Missing;
    if let (Some(expected), Some(given)) = (&creds.bearer_token, authorization.and_then(bearer)) {
        if ct_eq(expected.as_bytes(), given.as_bytes()) {
            return Ok(());
        }
        failure = AuthError::BadToken;
    }
    if let (Some(secret), Some(sig)) = (&creds.hmac_secret, signature) {
        let given = sig.trim().strip_prefix("sha256=").and_then(unhex);
        let mut m = mac(secret);
        m.update(body);
        // verify_slice compares in constant time.
        if given.is_some_and(|g| m.verify_slice(&g).is_ok()) {
            return Ok(());
        }
        failure = AuthError::BadSignature;
    }
    Err(failure)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn creds() -> Credentials {
        Credentials {
            bearer_token: Some("s3cret-token-0123456789".into()),
            hmac_secret: Some("hmac-secret-0123456789".into()),
        }
    }

    #[test]
    fn bearer_token() {
        let c = creds();
        assert_eq!(
            check(&c, Some("Bearer s3cret-token-0123456789"), None, b""),
            Ok(())
        );
        assert_eq!(
            check(&c, Some("bearer s3cret-token-0123456789"), None, b""),
            Ok(())
        );
        assert_eq!(
            check(&c, Some("Bearer s3cret-token-0123456788"), None, b""),
            Err(AuthError::BadToken)
        );
        assert_eq!(
            check(&c, Some("Basic s3cret-token-0123456789"), None, b""),
            Err(AuthError::Missing)
        );
        assert_eq!(check(&c, None, None, b""), Err(AuthError::Missing));
    }

    #[test]
    fn signature_covers_the_body() {
        let c = creds();
        let sig = sign("hmac-secret-0123456789", b"{\"a\":1}");
        assert!(sig.starts_with("sha256=") && sig.len() == 7 + 64);
        assert_eq!(check(&c, None, Some(&sig), b"{\"a\":1}"), Ok(()));
        assert_eq!(
            check(&c, None, Some(&sig), b"{\"a\":2}"),
            Err(AuthError::BadSignature)
        );
        assert_eq!(
            check(&c, None, Some("sha256=zz"), b"{}"),
            Err(AuthError::BadSignature)
        );
        // A signature is no use when only a token is configured.
        let token_only = Credentials {
            hmac_secret: None,
            ..creds()
        };
        assert_eq!(
            check(&token_only, None, Some(&sig), b"{\"a\":1}"),
            Err(AuthError::Missing)
        );
    }

    #[test]
    fn hmac_matches_rfc4231_case_2() {
        assert_eq!(
            sign("Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn ct_eq_basics() {
        assert!(ct_eq(b"abc", b"abc"));
        assert!(!ct_eq(b"abc", b"abd"));
        assert!(!ct_eq(b"abc", b"abcd"));
    }
}
