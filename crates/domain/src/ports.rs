//! The ports the domain needs from the outside world. The storage crate implements them for
//! SQLite and PostgreSQL; tests may implement them in memory.
//!
//! Error contract: `insert`/`update` give `StoreError::Duplicate` when a name is already taken
//! under the same parent; `delete` gives `StoreError::InUse` when other rows still reference the
//! row and `StoreError::NotFound` when there is no such row; `get` gives `Ok(None)` for an
//! unknown id. Lists are ordered by creation time, then id.

use crate::error::StoreResult;
use crate::ids::*;
use crate::model::*;
use crate::pagination::{Page, PageRequest};
use async_trait::async_trait;
use std::collections::HashMap;

/// Generic persistence of one record type.
#[async_trait]
pub trait Repo<T: Record>: Send + Sync {
    async fn insert(&self, item: &T) -> StoreResult<()>;
    async fn get(&self, id: T::Id) -> StoreResult<Option<T>>;
    async fn get_many(&self, ids: &[T::Id]) -> StoreResult<Vec<T>>;
    async fn update(&self, item: &T) -> StoreResult<()>;
    async fn delete(&self, id: T::Id) -> StoreResult<()>;
    async fn list(&self, parent: T::Parent, page: PageRequest) -> StoreResult<Page<T>>;
}

#[async_trait]
pub trait TokenStore: Send + Sync {
    /// The token whose hash is `hash`, by an indexed lookup.
    async fn find_token_by_hash(&self, hash: &str) -> StoreResult<Option<ApiToken>>;
    /// Creates an organization and its first token in one transaction.
    async fn insert_organization_with_token(
        &self,
        organization: &Organization,
        token: &ApiToken,
    ) -> StoreResult<()>;
}

#[async_trait]
pub trait ServiceQueries: Send + Sync {
    /// The services of one kind in an environment; with `out_of_date_only`, only those whose
    /// configuration changed since their deployment.
    async fn list_services_of_kind(
        &self,
        environment: EnvironmentId,
        kind: ServiceKind,
        out_of_date_only: bool,
        page: PageRequest,
    ) -> StoreResult<Page<Service>>;
    /// How many services use each registry (absent ids: none).
    async fn count_services_by_registry(
        &self,
        registries: &[ContainerRegistryId],
    ) -> StoreResult<HashMap<ContainerRegistryId, u64>>;
    /// The services whose git repository uses `token`, paged.
    async fn list_services_by_git_token(
        &self,
        token: GitTokenId,
        page: PageRequest,
    ) -> StoreResult<Page<Service>>;
    /// How many services use each git token (absent ids: none).
    async fn count_services_by_git_token(
        &self,
        tokens: &[GitTokenId],
    ) -> StoreResult<HashMap<GitTokenId, u64>>;
}

#[async_trait]
pub trait VariableQueries: Send + Sync {
    /// The variables attached to any of `parents` (secrets, non-secrets or both), paged.
    async fn list_variables(
        &self,
        parents: &[uuid::Uuid],
        secret: Option<bool>,
        page: PageRequest,
    ) -> StoreResult<Page<Variable>>;
    /// Marks every service under `reach` changed at `now`, and those UP_TO_DATE OUT_OF_DATE;
    /// returns how many changed status.
    async fn mark_out_of_date(
        &self,
        reach: VariableParent,
        now: time::OffsetDateTime,
    ) -> StoreResult<u64>;
}

#[async_trait]
pub trait EnvironmentStore: Send + Sync {
    /// Inserts an environment with its services and variables in one transaction (a clone).
    /// Variables must come after those they alias or override.
    async fn insert_environment_tree(
        &self,
        environment: &Environment,
        services: &[Service],
        variables: &[Variable],
    ) -> StoreResult<()>;
}

/// The durable queue of deployment requests, shared by every server process.
///
/// Contract: at most one request per environment is RUNNING at any time, across processes;
/// `claim_next` never hands the same request to two workers; a worker's writes to a request
/// take effect only while it holds the claim.
#[async_trait]
pub trait DeploymentQueue: Send + Sync {
    /// Adds requests, all or none.
    async fn enqueue(&self, requests: &[DeploymentRequest]) -> StoreResult<()>;
    /// Marks the oldest QUEUED request whose environment runs nothing RUNNING, claimed by
    /// `worker` until `lease_until`, and returns it; `None` when nothing can start now.
    async fn claim_next(
        &self,
        worker: &str,
        now: time::OffsetDateTime,
        lease_until: time::OffsetDateTime,
    ) -> StoreResult<Option<DeploymentRequest>>;
    /// Writes the progress of a RUNNING request (state, steps, lease, and its end when its
    /// status is finished), if `request.claimed_by` still holds it. Returns `None` when it does
    /// not, else whether a client asked to cancel it.
    async fn record(&self, request: &DeploymentRequest) -> StoreResult<Option<bool>>;
    /// Cancels what waits in an environment (except deletions) and asks its running request
    /// (unless a deletion) to stop; returns how many requests that touched.
    async fn cancel_environment(
        &self,
        environment: EnvironmentId,
        reason: &str,
        now: time::OffsetDateTime,
    ) -> StoreResult<u64>;
    /// Hands the RUNNING requests whose lease ran out (their worker died) to `worker`.
    async fn reclaim_expired(
        &self,
        worker: &str,
        now: time::OffsetDateTime,
        lease_until: time::OffsetDateTime,
    ) -> StoreResult<Vec<DeploymentRequest>>;
    /// For each service: its waiting and running requests and its latest ended request of each
    /// action (enough to derive its status).
    async fn requests_of_services(
        &self,
        services: &[ServiceId],
    ) -> StoreResult<Vec<DeploymentRequest>>;
    /// The running request, the waiting ones and the latest batch of an environment.
    async fn environment_activity(
        &self,
        environment: EnvironmentId,
    ) -> StoreResult<EnvironmentActivity>;
    /// The deployments (DEPLOY and REDEPLOY requests) of a service, newest first.
    async fn deployment_history(
        &self,
        service: ServiceId,
        page: PageRequest,
    ) -> StoreResult<Page<DeploymentRequest>>;
    /// Writes a service's spec and deployment status if its `updated_at` is still the one
    /// given; false when it changed meanwhile.
    async fn save_deployed(&self, service: &Service) -> StoreResult<bool>;
}

/// The users of organizations (JWT subjects) and their roles.
#[async_trait]
pub trait MemberStore: Send + Sync {
    /// The organizations `user` belongs to, with its role in each.
    async fn memberships(
        &self,
        user: &str,
    ) -> StoreResult<Vec<(OrganizationId, crate::auth::Role)>>;
    /// Adds `user` to the organization, or changes its role there.
    async fn put_member(
        &self,
        organization: OrganizationId,
        user: &str,
        role: crate::auth::Role,
        now: time::OffsetDateTime,
    ) -> StoreResult<()>;
    /// Creates an organization with its first member, in one transaction.
    async fn insert_organization_with_member(
        &self,
        organization: &Organization,
        user: &str,
        role: crate::auth::Role,
    ) -> StoreResult<()>;
}

/// Rate-limit state shared by every server process.
#[async_trait]
pub trait RateLimitStore: Send + Sync {
    /// Applies `gcra.step` to `key`'s state at `now_us` in one atomic statement.
    async fn gcra_step(
        &self,
        key: &str,
        gcra: crate::ratelimit::Gcra,
        now_us: i64,
    ) -> StoreResult<crate::ratelimit::GcraStep>;
}

/// The first answer to a request sent with an `Idempotency-Key`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResponse {
    pub status: u16,
    pub body: String,
}

/// What the store knows of an idempotency key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdempotencyClaim {
    /// New: the caller does the work, then saves the answer.
    Claimed,
    /// Seen with this request hash: its answer, or none yet (still running).
    Replay(Option<StoredResponse>),
    /// Seen with another request.
    Mismatch,
}

/// Idempotency keys, per principal, kept for a day.
#[async_trait]
pub trait IdempotencyStore: Send + Sync {
    /// Claims `key` for `principal` and `request_hash` unless it is known (keys older than
    /// `expired_before` are forgotten first).
    async fn claim_idempotency_key(
        &self,
        principal: &str,
        key: &str,
        request_hash: &str,
        now: time::OffsetDateTime,
        expired_before: time::OffsetDateTime,
    ) -> StoreResult<IdempotencyClaim>;
    /// Saves the answer of a claimed key.
    async fn save_idempotent_response(
        &self,
        principal: &str,
        key: &str,
        response: &StoredResponse,
    ) -> StoreResult<()>;
    /// Forgets a claimed key whose request failed before it could answer (so a retry runs).
    async fn release_idempotency_key(&self, principal: &str, key: &str) -> StoreResult<()>;
}

#[async_trait]
pub trait Health: Send + Sync {
    /// Succeeds when the store answers a trivial query.
    async fn ping(&self) -> StoreResult<()>;
}

/// Everything the use-case services need from a store.
pub trait Store:
    Repo<Organization>
    + Repo<ApiToken>
    + Repo<CloudCredentials>
    + Repo<Cluster>
    + Repo<Project>
    + Repo<Environment>
    + Repo<Service>
    + Repo<ContainerRegistry>
    + Repo<GitToken>
    + Repo<Variable>
    + Repo<DeploymentRequest>
    + VariableQueries
    + EnvironmentStore
    + DeploymentQueue
    + TokenStore
    + ServiceQueries
    + RateLimitStore
    + IdempotencyStore
    + MemberStore
    + Health
{
}

impl<S> Store for S where
    S: Repo<Organization>
        + Repo<ApiToken>
        + Repo<CloudCredentials>
        + Repo<Cluster>
        + Repo<Project>
        + Repo<Environment>
        + Repo<Service>
        + Repo<ContainerRegistry>
        + Repo<GitToken>
        + Repo<Variable>
        + Repo<DeploymentRequest>
        + VariableQueries
        + EnvironmentStore
        + DeploymentQueue
        + TokenStore
        + ServiceQueries
        + RateLimitStore
        + IdempotencyStore
        + MemberStore
        + Health
{
}
