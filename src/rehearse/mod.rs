//! `recover rehearse`: the whole failure and its recovery on one machine, with real
//! processes, and a report.
//!
//! Layout, in the order a rehearsal uses it: [`recorder`] scrapes every `/metrics` page
//! into a time series ([`series`], parsed by [`expo`]); [`verify`] decides steady state and
//! computes the lower bound; [`report`] holds the stable `report.json` fields, [`summary`]
//! the human text and [`timeline`] the SVG.

pub mod expo;
pub mod recorder;
pub mod report;
pub mod series;
pub mod summary;
pub mod timeline;
pub mod verify;
