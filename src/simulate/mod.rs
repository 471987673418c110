//! `recover simulate`: a seeded, deterministic model of clients, gate and server for
//! what-if questions and for checking plans before acting.
