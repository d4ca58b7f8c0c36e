//! The storage contract: one suite, run against SQLite and PostgreSQL, each test on a fresh
//! database; one module per port, all in one test binary.
//! Run one module with `cargo test -p capstan-storage --test contract queue::`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

// First, so that its `contract!` macro is in scope in every module below.
#[macro_use]
mod common;

mod clusters;
mod events;
mod limits;
mod maintenance;
mod queue;
mod records;
mod rules;
mod running;
mod tokens;
mod units;
