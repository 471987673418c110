//! The demo system: a victim service whose overload sustains itself (`config_service`) and
//! the fleet of clients that keeps it there (`workers`). Real HTTP on loopback, so the
//! rehearsal and the tests exercise the same code paths a real incident would.
//! [`defaults`] holds the numbers of the laptop scenario and their arithmetic; [`topology`]
//! the system's one description (command lines, ports, files); [`system`] starts the whole
//! demo by hand (`recover demo up | trigger | down`).

pub mod config_service;
pub mod defaults;
pub mod system;
pub mod topology;
pub mod workers;
