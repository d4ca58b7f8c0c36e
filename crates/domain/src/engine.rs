//! The engine port: what carries out the steps of a deployment request. The server wires an
//! adapter (the simulated engine by default); the worker in `services::worker` drives it.

use crate::model::{Cluster, ClusterAction, DeploymentRequest, Service, StepName};
use async_trait::async_trait;

#[async_trait]
pub trait Engine: Send + Sync {
    /// Performs one step of `request` on `service`. `Err` carries the reason the step failed,
    /// as the client will read it.
    async fn run_step(
        &self,
        step: StepName,
        request: &DeploymentRequest,
        service: &Service,
    ) -> Result<(), String>;

    /// Deploys or stops a cluster. `Err` carries the reason it failed.
    async fn run_cluster(&self, action: ClusterAction, cluster: &Cluster) -> Result<(), String>;
}
