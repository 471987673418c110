//! `x-deadline-ms`: when the gate stops waiting for this request, so a service can skip
//! work whose answer nobody will wait for (the abandoned work that keeps a stuck overload
//! stuck). The value is Unix epoch milliseconds, the encoding the demo workers send and
//! the demo config service reads. A client that sent a tighter deadline keeps it, and the
//! gate does not wait past it either.
//!
//! Clients may send either an epoch deadline or a duration: values below 10^12 (a date in
//! 2001) are read as milliseconds from now.

use std::time::{Duration, SystemTime};

pub const HEADER: &str = "x-deadline-ms";

/// Header values below this are durations, above it Unix epoch milliseconds.
const EPOCH_MS_FLOOR: u64 = 1_000_000_000_000;

/// The deadline to send on (epoch ms) and how long the gate itself will wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadline {
    pub epoch_ms: u64,
    pub wait: Duration,
}

/// Pure: the gate waits `timeout` minus what it already `spent`, or less when the
/// client's own deadline comes first.
pub fn compute(
    now_epoch_ms: u64,
    timeout: Duration,
    spent: Duration,
    client: Option<&[u8]>,
) -> Deadline {
    let ours = u64::try_from(timeout.saturating_sub(spent).as_millis()).unwrap_or(u64::MAX);
    let left = match client.and_then(parse_ms) {
        Some(v) if v >= EPOCH_MS_FLOOR => ours.min(v.saturating_sub(now_epoch_ms)),
        Some(v) => ours.min(v),
        None => ours,
    };
    Deadline {
        epoch_ms: now_epoch_ms.saturating_add(left),
        wait: Duration::from_millis(left),
    }
}

/// Milliseconds since the Unix epoch, now.
pub fn now_epoch_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn parse_ms(v: &[u8]) -> Option<u64> {
    std::str::from_utf8(v).ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_780_000_000_000;

    fn left(d: Deadline) -> (u64, u128) {
        (d.epoch_ms - NOW, d.wait.as_millis())
    }

    #[test]
    fn takes_the_tighter_deadline_in_either_encoding() {
        let t = Duration::from_secs(2);
        assert_eq!(
            left(compute(NOW, t, Duration::from_millis(5), None)),
            (1995, 1995)
        );
        assert_eq!(
            left(compute(NOW, t, Duration::ZERO, Some(b"300"))),
            (300, 300)
        );
        assert_eq!(
            left(compute(NOW, t, Duration::ZERO, Some(b"9000"))),
            (2000, 2000)
        );
        let epoch = (NOW + 700).to_string();
        assert_eq!(
            left(compute(NOW, t, Duration::ZERO, Some(epoch.as_bytes()))),
            (700, 700)
        );
        let far = (NOW + 60_000).to_string();
        assert_eq!(
            left(compute(NOW, t, Duration::ZERO, Some(far.as_bytes()))),
            (2000, 2000)
        );
        let past = (NOW - 10).to_string();
        assert_eq!(
            left(compute(NOW, t, Duration::ZERO, Some(past.as_bytes()))),
            (0, 0)
        );
        assert_eq!(
            left(compute(NOW, t, Duration::ZERO, Some(b"soon"))),
            (2000, 2000)
        );
        assert_eq!(left(compute(NOW, t, Duration::from_secs(3), None)), (0, 0));
    }
}
