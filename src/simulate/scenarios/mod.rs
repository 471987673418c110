//! The scenarios, one module each, every one a [`super::model::Model`]: the two models of
//! the stuck overload (`retry-storm`, `config-deploy`) and the five home-feed drills. The
//! list a user picks from is [`super::registry`].

pub mod breaker;
pub mod bulkhead;
pub mod config_deploy;
pub mod provider_outage;
pub mod retry_layers;
pub mod retry_storm;
pub mod slow_replica;
