//! The replicas' servers busy at the scrape, in the lower bound: a path that restarts
//! nothing serves with each server only once the request it holds has ended. Its own
//! module beside [`super::bound`], whose no-restart path reads it, so the fluid model and
//! this count of servers read apart (the derivation is in docs/design/arithmetic.md,
//! "Servers busy at the scrape").
//!
//! Why it exists: a stuck service's servers are working on requests that started at the
//! overloaded cost (k times the healthy one, often abandoned by their clients). A
//! request's cost is fixed when it starts, and a drain drops only what is queued, so no
//! procedure that restarts nothing gets a busy server back before its request ends; the
//! bound that took every server free at the scrape read 0.73 s where the service could
//! not answer anything before 0.2 s (seed 7's grid-5, 9 servers busy for up to 0.25 s).

use super::bound_retry::ServersAt;

/// Each replica's servers busy with a request at the scrape, by when each is free: the
/// earliest it can be (the lower edge of its bucket on the service's ladder), seconds from
/// the paths' origin. A replica's other servers are idle. Where not measured there is no
/// `ServersBusy`, and every server counts as free at the origin. The service's pages may
/// be read up to `busy_from_s` after the clients' (one probe): a server read busy may
/// have been free until then, so it counts busy only from then on.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ServersBusy {
    /// Servers per replica.
    pub servers: u32,
    /// Per replica, each busy server's free time, seconds from the paths' origin.
    pub free_at: Vec<Vec<f64>>,
    /// From when a server read busy counts busy, seconds from the paths' origin.
    pub busy_from_s: f64,
}

impl ServersBusy {
    /// The servers the service's pages gave (`at`, each replica's busy ones read on its
    /// ladder, `servers` per replica), moved to the paths' origin: `at_s` after it.
    /// `None` where the pages did not say which replica held which.
    pub(super) fn read(at: &ServersAt, servers: u32, at_s: f64) -> Option<ServersBusy> {
        if at.by_replica.is_empty() {
            return None;
        }
        // Read before the clients' pages (the probe's order), a server's job ends up to
        // the read span sooner on their clock; read in either order, one may have
        // answered once more in between, so none counts busy until the span is over.
        let (early, busy_from_s) = if at.read_first {
            (at.read_apart_s, at_s)
        } else {
            (0.0, at_s + at.read_apart_s)
        };
        Some(ServersBusy {
            servers,
            free_at: at
                .by_replica
                .iter()
                .map(|f| f.iter().map(|b| b.free_s + at_s - early).collect())
                .collect(),
            busy_from_s,
        })
    }

    /// The share of `replica`'s servers free at `t`: idle ones, and busy ones whose
    /// request has ended by then.
    pub(super) fn free_share(&self, replica: usize, t: f64) -> f64 {
        let servers = f64::from(self.servers.max(1));
        let still = self
            .free_at
            .get(replica)
            .map_or(0, |f| f.iter().filter(|&&at| at > t).count());
        let still = if t < self.busy_from_s { 0 } else { still };
        ((servers - still as f64) / servers).clamp(0.0, 1.0)
    }

    /// Requests in service at the scrape on `replica` that end in `(from, to]`: each may
    /// be a live client's answer, so a path counts it as served when it ends.
    pub(super) fn ending(&self, replica: usize, from: f64, to: f64) -> f64 {
        self.free_at
            .get(replica)
            .map_or(0, |f| f.iter().filter(|&&at| at > from && at <= to).count()) as f64
    }

    /// Servers read busy: the requests in service at the scrape.
    pub(super) fn in_service(&self) -> f64 {
        self.free_at.iter().map(Vec::len).sum::<usize>() as f64
    }

    /// When the last busy server is free (0 when none is busy).
    pub(super) fn last_free_s(&self) -> f64 {
        self.free_at
            .iter()
            .flatten()
            .fold(0.0_f64, |a, &b| a.max(b))
    }

    /// The same servers with every free time `by` seconds earlier: what a fluid step of
    /// `by` may count late is counted early instead, so the bound only comes out lower.
    pub(super) fn earlier(&self, by: f64) -> ServersBusy {
        ServersBusy {
            servers: self.servers,
            busy_from_s: self.busy_from_s,
            free_at: self
                .free_at
                .iter()
                .map(|f| f.iter().map(|&at| at - by).collect())
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_server_counts_free_only_once_its_request_has_ended() {
        let b = ServersBusy {
            servers: 4,
            free_at: vec![vec![0.1, 0.2], vec![]],
            busy_from_s: 0.0,
        };
        assert_eq!(b.free_share(0, 0.0), 0.5);
        assert_eq!(b.free_share(0, 0.15), 0.75);
        assert_eq!(b.free_share(0, 0.2), 1.0);
        assert_eq!(b.free_share(1, 0.0), 1.0);
        // A replica the ladder did not cover: every server free.
        assert_eq!(b.free_share(2, 0.0), 1.0);
        assert_eq!(b.ending(0, 0.05, 0.15), 1.0);
        assert_eq!(b.ending(0, 0.1, 0.2), 1.0);
        assert_eq!(b.last_free_s(), 0.2);
        assert_eq!(b.in_service(), 2.0);
        assert_eq!(b.earlier(0.05).free_at[0], vec![0.05, 0.15000000000000002]);
        // Read 10 ms after the clients: free until then.
        let late = ServersBusy {
            busy_from_s: 0.01,
            ..b
        };
        assert_eq!(late.free_share(0, 0.005), 1.0);
        assert_eq!(late.free_share(0, 0.01), 0.5);
    }
}
