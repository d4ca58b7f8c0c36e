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

/// Generic persistence of one record type, inside a unit of work ([`Tx`]).
#[async_trait]
pub trait Repo<T: Record>: Send {
    async fn insert(&mut self, item: &T) -> StoreResult<()>;
    async fn get(&mut self, id: T::Id) -> StoreResult<Option<T>>;
    async fn get_many(&mut self, ids: &[T::Id]) -> StoreResult<Vec<T>>;
    /// Writes the record back; only inside the write unit that locked its scope before reading
    /// it ([`Tx::lock`]), so nothing another unit wrote in between is lost.
    async fn update(&mut self, item: &T) -> StoreResult<()>;
    async fn delete(&mut self, id: T::Id) -> StoreResult<()>;
    async fn list(&mut self, parent: T::Parent, page: PageRequest) -> StoreResult<Page<T>>;
}

/// What the scheduler of deployment rules looks for.
#[async_trait]
pub trait RuleQueries: Send {
    /// The environments whose rule has an hour due at `now`, the most overdue first, at most
    /// `limit`.
    async fn due_environment_rules(
        &mut self,
        now: time::OffsetDateTime,
        limit: i64,
    ) -> StoreResult<Vec<EnvironmentId>>;
    /// The earliest hour any rule has next, due or not.
    async fn next_rule_turn(&mut self) -> StoreResult<Option<time::OffsetDateTime>>;
}

#[async_trait]
pub trait TokenStore: Send + Sync {
    /// The token whose hash is `hash`, by an indexed lookup.
    async fn find_token_by_hash(&self, hash: &str) -> StoreResult<Option<ApiToken>>;
}

/// What services use that counts are taken by: the registry they pull from, the git token of
/// their repository, the helm repository of their chart, the labels or annotations groups they
/// carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServiceLink {
    Registry,
    GitToken,
    HelmRepository,
    MetadataGroup,
}

/// Which services a search finds: those meeting every condition set.
#[derive(Debug, Clone, Default)]
pub struct ServiceFilter {
    pub organization: Option<OrganizationId>,
    pub project: Option<ProjectId>,
    pub environment: Option<EnvironmentId>,
    /// Services of the environments on this cluster.
    pub cluster: Option<ClusterId>,
    /// Services pulling their image from this registry.
    pub registry: Option<ContainerRegistryId>,
    /// Services whose git repository uses this token.
    pub git_token: Option<GitTokenId>,
    /// Helm services whose chart comes from this repository.
    pub helm_repository: Option<HelmRepositoryId>,
    pub kind: Option<ServiceKind>,
}

#[async_trait]
pub trait ServiceQueries: Send {
    /// The labels and annotations groups attached to each of `services`.
    async fn service_group_ids(
        &mut self,
        services: &[ServiceId],
    ) -> StoreResult<Vec<(ServiceId, MetadataGroupId)>>;
    /// One service with the ids of the groups attached to it, in one statement: a read of one
    /// service costs one round trip, not two.
    async fn service_with_group_ids(
        &mut self,
        service: ServiceId,
    ) -> StoreResult<Option<(Service, Vec<MetadataGroupId>)>>;
    /// Attaches exactly `groups` to the service (those attached before and not named go).
    async fn set_service_groups(
        &mut self,
        service: ServiceId,
        groups: &[MetadataGroupId],
    ) -> StoreResult<()>;
    /// The services a group is attached to.
    async fn group_service_ids(&mut self, group: MetadataGroupId) -> StoreResult<Vec<ServiceId>>;
    /// The custom domain named `domain` (lowercase), of any organization.
    async fn custom_domain_named(&mut self, domain: &str) -> StoreResult<Option<CustomDomain>>;
    /// The custom domains of `services`, by name.
    async fn custom_domains_of(&mut self, services: &[ServiceId])
        -> StoreResult<Vec<CustomDomain>>;
    /// The name of every custom domain of the installation, wildcards included, sorted.
    async fn custom_domain_names(&mut self) -> StoreResult<Vec<String>>;
    /// The services of one kind in an environment; with `out_of_date_only`, only those whose
    /// configuration changed since their deployment.
    async fn list_services_of_kind(
        &mut self,
        environment: EnvironmentId,
        kind: ServiceKind,
        out_of_date_only: bool,
        page: PageRequest,
    ) -> StoreResult<Page<Service>>;
    /// How many services use each of `ids` through `link` (absent ids: none).
    async fn count_services_by(
        &mut self,
        link: ServiceLink,
        ids: &[uuid::Uuid],
    ) -> StoreResult<HashMap<uuid::Uuid, u64>>;
    /// The services that meet every condition of `filter`, paged in creation order.
    async fn find_services(
        &mut self,
        filter: &ServiceFilter,
        page: PageRequest,
    ) -> StoreResult<Page<Service>>;
    /// An organization's environments (on one cluster, when given), paged in creation order.
    async fn find_environments(
        &mut self,
        organization: OrganizationId,
        cluster: Option<ClusterId>,
        page: PageRequest,
    ) -> StoreResult<Page<Environment>>;
    /// Every preview environment that follows a pull request, in every organization.
    async fn pull_request_previews(&mut self) -> StoreResult<Vec<Environment>>;
    /// How many environments each project has (absent ids: none).
    async fn count_environments_by_project(
        &mut self,
        projects: &[ProjectId],
    ) -> StoreResult<HashMap<ProjectId, u64>>;
}

#[async_trait]
pub trait VariableQueries: Send {
    /// The variables attached to any of `parents` (secrets, non-secrets or both), paged.
    async fn list_variables(
        &mut self,
        parents: &[uuid::Uuid],
        secret: Option<bool>,
        page: PageRequest,
    ) -> StoreResult<Page<Variable>>;
    /// The BUILT_IN variables that give applications `database`'s connection (each application
    /// holding some is linked to it), oldest first.
    async fn database_link_variables(&mut self, database: ServiceId) -> StoreResult<Vec<Variable>>;
    /// Marks the services under `reach` that a change at `now` concerns: those UP_TO_DATE
    /// become OUT_OF_DATE, and those with a deployment waiting or running are marked changed
    /// at `now` (so it does not count as deploying this change); in one statement. Others are
    /// left alone (not even locked): their next deployment is asked for after this change.
    /// Returns how many services it marked.
    async fn mark_out_of_date(
        &mut self,
        reach: VariableParent,
        now: time::OffsetDateTime,
    ) -> StoreResult<u64>;
}

/// The durable queue of deployment requests, shared by every server process: what a unit of
/// work does with it.
///
/// Contract: at most one request per environment is RUNNING at any time, across processes;
/// a worker's writes to a request take effect only while it holds the claim.
#[async_trait]
pub trait DeploymentQueue: Send {
    /// Adds requests, all or none.
    async fn enqueue(&mut self, requests: &[DeploymentRequest]) -> StoreResult<()>;
    /// Writes the progress of a RUNNING request (state, steps, lease, and its end when its
    /// status is finished), if `request.claimed_by` still holds it. Returns `None` when it does
    /// not, else whether a client asked to cancel it.
    async fn record(&mut self, request: &DeploymentRequest) -> StoreResult<Option<bool>>;
    /// Makes requests that wait or run part of their environment's deletion (it joined them):
    /// the environment goes with the last of them. Only their snapshot is written, so a
    /// worker's progress on them is untouched.
    async fn join_environment_deletion(
        &mut self,
        requests: &[DeploymentRequest],
    ) -> StoreResult<()>;
    /// Cancels what waits in an environment (of one batch only, when given), except deletions
    /// and uninstalls, and asks its running request (the same exceptions) to stop at its next
    /// step; returns what that ended and how many it asked to stop.
    async fn cancel_pending(
        &mut self,
        environment: EnvironmentId,
        batch: Option<uuid::Uuid>,
        reason: &str,
        now: time::OffsetDateTime,
    ) -> StoreResult<Canceled>;
    /// Cancels the requests of `batch` still waiting in a place after `position` (later
    /// stages), when an earlier one failed; returns those it ended.
    async fn cancel_later_stages(
        &mut self,
        batch: uuid::Uuid,
        position: i32,
        reason: &str,
        now: time::OffsetDateTime,
    ) -> StoreResult<Vec<DeploymentRequestId>>;
    /// Every request of the given batches, and any request whose own id is given (a request
    /// asked for alone is its own batch).
    async fn batch_requests(
        &mut self,
        batches: &[uuid::Uuid],
    ) -> StoreResult<Vec<DeploymentRequest>>;
    /// The batches of an environment, newest first: at most `limit`, those older than batch
    /// `after` when given.
    async fn environment_batches(
        &mut self,
        environment: EnvironmentId,
        after: Option<uuid::Uuid>,
        limit: i64,
    ) -> StoreResult<Vec<uuid::Uuid>>;
    /// A service's requests of the given actions (`None`: every action), newest first: at
    /// most `limit`, those older than request `after` (its id or its batch's) when given.
    async fn service_requests(
        &mut self,
        service: ServiceId,
        actions: Option<&[DeploymentAction]>,
        after: Option<DeploymentRequestId>,
        limit: i64,
    ) -> StoreResult<Vec<DeploymentRequest>>;
    /// The running request, the waiting ones and the latest batch of an environment.
    async fn environment_activity(
        &mut self,
        environment: EnvironmentId,
    ) -> StoreResult<EnvironmentActivity> {
        Ok(self.activity_of(environment, &[]).await?.0)
    }
    /// An environment's activity and, for each of `services` (all of that environment), its
    /// waiting and running requests and its latest ended request of each action (enough to
    /// derive its status), read at once.
    async fn activity_of(
        &mut self,
        environment: EnvironmentId,
        services: &[ServiceId],
    ) -> StoreResult<(EnvironmentActivity, Vec<DeploymentRequest>)>;
    /// A service with its environment's activity and its requests as `activity_of` reads
    /// them, in one read that sees one state (no snapshot needed); `None`: no such service.
    async fn service_with_activity(
        &mut self,
        service: ServiceId,
    ) -> StoreResult<Option<(Service, EnvironmentActivity, Vec<DeploymentRequest>)>>;
}

/// What a cancel did: the waiting requests it ended, and how many running ones it asked to
/// stop at their next step.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Canceled {
    pub ended: Vec<DeploymentRequestId>,
    pub flagged: u64,
}

impl Canceled {
    /// How many requests the cancel touched.
    pub fn touched(&self) -> u64 {
        self.ended.len() as u64 + self.flagged
    }
}

/// Deployment stages and the services in them, inside a unit of work.
#[async_trait]
pub trait StageQueries: Send {
    /// An environment's stages, in deployment order.
    async fn stages_of(&mut self, environment: EnvironmentId) -> StoreResult<Vec<DeploymentStage>>;
    /// Where each service of an environment is.
    async fn stage_members(&mut self, environment: EnvironmentId) -> StoreResult<Vec<StageMember>>;
    /// Where one service is.
    async fn stage_member(&mut self, service: ServiceId) -> StoreResult<Option<StageMember>>;
    /// Puts a service in a stage, or moves it there (its attachment keeps its id).
    async fn put_stage_member(&mut self, member: &StageMember) -> StoreResult<()>;
    /// Gives stages new deployment orders.
    async fn set_stage_orders(
        &mut self,
        orders: &[(DeploymentStageId, i32)],
        now: time::OffsetDateTime,
    ) -> StoreResult<()>;
}

/// How workers take requests from the queue; each call is atomic on its own.
///
/// Contract: `claim_next` never hands the same request to two workers.
#[async_trait]
pub trait QueueClaims: Send + Sync {
    /// Marks the oldest QUEUED request whose environment runs nothing RUNNING, claimed by
    /// `worker` until `lease_until`, and returns it; `None` when nothing can start now.
    async fn claim_next(
        &self,
        worker: &str,
        now: time::OffsetDateTime,
        lease_until: time::OffsetDateTime,
    ) -> StoreResult<Option<DeploymentRequest>>;
    /// Hands the RUNNING requests whose lease ran out (their worker died) to `worker`.
    async fn reclaim_expired(
        &self,
        worker: &str,
        now: time::OffsetDateTime,
        lease_until: time::OffsetDateTime,
    ) -> StoreResult<Vec<DeploymentRequest>>;
    /// Moves the cluster queued longest (DEPLOYMENT_QUEUED, STOP_QUEUED) to its running state
    /// (DEPLOYING, STOPPING), claimed by `worker` until `lease_until`, and returns it.
    async fn claim_cluster(
        &self,
        worker: &str,
        lease_until: time::OffsetDateTime,
    ) -> StoreResult<Option<Cluster>>;
    /// The clusters in a running state whose lease ran out before `now` (their worker died).
    async fn expired_clusters(&self, now: time::OffsetDateTime) -> StoreResult<Vec<Cluster>>;
    /// Every organization's ON_PREMISE clusters (the Docker hosts the engine watches).
    async fn on_premise_clusters(&self) -> StoreResult<Vec<Cluster>>;
    /// How many requests wait (QUEUED) and run (RUNNING), across every organization.
    async fn queue_depth(&self) -> StoreResult<QueueDepth>;
}

/// The deployment queue's size, as metrics show it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueDepth {
    pub queued: u64,
    pub running: u64,
}

/// What engines saw run, per service.
#[async_trait]
pub trait RunningStates: Send {
    /// Keeps what the engine saw of a service, in place of what it saw before.
    async fn put_running_state(&mut self, state: &RunningState) -> StoreResult<()>;
    /// What was seen of each of `services` that has been seen.
    async fn running_states(&mut self, services: &[ServiceId]) -> StoreResult<Vec<RunningState>>;
    /// What was seen of every service (the router's routes).
    async fn all_running_states(&mut self) -> StoreResult<Vec<RunningState>>;
}

/// The logs of deployment requests, as workers write them and clients read them.
#[async_trait]
pub trait DeploymentLogs: Send {
    /// Adds lines (already masked) to their requests' logs.
    async fn append_logs(&mut self, lines: &[DeploymentLogLine]) -> StoreResult<()>;
    /// The newest `limit` lines of the environment's requests, oldest first (in the order
    /// their requests wrote them).
    async fn environment_logs(
        &mut self,
        environment: EnvironmentId,
        limit: i64,
    ) -> StoreResult<Vec<DeploymentLogLine>>;
}

/// What Capstan did on each cluster, as workers write it and clients read it.
#[async_trait]
pub trait ClusterLogs: Send {
    /// Adds lines to their clusters' logs.
    async fn append_cluster_logs(&mut self, lines: &[ClusterLogLine]) -> StoreResult<()>;
    /// The newest `limit` lines of the cluster's log, oldest first.
    async fn cluster_logs(
        &mut self,
        cluster: ClusterId,
        limit: i64,
    ) -> StoreResult<Vec<ClusterLogLine>>;
}

/// Which Docker daemon each cluster naming an endpoint was deployed on, by the daemon's own
/// ID: a daemon one organization's clusters run on is never another's.
#[async_trait]
pub trait DaemonClaims: Send {
    /// The organizations whose clusters were deployed on the daemon `daemon`.
    async fn daemon_organizations(&mut self, daemon: &str) -> StoreResult<Vec<OrganizationId>>;
    /// Records that `cluster` (of `organization`) was deployed on the daemon `daemon`.
    async fn set_cluster_daemon(
        &mut self,
        cluster: ClusterId,
        organization: OrganizationId,
        daemon: &ClaimedDaemon,
    ) -> StoreResult<()>;
    /// The daemon each of `clusters` was deployed on, for those deployed on one.
    async fn cluster_daemons(
        &mut self,
        clusters: &[ClusterId],
    ) -> StoreResult<Vec<(ClusterId, ClaimedDaemon)>>;
    /// This installation's identity, `proposed` when it has none yet: the same for every
    /// instance on the database, for good.
    async fn installation_id(&mut self, proposed: &str) -> StoreResult<String>;
}

/// When deployed cron jobs run next, as the scheduler takes their times.
#[async_trait]
pub trait CronTurns: Send {
    /// Keeps when the job runs next, in place of what was kept.
    async fn put_cron_turn(&mut self, turn: &CronTurn) -> StoreResult<()>;
    /// Forgets the job's next run (it was stopped, or is no longer a cron job).
    async fn delete_cron_turn(&mut self, service: ServiceId) -> StoreResult<()>;
    /// The job's next run, if it has one.
    async fn cron_turn(&mut self, service: ServiceId) -> StoreResult<Option<CronTurn>>;
    /// The turns due at `now`, earliest first, at most `limit`.
    async fn due_cron_turns(
        &mut self,
        now: time::OffsetDateTime,
        limit: i64,
    ) -> StoreResult<Vec<CronTurn>>;
    /// The earliest turn of all, for the scheduler to sleep until.
    async fn next_cron_turn(&mut self) -> StoreResult<Option<time::OffsetDateTime>>;
}

/// What services' workloads print, as engines read it and clients follow it.
#[async_trait]
pub trait ServiceOutputs: Send {
    /// Adds lines (already masked); a line kept already (same service, replica and position)
    /// is left as it is.
    async fn append_output(&mut self, lines: &[OutputLine]) -> StoreResult<()>;
    /// Lets go of the service's lines but its newest `keep`.
    async fn trim_output(&mut self, service: ServiceId, keep: i64) -> StoreResult<()>;
    /// The newest `limit` lines of the service that `query` admits, oldest first.
    async fn service_output(
        &mut self,
        service: ServiceId,
        query: &OutputQuery,
        limit: i64,
    ) -> StoreResult<Vec<OutputLine>>;
}

/// The event log, as use cases write it and readers page through it.
#[async_trait]
pub trait EventLog: Send {
    /// Adds an event, in the unit of the change it tells of.
    async fn append_event(&mut self, event: &OrgEvent) -> StoreResult<()>;
    /// The events no position was given yet, oldest first.
    async fn unsequenced_events(&mut self, limit: i64) -> StoreResult<Vec<OrgEvent>>;
    /// Gives `events` the positions after the last one given, in this order. Run under
    /// [`Scope::EventLog`], so that positions follow the order events became visible.
    async fn sequence_events(&mut self, events: &[EventId]) -> StoreResult<()>;
    /// The organization's events after position `after`, in order, at most `limit`.
    async fn events_after(
        &mut self,
        organization: OrganizationId,
        after: i64,
        limit: i64,
    ) -> StoreResult<Vec<OrgEvent>>;
    /// The last position given in the organization (0 when none).
    async fn last_position(&mut self, organization: OrganizationId) -> StoreResult<i64>;
    /// The organization's audited events that pass `filter`, newest first when `newer` is
    /// false (those strictly before `bound`), oldest first when true (strictly after it).
    async fn audit_events(
        &mut self,
        organization: OrganizationId,
        filter: &EventFilter,
        bound: Option<time::OffsetDateTime>,
        newer: bool,
        limit: i64,
    ) -> StoreResult<Vec<OrgEvent>>;
    /// The services among `ids` that exist, each with its environment and project, by name:
    /// one read, whatever the services' specs hold.
    async fn services_named(&mut self, ids: &[ServiceId]) -> StoreResult<Vec<ServiceNamed>>;
    /// As [`EventLog::services_named`], for environments.
    async fn environments_named(
        &mut self,
        ids: &[EnvironmentId],
    ) -> StoreResult<Vec<EnvironmentNamed>>;
    /// Removes an organization's events (with their deliveries), when it is deleted.
    async fn forget_events(&mut self, organization: OrganizationId) -> StoreResult<()>;
    /// Adds deliveries (routed from sequenced events).
    async fn insert_deliveries(&mut self, deliveries: &[WebhookDelivery]) -> StoreResult<()>;
    /// Records where a delivery is after an attempt, if `worker` still holds its claim;
    /// false when it does not (the attempt is recorded all the same).
    async fn settle_delivery(
        &mut self,
        delivery: &WebhookDelivery,
        worker: &str,
    ) -> StoreResult<bool>;
}

/// Deliveries handed to senders: like the queue's claims, no delivery is held by two
/// senders at once; one whose sender died is claimed again once its lease runs out.
#[async_trait]
pub trait DeliveryClaims: Send + Sync {
    /// Claims up to `limit` PENDING deliveries due by `now` and not held, for `worker` until
    /// `lease_until`.
    async fn claim_deliveries(
        &self,
        worker: &str,
        now: time::OffsetDateTime,
        lease_until: time::OffsetDateTime,
        limit: i64,
    ) -> StoreResult<Vec<WebhookDelivery>>;
    /// When the first PENDING delivery may be claimed: due and not held by a live claim (a
    /// time at or before `now` when one may be now).
    async fn next_delivery_due(
        &self,
        now: time::OffsetDateTime,
    ) -> StoreResult<Option<time::OffsetDateTime>>;
    /// Whether any event waits for its position (a read, so idle sequencers stay off the
    /// writer).
    async fn has_unsequenced_events(&self) -> StoreResult<bool>;
}

/// The users of organizations (JWT subjects) and their roles.
#[async_trait]
pub trait MemberStore: Send {
    /// The organizations `user` belongs to, with its role in each.
    async fn memberships(
        &mut self,
        user: &str,
    ) -> StoreResult<Vec<(OrganizationId, crate::auth::Role)>>;
    /// Adds `user` to the organization, or changes its role there.
    async fn put_member(
        &mut self,
        organization: OrganizationId,
        user: &str,
        role: crate::auth::Role,
        now: time::OffsetDateTime,
    ) -> StoreResult<()>;
    /// The organization's members, oldest first.
    async fn members(&mut self, organization: OrganizationId) -> StoreResult<Vec<Member>>;
    /// Records the address a member joined with.
    async fn set_member_email(
        &mut self,
        organization: OrganizationId,
        user: &str,
        email: &str,
    ) -> StoreResult<()>;
    /// Makes `user` the organization's only owner.
    async fn set_owner(&mut self, organization: OrganizationId, user: &str) -> StoreResult<()>;
    /// The owner (a user id) of each of `organizations` that has one.
    async fn owners(
        &mut self,
        organizations: &[OrganizationId],
    ) -> StoreResult<std::collections::HashMap<OrganizationId, String>>;
    /// Removes `user` from the organization; false when it was not a member.
    async fn remove_member(
        &mut self,
        organization: OrganizationId,
        user: &str,
    ) -> StoreResult<bool>;
}

/// Rate-limit state shared by every server process.
#[async_trait]
pub trait RateLimitStore: Send + Sync {
    /// Applies `gcra.lease(tat, now_us, wanted)` to `key`'s TAT, holding it against every
    /// other process until the new TAT is written.
    async fn gcra_lease(
        &self,
        key: &str,
        gcra: crate::ratelimit::Gcra,
        now_us: i64,
        wanted: u32,
    ) -> StoreResult<crate::ratelimit::GcraLease>;
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

/// What an operator (or a test suite) does to the whole store at once.
#[async_trait]
pub trait Maintenance: Send + Sync {
    /// Empties every table in one transaction. `keep_tokens` keeps the organizations that
    /// have API tokens, with their tokens and members, so the tokens go on working.
    async fn reset(&self, keep_tokens: bool) -> StoreResult<()>;
    /// Saves the whole state under `name`, consistent as of one instant, while others go on
    /// reading and writing. `Duplicate` when the name is taken.
    async fn save_snapshot(
        &self,
        name: &SnapshotName,
        now: time::OffsetDateTime,
    ) -> StoreResult<Snapshot>;
    /// Brings back the state saved under `name`, in one transaction: what the snapshot
    /// holds, and nothing else. `NotFound` when there is none; `Refused` when it was saved
    /// under another schema.
    async fn restore_snapshot(&self, name: &SnapshotName) -> StoreResult<()>;
    /// The snapshots, oldest first.
    async fn snapshots(&self) -> StoreResult<Vec<Snapshot>>;
    /// `NotFound` when there is none.
    async fn delete_snapshot(&self, name: &SnapshotName) -> StoreResult<()>;
}

#[async_trait]
pub trait Health: Send + Sync {
    /// Succeeds when the store answers a trivial query.
    async fn ping(&self) -> StoreResult<()>;
    /// How many times this process has used a database connection (a unit of work, a claim):
    /// the load it puts on the database.
    fn connections_lent(&self) -> u64;
}

/// A unit of work: one connection, and for [`Store::write`] one transaction, through which a use
/// case reads what it decides on, decides, and writes. Dropping it without `commit` rolls the
/// transaction back.
#[async_trait]
pub trait Tx:
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
    + Repo<DeploymentStage>
    + Repo<Invitation>
    + Repo<HelmRepository>
    + Repo<DeploymentRestriction>
    + Repo<CustomDomain>
    + Repo<MetadataGroup>
    + Repo<ProjectDeploymentRule>
    + Repo<EnvironmentDeploymentRule>
    + Repo<OrganizationWebhook>
    + Repo<WebhookAttempt>
    + Repo<DatabaseBackup>
    + EventLog
    + DeploymentLogs
    + ClusterLogs
    + DaemonClaims
    + ServiceOutputs
    + CronTurns
    + RunningStates
    + RuleQueries
    + StageQueries
    + VariableQueries
    + DeploymentQueue
    + ServiceQueries
    + MemberStore
    + Send
{
    /// In a write unit, holds `scope` against every other write unit that locks it until this
    /// one ends; a no-op in a read unit. PostgreSQL locks the rows (`FOR UPDATE`); SQLite's
    /// write unit is already the only writer. A scope whose row is gone locks nothing (the
    /// read that follows finds nothing).
    async fn lock(&mut self, scope: Scope) -> StoreResult<()>;
    /// As [`Tx::lock`], but shared with other units that share `scope`: they go on together,
    /// while units that lock it wait for all of them (and they for it). For writes that only
    /// add rows, whose clashes a unique index settles (PostgreSQL `FOR SHARE`).
    async fn share(&mut self, scope: Scope) -> StoreResult<()>;
    /// Makes every write of the unit durable, all at once.
    async fn commit(self: Box<Self>) -> StoreResult<()>;
}

/// What a write unit holds while it decides. Every use case that writes locks the narrowest
/// scope that covers everything its decision reads, before reading it; units that lock
/// several take them in this order: organization, project, environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Organization-level resources: clusters, credentials, registries, git tokens, projects,
    /// API tokens, members.
    Organization(OrganizationId),
    /// A project, its variables, and every environment in it (in id order): what a
    /// project-level change that reaches every service of the project needs.
    Project(ProjectId),
    /// An environment and everything in it: its services, their variables and deployments.
    Environment(EnvironmentId),
    /// The environment of a service, found from the service.
    EnvironmentOf(ServiceId),
    /// The sequencer of the event log: one unit at a time gives events their positions
    /// (PostgreSQL: a transaction-scoped advisory lock). A unit that deletes events in bulk
    /// (an organization's) takes it last, so it and the sequencer cannot deadlock on them.
    EventLog,
    /// Every cluster's claim on its Docker daemon: one unit at a time tells whose a daemon
    /// is (PostgreSQL: a transaction-scoped advisory lock).
    DockerDaemons,
    /// A record that what the unit writes will refer to, held shared: it cannot be deleted
    /// before the unit ends, while other units may refer to it too. Taken after the unit's
    /// other scopes.
    Referenced(Reference),
}

/// Organization-level records that services and environments refer to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reference {
    Registry(ContainerRegistryId),
    GitToken(GitTokenId),
    Cluster(ClusterId),
    /// A webhook a delivery's attempt is recorded under: held against its deletion, so the
    /// attempt's key checks and the deletion's cascade cannot deadlock.
    Webhook(WebhookId),
}

/// Everything the use-case services need from a store.
///
#[async_trait]
pub trait Store:
    TokenStore
    + QueueClaims
    + DeliveryClaims
    + RateLimitStore
    + IdempotencyStore
    + Maintenance
    + Health
    + Send
    + Sync
{
    /// A unit for reads: each statement sees what is committed when it runs.
    async fn read(&self) -> StoreResult<Box<dyn Tx>>;
    /// A unit for reads that must agree with each other (a status derived from a service and
    /// its deployments): every statement sees the same committed state.
    async fn snapshot(&self) -> StoreResult<Box<dyn Tx>>;
    /// A unit for a read-check-write use case: one transaction (SQLite: `BEGIN IMMEDIATE`, one
    /// writer at a time; PostgreSQL: READ COMMITTED with the row locks of [`Tx::lock`]).
    async fn write(&self) -> StoreResult<Box<dyn Tx>>;
    /// Rung once a unit that changed something the background tasks act on commits (on
    /// PostgreSQL, a unit of another instance too, for what crosses instances).
    fn changes(&self) -> &crate::changes::Changes;
}

/// A unit of work as use cases pass it along: borrowed from the `Box<dyn Tx>` that owns it.
pub type Unit = dyn Tx;
