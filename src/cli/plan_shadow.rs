//! `recover plan --shadow`: put the plan's limit on the gate in shadow, so the gate counts
//! what the shed would refuse of today's traffic while refusing nothing. It never replaces
//! a limit the gate enforces: shadow would lift it, and that is a decision for
//! `recover gate limit`, not a side effect of planning.

use super::gate_limit::{by_hand, describe, GateArgs};
use super::{Failure, Output};
use anyhow::anyhow;
use recover::exit::Exit;
use recover::gate::limit::{default_burst, Limit};
use recover::platform::gate_address;

/// The limit `recover plan --shadow` puts in shadow: the plan's admitted rate.
pub fn shadow_limit(admit_rate: f64, shed_fraction: f64) -> Limit {
    let rate = admit_rate.max(0.0);
    Limit {
        rate_per_s: Some(rate),
        burst: default_burst(rate),
        max_in_flight: None,
        note: Some(by_hand(
            "put in shadow",
            Some(&format!(
                "recover plan's limit (shed {:.1}%), counted and not enforced",
                100.0 * shed_fraction
            )),
        )),
        shadow: true,
    }
}

/// Put `limit` in shadow on the gate `at` names, unless the gate enforces a limit now
/// (exit 3, saying which and what to do). Says where to watch and how to lift it, on
/// stdout for text and stderr beside JSON.
pub fn apply(at: &GateArgs, limit: Limit, output: Output) -> Result<(), Failure> {
    let address = at.address()?;
    let rt = super::runtime()?;
    rt.block_on(async move {
        let unreachable = |e: recover::platform::PlatformError| Failure::new(Exit::Refused, e);
        let gate = gate_address::reach(&address).await.map_err(unreachable)?;
        let now = gate.get_limit().await.map_err(unreachable)?;
        let flags = gate.shell_flags().join(" ");
        if now.restricts() {
            return Err(Failure::new(
                Exit::Refused,
                anyhow!(
                    "the gate enforces a limit now, which a limit in shadow would lift; nothing was changed.\n{}\nto replace it anyway: recover gate limit set --rate {:.1} --shadow {flags}",
                    describe(&now),
                    limit.rate_per_s.unwrap_or(0.0)
                ),
            ));
        }
        gate.set_limit(&limit).await.map_err(unreachable)?;
        let said = format!(
            "\ngate: the plan's limit ({:.1} req/s) is in shadow: the gate refuses nothing and counts what it would refuse in recover_gate_shadow_refusals_total (its /metrics)\nto enforce it: recover gate limit set --rate {:.1} {flags}\nto end the shadow: recover gate limit lift {flags}",
            limit.rate_per_s.unwrap_or(0.0),
            limit.rate_per_s.unwrap_or(0.0),
        );
        match output {
            Output::Text => println!("{said}"),
            Output::Json => eprintln!("{}", said.trim_start()),
        }
        Ok(())
    })
}
