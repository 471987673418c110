//! The parts of the continuous-time model, one concern each, mirroring the real components:
//! the demo workers ([`clients`]), the admission gate ([`gate`]) and the demo config service
//! ([`server`]). The engine wires them together tick by tick.

pub mod clients;
pub mod gate;
pub mod server;
