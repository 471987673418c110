//! What a gate pod's `/metrics` says about the limit it enforces: the version in force
//! and how many replicas share it.

/// The version in `recover_gate_limit_applied_info{version="..."} 1`, if the gate reports one.
pub fn applied_version(metrics: &str) -> Option<String> {
    metrics.lines().find_map(|line| {
        let rest = line.strip_prefix("recover_gate_limit_applied_info{")?;
        let (labels, value) = rest.split_once('}')?;
        if value.trim().parse::<f64>().ok()? != 1.0 {
            return None;
        }
        labels.split(',').find_map(|kv| {
            let v = kv.trim().strip_prefix("version=\"")?;
            v.strip_suffix('"').map(str::to_string)
        })
    })
}

/// The peer count in `recover_gate_limit_peers N`; a gate that does not report one shares
/// its limit with nobody.
pub fn reported_peers(metrics: &str) -> Option<usize> {
    applied_version(metrics)?;
    let count = metrics.lines().find_map(|line| {
        let value = line.strip_prefix("recover_gate_limit_peers ")?;
        value.trim().parse::<f64>().ok()
    });
    Some(count.map_or(1, |c| c.max(0.0) as usize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_version_and_the_peers_from_gate_metrics() {
        let text = "# HELP x\nrecover_gate_limit_burst 5\nrecover_gate_limit_applied_info{version=\"4711\"} 1\nrecover_gate_limit_peers 3\n";
        assert_eq!(applied_version(text).as_deref(), Some("4711"));
        assert_eq!(reported_peers(text), Some(3));
        assert_eq!(applied_version("recover_gate_limit_burst 5\n"), None);
        assert_eq!(reported_peers("recover_gate_limit_burst 5\n"), None);
        let old = "recover_gate_limit_applied_info{version=\"1\"} 1\n";
        assert_eq!(reported_peers(old), Some(1));
    }
}
