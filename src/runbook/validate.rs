//! Semantic checks serde cannot make: every referenced signal, check, param and step
//! exists, numbers are in range, step names are unique, and the gate is never set to block
//! everything without a deadline. Runs after parsing and reports all problems at once.

use super::action::{self, Action, Quantity, RateSetting};
use super::error::Reporter;
use super::expr::{Expr, Type};
use super::schema::{ActionKind, RawRunbook, RawStep, API_VERSION, KIND};
use super::{Check, Runbook, Step};
use crate::plan::vars::{plan_var, plan_var_names};
use crate::util::yaml::segs_of as segs;
use crate::util::yaml::{bare_message, path_string, Seg};
use std::collections::{BTreeMap, BTreeSet};

fn k(s: &str) -> Seg {
    Seg::Key(s.to_string())
}

fn p(parts: &[Seg]) -> Vec<Seg> {
    parts.to_vec()
}

struct Ctx<'a> {
    signals: BTreeSet<&'a str>,
    params: BTreeSet<String>,
    checks: BTreeSet<String>,
    /// `spec.when` includes `slow_replica`: a verdict names a slow replica.
    slow_replica_verdict: bool,
}

impl Ctx<'_> {
    /// Report variables an expression reads that are not defined. Quantities may read only
    /// the plan and params; conditions may also read signals.
    fn check_vars(&self, rep: &mut Reporter, path: &[Seg], e: &Expr, allow_signals: bool) {
        for v in e.variables() {
            let known = if v.starts_with("plan.") {
                plan_var(&v).is_some()
            } else if let Some(name) = v.strip_prefix("params.") {
                self.params.contains(name)
            } else {
                allow_signals && self.signals.contains(v.as_str())
            };
            if !known {
                let what = if v.starts_with("plan.") {
                    format!(
                        "unknown plan value `{v}` (known: {})",
                        plan_var_names().collect::<Vec<_>>().join(", ")
                    )
                } else if v.starts_with("params.") {
                    format!("`{v}` is not defined in spec.params")
                } else if allow_signals {
                    format!("signal `{v}` is not defined in spec.signals")
                } else {
                    format!("`{v}`: only plan.* and params.* can be used here")
                };
                rep.at(path, what);
            }
        }
    }

    fn condition(&self, rep: &mut Reporter, path: &[Seg], src: &str) -> Option<Expr> {
        match Expr::parse(src) {
            Ok(e) if e.type_of() == Ok(Type::Bool) => {
                self.check_vars(rep, path, &e, true);
                Some(e)
            }
            Ok(_) => {
                rep.at(
                    path,
                    format!("{src:?} is a number; a condition like `x > 1` is needed"),
                );
                None
            }
            Err(m) => {
                rep.at(path, m);
                None
            }
        }
    }
}

/// Turn the parsed document into a [`Runbook`], reporting every problem into `rep`.
pub(crate) fn validate(
    raw: RawRunbook,
    role_overrides: &BTreeMap<String, String>,
    rep: &mut Reporter,
) -> Option<Runbook> {
    if raw.api_version != API_VERSION {
        rep.at(
            &[k("apiVersion")],
            format!(
                "unsupported apiVersion {:?}; expected {API_VERSION:?}",
                raw.api_version
            ),
        );
    }
    if raw.kind != KIND {
        rep.at(
            &[k("kind")],
            format!("kind must be {KIND:?}, not {:?}", raw.kind),
        );
    }
    let name = &raw.metadata.name;
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        rep.at(
            &[k("metadata"), k("name")],
            format!("name {name:?} must be lowercase letters, digits and dashes"),
        );
    }
    let spec = &raw.spec;
    for (sig, s) in &spec.signals {
        if s.scrape.is_none() && s.promql.is_none() {
            rep.at(
                &[k("spec"), k("signals"), k(sig)],
                "a signal needs a `scrape` or a `promql` expression",
            );
        }
        // A scrape expression that does not parse would fail every read of the signal at
        // run time, after the run has started acting: refuse it here.
        if let Some(Err(e)) = s.scrape.as_deref().map(crate::metrics::scrape::expr::parse) {
            rep.at(
                &[k("spec"), k("signals"), k(sig), k("scrape")],
                e.to_string(),
            );
        }
    }
    if spec.observe.interval.is_zero() {
        rep.at(
            &[k("spec"), k("observe"), k("interval")],
            "interval must be more than 0s",
        );
    }
    let plan = &spec.plan;
    if !(plan.headroom > 0.0 && plan.headroom <= 1.0) {
        rep.at(
            &[k("spec"), k("plan"), k("headroom")],
            format!("headroom {} must be in (0, 1]", plan.headroom),
        );
    }
    if plan.step_factor <= 1.0 {
        rep.at(
            &[k("spec"), k("plan"), k("step_factor")],
            format!("step_factor {} must be more than 1", plan.step_factor),
        );
    }
    let ctx = Ctx {
        signals: spec.signals.keys().map(String::as_str).collect(),
        params: spec.params.keys().cloned().collect(),
        checks: spec.checks.keys().cloned().collect(),
        slow_replica_verdict: spec.when.contains(&crate::detect::VerdictKind::SlowReplica),
    };
    let mut checks = BTreeMap::new();
    for (cname, c) in &spec.checks {
        let base = p(&[k("spec"), k("checks"), k(cname)]);
        let at = |f: &str| [base.clone(), vec![k(f)]].concat();
        let success = ctx.condition(rep, &at("success"), &c.success);
        let failure = c
            .failure
            .as_ref()
            .and_then(|f| ctx.condition(rep, &at("failure"), f));
        if c.consecutive_successes == 0 {
            rep.at(&at("consecutive_successes"), "must be at least 1");
        }
        if c.interval.is_zero() {
            rep.at(&at("interval"), "interval must be more than 0s");
        }
        if c.count == Some(0) {
            rep.at(&at("count"), "count must be at least 1 (or left out)");
        }
        if let Some(success) = success {
            checks.insert(
                cname.clone(),
                Check {
                    interval: c.interval,
                    count: c.count,
                    success,
                    failure,
                    failure_limit: c.failure_limit,
                    consecutive_successes: c.consecutive_successes.max(1),
                    inconclusive: c.inconclusive,
                    inconclusive_limit: c.inconclusive_limit,
                },
            );
        }
    }
    let abort_when: Vec<Expr> = spec
        .abort_when
        .iter()
        .enumerate()
        .filter_map(|(i, c)| ctx.condition(rep, &[k("spec"), k("abort_when"), Seg::Index(i)], c))
        .collect();
    if spec.steps.is_empty() {
        rep.at(
            &[k("spec"), k("steps")],
            "a runbook needs at least one step",
        );
    }
    let mut names: BTreeMap<&str, Vec<Seg>> = BTreeMap::new();
    let failure_names: BTreeSet<&str> = spec.on_failure.iter().map(|s| s.name.as_str()).collect();
    let mut steps = Vec::new();
    let mut on_failure = Vec::new();
    for (list, out) in [("steps", &mut steps), ("on_failure", &mut on_failure)] {
        let raws = if list == "steps" {
            &spec.steps
        } else {
            &spec.on_failure
        };
        for (i, s) in raws.iter().enumerate() {
            let base = p(&[k("spec"), k(list), Seg::Index(i)]);
            if s.name == super::schema::HANDBACK_STEP {
                rep.at(
                    &[base.clone(), vec![k("name")]].concat(),
                    format!(
                        "step name {:?} is reserved for the step that hands the gate back after the last step (spec.handback)",
                        s.name
                    ),
                );
            }
            if let Some(prev) = names.get(s.name.as_str()) {
                rep.at(
                    &[base.clone(), vec![k("name")]].concat(),
                    format!(
                        "step name {:?} is already used at {}",
                        s.name,
                        path_string(prev)
                    ),
                );
            } else {
                names.insert(&s.name, base.clone());
            }
            if let Some(step) = step(&ctx, rep, &base, s, &failure_names, list == "on_failure") {
                out.push(step);
            }
        }
    }
    let (roles, signals) = super::roles::bind(&spec.roles, role_overrides, &spec.signals, rep);
    if !rep.diags.is_empty() {
        return None;
    }
    Some(Runbook {
        name: raw.metadata.name.clone(),
        description: raw.metadata.description.clone(),
        owner: raw.metadata.owner.clone(),
        target: spec.target.clone(),
        when: spec.when.clone(),
        params: spec.params.clone(),
        roles,
        signals,
        observe: spec.observe.clone(),
        detect: spec.detect.clone(),
        plan: spec.plan.clone(),
        checks,
        abort_when,
        steps,
        on_failure,
        handback: spec.handback,
    })
}

fn step(
    ctx: &Ctx,
    rep: &mut Reporter,
    base: &[Seg],
    s: &RawStep,
    failure_names: &BTreeSet<&str>,
    in_on_failure: bool,
) -> Option<Step> {
    let at = |f: &str| [base.to_vec(), vec![k(f)]].concat();
    let abort_when: Vec<Expr> = s
        .abort_when
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            ctx.condition(rep, &[at("abort_when"), vec![Seg::Index(i)]].concat(), c)
        })
        .collect();
    if let Some(refs) = &s.on_failure {
        if in_on_failure {
            rep.at(
                &at("on_failure"),
                "on_failure steps cannot have their own on_failure",
            );
        }
        for (i, r) in refs.iter().enumerate() {
            if !failure_names.contains(r.as_str()) {
                rep.at(
                    &[at("on_failure"), vec![Seg::Index(i)]].concat(),
                    format!("step {r:?} is not defined in spec.on_failure"),
                );
            }
        }
    }
    if s.timeout.is_some_and(|t| t.is_zero()) {
        rep.at(&at("timeout"), "timeout must be more than 0s");
    }
    let action = parse_action(ctx, rep, &at("with"), s)?;
    Some(Step {
        name: s.name.clone(),
        action,
        timeout: s.timeout,
        abort_when,
        on_failure: s.on_failure.clone(),
        note: s.note.clone(),
    })
}

fn typed<T: serde::de::DeserializeOwned>(
    rep: &mut Reporter,
    with: &[Seg],
    v: &serde_yaml::Value,
) -> Option<T> {
    let v = if v.is_null() {
        serde_yaml::Value::Mapping(Default::default())
    } else {
        v.clone()
    };
    match serde_path_to_error::deserialize::<_, T>(v) {
        Ok(t) => Some(t),
        Err(e) => {
            let path = [with.to_vec(), segs(e.path())].concat();
            let msg = bare_message(&e.inner().to_string(), &path_string(&segs(e.path())));
            rep.at(&path, msg);
            None
        }
    }
}

fn parse_action(ctx: &Ctx, rep: &mut Reporter, with: &[Seg], s: &RawStep) -> Option<Action> {
    let at = |f: &str| [with.to_vec(), vec![k(f)]].concat();
    let quantity =
        |rep: &mut Reporter, f: &str, q: &Quantity| ctx.check_vars(rep, &at(f), &q.0, false);
    let check_ref = |rep: &mut Reporter, f: &str, name: &str| {
        if !ctx.checks.contains(name) {
            rep.at(
                &at(f),
                format!("check {name:?} is not defined in spec.checks"),
            );
        }
    };
    Some(match s.action {
        ActionKind::GateLimit => {
            let a: action::GateLimit = typed(rep, with, &s.with)?;
            let blocks = match &a.rate {
                RateSetting::Rate(q) => {
                    quantity(rep, "rate", q);
                    q.0.variables().is_empty()
                        && q.0.eval(&|_| None) == super::expr::Value::Number(0.0)
                }
                RateSetting::Unlimited => false,
            };
            if let Some(m) = &a.max_in_flight {
                quantity(rep, "max_in_flight", m);
            }
            if a.burst == Some(0) {
                rep.at(&at("burst"), "burst must be at least 1");
            }
            if a.shadow && a.rate == RateSetting::Unlimited {
                rep.at(
                    &at("shadow"),
                    "a limit in shadow needs a rate to decide by; `unlimited` has nothing to count",
                );
            }
            if !a.fill.is_carried() && a.rate == RateSetting::Unlimited {
                rep.at(
                    &at("fill"),
                    "`unlimited` has no bucket to fill; give a rate, or drop `fill`",
                );
            }
            if blocks && !a.shadow && (a.deadline.is_none() || a.note.is_none()) {
                rep.at(&at("rate"), "a limit that blocks everything needs a `deadline` and a `note` saying who must act");
            }
            Action::GateLimit(a)
        }
        ActionKind::GateRamp => {
            let a: action::GateRamp = typed(rep, with, &s.with)?;
            quantity(rep, "from", &a.from);
            quantity(rep, "factor", &a.factor);
            check_ref(rep, "check", &a.check);
            if !ctx.signals.contains(a.rejected_signal.as_str()) {
                rep.at(
                    &at("rejected_signal"),
                    format!(
                        "signal `{}` is not defined in spec.signals",
                        a.rejected_signal
                    ),
                );
            }
            Action::GateRamp(a)
        }
        ActionKind::BacklogDrain => Action::BacklogDrain(typed(rep, with, &s.with)?),
        ActionKind::RestartBatched => {
            let a: action::RestartBatched = typed(rep, with, &s.with)?;
            if a.ready_timeout.is_zero() {
                rep.at(&at("ready_timeout"), "ready_timeout must be more than 0s");
            }
            if a.replicas == action::ReplicaSelect::Slow && !ctx.slow_replica_verdict {
                rep.at(
                    &at("replicas"),
                    "`replicas: slow` restarts the replica a slow_replica verdict names: add slow_replica to spec.when",
                );
            }
            Action::RestartBatched(a)
        }
        ActionKind::CacheWarm => {
            let a: action::CacheWarm = typed(rep, with, &s.with)?;
            if !(0.0..=1.0).contains(&a.threshold) {
                rep.at(
                    &at("threshold"),
                    format!(
                        "threshold {} must be a fraction between 0 and 1",
                        a.threshold
                    ),
                );
            }
            if !ctx.signals.contains(a.signal.as_str()) {
                rep.at(
                    &at("signal"),
                    format!("signal `{}` is not defined in spec.signals", a.signal),
                );
            }
            Action::CacheWarm(a)
        }
        ActionKind::WaitUntil => {
            let a: action::WaitUntil = typed(rep, with, &s.with)?;
            check_ref(rep, "check", &a.check);
            Action::WaitUntil(a)
        }
        ActionKind::Notify => Action::Notify(typed(rep, with, &s.with)?),
    })
}
