//! `recover report RUN_ID`: the postmortem draft of a real run (a run by hand, from
//! `recover serve`, or a Job in a cluster): `postmortem.md`, `report.json` in the
//! rehearsal's schema with `series.csv`, and `timeline.svg`, from the run's journal and
//! the series it observed ([`recover::postmortem`]). `--target kube ...` reads a run that
//! left only its mirrored journal; `--prometheus URL` adds the series from before the run.

use super::resume::{fetch_mirrored, MirrorArgs};
use super::{runtime, CliResult, Failure};
use anyhow::anyhow;
use recover::exit::Exit;
use recover::postmortem::{self, Formats, PostmortemError};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Md,
    Json,
    Svg,
    All,
}

impl Format {
    /// The files this choice writes.
    fn formats(self) -> Formats {
        Formats {
            md: matches!(self, Format::Md | Format::All),
            json: matches!(self, Format::Json | Format::All),
            svg: matches!(self, Format::Svg | Format::All),
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// The run, as `recover history` prints it (a unique prefix is enough).
    pub run_id: String,
    /// Where run journals are: the run's --journal-dir, or serve.yaml's journal_dir.
    #[arg(long, value_name = "DIR", default_value = "recover-runs")]
    pub journal_dir: PathBuf,
    /// What to write.
    #[arg(long, value_enum, default_value_t = Format::All)]
    pub format: Format,
    /// Where to write (default: JOURNAL_DIR/RUN_ID.report/).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Prometheus to read the series from before the run from, so the timeline starts
    /// at the onset (the runbook's promql signals, with range queries).
    #[arg(long, value_name = "URL")]
    pub prometheus: Option<String>,
    /// With --prometheus: how far before the run to look for the onset.
    #[arg(long, value_name = "DURATION", default_value = "15m", value_parser = recover::util::duration::parse)]
    pub before: Duration,
    #[command(flatten)]
    pub mirror: MirrorArgs,
}

pub fn run(args: ReportArgs) -> CliResult {
    let rt = runtime()?;
    let ev = match postmortem::load(&args.journal_dir, &args.run_id) {
        Ok(ev) => ev,
        Err(PostmortemError::NotFound { .. }) if args.mirror.target.is_some() => {
            fetch_mirrored(&args.journal_dir, &args.run_id, &args.mirror, &rt)?;
            postmortem::load(&args.journal_dir, &args.run_id).map_err(Failure::usage)?
        }
        Err(e @ PostmortemError::NotFound { .. }) => return Err(Failure::usage(e)),
        Err(e) => return Err(Failure::new(Exit::Failed, e)),
    };
    let before = match &args.prometheus {
        Some(url) => Some(
            rt.block_on(postmortem::onset::before(url, &ev, args.before))
                .map_err(|e| Failure::new(Exit::Refused, e))?,
        ),
        None => None,
    };
    let (report, samples) = postmortem::convert::convert(&ev, before.as_ref());
    let formats = args.format.formats();
    let out = args.out.clone().unwrap_or_else(|| {
        args.journal_dir
            .join(format!("{}.report", ev.report.run_id))
    });
    let files = postmortem::write(&out, &ev, &report, &samples, formats)
        .map_err(|e| Failure::new(Exit::Failed, anyhow!(e)))?;
    if let Err(why) = &ev.observed {
        eprintln!("note: {why}; the timeline has the journal's steps only");
    }
    for f in files {
        println!("{}", f.display());
    }
    Ok(Exit::Done)
}
