//! `recover serve`: an Alertmanager webhook receiver that checks for itself before it runs
//! a runbook, and never becomes a remediation storm.
