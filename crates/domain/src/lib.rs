//! Capstan's domain: what the API manages and the rules it keeps, free of any web or database
//! framework so that other Rust services can link it cheaply.

// First: the macro it declares is used by the modules that follow.
#[cfg(feature = "diesel")]
#[macro_use]
mod sql_text;

pub mod auth;
pub mod changes;
pub mod clock;
pub mod dns;
pub mod dockerfile;
pub mod engine;
pub mod error;
pub mod git;
pub mod hex;
pub mod ids;
pub mod ip_network;
pub mod model;
pub mod observe;
pub mod outbound;
pub mod outbound_policy;
pub mod pagination;
pub mod ports;
pub mod pull_requests;
pub mod ratelimit;
pub mod secret;
pub mod services;
pub mod validate;

pub use error::{DomainError, DomainResult};
pub use services::Capstan;
