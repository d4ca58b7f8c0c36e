//! A cluster's life: its status, deploying and stopping it through the engine, and its advanced
//! settings.

use super::Capstan;
use crate::auth::{Action, Principal};
use crate::error::DomainResult;
use crate::ids::{ClusterId, OrganizationId};
use crate::model::EventType;
use crate::model::{Cluster, ClusterAction, Organization, CLUSTER_SETTINGS};
use crate::pagination::PageRequest;
use crate::ports::Scope;
use serde_json::{Map, Value};

impl Capstan {
    /// The organization's clusters, as their statuses show them.
    pub async fn cluster_statuses(
        &self,
        p: &Principal,
        org: OrganizationId,
    ) -> DomainResult<Vec<Cluster>> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        self.load::<Organization>(tx, p, org, Action::Read).await?;
        Ok(self
            .list::<Cluster>(tx, org, PageRequest::all())
            .await?
            .items)
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
