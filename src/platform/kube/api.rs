//! Turning kube-rs errors into [`PlatformError`]s that say what was being done and, on a
//! 403, which Role rule is missing: an operator reading "forbidden" at 3 am needs the fix,
//! not the status code.

use super::rbac::{self, Permission};
use crate::platform::PlatformError;

/// The status code of an API error, if the API server answered at all.
pub fn status_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

pub fn is_not_found(e: &kube::Error) -> bool {
    status_code(e) == Some(404)
}

pub fn is_conflict(e: &kube::Error) -> bool {
    status_code(e) == Some(409)
}

/// Wrap a failed call made under `perm`.
pub fn call_error(perm: &Permission, what: impl Into<String>, e: kube::Error) -> PlatformError {
    let mut message = e.to_string();
    if status_code(&e) == Some(403) {
        message = format!(
            "{message}; the Role needs {} (see manifests/controller-rbac.yaml)",
            rbac::describe(perm)
        );
    }
    PlatformError::Call {
        what: what.into(),
        message,
    }
}
