//! The network each environment's workloads share, made at its first deployment and removed
//! once the environment is gone.

use crate::engine::DockerEngine;
use crate::errors::said;
use crate::plan;
use domain::engine::EngineError;
use domain::ids::{EnvironmentId, OrganizationId};
use domain::model::Service;
use std::collections::HashMap;

impl DockerEngine {
    /// The network of the service's environment, made the first time.
    pub(crate) async fn ensure_network(&self, service: &Service) -> Result<(), EngineError> {
        self.ensure_environment_network(service.organization_id, service.environment_id)
            .await
    }

    /// The network of an environment, made the first time.
    pub(crate) async fn ensure_environment_network(
        &self,
        organization: OrganizationId,
        environment: EnvironmentId,
    ) -> Result<(), EngineError> {
        let name = plan::network_name(environment);
        if self.docker.inspect_network(&name, None).await.is_ok() {
            return Ok(());
        }
        // On a Swarm an overlay spans the nodes (attachable: a one-off task joins it too);
        // unencrypted, as the kernels of many hosts carry no ESP.
        let (driver, options) = if self.settings.swarm {
            ("overlay", HashMap::new())
        } else {
            (
                "bridge",
                HashMap::from([(
                    "com.docker.network.bridge.name".to_string(),
                    plan::bridge_name(environment),
                )]),
            )
        };
        let request = bollard::models::NetworkCreateRequest {
            name: name.clone(),
            driver: Some(driver.into()),
            attachable: Some(self.settings.swarm),
            options: Some(options),
            labels: Some(self.marked(HashMap::from([
                (
                    plan::LABEL_ORGANIZATION.to_string(),
                    organization.0.to_string(),
                ),
                (
                    plan::LABEL_ENVIRONMENT.to_string(),
                    environment.0.to_string(),
                ),
            ]))),
            ..Default::default()
        };
        match self.docker.create_network(request).await {
            Ok(_) => Ok(()),
            // Made meanwhile by another deployment of the environment.
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 409, ..
            }) => Ok(()),
            Err(e) => Err(said(&format!("could not make the network {name}"), e)),
        }
    }
}
