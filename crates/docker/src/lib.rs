//! The Docker engine: the adapter of the domain's engine port that runs containers and jobs on
//! Docker daemons through `bollard`: the one at `DOCKER_HOST` (or the default socket), and
//! the hosts ON_PREMISE clusters name ([`Hosts`]).

mod backups;
mod build;
mod connect;
mod containers;
mod daemon;
mod db_recipe;
mod diagnosis;
mod engine;
mod errors;
mod exec;
mod files;
pub mod firewall;
mod holdings;
mod hosts;
mod images;
mod job;
mod liveness;
mod networks;
mod observe;
mod output;
mod plan;
mod port;
mod probe;
mod pulls;
mod replicas;
mod rollout;
mod running_replicas;
mod shells;
mod swarm;
mod terraform;
mod tunnel;
mod usage;
mod volumes;

pub use db_recipe::DatabaseImages;
pub use engine::{DockerEngine, DEFAULT_IMAGES_KEPT, DEFAULT_TERRAFORM_IMAGE};
pub use errors::BadSetting;
pub use hosts::Hosts;
pub use images::HostImages;
pub use plan::{image_reference, LABEL_SERVICE};
