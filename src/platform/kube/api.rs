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

/// Whether a [`PlatformError`] from [`super::call::call`] is the API server's 409: the
/// object changed since it was read (a resourceVersion precondition failed).
pub fn is_conflict_error(e: &PlatformError) -> bool {
    match e {
        PlatformError::Call { source, .. } => source
            .downcast_ref::<kube::Error>()
            .is_some_and(is_conflict),
        _ => false,
    }
}

/// A call the Role does not allow, with the permission it needs.
#[derive(Debug, thiserror::Error)]
#[error("{source}; the Role needs {needs} (see manifests/controller-rbac.yaml)")]
pub struct Forbidden {
    pub needs: String,
    pub source: kube::Error,
}

/// Wrap a failed call made under `perm`.
pub fn call_error(perm: &Permission, what: impl Into<String>, e: kube::Error) -> PlatformError {
    let source: crate::platform::CallCause = if status_code(&e) == Some(403) {
        Box::new(Forbidden {
            needs: rbac::describe(perm),
            source: e,
        })
    } else {
        Box::new(e)
    };
    PlatformError::Call {
        what: what.into(),
        source,
    }
}
