//! A Docker host that manages a Swarm: what runs there runs as Swarm services over its nodes,
//! never as plain containers beside them, and what runs is read from the Swarm's tasks.

mod files;
mod jobs;
mod moving;
pub(crate) mod node_daemons;
pub(crate) mod nodes;
mod one_off;
mod pinned;
mod readiness;
mod registry;
mod removal;
mod running;
mod services;
mod spec;
pub(crate) mod tasks;
mod terraform;
