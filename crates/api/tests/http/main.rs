//! The HTTP suites, through the production app factory, on SQLite and PostgreSQL: one module per
//! suite, all in one test binary. Each test binary links the whole stack on its own, so one binary
//! instead of one per suite is most of what building these tests costs.
//! Run one suite with `cargo test -p capstan-api --test http clusters::`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

// First, so that its `http_suite!` macros are in scope in every suite below.
#[macro_use]
mod common;

mod advanced_settings;
mod bad_input;
mod bounds;
mod clusters;
mod contract;
mod controls;
mod custom_domains;
mod database_links;
mod deployment_operations;
mod deployment_rules;
mod deployments;
mod endpoints;
mod events;
mod image_deploys;
mod jwt;
mod landed_records;
mod limits;
mod metadata_groups;
mod metrics;
mod openapi;
mod organization_resources;
mod organization_webhooks;
mod previews;
mod records;
mod restrictions;
mod roles;
mod service_clone;
mod stages;
mod variable_routes;
mod variables;
mod waiting;
mod webhooks;
