//! Following a few objects of one kind as they change: list, then watch from the list's
//! resourceVersion, and list again whenever the watch ends. The watch asks the server to
//! end it after `backstop`, so even a watch that silently stopped delivering (a proxy that
//! holds the connection, a missed event) is replaced by a fresh read that often: a slow
//! periodic read as a backstop behind the push, not a poll several times a second.
//!
//! Each list and each watch request has its own deadline (the watch's: `backstop` plus a
//! grace). Failures are logged at most once per failure streak and retried with a growing
//! backoff; the caller keeps what it last saw meanwhile.

use super::call::{self, CallPolicy};
use super::rbac::Permission;
use futures::StreamExt;
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use kube::Resource;
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// What to follow.
#[derive(Debug, Clone)]
pub struct Follow {
    /// `key=value,...`, or empty.
    pub labels: String,
    /// `metadata.name=NAME`, or empty.
    pub fields: String,
    /// How long one watch may last before a fresh list.
    pub backstop: Duration,
    /// Permissions of the list and the watch, for the error hint.
    pub list_perm: Permission,
    pub watch_perm: Permission,
}

/// The objects now, by name.
pub type Seen<K> = BTreeMap<String, K>;

fn name_of<K: Resource>(k: &K) -> String {
    k.meta().name.clone().unwrap_or_default()
}

/// Follow until `shutdown`, calling `on_change` with every state seen (after each list and
/// after each watch event).
pub async fn follow<K, F>(api: Api<K>, what: Follow, shutdown: CancellationToken, mut on_change: F)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + 'static,
    F: FnMut(&Seen<K>) + Send,
{
    let mut failures = 0u32;
    let whom = || {
        format!(
            "following {} ({} {})",
            K::kind(&()),
            what.labels,
            what.fields
        )
    };
    loop {
        let ended = tokio::select! {
            _ = shutdown.cancelled() => return,
            r = one_round(&api, &what, &mut on_change) => r,
        };
        let wait = match ended {
            Ok(()) => {
                failures = 0;
                continue;
            }
            Err(e) => {
                failures += 1;
                if failures == 1 || failures.is_power_of_two() {
                    tracing::warn!(target_objects = %whom(), failures, error = %e, "list/watch failed; keeping what was last seen and retrying");
                }
                Duration::from_millis(250 * u64::from(failures.min(20)))
            }
        };
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

/// One list and the watch after it; `Ok` when the watch ended normally (its timeout).
async fn one_round<K, F>(
    api: &Api<K>,
    what: &Follow,
    on_change: &mut F,
) -> Result<(), crate::platform::PlatformError>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    F: FnMut(&Seen<K>) + Send,
{
    let mut lp = ListParams::default();
    if !what.labels.is_empty() {
        lp = lp.labels(&what.labels);
    }
    if !what.fields.is_empty() {
        lp = lp.fields(&what.fields);
    }
    let list = call::call(
        &call::READ,
        &what.list_perm,
        || "list".to_string(),
        || api.list(&lp),
    )
    .await?;
    let mut seen: Seen<K> = list.items.into_iter().map(|k| (name_of(&k), k)).collect();
    on_change(&seen);
    let mut version = list.metadata.resource_version.unwrap_or_default();
    let secs = what.backstop.as_secs().clamp(1, 290) as u32;
    let mut wp = WatchParams::default().timeout(secs);
    if !what.labels.is_empty() {
        wp = wp.labels(&what.labels);
    }
    if !what.fields.is_empty() {
        wp = wp.fields(&what.fields);
    }
    let open = CallPolicy {
        attempts: 1,
        ..call::READ
    };
    let stream = call::call(
        &open,
        &what.watch_perm,
        || "watch".to_string(),
        || api.watch(&wp, &version),
    )
    .await?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(u64::from(secs) + 10);
    let mut stream = std::pin::pin!(stream);
    loop {
        let next = match tokio::time::timeout_at(deadline, stream.next()).await {
            Err(_) | Ok(None) => return Ok(()),
            Ok(Some(next)) => next,
        };
        let event = next.map_err(|e| crate::platform::PlatformError::Call {
            what: "watch stream".to_string(),
            source: Box::new(e),
        })?;
        match event {
            WatchEvent::Added(k) | WatchEvent::Modified(k) => {
                version = k.meta().resource_version.clone().unwrap_or(version);
                seen.insert(name_of(&k), k);
            }
            WatchEvent::Deleted(k) => {
                seen.remove(&name_of(&k));
            }
            WatchEvent::Bookmark(b) => {
                version = b.metadata.resource_version;
                continue;
            }
            // 410 Gone and the like: list again.
            WatchEvent::Error(e) => {
                return Err(crate::platform::PlatformError::Call {
                    what: format!("watch from version {version}"),
                    source: Box::new(kube::Error::Api(e)),
                })
            }
        }
        on_change(&seen);
    }
}
