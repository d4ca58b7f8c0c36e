//! What was deployed and what waits: deployment histories of services and environments, and
//! the queue, read from the durable requests (every action of every client is one).

use super::statuses::{batch_status, EnvironmentStatus};
use super::Capstan;
use crate::auth::{Action, Principal};
use crate::error::{DomainError, DomainResult};
use crate::ids::{DeploymentRequestId, EnvironmentId, ServiceId};
use crate::model::*;
use crate::ports::{Repo, Unit};
use std::collections::HashMap;
use uuid::Uuid;

/// One request with the kind of its service.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryEntry {
    pub request: DeploymentRequest,
    pub kind: ServiceKind,
}

/// One deployment of an environment (a batch) and its requests in the order they run.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchHistory {
    pub environment_id: EnvironmentId,
    pub summary: BatchSummary,
    pub entries: Vec<HistoryEntry>,
}

/// How far to page a history: `page_size` items, after item `start_id` (the public `startId`),
/// or at page `page` (API.md's paging).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryPaging {
    pub page: u32,
    pub page_size: u32,
    pub start_id: Option<Uuid>,
}

impl HistoryPaging {
    fn window(&self) -> (i64, usize) {
        let skip = (self.page.saturating_sub(1) as usize) * self.page_size as usize;
        ((skip + self.page_size as usize) as i64, skip)
    }
}

/// A page of a history, newest first.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryPage<T> {
    pub page: u32,
    pub page_size: u32,
    pub items: Vec<T>,
}

impl Capstan {
    /// The kinds of the services `requests` are about (as recorded when a service is gone).
    async fn entries(
        &self,
        tx: &mut Unit,
        requests: Vec<DeploymentRequest>,
    ) -> DomainResult<Vec<HistoryEntry>> {
        let mut ids: Vec<ServiceId> = requests.iter().map(|r| r.service_id).collect();
        ids.sort();
        ids.dedup();
        let kinds: HashMap<ServiceId, ServiceKind> = Repo::<Service>::get_many(tx, &ids)
            .await?
            .into_iter()
            .map(|s| (s.id, s.kind()))
            .collect();
        Ok(requests
            .into_iter()
            .filter_map(|r| {
                let kind = kinds.get(&r.service_id).copied().or(r.snapshot.kind)?;
                Some(HistoryEntry { kind, request: r })
            })
            .collect())
    }

    /// The given batches with their requests, in the order of `batches`.
    async fn batches(&self, tx: &mut Unit, batches: &[Uuid]) -> DomainResult<Vec<BatchHistory>> {
        let requests = tx.batch_requests(batches).await?;
        let entries = self.entries(tx, requests).await?;
        Ok(batches
            .iter()
            .filter_map(|b| {
                let mine: Vec<HistoryEntry> = entries
                    .iter()
                    .filter(|e| e.request.batch_id == *b)
                    .cloned()
                    .collect();
                let refs: Vec<&DeploymentRequest> = mine.iter().map(|e| &e.request).collect();
                let summary = batch_summary(&refs)?;
                Some(BatchHistory {
                    environment_id: mine.first()?.request.environment_id,
                    summary,
                    entries: mine,
                })
            })
            .collect())
    }

    /// An environment's deployments, newest first.
    pub async fn environment_history(
        &self,
        p: &Principal,
        environment: EnvironmentId,
        paging: HistoryPaging,
    ) -> DomainResult<HistoryPage<BatchHistory>> {
        let mut unit = self.snapshot().await?;
        let tx = &mut *unit;
        self.load::<Environment>(tx, p, environment, Action::Read)
            .await?;
        let (limit, skip) = paging.window();
        let ids = tx
            .environment_batches(environment, paging.start_id, limit)
            .await?;
        let ids: Vec<Uuid> = ids.into_iter().skip(skip).collect();
        Ok(HistoryPage {
            page: paging.page,
            page_size: paging.page_size,
            items: self.batches(tx, &ids).await?,
        })
    }

    /// A service's requests of every action (deployments, restarts, stops, deletions), newest
    /// first.
    pub async fn service_history(
        &self,
        p: &Principal,
        kind: ServiceKind,
        id: ServiceId,
        paging: HistoryPaging,
    ) -> DomainResult<HistoryPage<HistoryEntry>> {
        let mut unit = self.snapshot().await?;
        let tx = &mut *unit;
        self.load_service(tx, p, kind, id, Action::Read).await?;
        let (limit, skip) = paging.window();
        let requests = tx
            .service_requests(id, None, paging.start_id.map(DeploymentRequestId), limit)
            .await?;
        let items = requests
            .into_iter()
            .skip(skip)
            .map(|request| HistoryEntry { request, kind })
            .collect();
        Ok(HistoryPage {
            page: paging.page,
            page_size: paging.page_size,
            items,
        })
    }

    /// A service's deployments (DEPLOY and REDEPLOY requests), newest first.
    pub async fn deployment_history(
        &self,
        p: &Principal,
        kind: ServiceKind,
        id: ServiceId,
        paging: HistoryPaging,
    ) -> DomainResult<HistoryPage<DeploymentRequest>> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        self.load_service(tx, p, kind, id, Action::Read).await?;
        let (limit, skip) = paging.window();
        let deployments = [DeploymentAction::Deploy, DeploymentAction::Redeploy];
        let requests = tx
            .service_requests(
                id,
                Some(&deployments),
                paging.start_id.map(DeploymentRequestId),
                limit,
            )
            .await?;
        Ok(HistoryPage {
            page: paging.page,
            page_size: paging.page_size,
            items: requests.into_iter().skip(skip).collect(),
        })
    }

    /// What waits or runs in an environment, one entry per deployment, oldest first.
    pub async fn environment_queue(
        &self,
        p: &Principal,
        environment: EnvironmentId,
    ) -> DomainResult<Vec<BatchHistory>> {
        let mut unit = self.snapshot().await?;
        let tx = &mut *unit;
        self.load::<Environment>(tx, p, environment, Action::Read)
            .await?;
        let env = tx.environment_activity(environment).await?;
        let mut ids: Vec<Uuid> = Vec::new();
        for r in &env.pending {
            if !ids.contains(&r.batch_id) {
                ids.push(r.batch_id);
            }
        }
        self.batches(tx, &ids).await
    }

    /// A service's requests that wait or run, oldest first.
    pub async fn service_queue(
        &self,
        p: &Principal,
        id: ServiceId,
    ) -> DomainResult<Vec<HistoryEntry>> {
        let mut unit = self.snapshot().await?;
        let tx = &mut *unit;
        let service: Service = self.load(tx, p, id, Action::Read).await?;
        let (_, requests) = tx.activity_of(service.environment_id, &[id]).await?;
        let mut pending: Vec<DeploymentRequest> = requests
            .into_iter()
            .filter(|r| !r.status.is_finished())
            .collect();
        pending.sort_by_key(|r| r.queue_key());
        let kind = service.kind();
        Ok(pending
            .into_iter()
            .map(|request| HistoryEntry { request, kind })
            .collect())
    }

    /// The status of one deployment request (named by its id or its batch's), as an
    /// environment status of that deployment.
    pub async fn deployment_request_status(
        &self,
        p: &Principal,
        id: Uuid,
    ) -> DomainResult<EnvironmentStatus> {
        let mut unit = self.snapshot().await?;
        let tx = &mut *unit;
        let found = tx.batch_requests(&[id]).await?;
        let first = found
            .first()
            .ok_or(DomainError::NotFound(DeploymentRequest::KIND))?;
        p.authorize(first.organization_id, Action::Read)?;
        let environment = first.environment_id;
        let batch = first.batch_id;
        let requests: Vec<DeploymentRequest> = tx
            .batch_requests(&[batch])
            .await?
            .into_iter()
            .filter(|r| r.batch_id == batch)
            .collect();
        let env = tx.environment_activity(environment).await?;
        let statuses = self.environment_statuses_of(tx, environment).await?;
        let created_at = requests.first().map_or(first.created_at, |r| r.created_at);
        Ok(batch_status(
            environment,
            &env,
            &requests,
            statuses.environment.deployment_status,
            created_at,
        ))
    }
}
