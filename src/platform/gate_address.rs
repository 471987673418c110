//! Where a person reaches a gate's limit from a shell (`recover gate limit`): a local
//! gate's admin API with its token file, or, on Kubernetes, the limit ConfigMap every gate
//! replica follows. The same [`GateControl`] the engine acts through, so a limit set by
//! hand is confirmed in force exactly as the engine's are.

use super::kube::{KubeOptions, KubePlatform, Workload};
use super::local::gate::HttpGate;
use super::{GateControl, PlatformError};
use std::path::PathBuf;
use std::sync::Arc;

/// A gate, as a person names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateAddress {
    /// A local gate: its admin listener's base URL and the file holding its bearer token.
    Local {
        admin_url: String,
        token_file: PathBuf,
    },
    /// The gates of a namespace, through the limit ConfigMap they follow.
    Kube {
        namespace: String,
        context: Option<String>,
    },
}

/// The gate's control at `address`. Nothing is read or written yet.
pub async fn reach(address: &GateAddress) -> Result<Arc<dyn GateControl>, PlatformError> {
    crate::util::http::ensure_tls_provider();
    Ok(match address {
        GateAddress::Local {
            admin_url,
            token_file,
        } => Arc::new(HttpGate::new(admin_url, token_file.clone())),
        GateAddress::Kube { namespace, context } => {
            // The workload is not used: only the gate's ConfigMap and pods are.
            let opts = KubeOptions::new(
                namespace,
                Workload::Selector("app.kubernetes.io/name=recover-gate".into()),
            );
            Arc::new(
                KubePlatform::connect(context.as_deref(), opts)
                    .await?
                    .kube_gate(),
            )
        }
    })
}
