//! `spec.roles`: which Prometheus series belong to the gate, the service and the clients,
//! as label matchers (`service: job="config-service",namespace="shop"`). The roles are
//! bound into the signals' `promql:` expressions here, at load, so every consumer of a
//! runbook (detect, the engine, the receiver) queries the same series, and a signal that
//! names a role nobody declared is reported on its own line.

use super::error::Reporter;
use crate::metrics::promql::{roles, template};
use crate::metrics::signal::SignalSpec;
use crate::util::yaml::Seg;
use std::collections::BTreeMap;

fn k(s: &str) -> Seg {
    Seg::Key(s.to_string())
}

/// Check the declared roles and bind them into the signals' PromQL. `overrides` (from
/// flags, already checked) replace or add roles.
pub(crate) fn bind(
    declared: &BTreeMap<String, String>,
    overrides: &BTreeMap<String, String>,
    signals: &BTreeMap<String, SignalSpec>,
    rep: &mut Reporter,
) -> (BTreeMap<String, String>, BTreeMap<String, SignalSpec>) {
    for (role, m) in declared {
        let at = [k("spec"), k("roles"), k(role)];
        if let Err(e) = roles::check_role_name(role) {
            rep.at(&at, e);
        } else if let Err(e) = roles::check_matchers(m) {
            rep.at(&at, format!("role {role}: {e}"));
        }
    }
    let mut all = declared.clone();
    all.extend(overrides.iter().map(|(r, m)| (r.clone(), m.clone())));
    let mut bound = signals.clone();
    for (name, spec) in bound.iter_mut() {
        let Some(q) = spec.promql.as_mut() else {
            continue;
        };
        match template::bind_roles(q, &all) {
            Ok(b) => *q = b,
            Err(e) => rep.at(
                &[k("spec"), k("signals"), k(name), k("promql")],
                e.to_string(),
            ),
        }
    }
    (all, bound)
}
