//! `recover rehearse`: the whole failure and its recovery on one machine, with real
//! processes, and a report.
