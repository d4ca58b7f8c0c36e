//! File variables on a Swarm: each file a Swarm secret (kept encrypted by the Swarm's managers,
//! given to a task on a RAM disk, never written to a node's disk), mounted read-only at its
//! path, made for one generation of a service and removed with it.

use crate::engine::DockerEngine;
use crate::errors::said;
use crate::plan::{PlannedFile, LABEL_SERVICE};
use base64::Engine as _;
use bollard::models::{SecretSpec, TaskSpecContainerSpecFile, TaskSpecContainerSpecSecrets};
use bollard::query_parameters::ListSecretsOptions;
use domain::engine::EngineError;
use domain::ids::ServiceId;
use std::collections::HashMap;

/// The Swarm service whose file a secret is.
const LABEL_FOR: &str = "capstan.swarm-service";

impl DockerEngine {
    /// Makes a secret of each file for the Swarm service `name` of `service`: their mounts.
    pub(crate) async fn file_secrets(
        &self,
        service: ServiceId,
        name: &str,
        files: &[PlannedFile],
    ) -> Result<Vec<TaskSpecContainerSpecSecrets>, EngineError> {
        let mut mounts = Vec::with_capacity(files.len());
        for (i, file) in files.iter().enumerate() {
            let path = file.path.trim_start_matches('/');
            if path.is_empty() || path.split('/').any(|part| part == "..") {
                return Err(
                    format!("a file variable's mount path is not a file: {}", file.path).into(),
                );
            }
            let secret = format!("{name}-f{i}");
            let spec = SecretSpec {
                name: Some(secret.clone()),
                labels: Some(self.marked(HashMap::from([
                    (LABEL_SERVICE.to_string(), service.0.to_string()),
                    (LABEL_FOR.to_string(), name.to_string()),
                ]))),
                data: Some(base64::engine::general_purpose::STANDARD.encode(&file.content)),
                ..Default::default()
            };
            let made = match self.docker.create_secret(spec).await {
                Ok(made) => made.id,
                // Made by an earlier attempt at the same deployment: made anew.
                Err(bollard::errors::Error::DockerResponseServerError {
                    status_code: 409, ..
                }) => {
                    self.remove_secrets(&format!("{LABEL_FOR}={name}")).await?;
                    return Box::pin(self.file_secrets(service, name, files)).await;
                }
                Err(e) => return Err(said("could not store a file variable in the Swarm", e)),
            };
            mounts.push(TaskSpecContainerSpecSecrets {
                file: Some(TaskSpecContainerSpecFile {
                    name: Some(file.path.clone()),
                    uid: Some("0".into()),
                    gid: Some("0".into()),
                    mode: Some(0o444),
                }),
                secret_id: Some(made),
                secret_name: Some(secret),
            });
        }
        Ok(mounts)
    }

    /// Removes the file secrets of the Swarm service `name`, once nothing uses them.
    pub(crate) async fn remove_file_secrets(&self, name: &str) -> Result<(), EngineError> {
        self.remove_secrets(&format!("{LABEL_FOR}={name}")).await
    }

    /// Removes every file secret of `service`.
    pub(crate) async fn remove_all_file_secrets(
        &self,
        service: ServiceId,
    ) -> Result<(), EngineError> {
        self.remove_secrets(&format!("{LABEL_SERVICE}={}", service.0))
            .await
    }

    async fn remove_secrets(&self, label: &str) -> Result<(), EngineError> {
        let mut labels = vec![label.to_string()];
        labels.extend(self.scope());
        let options = ListSecretsOptions {
            filters: Some(HashMap::from([("label".to_string(), labels)])),
        };
        let found = self
            .docker
            .list_secrets(Some(options))
            .await
            .map_err(|e| said("could not list the Swarm's secrets", e))?;
        for secret in found {
            let Some(id) = secret.id else { continue };
            match self.docker.delete_secret(&id).await {
                Ok(())
                | Err(bollard::errors::Error::DockerResponseServerError {
                    status_code: 404, ..
                }) => {}
                Err(e) => return Err(said("could not remove a file variable from the Swarm", e)),
            }
        }
        Ok(())
    }
}
