//! What the API reads of terraform services: the resources their state holds, and the
//! versions the installation runs.

use super::Capstan;
use crate::auth::{Action, Principal};
use crate::error::{DomainError, DomainResult};
use crate::ids::ServiceId;
use crate::model::{state_resources, ServiceKind, TerraformEngine, TerraformResource};

/// The versions offered unless the operator names others (`CAPSTAN_TERRAFORM_VERSIONS`).
pub const DEFAULT_TERRAFORM_VERSIONS: &[(TerraformEngine, &str)] = &[
    (TerraformEngine::OpenTofu, "1.9.0"),
    (TerraformEngine::OpenTofu, "1.8.8"),
    (TerraformEngine::Terraform, "1.9.8"),
    (TerraformEngine::Terraform, "1.5.7"),
];

impl Capstan {
    /// `GET /terraform/availableVersion`: the engines and versions this installation runs.
    pub fn terraform_versions(&self, p: &Principal) -> Vec<(TerraformEngine, String)> {
        let _ = p;
        self.terraform_versions.clone()
    }

    /// `GET /terraform/{id}/terraformResources`: the resources its state holds, read from the
    /// engine; none before its first run.
    pub async fn terraform_resources(
        &self,
        p: &Principal,
        id: ServiceId,
    ) -> DomainResult<Vec<TerraformResource>> {
        let (service, host) = {
            let mut unit = self.reading().await?;
            let service = self
                .load_service(&mut *unit, p, ServiceKind::Terraform, id, Action::Read)
                .await?;
            let host = self
                .target_of_environment(&mut *unit, service.environment_id)
                .await?;
            (service, host)
        };
        let Some(states) = self.engine.as_ref().and_then(|e| e.terraform_states(&host)) else {
            return Ok(Vec::new());
        };
        match states
            .terraform_state(&host, &service)
            .await
            .map_err(|e| DomainError::Upstream(e.to_string()))?
        {
            None => Ok(Vec::new()),
            Some(state) => {
                state_resources(id, &state).map_err(|e| DomainError::Upstream(e.to_string()))
            }
        }
    }
}
