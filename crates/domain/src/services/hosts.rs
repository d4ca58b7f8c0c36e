//! Where environments' workloads run: their cluster's host, the Docker daemon an ON_PREMISE
//! cluster names (reached with what its credentials hold, unsealed only here), else the one
//! the engine itself uses.

use super::Capstan;
use crate::error::{DomainError, DomainResult};
use crate::ids::EnvironmentId;
use crate::model::{CloudCredentials, Cluster, DockerAccess, Environment, Host};
use crate::ports::{Repo, Unit};

impl Capstan {
    /// The host `cluster` runs its environments on.
    pub(super) async fn host_of_cluster(
        &self,
        tx: &mut Unit,
        cluster: &Cluster,
    ) -> DomainResult<Host> {
        let Some(docker) = &cluster.spec.docker else {
            return Ok(Host::local(cluster.id));
        };
        let access = match &cluster.spec.cloud_provider_credentials {
            None => DockerAccess::default(),
            Some(reference) => Repo::<CloudCredentials>::get(tx, reference.credentials.id)
                .await?
                .map(|c| DockerAccess::unseal(&c.secret))
                .unwrap_or_default(),
        };
        Host::named(cluster.id, docker, access)
    }

    /// The host `environment`'s workloads run on.
    pub(super) async fn host_of_environment(
        &self,
        tx: &mut Unit,
        environment: EnvironmentId,
    ) -> DomainResult<Host> {
        let env = Repo::<Environment>::get(tx, environment)
            .await?
            .ok_or(DomainError::NotFound("environment"))?;
        let cluster = Repo::<Cluster>::get(tx, env.cluster_id)
            .await?
            .ok_or(DomainError::NotFound("cluster"))?;
        self.host_of_cluster(tx, &cluster).await
    }

    /// The hosts every ON_PREMISE cluster names, for the engine to watch; a cluster whose host
    /// cannot be told (its credentials gone) is left out, and said so.
    pub async fn named_hosts(&self) -> DomainResult<Vec<Host>> {
        let clusters = self.store.on_premise_clusters().await?;
        let mut unit = self.reading().await?;
        let mut hosts = Vec::new();
        for cluster in clusters.iter().filter(|c| c.spec.docker.is_some()) {
            match self.host_of_cluster(&mut *unit, cluster).await {
                Ok(host) => hosts.push(host),
                Err(e) => {
                    tracing::warn!(cluster = %cluster.id, error = %e, "a cluster's Docker host cannot be told")
                }
            }
        }
        Ok(hosts)
    }
}
