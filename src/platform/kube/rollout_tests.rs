use super::*;

fn pod(name: &str, ready: bool, terminating: bool) -> PodView {
    PodView {
        name: name.to_string(),
        ready,
        terminating,
        started_at: None,
        deployment: Some("svc".to_string()),
    }
}

#[test]
fn next_batch_takes_unrestarted_snapshot_pods_not_ready_first() {
    let now = vec![
        pod("a", true, false),
        pod("b", false, false),
        pod("c", true, false),
        pod("d", true, false),
    ];
    let mut state = RolloutState::begin(&now);
    assert_eq!(next_batch(&state, &now, 2), vec!["b", "a"]);
    state.record_evicted("b");
    state.record_evicted("a");
    // a and b replaced by x and y: replacements are never picked.
    let now = vec![
        pod("c", true, false),
        pod("d", true, false),
        pod("x", true, false),
        pod("y", false, false),
    ];
    assert_eq!(next_batch(&state, &now, 2), vec!["c", "d"]);
    assert_eq!(
        next_batch(&state, &now, 0),
        vec!["c"],
        "a batch is at least one pod"
    );
}

#[test]
fn batch_waits_for_new_ready_pods_not_evicted_ones() {
    let before = vec![
        pod("a", true, false),
        pod("b", true, false),
        pod("c", true, false),
    ];
    let mut state = RolloutState::begin(&before);
    state.record_evicted("a");
    let batch = vec!["a".to_string()];
    // a is terminating, no replacement yet: not done.
    let p = batch_progress(
        &state,
        &batch,
        &[
            pod("a", true, true),
            pod("b", true, false),
            pod("c", true, false),
        ],
    );
    assert!(!p.done());
    // a replacement exists but is not ready: not done.
    let now = vec![
        pod("b", true, false),
        pod("c", true, false),
        pod("x", false, false),
    ];
    assert!(!batch_progress(&state, &batch, &now).done());
    // ready replacement: done.
    let now = vec![
        pod("b", true, false),
        pod("c", true, false),
        pod("x", true, false),
    ];
    assert!(batch_progress(&state, &batch, &now).done());
    // a second batch needs two new ready pods in all, not one.
    state.record_evicted("b");
    let now = vec![
        pod("c", true, false),
        pod("x", true, false),
        pod("y", false, false),
    ];
    assert_eq!(
        batch_progress(&state, &["b".to_string()], &now).new_needed,
        2
    );
    assert!(!batch_progress(&state, &["b".to_string()], &now).done());
}

#[test]
fn evicting_retries_while_blocked_then_deletes_only_if_allowed() {
    let blocked = EvictOutcome::Blocked("pdb".into());
    let s = Duration::from_secs;
    assert_eq!(
        after_evict(&blocked, s(1), s(10), false, s(2)),
        EvictNext::RetryAfter(s(2))
    );
    assert_eq!(
        after_evict(&blocked, s(9), s(10), false, s(2)),
        EvictNext::GiveUp("pdb".into())
    );
    assert_eq!(
        after_evict(&blocked, s(9), s(10), true, s(2)),
        EvictNext::Delete
    );
    assert_eq!(
        after_evict(&EvictOutcome::Gone, s(0), s(10), false, s(2)),
        EvictNext::Done
    );
}

#[test]
fn lease_is_taken_over_only_after_expiry() {
    let now = SystemTime::now();
    let held = LeaseView {
        holder_identity: Some("alice@laptop".into()),
        run_id: Some("run-1".into()),
        renew_time: Some(now - Duration::from_secs(5)),
        duration: Duration::from_secs(15),
    };
    assert_eq!(
        lease_decision(None, "bob", "run-2", now),
        LeaseDecision::Create
    );
    match lease_decision(Some(&held), "bob", "run-2", now) {
        LeaseDecision::Held {
            holder,
            run_id,
            expires_in,
        } => {
            assert_eq!(
                (holder.as_str(), run_id.as_str()),
                ("alice@laptop", "run-1")
            );
            assert!(expires_in <= Duration::from_secs(10));
        }
        other => panic!("expected Held, got {other:?}"),
    }
    assert_eq!(
        lease_decision(Some(&held), "alice@laptop", "run-1", now),
        LeaseDecision::Renew
    );
    let expired = LeaseView {
        renew_time: Some(now - Duration::from_secs(16)),
        ..held.clone()
    };
    assert_eq!(
        lease_decision(Some(&expired), "bob", "run-2", now),
        LeaseDecision::TakeOver
    );
    let released = LeaseView {
        holder_identity: None,
        ..held
    };
    assert_eq!(
        lease_decision(Some(&released), "bob", "run-2", now),
        LeaseDecision::TakeOver
    );
}

#[test]
fn reads_the_applied_limit_version_from_gate_metrics() {
    let text = "# HELP x\nrecover_gate_limit_burst 5\nrecover_gate_limit_applied_info{version=\"4711\"} 1\n";
    assert_eq!(applied_version(text).as_deref(), Some("4711"));
    assert_eq!(applied_version("recover_gate_limit_burst 5\n"), None);
}

#[test]
fn owner_deployment_comes_from_the_replicaset_name() {
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": "config-service-7d9f8-abcde",
            "labels": {"pod-template-hash": "7d9f8"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "name": "config-service-7d9f8", "uid": "u", "controller": true}]
        }
    }))
    .unwrap();
    assert_eq!(owner_deployment(&pod).as_deref(), Some("config-service"));
}

#[test]
fn configmap_keys_stay_valid() {
    assert_eq!(configmap_key("run/1 x", ".jsonl"), "run_1_x.jsonl");
}

#[test]
fn replacements_named_in_a_resumed_batch_only_need_to_be_ready() {
    let before = vec![pod("a", true, false), pod("b", true, false)];
    let mut state = RolloutState::begin(&before);
    state.record_evicted("a");
    // A resumed engine waits for "x" (a's replacement, by its new name) and "b".
    let batch = vec!["x".to_string(), "b".to_string()];
    state.record_evicted("b");
    let now = vec![pod("x", true, false), pod("y", false, false)];
    let p = batch_progress(&state, &batch, &now);
    assert_eq!((p.new_ready, p.new_needed), (1, 2));
    assert!(!p.done());
    let now = vec![pod("x", true, false), pod("y", true, false)];
    assert!(batch_progress(&state, &batch, &now).done());
}
