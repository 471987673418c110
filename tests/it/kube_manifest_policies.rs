//! What the rendered manifests let happen: the NetworkPolicies, both ways, allow exactly
//! the shipped Prometheus scrape, the gate's upstream, the controller's and serve's calls
//! (the API server and the pods), the laptop path through the API server's pod proxy, DNS
//! and the front doors, and nothing else; every workload with several replicas has one
//! budget that lets not-ready pods go, and probes; no secret value is committed anywhere.

use crate::kube_manifests::{name, rendered};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One end of a connection, as the NetworkPolicies see it: a pod (its namespace and
/// labels) or an address outside the pod network (the API server).
#[derive(Debug, Clone)]
struct End {
    name: &'static str,
    namespace: Option<&'static str>,
    labels: BTreeMap<String, String>,
    /// The ports it listens on.
    ports: Vec<i32>,
}

const NS: &str = "recover-demo";

fn pod(name: &'static str, ns: &'static str, key: &str, value: &str, ports: &[i32]) -> End {
    End {
        name,
        namespace: Some(ns),
        labels: BTreeMap::from([(key.to_string(), value.to_string())]),
        ports: ports.to_vec(),
    }
}

/// Everything that might talk: the namespace's pods, the Prometheus network-config.yaml
/// names, Alertmanager, DNS, the API server (by address, kind's node network), and
/// strangers inside and outside the namespace.
fn ends() -> Vec<End> {
    let app = "app.kubernetes.io/name";
    vec![
        pod("gate", NS, app, "recover-gate", &[8080, 8081]),
        pod("config-service", NS, app, "config-service", &[9001]),
        pod("workers", NS, app, "workers", &[9100]),
        pod("serve", NS, app, "recover-serve", &[9095]),
        pod("controller", NS, app, "recover-controller", &[]),
        pod("stranger-inside", NS, app, "some-other-app", &[80]),
        pod("prometheus", "monitoring", app, "prometheus", &[9090]),
        pod("alertmanager", "monitoring", app, "alertmanager", &[9093]),
        pod("other-prometheus", "elsewhere", app, "prometheus", &[9090]),
        pod("kube-dns", "kube-system", "k8s-app", "kube-dns", &[53]),
        End {
            name: "apiserver",
            namespace: None,
            labels: BTreeMap::new(),
            ports: vec![6443],
        },
    ]
}

fn selects(
    sel: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
    l: &BTreeMap<String, String>,
) -> bool {
    let labels_ok = sel
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| l.get(k) == Some(v));
    let exprs_ok = sel.match_expressions.iter().flatten().all(|e| {
        let vals = e.values.clone().unwrap_or_default();
        match e.operator.as_str() {
            "In" => l.get(&e.key).is_some_and(|v| vals.contains(v)),
            "NotIn" => l.get(&e.key).is_none_or(|v| !vals.contains(v)),
            "Exists" => l.contains_key(&e.key),
            _ => !l.contains_key(&e.key),
        }
    });
    labels_ok && exprs_ok
}

/// Whether a policy's peer covers `e` (the policy's namespace is recover-demo). An ipBlock
/// covers addresses outside the pod network only (for pod addresses its meaning is up to
/// the CNI, so no rule here relies on it); the API server is at 172.18.0.2, kind's node.
fn covers(peer: &k8s_openapi::api::networking::v1::NetworkPolicyPeer, e: &End) -> bool {
    if let Some(block) = &peer.ip_block {
        return e.namespace.is_none() && in_cidr("172.18.0.2", &block.cidr);
    }
    let Some(ns) = e.namespace else {
        return false;
    };
    let ns_labels = BTreeMap::from([("kubernetes.io/metadata.name".to_string(), ns.to_string())]);
    let ns_ok = match &peer.namespace_selector {
        Some(sel) => selects(sel, &ns_labels),
        None => ns == NS,
    };
    ns_ok
        && peer
            .pod_selector
            .as_ref()
            .is_none_or(|sel| selects(sel, &e.labels))
}

fn in_cidr(ip: &str, cidr: &str) -> bool {
    let parse = |s: &str| -> u32 {
        s.split('.')
            .fold(0u32, |acc, o| (acc << 8) | o.parse::<u32>().unwrap_or(0))
    };
    let (net, bits) = cidr.split_once('/').unwrap_or((cidr, "32"));
    let bits: u32 = bits.parse().unwrap_or(32);
    let mask = if bits == 0 {
        0
    } else {
        u32::MAX << (32 - bits)
    };
    parse(ip) & mask == parse(net) & mask
}

fn port_ok(
    ports: &Option<Vec<k8s_openapi::api::networking::v1::NetworkPolicyPort>>,
    port: i32,
) -> bool {
    ports.as_ref().is_none_or(|ps| {
        ps.iter().any(|pp| match &pp.port {
            Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(n)) => *n == port,
            None => true,
            _ => false,
        })
    })
}

/// The policies of recover-demo that select pod `e` for `kind` (Ingress or Egress).
fn selecting<'a>(policies: &'a [NetworkPolicy], e: &End, kind: &str) -> Vec<&'a NetworkPolicy> {
    if e.namespace != Some(NS) {
        return Vec::new();
    }
    policies
        .iter()
        .filter(|p| {
            let spec = p.spec.as_ref().unwrap();
            let types = spec.policy_types.clone().unwrap_or_default();
            types.iter().any(|t| t == kind)
                && spec
                    .pod_selector
                    .as_ref()
                    .is_none_or(|ps| selects(ps, &e.labels))
        })
        .collect()
}

/// Would the rendered policies let `from` open a connection to `to` on `port`? Both ends'
/// policies must allow it: egress on the source's side, ingress on the destination's.
fn allowed(policies: &[NetworkPolicy], from: &End, to: &End, port: i32) -> bool {
    let egress = selecting(policies, from, "Egress");
    let egress_ok = egress.is_empty()
        || egress.iter().any(|p| {
            p.spec
                .as_ref()
                .unwrap()
                .egress
                .iter()
                .flatten()
                .any(|rule| {
                    port_ok(&rule.ports, port)
                        && rule
                            .to
                            .as_ref()
                            .is_none_or(|peers| peers.iter().any(|peer| covers(peer, to)))
                })
        });
    let ingress = selecting(policies, to, "Ingress");
    let ingress_ok = ingress.is_empty()
        || ingress.iter().any(|p| {
            p.spec
                .as_ref()
                .unwrap()
                .ingress
                .iter()
                .flatten()
                .any(|rule| {
                    port_ok(&rule.ports, port)
                        && rule
                            .from
                            .as_ref()
                            .is_none_or(|peers| peers.iter().any(|peer| covers(peer, from)))
                })
        });
    egress_ok && ingress_ok
}

/// (app label, port) each shipped Deployment asks Prometheus to scrape.
fn scraped(all: &[serde_yaml::Value]) -> Vec<(String, i32)> {
    all.iter()
        .filter(|d| d["kind"] == "Deployment")
        .filter_map(|d| {
            let t = &d["spec"]["template"]["metadata"];
            (t["annotations"]["prometheus.io/scrape"] == "true").then(|| {
                (
                    t["labels"]["app.kubernetes.io/name"]
                        .as_str()
                        .unwrap()
                        .to_string(),
                    t["annotations"]["prometheus.io/port"]
                        .as_str()
                        .unwrap()
                        .parse()
                        .unwrap(),
                )
            })
        })
        .collect()
}

/// The gate's upstream, from its `--upstream=http://SERVICE.NS.svc:PORT` argument.
fn gate_upstream(all: &[serde_yaml::Value]) -> (String, i32) {
    let gate = all
        .iter()
        .find(|d| d["kind"] == "Deployment" && d["metadata"]["name"] == "recover-gate")
        .unwrap();
    let args = gate["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_sequence()
        .unwrap();
    let up = args
        .iter()
        .find_map(|a| a.as_str().unwrap().strip_prefix("--upstream=http://"))
        .unwrap();
    let (host, port) = up.split_once(':').unwrap();
    (
        host.split('.').next().unwrap().to_string(),
        port.parse().unwrap(),
    )
}

#[test]
fn network_policies_allow_the_scrape_the_upstream_and_the_controllers_calls_and_nothing_else() {
    let all = rendered();
    let policies: Vec<NetworkPolicy> = all
        .iter()
        .filter(|d| d["kind"] == "NetworkPolicy")
        .map(|d| serde_yaml::from_value(d.clone()).unwrap())
        .collect();
    let ends = ends();
    let by_app = |app: &str| {
        ends.iter()
            .find(|e| e.labels.get("app.kubernetes.io/name").map(String::as_str) == Some(app))
            .unwrap()
            .name
    };
    let mut want: BTreeSet<(&str, &str, i32)> = BTreeSet::new();
    // The shipped Prometheus scrape, as the Deployments' annotations ask for it.
    for (app, port) in scraped(&all) {
        want.insert(("prometheus", by_app(&app), port));
    }
    // The gate's upstream, as its arguments name it.
    let (svc, port) = gate_upstream(&all);
    want.insert(("gate", by_app(&svc), port));
    // The controller's and serve's calls: the API server, and the pods' admin and metrics.
    for who in ["controller", "serve"] {
        for (to, port) in [
            ("apiserver", 6443),
            ("gate", 8081),
            ("config-service", 9001),
            ("workers", 9100),
        ] {
            want.insert((who, to, port));
        }
    }
    // The gate's own reads of the API server; the laptop path through the pod proxy.
    want.insert(("gate", "apiserver", 6443));
    for (to, port) in [("gate", 8081), ("config-service", 9001), ("workers", 9100)] {
        want.insert(("apiserver", to, port));
    }
    // DNS for every pod of the namespace; the front doors for whoever may reach them.
    for e in ends.iter().filter(|e| e.namespace == Some(NS)) {
        want.insert((e.name, "kube-dns", 53));
    }
    want.insert(("workers", "gate", 8080));
    for e in ends.iter().filter(|e| e.namespace != Some(NS)) {
        want.insert((e.name, "gate", 8080));
        want.insert((e.name, "serve", 9095));
    }
    let mut got = BTreeSet::new();
    for from in &ends {
        for to in &ends {
            if from.name == to.name || (from.namespace != Some(NS) && to.namespace != Some(NS)) {
                continue;
            }
            for &port in &to.ports {
                if allowed(&policies, from, to, port) {
                    got.insert((from.name, to.name, port));
                }
            }
        }
    }
    let missing: Vec<_> = want.difference(&got).collect();
    let extra: Vec<_> = got.difference(&want).collect();
    assert!(missing.is_empty(), "needed but blocked: {missing:?}");
    assert!(extra.is_empty(), "allowed but not needed: {extra:?}");
}

#[test]
fn workloads_with_several_replicas_have_budgets_that_let_not_ready_pods_go() {
    let all = rendered();
    let budgets: Vec<PodDisruptionBudget> = all
        .iter()
        .filter(|d| d["kind"] == "PodDisruptionBudget")
        .map(|d| serde_yaml::from_value(d.clone()).unwrap())
        .collect();
    for b in &budgets {
        let spec = b.spec.as_ref().unwrap();
        assert_eq!(
            spec.unhealthy_pod_eviction_policy.as_deref(),
            Some("AlwaysAllow"),
            "{:?}",
            b.metadata.name
        );
    }
    for d in all.iter().filter(|d| d["kind"] == "Deployment") {
        let dep: Deployment = serde_yaml::from_value(d.clone()).unwrap();
        let spec = dep.spec.unwrap();
        if spec.replicas.unwrap_or(1) < 2 {
            continue;
        }
        let pod_labels = spec.template.metadata.unwrap().labels.unwrap();
        let covered = budgets
            .iter()
            .filter(|b| {
                selects(
                    b.spec.as_ref().unwrap().selector.as_ref().unwrap(),
                    &pod_labels,
                )
            })
            .count();
        assert_eq!(covered, 1, "{}: budgets covering it", name(d));
        let probes = &spec.template.spec.unwrap().containers[0];
        assert!(
            probes.liveness_probe.is_some() && probes.readiness_probe.is_some(),
            "{}: probes",
            name(d)
        );
    }
}

#[test]
fn no_secret_value_is_committed() {
    for d in rendered() {
        assert_ne!(
            d["kind"],
            "Secret",
            "{}: Secrets are created by the operator (docs/guide/kubernetes.md)",
            name(&d)
        );
    }
    let published: Vec<&str> = recover::util::secret::WELL_KNOWN
        .iter()
        .copied()
        .filter(|w| w.contains('-'))
        .collect();
    // Every documentation page (README.md, ARCHITECTURE.md, docs/ at any depth).
    let mut files: Vec<PathBuf> = crate::support::docs::files()
        .into_iter()
        .map(|f| crate::support::docs::root().join(f))
        .collect();
    files.push(Path::new(env!("CARGO_MANIFEST_DIR")).join("Dockerfile"));
    for dir in ["manifests", "scripts"] {
        if let Ok(rd) = std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(dir)) {
            files.extend(rd.map(|e| e.unwrap().path()).filter(|p| p.is_file()));
        }
    }
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap_or_default();
        for w in &published {
            assert!(
                !text.contains(w),
                "{} contains the published token {w:?}",
                f.display()
            );
        }
        for line in text.lines() {
            let l = line.trim();
            assert!(
                !(l.starts_with("token:")
                    || l.starts_with("admin-token:")
                    || l.contains("--from-literal=token=") && !l.contains("$(")),
                "{}: a literal token: {l}",
                f.display()
            );
        }
    }
}
