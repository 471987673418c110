//! Several local gates in front of the same replicas, as the engine sees them: one limit,
//! the total for the service. `set_limit` finds the gates that answer now and gives each
//! its share ([`crate::gate::share::share`]: rate, burst and in-flight cap divided by the
//! gates that answered, the remainder to the first ones); `get_limit` adds the shares up.
//!
//! Shares are recomputed at every `set_limit` (every ramp step): a gate that stops between
//! two steps leaves the others at their old shares until the next one, so the total
//! admitted drops by that gate's share meanwhile; it never rises above the total.

use super::gate::HttpGate;
use crate::gate::limit::{Limit, LimitChange};
use crate::gate::share::{share, share_fill, Peers};
use crate::platform::{GateControl, PlatformError};
use std::time::Duration;

pub struct SharedGates {
    gates: Vec<HttpGate>,
}

impl SharedGates {
    pub fn new(gates: Vec<HttpGate>) -> Self {
        SharedGates { gates }
    }

    /// The gates whose admin API answers now, in inventory order.
    async fn live(&self) -> Vec<&HttpGate> {
        let probes = self.gates.iter().map(|g| async move {
            let ok = tokio::time::timeout(Duration::from_secs(2), g.get_limit())
                .await
                .is_ok_and(|r| r.is_ok());
            (g, ok)
        });
        futures::future::join_all(probes)
            .await
            .into_iter()
            .filter(|(_, ok)| *ok)
            .map(|(g, _)| g)
            .collect()
    }
}

/// The total of the shares the gates enforce. Pure.
pub fn total(shares: &[Limit]) -> Option<Limit> {
    let first = shares.first()?;
    let rate = shares
        .iter()
        .map(|l| l.rate_per_s)
        .try_fold(0.0, |acc, r| r.map(|r| acc + r));
    let max_in_flight = shares
        .iter()
        .map(|l| l.max_in_flight)
        .try_fold(0u32, |acc, m| m.map(|m| acc.saturating_add(m)));
    Some(Limit {
        rate_per_s: rate,
        burst: shares.iter().map(|l| l.burst).sum::<u32>().max(1),
        max_in_flight,
        note: first.note.clone(),
        // In shadow only when every gate is: one enforcing gate refuses for real.
        shadow: shares.iter().all(|l| l.shadow),
    })
}

#[async_trait::async_trait]
impl GateControl for SharedGates {
    fn shell_flags(&self) -> Vec<String> {
        self.gates.iter().flat_map(|g| g.shell_flags()).collect()
    }

    async fn get_limit(&self) -> Result<Limit, PlatformError> {
        if let [one] = self.gates.as_slice() {
            return one.get_limit().await;
        }
        let mut shares = Vec::new();
        for g in self.live().await {
            shares.push(g.get_limit().await?);
        }
        total(&shares).ok_or_else(|| PlatformError::Other("no gate answers its admin API".into()))
    }

    async fn set_limit(&self, limit: &Limit) -> Result<(), PlatformError> {
        self.change_limit(&LimitChange::carried(limit.clone()))
            .await
    }

    fn fills(&self) -> bool {
        self.gates.iter().all(|g| g.fills())
    }

    /// Each gate that answers gets its share, and its part of the fill when asked (full at
    /// its share's burst, or its split of a count of tokens).
    async fn change_limit(&self, change: &LimitChange) -> Result<(), PlatformError> {
        let limit = &change.limit;
        if let [one] = self.gates.as_slice() {
            return one.change_limit(change).await;
        }
        let live = self.live().await;
        if live.is_empty() {
            return Err(PlatformError::Other(format!(
                "none of the {} gates answers its admin API",
                self.gates.len()
            )));
        }
        if live.len() < self.gates.len() {
            tracing::warn!(
                answering = live.len(),
                listed = self.gates.len(),
                "some gates do not answer; the limit is shared by the ones that do"
            );
        }
        let n = live.len();
        for (rank, g) in live.into_iter().enumerate() {
            g.change_limit(&LimitChange {
                limit: share(limit, Peers::new(n, rank)),
                fill: share_fill(change.fill, Peers::new(n, rank)),
            })
            .await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_back_up_to_the_total() {
        let t = Limit {
            rate_per_s: Some(45.0),
            burst: 7,
            max_in_flight: Some(11),
            note: Some("n".into()),
            shadow: false,
        };
        let shares: Vec<Limit> = (0..3).map(|r| share(&t, Peers::new(3, r))).collect();
        let back = total(&shares).unwrap();
        assert!((back.rate_per_s.unwrap() - 45.0).abs() < 1e-9);
        assert_eq!((back.burst, back.max_in_flight), (7, Some(11)));
        let mixed = [Limit::unlimited(), share(&t, Peers::new(2, 0))];
        assert_eq!(total(&mixed).unwrap().rate_per_s, None);
    }
}
