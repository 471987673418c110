//! How many gate replicas share the limit, from the gate Service's EndpointSlices: the
//! replicas the Service sends traffic to are exactly its ready endpoints. Followed with a
//! watch ([`super::follow`]), so a replica that appears or goes away changes every
//! replica's share within a second. Needs list and watch on endpointslices in the
//! namespace, nothing else.

use super::follow::{follow, Follow, Seen};
use super::rbac;
use crate::gate::limit_source::{LimitSourceError, PeerSource};
use crate::gate::share::Peers;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::Api;
use std::collections::BTreeSet;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const NAME: &str = "endpointslices";

/// The label the EndpointSlice controller puts on every slice of a Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// The names of the endpoints that take traffic: ready (a missing condition means ready,
/// as the API documents) and not terminating, named by their pod (or address). A Service
/// with several slices (many endpoints, dual-stack) lists an endpoint once. Pure.
pub fn ready_endpoints<'a>(
    slices: impl IntoIterator<Item = &'a EndpointSlice>,
) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for slice in slices {
        for ep in &slice.endpoints {
            let c = ep.conditions.as_ref();
            let ready = c.and_then(|c| c.ready).unwrap_or(true);
            let terminating = c.and_then(|c| c.terminating).unwrap_or(false);
            if !ready || terminating {
                continue;
            }
            let name = ep
                .target_ref
                .as_ref()
                .and_then(|r| r.name.clone())
                .or_else(|| ep.addresses.first().cloned());
            if let Some(n) = name {
                out.insert(n);
            }
        }
    }
    out
}

/// A [`PeerSource`] following one Service's EndpointSlices.
pub struct EndpointSlicePeers {
    api: Api<EndpointSlice>,
    service: String,
    /// This replica's pod name, as its endpoint's targetRef names it.
    me: String,
    backstop: Duration,
}

impl EndpointSlicePeers {
    pub fn new(client: kube::Client, namespace: &str, service: &str, me: &str) -> Self {
        EndpointSlicePeers {
            api: Api::namespaced(client, namespace),
            service: service.to_string(),
            me: me.to_string(),
            backstop: Duration::from_secs(60),
        }
    }

    /// How long one watch may last before a fresh list (tests shorten it).
    pub fn with_backstop(mut self, backstop: Duration) -> Self {
        self.backstop = backstop;
        self
    }
}

#[async_trait::async_trait]
impl PeerSource for EndpointSlicePeers {
    fn name(&self) -> &'static str {
        NAME
    }

    async fn run(
        self: Box<Self>,
        updates: mpsc::Sender<Peers>,
        shutdown: CancellationToken,
    ) -> Result<(), LimitSourceError> {
        let what = Follow {
            labels: format!("{SERVICE_NAME_LABEL}={}", self.service),
            fields: String::new(),
            backstop: self.backstop,
            list_perm: rbac::ENDPOINTSLICES_LIST,
            watch_perm: rbac::ENDPOINTSLICES_WATCH,
        };
        let (tx, mut rx) = mpsc::unbounded_channel();
        let me = self.me.clone();
        let follower = follow(
            self.api,
            what,
            shutdown.clone(),
            move |seen: &Seen<EndpointSlice>| {
                let _ = tx.send(Peers::among(
                    ready_endpoints(seen.values()).iter().map(String::as_str),
                    &me,
                ));
            },
        );
        // Every state seen is sent, changed or not: each is a fresh confirmation of the
        // count (the gate shows its age), and the gate acts only on a change.
        let forward = async {
            while let Some(peers) = rx.recv().await {
                if updates.send(peers).await.is_err() {
                    return; // the gate is gone
                }
            }
        };
        tokio::select! {
            _ = follower => {}
            _ = forward => {}
        }
        Ok(())
    }
}
