//! The `recover` binary: a thin layer over the library. It parses flags, sets up logging,
//! and turns results into exit codes (see `recover::exit`).

mod cli;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    // Test builds give reqwest rustls without a crypto provider; install one up front.
    recover::util::http::ensure_tls_provider();
    let args = cli::Cli::parse();
    recover::util::logging::init(args.log_format, args.default_log_level());
    match cli::dispatch(args) {
        Ok(exit) => exit.into(),
        Err(failure) => failure.report(),
    }
}
