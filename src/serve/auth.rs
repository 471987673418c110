//! Who may make the receiver act: a bearer token, or an HMAC-SHA256 signature of a
//! timestamp and the body. Both are compared in constant time so response timing leaks
//! nothing about the secret. A signature is good for [`SIGNATURE_WINDOW`] around its
//! timestamp, and once ([`super::replay`]): a captured request cannot be sent again.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::time::Duration;

/// The header carrying `sha256=<hex>` of `<timestamp>.<raw body>`.
pub const SIGNATURE_HEADER: &str = "x-recover-signature";
/// The header carrying the signing time, Unix seconds; covered by the signature.
pub const TIMESTAMP_HEADER: &str = "x-recover-timestamp";
/// How far a signed request's timestamp may be from the receiver's clock, either way.
pub const SIGNATURE_WINDOW: Duration = Duration::from_secs(300);

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
    #[error("a signature without a valid x-recover-timestamp (Unix seconds)")]
    NoTimestamp,
    #[error("signed {skew_s} s away from this receiver's clock (window {}s)", SIGNATURE_WINDOW.as_secs())]
    StaleTimestamp { skew_s: i64 },
    #[error("a signature already used (replayed request)")]
    Replayed,
}

/// What a request presented.
#[derive(Debug, Clone, Copy, Default)]
pub struct Presented<'a> {
    pub authorization: Option<&'a str>,
    pub signature: Option<&'a str>,
    pub timestamp: Option<&'a str>,
    pub body: &'a [u8],
}

/// How a request was let in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admitted {
    Token,
    /// By signature: the caller still checks it was not used before.
    Signature {
        mac: [u8; 32],
        timestamp: u64,
    },
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
pub fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
}

/// The signature header value for `body` sent at `timestamp` (what a sender computes):
/// `sha256=` and the hex HMAC-SHA256 of `<timestamp>.<body>`.
pub fn sign(secret: &str, timestamp: u64, body: &[u8]) -> String {
    let bytes = signed_mac(secret, timestamp, body).finalize().into_bytes();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

fn signed_mac(secret: &str, timestamp: u64, body: &[u8]) -> Hmac<Sha256> {
    let mut m = mac(secret);
    m.update(timestamp.to_string().as_bytes());
    m.update(b".");
    m.update(body);
    m
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

/// Check a request at `now` (Unix seconds): a valid bearer token, or a valid signature
/// over a timestamp within [`SIGNATURE_WINDOW`] of `now`, admits it.
pub fn check(creds: &Credentials, p: &Presented<'_>, now: u64) -> Result<Admitted, AuthError> {
    let mut failure = AuthError::Missing;
    if let (Some(expected), Some(given)) = (&creds.bearer_token, p.authorization.and_then(bearer)) {
        if ct_eq(expected.as_bytes(), given.as_bytes()) {
            return Ok(Admitted::Token);
        }
        failure = AuthError::BadToken;
    }
    if let (Some(secret), Some(sig)) = (&creds.hmac_secret, p.signature) {
        let Some(timestamp) = p.timestamp.and_then(|t| t.trim().parse::<u64>().ok()) else {
            return Err(AuthError::NoTimestamp);
        };
        let given = sig.trim().strip_prefix("sha256=").and_then(unhex);
        // verify_slice compares in constant time.
        let valid = given.as_deref().filter(|g| {
            signed_mac(secret, timestamp, p.body)
                .verify_slice(g)
                .is_ok()
        });
        let Some(mac) = valid.and_then(|g| <[u8; 32]>::try_from(g).ok()) else {
            return Err(AuthError::BadSignature);
        };
        // Only a genuine signature learns that its time is off.
        let skew_s = i64::try_from(timestamp).unwrap_or(i64::MAX) - i64::try_from(now).unwrap_or(0);
        if skew_s.unsigned_abs() > SIGNATURE_WINDOW.as_secs() {
            return Err(AuthError::StaleTimestamp { skew_s });
        }
        return Ok(Admitted::Signature { mac, timestamp });
    }
    Err(failure)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_800_000_000;

    fn creds() -> Credentials {
        Credentials {
            bearer_token: Some("s3cret-token-0123456789".into()),
            hmac_secret: Some("hmac-secret-0123456789".into()),
        }
    }

    fn token(value: &str) -> Presented<'_> {
        Presented {
            authorization: Some(value),
            ..Presented::default()
        }
    }

    fn signed<'a>(sig: &'a str, ts: &'a str, body: &'a [u8]) -> Presented<'a> {
        Presented {
            signature: Some(sig),
            timestamp: Some(ts),
            body,
            ..Presented::default()
        }
    }

    #[test]
    fn bearer_token() {
        let c = creds();
        let ok = Ok(Admitted::Token);
        assert_eq!(check(&c, &token("Bearer s3cret-token-0123456789"), NOW), ok);
        assert_eq!(check(&c, &token("bearer s3cret-token-0123456789"), NOW), ok);
        assert_eq!(
            check(&c, &token("Bearer s3cret-token-0123456788"), NOW),
            Err(AuthError::BadToken)
        );
        assert_eq!(
            check(&c, &token("Basic s3cret-token-0123456789"), NOW),
            Err(AuthError::Missing)
        );
        assert_eq!(
            check(&c, &Presented::default(), NOW),
            Err(AuthError::Missing)
        );
    }

    #[test]
    fn signature_covers_the_timestamp_and_the_body() {
        let c = creds();
        let ts = NOW.to_string();
        let sig = sign("hmac-secret-0123456789", NOW, b"{\"a\":1}");
        assert!(sig.starts_with("sha256=") && sig.len() == 7 + 64);
        assert!(matches!(
            check(&c, &signed(&sig, &ts, b"{\"a\":1}"), NOW),
            Ok(Admitted::Signature { timestamp: NOW, .. })
        ));
        assert_eq!(
            check(&c, &signed(&sig, &ts, b"{\"a\":2}"), NOW),
            Err(AuthError::BadSignature)
        );
        let later = (NOW + 1).to_string();
        assert_eq!(
            check(&c, &signed(&sig, &later, b"{\"a\":1}"), NOW),
            Err(AuthError::BadSignature),
            "the timestamp is signed: changing it breaks the signature"
        );
        assert_eq!(
            check(&c, &signed("sha256=zz", &ts, b"{}"), NOW),
            Err(AuthError::BadSignature)
        );
        let no_ts = Presented {
            timestamp: None,
            ..signed(&sig, &ts, b"{\"a\":1}")
        };
        assert_eq!(check(&c, &no_ts, NOW), Err(AuthError::NoTimestamp));
        // A signature is no use when only a token is configured.
        let token_only = Credentials {
            hmac_secret: None,
            ..creds()
        };
        assert_eq!(
            check(&token_only, &signed(&sig, &ts, b"{\"a\":1}"), NOW),
            Err(AuthError::Missing)
        );
    }

    #[test]
    fn a_signature_is_good_within_the_window_only() {
        let c = creds();
        let window = SIGNATURE_WINDOW.as_secs();
        for (at, ok) in [
            (NOW - window, true),
            (NOW + window, true),
            (NOW - window - 1, false),
            (NOW + window + 1, false),
        ] {
            let sig = sign("hmac-secret-0123456789", at, b"{}");
            let ts = at.to_string();
            let r = check(&c, &signed(&sig, &ts, b"{}"), NOW);
            assert_eq!(
                r.is_ok(),
                ok,
                "signed at now{:+}: {r:?}",
                at as i64 - NOW as i64
            );
        }
    }

    #[test]
    fn hmac_matches_rfc4231_case_2() {
        let mut m = mac("Jefe");
        m.update(b"what do ya want for nothing?");
        let hex: String = m
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(
            hex,
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn ct_eq_basics() {
        assert!(ct_eq(b"abc", b"abc"));
        assert!(!ct_eq(b"abc", b"abd"));
        assert!(!ct_eq(b"abc", b"abcd"));
    }
}
