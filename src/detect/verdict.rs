//! The verdict rules, in the order they are checked:
//! 1. no snapshots, or the newest is older than `stale_after`: Unknown;
//! 2. a trigger active now: Triggered (acting now would fight the trigger), unless the
//!    service cannot be judged at all (then Unknown);
//! 3. cannot judge the service now: Unknown;
//! 4. one replica alone far slower than its peers for `persist`, goodput keeping up with
//!    the offered load: SlowReplica (whether p99 shows it or the gate already hides it);
//! 5. not failing now: Healthy;
//! 6. failing, but cannot tell whether a trigger is active: Unknown;
//! 7. failing without a break for `persist` AND the trigger gone for `grace`: Stuck;
//! 8. otherwise Triggered ("not stuck yet"), or Unknown when the window is too short to say.

use super::classify::{goodput_short, health, trigger, Health, Trigger};
use super::estimate::{self, Inputs};
use super::history::Lookback;
use super::{DetectorConfig, Evidence, Verdict, VerdictKind};
use crate::metrics::signal::{names, Snapshot};
use std::time::{Duration, SystemTime};

fn secs(d: Duration) -> String {
    crate::util::duration::format(Duration::from_millis(d.as_millis() as u64))
}

fn age(from: SystemTime, to: SystemTime) -> Duration {
    to.duration_since(from).unwrap_or_default()
}

/// Like [`super::detect`], with `now` to judge staleness by.
pub fn detect_at(window: &[Snapshot], cfg: &DetectorConfig, now: SystemTime) -> Verdict {
    detect_with(window, cfg, None, now)
}

/// Like [`detect_at`], with what a look back over the metrics history found: when the
/// window has no healthy period, capacity, the healthy service time and the demand
/// baseline come from the history's last healthy period.
pub fn detect_with(
    window: &[Snapshot],
    cfg: &DetectorConfig,
    lookback: Option<&Lookback>,
    now: SystemTime,
) -> Verdict {
    let mut v = Verdict {
        lookback: lookback.cloned(),
        ..Verdict::default()
    };
    let Some(last) = window.last() else {
        v.summary = "no snapshots: no data, no verdict".into();
        return v;
    };
    let stale = age(last.at, now);
    if stale > cfg.stale_after {
        v.summary = format!(
            "the newest data is {} old (stale after {}): no verdict",
            secs(stale),
            secs(cfg.stale_after)
        );
        return v;
    }

    let healths: Vec<Health> = window.iter().map(|s| health(s, cfg)).collect();
    // Triggers are judged against the demand baseline, which the healthy snapshots give;
    // so this first pass takes healthy as "not failing".
    let not_failing: Vec<&Snapshot> = window
        .iter()
        .zip(&healths)
        .filter(|(_, h)| **h == Health::Healthy)
        .map(|(s, _)| s)
        .collect();
    let demand = estimate::demand(
        &Inputs {
            cfg,
            window,
            healthy: &not_failing,
            lookback,
        },
        baseline_demand(window, &healths),
    );
    let baseline = demand.as_ref().map(|d| d.value);
    let triggers: Vec<Trigger> = window.iter().map(|s| trigger(s, cfg, baseline)).collect();
    let healthy: Vec<&Snapshot> = window
        .iter()
        .zip(healths.iter().zip(&triggers))
        .filter(|(_, (h, t))| **h == Health::Healthy && !matches!(t, Trigger::Active(_)))
        .map(|(s, _)| s)
        .collect();

    estimates(
        &mut v,
        &Inputs {
            cfg,
            window,
            healthy: &healthy,
            lookback,
        },
    );
    if let Some(d) = &demand {
        v.demand = Some(d.value);
        v.demand_from = Some(d.from.clone());
        v.sources.demand = Some(d.source);
    }
    if let Some(lb) = lookback {
        v.evidence
            .push(Evidence::new("lookback", None, lb.note.clone()));
    }
    for name in [
        names::OFFERED_RATE,
        names::FIRST_ATTEMPT_RATE,
        names::GOODPUT,
        names::WORK_RATE,
        names::ERROR_RATIO,
        names::LATENCY_P99,
        names::QUEUE_DEPTH,
    ] {
        if let Some(x) = last.get(name) {
            v.evidence.push(Evidence::new(name, Some(x), "now"));
        }
    }
    if let Some(d) = &demand {
        v.evidence.push(Evidence::new(
            names::FIRST_ATTEMPT_RATE,
            Some(d.value),
            format!("baseline demand ({}: {})", d.source.as_str(), d.from),
        ));
    }
    let flips = healths
        .windows(2)
        .filter(|w| {
            matches!(
                (&w[0], &w[1]),
                (Health::Healthy, Health::Failing(_)) | (Health::Failing(_), Health::Healthy)
            )
        })
        .count();
    if flips >= 2 {
        v.evidence.push(Evidence::new(
            "health",
            Some(flips as f64),
            "flapping: healthy/failing transitions in the window",
        ));
    }

    for (name, r) in &last.readings {
        if let crate::metrics::signal::Reading::Missing { reason } = r {
            v.evidence
                .push(Evidence::new(name, None, format!("missing: {reason}")));
        }
    }
    let n = window.len() - 1;
    let (now_health, now_trigger) = (&healths[n], &triggers[n]);
    if let Trigger::Active(why) = now_trigger {
        let since = run_start(&triggers, |t| matches!(t, Trigger::Active(_)));
        v.evidence
            .push(Evidence::new("trigger", None, why.clone()).since(window[since].at, last.at));
        if let Health::NoData(nodata) = now_health {
            // Everything unreachable also reads as "replicas down": without a word from
            // the clients or the edge, that is no data, not a trigger.
            v.summary = format!("no verdict: {nodata} (and {why})");
            return v;
        }
        v.verdict = VerdictKind::Triggered;
        v.summary = format!("trigger still active: {why}");
        return v;
    }
    if !matches!(now_health, Health::NoData(_)) && slow_replica(&mut v, window, cfg) {
        return v;
    }
    let reasons = match now_health {
        Health::NoData(why) => {
            v.summary = format!("no verdict: {why}");
            return v;
        }
        Health::Healthy => {
            v.verdict = VerdictKind::Healthy;
            v.summary = "healthy: goodput keeps up with the offered load".into();
            return v;
        }
        Health::Failing(reasons) => reasons,
    };
    if let Trigger::NoData(why) = now_trigger {
        v.summary = format!("failing ({}), but {why}", reasons.join("; "));
        return v;
    }

    let fail_start = run_start(&healths, |h| matches!(h, Health::Failing(_)));
    let gone_start = run_start(&triggers, |t| *t == Trigger::Gone);
    let failing_for = age(window[fail_start].at, last.at);
    let gone_for = age(window[gone_start].at, last.at);
    for r in reasons {
        v.evidence
            .push(Evidence::new("failure", None, r.clone()).since(window[fail_start].at, last.at));
    }
    v.evidence.push(
        Evidence::new("trigger", None, "no trigger active").since(window[gone_start].at, last.at),
    );
    let (fail_ok, gone_ok) = (failing_for >= cfg.persist, gone_for >= cfg.grace);
    if fail_ok && gone_ok {
        v.verdict = VerdictKind::Stuck;
        v.summary = format!(
            "stuck: failing for {} (persist {}) with no trigger for {} (grace {})",
            secs(failing_for),
            secs(cfg.persist),
            secs(gone_for),
            secs(cfg.grace)
        );
        return v;
    }
    // A run that starts with the window may have begun earlier: the window is too short
    // to say, which is not the same as "it only just started".
    let too_short = (!fail_ok && fail_start == 0) || (!gone_ok && gone_start == 0);
    v.verdict = if too_short {
        VerdictKind::Unknown
    } else {
        VerdictKind::Triggered
    };
    v.summary = format!(
        "{}: failing for {} (persist {}), no trigger for {} (grace {})",
        if too_short {
            "window too short to tell stuck"
        } else {
            "not stuck yet"
        },
        secs(failing_for),
        secs(cfg.persist),
        secs(gone_for),
        secs(cfg.grace)
    );
    v
}

/// Rule 4: one replica has stood out alone for `persist` and goodput keeps up. Says so in
/// `v` and returns true; else leaves `v` alone.
fn slow_replica(v: &mut Verdict, window: &[Snapshot], cfg: &DetectorConfig) -> bool {
    let Some(last) = window.last() else {
        return false;
    };
    let Some((slow, start)) = super::slow_replica::persisting(window, cfg.slow_replica_factor)
    else {
        return false;
    };
    let lasted = age(window[start].at, last.at);
    if lasted < cfg.persist || goodput_short(last, cfg) == Some(true) {
        return false;
    }
    for (replica, s) in last.per_replica(names::REPLICA_SERVICE_TIME) {
        v.evidence.push(Evidence::new(
            &crate::metrics::signal::replica_key(names::REPLICA_SERVICE_TIME, &replica),
            Some(s),
            "now",
        ));
    }
    v.evidence.push(
        Evidence::new(
            "slow_replica",
            Some(slow.ratio()),
            format!(
                "{} takes {:.3}s per request, {:.1}x its peers' median {:.3}s (above {}x)",
                slow.replica,
                slow.latency_s,
                slow.ratio(),
                slow.peers_median_s,
                cfg.slow_replica_factor
            ),
        )
        .since(window[start].at, last.at),
    );
    v.verdict = VerdictKind::SlowReplica;
    v.summary = format!(
        "slow replica: {} is {:.1}x slower than its peers' median for {} (persist {}), the rest keep up with the load",
        slow.replica,
        slow.ratio(),
        secs(lasted),
        secs(cfg.persist)
    );
    v.slow_replica = Some(slow);
    true
}

/// Index where the trailing run of snapshots satisfying `pred` begins.
fn run_start<T>(xs: &[T], pred: impl Fn(&T) -> bool) -> usize {
    let mut i = xs.len();
    while i > 0 && pred(&xs[i - 1]) {
        i -= 1;
    }
    i.min(xs.len().saturating_sub(1))
}

/// Mean first-attempt rate over the healthy snapshots (trigger is not considered: this is
/// what decides whether demand is spiking).
fn baseline_demand(window: &[Snapshot], healths: &[Health]) -> Option<f64> {
    let v: Vec<f64> = window
        .iter()
        .zip(healths)
        .filter(|(_, h)| **h == Health::Healthy)
        .filter_map(|(s, _)| s.get(names::FIRST_ATTEMPT_RATE))
        .collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

fn estimates(v: &mut Verdict, i: &Inputs) {
    let Some(last) = i.window.last() else { return };
    v.arrival_rate = last.get(names::OFFERED_RATE);
    v.sources.arrival_rate = v.arrival_rate.map(|_| estimate::Source::Measured);
    let mut ev = Vec::new();
    let st = estimate::healthy_service_time(i);
    if let Some(s) = &st {
        ev.push(Evidence::new(
            "healthy_service_time",
            Some(s.value),
            format!("{}: {}", s.source.as_str(), s.from),
        ));
        v.healthy_service_time = Some(s.value);
        v.healthy_service_time_from = Some(s.from.clone());
        v.sources.healthy_service_time = Some(s.source);
    }
    let cap = estimate::capacity(i, st.as_ref(), &mut ev);
    if let Some(c) = &cap {
        ev.push(Evidence::new(
            "capacity",
            Some(c.value),
            format!("used ({}): {}", c.source.as_str(), c.from),
        ));
        v.capacity_from = Some(c.from.clone());
    }
    let reference = estimate::healthy_reference(i, st.as_ref(), cap.as_ref());
    let history = i.lookback.and_then(|l| l.healthy.as_ref());
    let cold_factor =
        match estimate::cold_factor_against(i.cfg, i.window, reference.as_ref(), history) {
            Ok(f) => {
                v.sources.cold_factor = Some(f.source);
                ev.push(Evidence::new(
                    "cold_factor",
                    Some(f.value),
                    format!("used ({}): {}", f.source.as_str(), f.from),
                ));
                Some(f)
            }
            Err(why) => {
                ev.push(Evidence::new("cold_factor", None, why));
                None
            }
        };
    let cold = estimate::capacity_cold(i.window, cap.as_ref(), cold_factor.as_ref());
    if let Some(c) = &cold {
        ev.push(Evidence::new(
            "capacity_cold",
            Some(c.value),
            format!("used ({}): {}", c.source.as_str(), c.from),
        ));
        v.capacity_cold_from = Some(c.from.clone());
    }
    let warmth = estimate::Warmth::over_rate_window(i.window, last);
    match estimate::k(
        i.cfg,
        last,
        warmth.as_ref(),
        st.as_ref(),
        cap.as_ref(),
        cold_factor.as_ref(),
        &mut ev,
    ) {
        Ok(k) => {
            ev.push(Evidence::new(
                "k",
                Some(k.chosen.value),
                format!("used ({}): {}", k.chosen.source.as_str(), k.chosen.from),
            ));
            v.k = Some(k.chosen.value);
            v.k_from = Some(k.chosen.from);
            v.sources.k = Some(k.chosen.source);
            v.k_range = Some(k.range);
        }
        Err(why) => {
            ev.push(Evidence::new("k", None, format!("unknown: {why}")));
            v.k_unknown = Some(why);
        }
    }
    v.evidence.extend(ev);
    v.sources.capacity = cap.as_ref().map(|c| c.source);
    v.sources.capacity_cold = cold.as_ref().map(|c| c.source);
    v.capacity = cap.map(|c| c.value);
    v.capacity_cold = cold.map(|c| c.value);
}
