//! The demo system: a victim service whose overload sustains itself (`config_service`) and
//! the fleet of clients that keeps it there (`workers`). Real HTTP on loopback, so the
//! rehearsal and the tests exercise the same code paths a real incident would.
