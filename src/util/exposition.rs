//! Exporting metrics on `/metrics`: the demo service, the demo workers and the receiver
//! each keep a struct of metric handles and must also register every one of them under
//! its contract name; doing both in one call keeps a handle from being left unregistered
//! (it would silently never be scraped).

use prometheus_client::metrics::family::Family;
use prometheus_client::registry::{Metric, Registry};
use std::hash::Hash;

/// Registers `metric` under `name` (the registry's prefix goes in front) and gives the
/// handle back. Metrics share their state with their clones, so the handle kept and the
/// one registered are the same series.
pub fn register<M: Metric + Clone>(
    registry: &mut Registry,
    name: &str,
    help: &str,
    metric: M,
) -> M {
    registry.register(name, help, metric.clone());
    metric
}

/// Like [`register`] for a labelled family, creating the children for `labels` first: a
/// series that exists only after its first event reads as absent, not 0, until then, and
/// rate() over it misses that first step.
pub fn register_family<L, M>(
    registry: &mut Registry,
    name: &str,
    help: &str,
    labels: impl IntoIterator<Item = L>,
) -> Family<L, M>
where
    L: Clone + Hash + Eq,
    M: Default,
    Family<L, M>: Metric + Clone,
{
    let family = Family::<L, M>::default();
    for label in labels {
        let _ = family.get_or_create(&label);
    }
    register(registry, name, help, family)
}

/// The registry in Prometheus text exposition.
pub fn encode_text(registry: &Registry) -> String {
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut out, registry);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::metrics::counter::Counter;

    #[test]
    fn the_handle_given_back_is_the_series_exported() {
        let mut r = Registry::with_prefix("t");
        let c: Counter = register(&mut r, "hits", "Hits", Counter::default());
        c.inc();
        assert!(encode_text(&r).contains("t_hits_total 1\n"));
    }

    #[test]
    fn family_children_are_exported_as_zero_before_any_event() {
        let mut r = Registry::default();
        let _: Family<[(&'static str, &'static str); 1], Counter> = register_family(
            &mut r,
            "polls",
            "Polls",
            [[("outcome", "ok")], [("outcome", "given_up")]],
        );
        let text = encode_text(&r);
        assert!(text.contains("polls_total{outcome=\"ok\"} 0\n"), "{text}");
        assert!(
            text.contains("polls_total{outcome=\"given_up\"} 0\n"),
            "{text}"
        );
    }
}
