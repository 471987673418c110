//! `x-deadline-ms`: how long the gate will still wait for this request. A service that
//! reads it can skip work whose answer nobody will wait for: the abandoned work that keeps
//! a stuck overload stuck. A client that already sent a tighter deadline keeps it.

use std::time::Duration;

pub const HEADER: &str = "x-deadline-ms";

/// Milliseconds left: the gate's upstream timeout minus the time already spent in the
/// gate, capped by the client's own `x-deadline-ms` when it sent a valid one.
pub fn remaining_ms(timeout: Duration, spent: Duration, client: Option<&[u8]>) -> u64 {
    let ours = u64::try_from(timeout.saturating_sub(spent).as_millis()).unwrap_or(u64::MAX);
    match client.and_then(parse_ms) {
        Some(theirs) => ours.min(theirs),
        None => ours,
    }
}

fn parse_ms(v: &[u8]) -> Option<u64> {
    std::str::from_utf8(v).ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_the_tighter_deadline() {
        let t = Duration::from_secs(2);
        assert_eq!(remaining_ms(t, Duration::from_millis(5), None), 1995);
        assert_eq!(remaining_ms(t, Duration::ZERO, Some(b"300")), 300);
        assert_eq!(remaining_ms(t, Duration::ZERO, Some(b"9000")), 2000);
        assert_eq!(remaining_ms(t, Duration::ZERO, Some(b"soon")), 2000);
        assert_eq!(remaining_ms(t, Duration::from_secs(3), None), 0);
    }
}
