//! The Docker adapter: each cluster's environments run on the daemon it names (the
//! installation's own when it names none). Each host is a [`DockerEngine`] of its own, made
//! with the local one's settings when the dispatcher first needs it, once the daemon there is
//! the one its cluster was deployed on.

use crate::connect::{answering, connect, daemon_id, does_not_answer, is_loopback};
use crate::daemon::Daemon;
use crate::engine::DockerEngine;
use async_trait::async_trait;
use bollard::Docker;
use domain::engine::{Adapter, EngineError, Offers, Place, Target};
use domain::ids::BackupId;
use domain::model::{DaemonIdentity, DockerEndpoint, DockerHost};
use std::sync::Arc;

const NAME: &str = "the Docker engine";

/// The adapter over every Docker host.
pub struct Hosts {
    local: DockerEngine,
    /// The Docker ID of the daemon this installation itself uses, once asked.
    own_id: tokio::sync::OnceCell<Daemon>,
}

impl Hosts {
    /// Runs on `local` unless a cluster names another host.
    pub fn new(local: DockerEngine) -> Arc<Self> {
        Arc::new(Self {
            local,
            own_id: tokio::sync::OnceCell::new(),
        })
    }

    /// Who answers through `docker` (the daemon's own ID), and whether it is the daemon this
    /// installation uses itself.
    async fn identity(
        &self,
        docker: &Docker,
        host: &DockerHost,
    ) -> Result<DaemonIdentity, EngineError> {
        let id = daemon_id(docker)
            .await
            .map_err(|why| why.context(&does_not_answer(host)))?;
        let own = self
            .own_id
            .get_or_try_init(|| daemon_id(&self.local.docker))
            .await
            .map_err(|why| why.context("the installation's own Docker daemon"))?;
        Ok(DaemonIdentity {
            installations_own: own.same_place(&id),
            claim: id.claim(),
        })
    }
}

#[async_trait]
impl Adapter for Hosts {
    fn name(&self) -> &'static str {
        NAME
    }

    fn offers(&self) -> Offers {
        Offers {
            image_checks: true,
            database_backups: true,
            terraform_states: true,
            replicas: true,
            host_reach: true,
        }
    }

    fn own(&self) -> Option<(&'static str, &dyn Place)> {
        Some(("the local Docker host", &self.local))
    }

    fn is_own(&self, target: &Target) -> bool {
        let Target::Docker(host) = target;
        host.endpoint == DockerEndpoint::Local
    }

    /// Refuses the installation's own daemon reached another way, a cluster never deployed,
    /// and a daemon other than the one its cluster was deployed on.
    async fn attach(&self, target: &Target) -> Result<Arc<dyn Place>, EngineError> {
        let Target::Docker(host) = target;
        let (docker, reach) = connect(host).await?;
        let docker = answering(docker, host).await?;
        let found = self.identity(&docker, host).await?;
        if found.installations_own {
            return Err(format!(
                "{} reaches the Docker daemon this installation itself uses",
                host.describe()
            )
            .into());
        }
        match &host.daemon {
            None => {
                return Err(format!(
                    "the cluster on {} is not deployed: deploying it checks whose daemon \
                     answers there",
                    host.describe()
                )
                .into())
            }
            Some(deployed) if deployed.id != found.claim.id => {
                return Err(format!(
                    "another Docker daemon answers at {} than the one its cluster was \
                     deployed on: deploy the cluster again",
                    host.describe()
                )
                .into())
            }
            Some(_) => {}
        }
        let publish = host
            .publish_address
            .clone()
            .or_else(|| host.endpoint.remote_host().map(str::to_string))
            .unwrap_or_else(|| self.local.publish_address().to_string());
        let on_this_machine = match &host.endpoint {
            DockerEndpoint::Local | DockerEndpoint::Unix { .. } => true,
            other => other.remote_host().is_some_and(is_loopback),
        };
        let place = self
            .local
            .on(docker, reach, publish, on_this_machine)
            .on_its_swarm(host)
            .await;
        Ok(Arc::new(place))
    }

    async fn identify(&self, target: &Target) -> Option<Result<DaemonIdentity, EngineError>> {
        let Target::Docker(host) = target;
        if host.endpoint == DockerEndpoint::Local {
            return None;
        }
        Some(
            async {
                let (docker, _reach) = connect(host).await?;
                let docker = answering(docker, host).await?;
                self.identity(&docker, host).await
            }
            .await,
        )
    }

    /// Backups are kept on this machine, whichever host the database runs on.
    async fn remove_backup(&self, file: &str) -> Result<(), EngineError> {
        self.local.drop_backup(file)
    }

    /// A deleted database's dumps are its data too: kept with its volume.
    async fn held_backups(&self) -> Result<Vec<BackupId>, EngineError> {
        if self.local.settings.keep_volumes {
            return Ok(Vec::new());
        }
        self.local.dumps()
    }
}
