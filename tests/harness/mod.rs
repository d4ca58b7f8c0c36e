//! Runs the built `capstan` binary: a scratch directory, a server process on a free port, and
//! an API client, with what the tests run it against (Docker daemons, TLS material, an ACME
//! authority, an SSH host, a registry), one module per concern. Shared by the black-box tests
//! and the benchmarks.
#![allow(
    dead_code,
    unused_imports,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use serde_json::{json, Value};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

mod acme;
mod case;
mod client;
mod daemons;
mod docker;
mod registry;
mod server;
mod sockets;
mod ssh;
mod streams;
mod swarm;
mod tls;
mod waiting;
mod workloads;

pub use acme::*;
pub use case::*;
pub use client::*;
pub use daemons::*;
pub use docker::*;
pub use registry::*;
pub use server::*;
pub use sockets::*;
pub use ssh::*;
pub use streams::*;
pub use swarm::*;
pub use tls::*;
pub use waiting::*;
pub use workloads::*;
