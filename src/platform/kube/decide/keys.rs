//! The journal ConfigMap's keys: one group per run (`<run>.jsonl`, `<run>.rollout.json`,
//! `<run>.summary.json`), and which runs to drop so the object stays under the API
//! server's 1 MiB limit (a larger write is refused with 422, on the restart path).

use std::collections::{BTreeMap, BTreeSet};

/// ConfigMap keys allow `[-._a-zA-Z0-9]`; a run id that strays is rewritten, not refused.
pub fn configmap_key(prefix: &str, suffix: &str) -> String {
    let clean: String = prefix
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{clean}{suffix}")
}

/// The run a key belongs to: everything before its first dot.
pub fn run_of(key: &str) -> &str {
    key.split('.').next().unwrap_or(key)
}

/// Keys to delete so that `sizes` (key -> bytes, the ConfigMap now) with `writes` (key ->
/// bytes about to be written) fits in `budget`: whole runs, oldest first (run ids sort by
/// start time), never a run being written now. Pure.
pub fn prune(
    sizes: &BTreeMap<String, usize>,
    writes: &BTreeMap<String, usize>,
    budget: usize,
) -> Vec<String> {
    let mut after: BTreeMap<&str, usize> = sizes.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    for (k, v) in writes {
        after.insert(k, *v);
    }
    let weight = |k: &str, v: usize| k.len() + v;
    let mut total: usize = after.iter().map(|(k, v)| weight(k, *v)).sum();
    let protected: BTreeSet<&str> = writes.keys().map(|k| run_of(k)).collect();
    let mut runs: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for k in after.keys() {
        runs.entry(run_of(k)).or_default().push(k);
    }
    let mut drop = Vec::new();
    for (run, keys) in runs {
        if total <= budget {
            break;
        }
        if protected.contains(run) {
            continue;
        }
        for k in keys {
            total -= weight(k, after[k]);
            drop.push(k.to_string());
        }
    }
    drop
}

/// A value cut to fit `cap` bytes: its first line (a journal's `run_started`) and as many
/// of its last lines as fit, whole lines only; `None` when it fits already. A journal cut
/// so is marked by the caller and never resumed from. Pure.
pub fn cut_to(value: &str, cap: usize) -> Option<String> {
    if value.len() <= cap {
        return None;
    }
    let mut lines = value.split_inclusive('\n');
    let head = lines.next().unwrap_or_default();
    let head = if head.len() > cap { "" } else { head };
    let mut tail: Vec<&str> = Vec::new();
    let mut used = head.len();
    for line in value
        .split_inclusive('\n')
        .skip(1)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
    {
        if used + line.len() > cap {
            break;
        }
        used += line.len();
        tail.push(line);
    }
    tail.reverse();
    Some(format!("{head}{}", tail.concat()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(items: &[(&str, usize)]) -> BTreeMap<String, usize> {
        items.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn configmap_keys_stay_valid() {
        assert_eq!(configmap_key("run/1 x", ".jsonl"), "run_1_x.jsonl");
        assert_eq!(
            run_of("20250101T000000Z-ab12.rollout.json"),
            "20250101T000000Z-ab12"
        );
    }

    #[test]
    fn the_oldest_runs_go_first_and_the_current_one_never() {
        let now = map(&[
            ("r1.jsonl", 400),
            ("r1.summary.json", 50),
            ("r2.jsonl", 400),
            ("r3.jsonl", 100),
        ]);
        let writes = map(&[("r1.jsonl", 500)]);
        // r1 is being written: r2 goes first (oldest of the rest), then r3 if needed.
        let budget = 1000;
        assert_eq!(prune(&now, &writes, budget), vec!["r2.jsonl"]);
        assert_eq!(prune(&now, &writes, 600), vec!["r2.jsonl", "r3.jsonl"]);
        assert!(prune(&now, &map(&[]), 10_000).is_empty());
    }

    #[test]
    fn a_value_over_the_cap_keeps_its_first_line_and_its_last_lines() {
        let v = "start\na\nbb\nccc\n";
        assert_eq!(cut_to(v, 100), None);
        assert_eq!(cut_to(v, 10).as_deref(), Some("start\nccc\n"));
        assert!(cut_to(v, 10).unwrap().len() <= 10);
        // One line longer than the cap: nothing of it, never a value over the cap.
        assert_eq!(cut_to(&"x".repeat(600), 512).as_deref(), Some(""));
    }
}
