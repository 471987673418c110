//! The model of a system as a plan sees it: `recover plan --check-with-sim` knows only the
//! plan's inputs (arrival, cold capacity, k, capacity, demand), so the rest of the model
//! (client timeout, retry delay, trigger) comes from a base the user can override with
//! `--sim-set key=value`.

use super::params::SystemParams;
use crate::plan::PlanInputs;

/// `base` with the server and the demand taken from the plan's inputs: capacity (else
/// twice the cold capacity, the model's default cold factor), cold factor =
/// capacity_cold / capacity, overload factor = k, and clients = demand x poll interval.
pub fn system_for(inputs: &PlanInputs, base: &SystemParams) -> SystemParams {
    let mut p = base.clone();
    let capacity = inputs
        .capacity
        .filter(|c| c.is_finite() && *c > 0.0)
        .unwrap_or(inputs.capacity_cold / base.cold_factor.max(1e-9));
    p.capacity = capacity.max(inputs.capacity_cold);
    p.cold_factor = (inputs.capacity_cold / p.capacity).clamp(1e-3, 1.0);
    p.overload_factor = inputs.k.max(1.0);
    if let Some(d) = inputs.demand.filter(|d| d.is_finite() && *d > 0.0) {
        p.clients = (d * base.interval.as_secs_f64()).round().max(1.0) as u32;
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_capacity_cold_and_k_onto_the_server() {
        let inputs = PlanInputs {
            arrival_rate: 160.0,
            capacity_cold: 100.0,
            k: 4.0,
            capacity: Some(200.0),
            demand: Some(50.0),
        };
        let p = system_for(&inputs, &SystemParams::default());
        assert_eq!(p.capacity, 200.0);
        assert_eq!(p.cold_factor, 0.5);
        assert_eq!(p.overload_factor, 4.0);
        assert_eq!(p.clients, 1500);
    }
}
