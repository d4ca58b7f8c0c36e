//! Where environments' workloads run: their cluster's target. For a Docker cluster, the daemon
//! an ON_PREMISE cluster names (reached with what its credentials hold, unsealed only here),
//! else the one the engine itself uses.

use super::Capstan;
use crate::engine::Target;
use crate::error::{DomainError, DomainResult};
use crate::ids::EnvironmentId;
use crate::model::{
    CloudCredentials, Cluster, DockerAccess, DockerEndpoint, DockerHost, Environment,
};
use crate::ports::{Repo, Unit};
use std::collections::HashMap;

impl Capstan {
    /// Where `cluster` runs its environments.
    pub(super) async fn target_of_cluster(
        &self,
        tx: &mut Unit,
        cluster: &Cluster,
    ) -> DomainResult<Target> {
        let mut targets = self
            .targets_of_clusters(tx, std::slice::from_ref(cluster))
            .await?;
        targets.pop().ok_or(DomainError::NotFound("cluster"))?
    }

    /// Where each of `clusters` runs its environments, in their order; their credentials
    /// read at once.
    pub(super) async fn targets_of_clusters(
        &self,
        tx: &mut Unit,
        clusters: &[Cluster],
    ) -> DomainResult<Vec<DomainResult<Target>>> {
        let wanted: Vec<_> = clusters
            .iter()
            .filter(|c| c.spec.docker.is_some())
            .filter_map(|c| c.spec.cloud_provider_credentials.as_ref())
            .map(|r| r.credentials.id)
            .collect();
        let named: Vec<_> = clusters
            .iter()
            .filter(|c| c.spec.docker.is_some())
            .map(|c| c.id)
            .collect();
        let daemons: HashMap<_, _> = tx.cluster_daemons(&named).await?.into_iter().collect();
        let credentials: HashMap<_, _> = if wanted.is_empty() {
            HashMap::new()
        } else {
            Repo::<CloudCredentials>::get_many(tx, &wanted)
                .await?
                .into_iter()
                .map(|c| (c.id, c))
                .collect()
        };
        Ok(clusters
            .iter()
            .map(|cluster| {
                let Some(docker) = &cluster.spec.docker else {
                    return Ok(Target::Docker(DockerHost::local(cluster.id)));
                };
                let access = cluster
                    .spec
                    .cloud_provider_credentials
                    .as_ref()
                    .and_then(|r| credentials.get(&r.credentials.id))
                    .map(|c| DockerAccess::unseal(&c.secret))
                    .unwrap_or_default();
                let mut host = DockerHost::named(cluster.id, docker, access)?;
                host.daemon = daemons.get(&cluster.id).cloned();
                Ok(Target::Docker(host))
            })
            .collect())
    }

    /// Where `environment`'s workloads run.
    pub(super) async fn target_of_environment(
        &self,
        tx: &mut Unit,
        environment: EnvironmentId,
    ) -> DomainResult<Target> {
        let env = Repo::<Environment>::get(tx, environment)
            .await?
            .ok_or(DomainError::NotFound("environment"))?;
        let cluster = Repo::<Cluster>::get(tx, env.cluster_id)
            .await?
            .ok_or(DomainError::NotFound("cluster"))?;
        self.target_of_cluster(tx, &cluster).await
    }

    /// Refuses an endpoint the operator does not let organizations name: a socket outside
    /// CAPSTAN_DOCKER_SOCKETS_DIR, a remote host the outbound policy does not let calls made
    /// for users reach (each address its name resolves to).
    pub(super) async fn endpoint_allowed(&self, host: &DockerHost) -> DomainResult<()> {
        self.one_endpoint_allowed(&host.endpoint, "docker.endpoint")
            .await?;
        for node in &host.nodes {
            self.one_endpoint_allowed(&node.endpoint, "docker.nodes.endpoint")
                .await?;
        }
        Ok(())
    }

    /// Refuses `endpoint`, named `field` in the request, as [`Self::endpoint_allowed`] does.
    async fn one_endpoint_allowed(
        &self,
        endpoint: &DockerEndpoint,
        field: &str,
    ) -> DomainResult<()> {
        let checked = self.docker_hosts.check(endpoint).map_err(|e| match e {
            DomainError::Invalid { message, .. } => DomainError::invalid(field, message),
            other => other,
        });
        let Some(name) = checked? else {
            return Ok(());
        };
        let addresses = match name.parse::<std::net::IpAddr>() {
            Ok(ip) => vec![ip],
            Err(_) => self.resolver.addresses(name).await.map_err(|_| {
                DomainError::invalid(field, format!("the host {name} does not resolve"))
            })?,
        };
        let policy = &self.docker_hosts.outbound;
        if addresses.is_empty() || addresses.iter().any(|ip| !policy.permits(name, *ip)) {
            tracing::warn!(
                host = %name,
                "a cluster's Docker endpoint was refused by the outbound policy; \
                 CAPSTAN_OUTBOUND_ALLOW would allow it"
            );
            return Err(DomainError::invalid(
                field,
                format!(
                    "the host {name} is not one the outbound policy lets Capstan reach for \
                     users: public addresses, and those the operator allows \
                     (CAPSTAN_OUTBOUND_ALLOW)"
                ),
            ));
        }
        Ok(())
    }

    /// Who answers at a cluster's endpoint, before its first deployment there: the daemon
    /// the installation itself uses runs only clusters that name no endpoint, and a daemon
    /// another organization's clusters run on is never this one's. Recorded on success.
    pub(super) async fn claim_daemon(
        &self,
        cluster: &Cluster,
        identity: &crate::model::DaemonIdentity,
    ) -> DomainResult<()> {
        if identity.installations_own {
            return Err(DomainError::state(
                "this endpoint reaches the Docker daemon this installation itself uses: a \
                 cluster runs there only by naming no endpoint",
            ));
        }
        self.in_unit(&[crate::ports::Scope::DockerDaemons], async |tx| {
            let holders = tx.daemon_organizations(&identity.claim.id).await?;
            if holders.iter().any(|o| *o != cluster.organization_id) {
                return Err(DomainError::state(
                    "this endpoint reaches a Docker daemon another organization's clusters \
                     run on",
                ));
            }
            tx.set_cluster_daemon(cluster.id, cluster.organization_id, &identity.claim)
                .await?;
            Ok(())
        })
        .await
    }

    /// This installation's identity, made by the first instance to ask: what its engines
    /// make on a Docker host carries it, and they act only on what does.
    pub async fn installation_id(&self) -> DomainResult<String> {
        let proposed = uuid::Uuid::new_v4().simple().to_string();
        self.in_unit(&[], async |tx| Ok(tx.installation_id(&proposed).await?))
            .await
    }

    /// The targets every ON_PREMISE cluster names, for the engine to watch; a cluster whose
    /// target cannot be told (its credentials gone) is left out, and said so.
    pub async fn named_targets(&self) -> DomainResult<Vec<Target>> {
        let clusters = self.store.on_premise_clusters().await?;
        let mut unit = self.reading().await?;
        let named: Vec<Cluster> = clusters
            .into_iter()
            .filter(|c| c.spec.docker.is_some())
            .collect();
        let mut targets = Vec::new();
        let found = self.targets_of_clusters(&mut *unit, &named).await?;
        for (cluster, target) in named.iter().zip(found) {
            match target {
                Ok(target) => targets.push(target),
                Err(e) => {
                    tracing::warn!(cluster = %cluster.id, error = %e, "a cluster's Docker host cannot be told")
                }
            }
        }
        Ok(targets)
    }
}
