//! `recover gate limit get|set|lift`: read or change a gate's limit by hand, on a local
//! gate (`--admin URL --token-file PATH`) or on Kubernetes (`--target kube --namespace
//! NS`, the limit ConfigMap every gate follows). The command a run's summary prints to
//! lift the limit it left. Bad flags exit 2; a gate that cannot be reached exits 3.

use super::{CliResult, Failure, Output};
use anyhow::anyhow;
use recover::exit::Exit;
use recover::gate::limit::{default_burst, Fill, Limit, LimitChange};
use recover::platform::gate_address::{self, GateAddress};
use std::path::PathBuf;

#[derive(Debug, clap::Subcommand)]
pub enum LimitCommand {
    /// Print the limit in force.
    ///
    /// Example: recover gate limit get --admin http://127.0.0.1:18081 --token-file recover-demo/gate.token
    Get(WhereArgs),
    /// Set a limit and wait until it is in force.
    ///
    /// Example: recover gate limit set --rate 50 --admin http://127.0.0.1:18081 --token-file recover-demo/gate.token
    Set(SetArgs),
    /// Lift the limit (admit everything) and wait until that is in force.
    ///
    /// Example: recover gate limit lift --target kube --namespace shop
    Lift(LiftArgs),
}

/// Which gate, and how to show its limit.
#[derive(Debug, clap::Args)]
pub struct WhereArgs {
    #[command(flatten)]
    pub gate: GateArgs,
    /// The limit in force afterwards: text for people, JSON for scripts.
    #[arg(long, value_enum, default_value = "text")]
    pub output: Output,
}

/// Which gate (also `recover plan --shadow`'s).
#[derive(Debug, clap::Args)]
pub struct GateArgs {
    /// local: a gate's admin API (--admin, --token-file); kube: the limit ConfigMap of
    /// the gates in --namespace.
    #[arg(long, value_enum, default_value = "local")]
    pub target: Where,
    /// The gate's admin listener, e.g. http://127.0.0.1:18081 (local).
    #[arg(long, value_name = "URL")]
    pub admin: Option<String>,
    /// The file holding the gate's admin bearer token (local).
    #[arg(long, value_name = "PATH")]
    pub token_file: Option<PathBuf>,
    /// The namespace of the gates and their limit ConfigMap (kube).
    #[arg(long, value_name = "NS")]
    pub namespace: Option<String>,
    /// Kubeconfig context (kube; default: the current one).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Where {
    Local,
    Kube,
}

#[derive(Debug, clap::Args)]
pub struct SetArgs {
    /// Admitted requests per second; 0 blocks everything.
    #[arg(long)]
    pub rate: f64,
    /// Requests admitted back to back above the rate [default: half a second of the rate].
    #[arg(long)]
    pub burst: Option<u32>,
    /// Requests admitted and not yet answered [default: no cap].
    #[arg(long)]
    pub max_in_flight: Option<u32>,
    /// Why, and who to ask (shown by `get` and the gate's admin API).
    #[arg(long)]
    pub note: Option<String>,
    /// Run the limit in shadow: the gate decides every request by it and counts what it
    /// would refuse (recover_gate_shadow_refusals_total), refusing nothing.
    #[arg(long)]
    pub shadow: bool,
    /// Start the new limit's bucket full at its burst, once (the admin API's "fill": a
    /// limit change otherwise opens no burst). Local gates only: a ConfigMap cannot carry
    /// a one-off.
    #[arg(long)]
    pub fill: bool,
    /// Start the new limit's bucket with N tokens, once (the admin API's "fill": N; never
    /// above the burst). Local gates only, as --fill.
    #[arg(long, value_name = "N", conflicts_with = "fill")]
    pub fill_tokens: Option<u32>,
    #[command(flatten)]
    pub at: WhereArgs,
}

impl SetArgs {
    /// How the new bucket starts, as the flags say, and the flag that said it.
    fn fill(&self) -> (Fill, &'static str) {
        match (self.fill, self.fill_tokens) {
            (true, _) => (Fill::Full, "--fill"),
            (false, Some(n)) => (Fill::Tokens(n), "--fill-tokens"),
            (false, None) => (Fill::Carried, ""),
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct LiftArgs {
    /// Why (shown by `get` and the gate's admin API).
    #[arg(long)]
    pub note: Option<String>,
    #[command(flatten)]
    pub at: WhereArgs,
}

impl GateArgs {
    pub fn address(&self) -> Result<GateAddress, Failure> {
        match self.target {
            Where::Local => {
                let (Some(admin_url), Some(token_file)) = (&self.admin, &self.token_file) else {
                    return Err(Failure::usage(anyhow!(
                        "a local gate needs --admin URL and --token-file PATH (the inventory's gate admin_url and token_file), or use --target kube --namespace NS"
                    )));
                };
                if !(admin_url.starts_with("http://") || admin_url.starts_with("https://")) {
                    return Err(Failure::usage(anyhow!(
                        "--admin {admin_url}: not an http:// or https:// URL"
                    )));
                }
                if let Err(e) = std::fs::metadata(token_file) {
                    return Err(Failure::usage(anyhow!(
                        "--token-file {}: {e}",
                        token_file.display()
                    )));
                }
                Ok(GateAddress::Local {
                    admin_url: admin_url.clone(),
                    token_file: token_file.clone(),
                })
            }
            Where::Kube => {
                let Some(namespace) = self.namespace.clone().filter(|n| !n.is_empty()) else {
                    return Err(Failure::usage(anyhow!(
                        "--target kube needs --namespace NS (where the gates and their limit ConfigMap are)"
                    )));
                };
                Ok(GateAddress::Kube {
                    namespace,
                    context: self.context.clone(),
                })
            }
        }
    }
}

/// Who changed the limit by hand, for its note.
pub fn by_hand(verb: &str, note: Option<&str>) -> String {
    let user = std::env::var("USER").unwrap_or_else(|_| "an operator".into());
    let at = recover::util::time::now_rfc3339();
    format!(
        "{verb} by hand (recover gate limit) by {user} at {at}{}",
        note.map(|n| format!(": {n}")).unwrap_or_default()
    )
}

fn set_change(args: &SetArgs) -> Result<LimitChange, Failure> {
    let limit = set_limit(args)?;
    let (fill, flag) = args.fill();
    if !fill.is_carried() && args.rate <= 0.0 {
        return Err(Failure::usage(anyhow!(
            "{flag}: fills the bucket of a rate above 0 (--rate {})",
            args.rate
        )));
    }
    if !fill.is_carried() && args.at.gate.target == Where::Kube {
        return Err(Failure::usage(anyhow!(
            "{flag}: only a local gate's admin API takes it; the gates on Kubernetes follow a ConfigMap, which cannot carry a one-off"
        )));
    }
    Ok(LimitChange { limit, fill })
}

fn set_limit(args: &SetArgs) -> Result<Limit, Failure> {
    let limit = Limit {
        rate_per_s: Some(args.rate),
        burst: args.burst.unwrap_or_else(|| default_burst(args.rate)),
        max_in_flight: args.max_in_flight,
        note: Some(by_hand("set", args.note.as_deref())),
        shadow: args.shadow,
    };
    recover::gate::validate::check(&limit)
        .map_err(|e| Failure::usage(anyhow!("--{}: {}", e.field.replace('_', "-"), e.message)))?;
    Ok(limit)
}

pub fn run(cmd: LimitCommand) -> CliResult {
    let (at, change) = match &cmd {
        LimitCommand::Get(at) => (at, None),
        LimitCommand::Set(s) => (&s.at, Some(set_change(s)?)),
        LimitCommand::Lift(l) => (
            &l.at,
            Some(LimitChange::carried(Limit {
                note: Some(by_hand("lifted", l.note.as_deref())),
                ..Limit::unlimited()
            })),
        ),
    };
    let address = at.gate.address()?;
    let output = at.output;
    let rt = super::runtime()?;
    rt.block_on(async move {
        let unreachable = |e: recover::platform::PlatformError| Failure::new(Exit::Refused, e);
        let gate = gate_address::reach(&address).await.map_err(unreachable)?;
        if let Some(change) = &change {
            gate.change_limit(change).await.map_err(unreachable)?;
        }
        let now = gate.get_limit().await.map_err(unreachable)?;
        match output {
            Output::Json => println!(
                "{}",
                serde_json::to_string_pretty(&now).map_err(|e| Failure::new(Exit::Failed, e))?
            ),
            Output::Text => println!("{}", describe(&now)),
        }
        Ok(Exit::Done)
    })
}

pub fn describe(l: &Limit) -> String {
    let what = match (l.rate_per_s, l.max_in_flight) {
        (None, None) => "unlimited".to_string(),
        (rate, mif) => {
            let mut parts = vec![];
            if let Some(r) = rate {
                parts.push(format!("{r} req/s (burst {})", l.burst));
            }
            if let Some(m) = mif {
                parts.push(format!("at most {m} in flight"));
            }
            parts.join(", ")
        }
    };
    let mode = if l.shadow {
        "\nshadow: on (every request decided by this limit and counted in recover_gate_shadow_refusals_total; nothing refused)"
    } else {
        "\nshadow: off"
    };
    match &l.note {
        Some(n) => format!("limit: {what}{mode}\nnote: {n}"),
        None => format!("limit: {what}{mode}"),
    }
}
