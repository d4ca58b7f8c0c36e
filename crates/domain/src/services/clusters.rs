//! A cluster's life: its status, deploying and stopping it through the engine, and its advanced
//! settings.

use super::Capstan;
use crate::auth::{Action, Principal};
use crate::engine::EngineError;
use crate::error::DomainResult;
use crate::ids::{ClusterId, OrganizationId};
use crate::model::EventType;
use crate::model::{
    Cluster, ClusterAction, ClusterHost, ClusterLogLine, ClusterState, Organization, SwarmNode,
    CLUSTER_SETTINGS,
};
use crate::pagination::PageRequest;
use crate::ports::Scope;
use serde_json::{Map, Value};

/// The most lines of a cluster's log answered at once.
const CLUSTER_LOG_LINES: i64 = 1000;

impl Capstan {
    /// The organization's clusters, as their statuses show them (see [`Self::cluster_status`]).
    pub async fn cluster_statuses(
        &self,
        p: &Principal,
        org: OrganizationId,
    ) -> DomainResult<Vec<Cluster>> {
        let with_hosts = {
            let mut unit = self.reading().await?;
            let tx = &mut *unit;
            self.load::<Organization>(tx, p, org, Action::Read).await?;
            let clusters = self
                .list::<Cluster>(tx, org, PageRequest::all())
                .await?
                .items;
            let hosts = self.targets_of_clusters(tx, &clusters).await?;
            clusters.into_iter().zip(hosts).collect::<Vec<_>>()
        };
        let seen = with_hosts
            .into_iter()
            .map(|(cluster, host)| self.as_its_host_shows(cluster, host));
        Ok(futures_util::future::join_all(seen).await)
    }

    /// A cluster's status as its host shows it now: a deployed cluster whose host does not
    /// answer is in DEPLOYMENT_ERROR (not deployed, not ready), the reason naming the host,
    /// until it answers again. With an engine of no hosts, the record is all there is.
    pub async fn cluster_status(
        &self,
        p: &Principal,
        org: OrganizationId,
        id: ClusterId,
    ) -> DomainResult<Cluster> {
        let (cluster, host) = self.cluster_and_host(p, org, id).await?;
        Ok(self.as_its_host_shows(cluster, host).await)
    }

    /// A cluster's status (as [`Self::cluster_status`]) with the nodes of the Swarm its host
    /// manages, as the managers see them now; none for a plain host, a host not answering, or
    /// an engine of no hosts.
    pub async fn cluster_status_with_nodes(
        &self,
        p: &Principal,
        org: OrganizationId,
        id: ClusterId,
    ) -> DomainResult<(Cluster, Vec<SwarmNode>)> {
        let (cluster, host) = self.cluster_and_host(p, org, id).await?;
        let nodes = match (&host, &self.engine) {
            (Ok(target), Some(engine)) => match engine.host_reach(target) {
                Some(reach) => reach.nodes(target).await.unwrap_or_default(),
                None => Vec::new(),
            },
            _ => Vec::new(),
        };
        Ok((self.as_its_host_shows(cluster, host).await, nodes))
    }

    /// A cluster (as its host shows it) with its hosts and what each holds, for the live
    /// API's cluster status; why they cannot be told when they cannot (its host does not
    /// answer). None for an engine of no hosts.
    pub async fn cluster_hosts(
        &self,
        p: &Principal,
        org: OrganizationId,
        id: ClusterId,
    ) -> DomainResult<(Cluster, Result<Vec<ClusterHost>, String>)> {
        let (cluster, host) = self.cluster_and_host(p, org, id).await?;
        let hosts = match (&host, &self.engine) {
            (Ok(target), Some(engine)) => match engine.host_reach(target) {
                Some(reach) => reach.hosts(target).await.map_err(|e| e.to_string()),
                None => Ok(Vec::new()),
            },
            (Err(e), Some(_)) => Err(e.to_string()),
            (_, None) => Ok(Vec::new()),
        };
        Ok((self.as_its_host_shows(cluster, host).await, hosts))
    }

    /// A cluster `p` may read, and where it runs (or why that cannot be told).
    async fn cluster_and_host(
        &self,
        p: &Principal,
        org: OrganizationId,
        id: ClusterId,
    ) -> DomainResult<(Cluster, DomainResult<crate::engine::Target>)> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        let cluster: Cluster = self.load_in_org(tx, p, org, id, Action::Read).await?;
        let host = self.target_of_cluster(tx, &cluster).await;
        Ok((cluster, host))
    }

    async fn as_its_host_shows(
        &self,
        mut cluster: Cluster,
        host: DomainResult<crate::engine::Target>,
    ) -> Cluster {
        let Some(engine) = &self.engine else {
            return cluster;
        };
        let reached = match host {
            Ok(target) => match engine.host_reach(&target) {
                Some(reach) => Some(reach.reach(&target).await),
                None => None,
            },
            Err(e) => Some(Err(EngineError::terminal(e.to_string()))),
        };
        if let Some(Err(why)) = reached {
            if cluster.run.state == ClusterState::Deployed {
                cluster.run.state = ClusterState::DeploymentError;
                cluster.run.reason = Some(why.to_string());
            }
        }
        cluster
    }

    /// Queues a deployment (or a stop) of the cluster for the engine; 409 while another action
    /// is queued or running, and for a stop of a cluster not deployed. A dry run checks that it
    /// could be queued and changes nothing.
    pub async fn cluster_action(
        &self,
        p: &Principal,
        org: OrganizationId,
        id: ClusterId,
        action: ClusterAction,
        dry_run: bool,
    ) -> DomainResult<Cluster> {
        self.in_unit(&[Scope::Organization(org)], async |tx| {
            let mut cluster: Cluster = self.load_in_org(tx, p, org, id, Action::Write).await?;
            let before = cluster.clone();
            cluster.queue(action, self.now())?;
            if dry_run {
                return Ok(before);
            }
            self.update(tx, &cluster, "organization").await?;
            let what = match action {
                ClusterAction::Deploy => EventType::DeployQueued,
                ClusterAction::Stop => EventType::StopQueued,
            };
            self.audit(tx, p, what, &cluster).await?;
            Ok(cluster)
        })
        .await
    }

    /// What Capstan did on the cluster (its newest thousand lines, oldest first); `org`, when
    /// the path names it, must be the cluster's.
    pub async fn cluster_logs(
        &self,
        p: &Principal,
        org: Option<OrganizationId>,
        id: ClusterId,
    ) -> DomainResult<Vec<ClusterLogLine>> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        match org {
            Some(org) => {
                self.load_in_org::<Cluster>(tx, p, org, id, Action::Read)
                    .await?;
            }
            None => {
                self.load::<Cluster>(tx, p, id, Action::Read).await?;
            }
        }
        Ok(tx.cluster_logs(id, CLUSTER_LOG_LINES).await?)
    }

    /// Every advanced setting of the cluster, with its value.
    pub async fn cluster_advanced_settings(
        &self,
        p: &Principal,
        org: OrganizationId,
        id: ClusterId,
    ) -> DomainResult<Map<String, Value>> {
        let mut unit = self.reading().await?;
        let cluster: Cluster = self
            .load_in_org(&mut *unit, p, org, id, Action::Read)
            .await?;
        Ok(CLUSTER_SETTINGS.shown(&cluster.advanced_settings))
    }

    /// Sets the settings sent (each checked; those not sent keep their value); a deployed
    /// cluster becomes OUT_OF_DATE when a value changes.
    pub async fn edit_cluster_advanced_settings(
        &self,
        p: &Principal,
        org: OrganizationId,
        id: ClusterId,
        sent: &Value,
    ) -> DomainResult<Map<String, Value>> {
        self.in_unit(&[Scope::Organization(org)], async |tx| {
            let mut cluster: Cluster = self.load_in_org(tx, p, org, id, Action::Write).await?;
            let edited = CLUSTER_SETTINGS.edit(&cluster.advanced_settings, sent)?;
            if edited != cluster.advanced_settings {
                cluster.advanced_settings = edited;
                cluster.mark_changed();
                cluster.updated_at = self.now();
                self.update(tx, &cluster, "organization").await?;
            }
            self.audit(
                tx,
                p,
                EventType::Update,
                &super::audit::ClusterSettingsOf(&cluster),
            )
            .await?;
            Ok(CLUSTER_SETTINGS.shown(&cluster.advanced_settings))
        })
        .await
    }
}
