//! The namespace's pods, followed with one watch ([`super::follow`]) instead of three
//! LISTs per scrape round: a run scrapes every 0.5-1 s, and each round needs the target's,
//! the gates' and the clients' pods. Until the first list has arrived (or for a selector
//! it cannot match itself) the caller lists as before; a watch that breaks keeps the last
//! state and lists again after a growing pause, as `follow` does.

use super::decide::PodView;
use super::follow::{follow, Follow, Seen};
use super::rbac;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// A selector of `k=v` (or `k==v`) terms, comma-separated; `None` for anything else
/// (set-based terms), which the cache leaves to a LIST. Pure.
pub fn equality_terms(selector: &str) -> Option<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for term in selector.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        if term.contains("!=") || term.contains(' ') {
            return None;
        }
        let (k, v) = term.split_once("==").or_else(|| term.split_once('='))?;
        out.insert(k.trim().to_string(), v.trim().to_string());
    }
    Some(out)
}

pub struct PodCache {
    seen: Arc<Mutex<Option<Seen<Pod>>>>,
    stop: CancellationToken,
}

impl PodCache {
    pub fn start(api: Api<Pod>) -> PodCache {
        let seen: Arc<Mutex<Option<Seen<Pod>>>> = Arc::default();
        let stop = CancellationToken::new();
        let what = Follow {
            labels: String::new(),
            fields: String::new(),
            backstop: Duration::from_secs(60),
            list_perm: rbac::PODS_LIST,
            watch_perm: rbac::PODS_WATCH,
        };
        let s = seen.clone();
        tokio::spawn(follow(api, what, stop.clone(), move |now: &Seen<Pod>| {
            *s.lock().unwrap_or_else(|e| e.into_inner()) = Some(now.clone());
        }));
        PodCache { seen, stop }
    }

    /// The pods matching `selector`, sorted by name; `None` until the first list arrived
    /// or when the selector is not one the cache matches.
    pub fn matching(&self, selector: &str) -> Option<Vec<PodView>> {
        let terms = equality_terms(selector)?;
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let pods = seen.as_ref()?;
        let mut out: Vec<PodView> = pods
            .values()
            .filter(|p| {
                let labels = p.metadata.labels.clone().unwrap_or_default();
                terms.iter().all(|(k, v)| labels.get(k) == Some(v))
            })
            .map(PodView::of)
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Some(out)
    }
}

impl Drop for PodCache {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_equality_selectors_are_matched_from_the_cache() {
        let t = equality_terms("app.kubernetes.io/name=gate, tier==edge").unwrap();
        assert_eq!(t["app.kubernetes.io/name"], "gate");
        assert_eq!(t["tier"], "edge");
        assert_eq!(equality_terms("app in (a,b)"), None);
        assert_eq!(equality_terms("app!=a"), None);
    }
}
