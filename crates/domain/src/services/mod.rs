//! Use-case services: every operation of the API, with its access check and its rules.

mod advanced_settings;
mod audit;
mod catalog;
mod clusters;
mod controls;
mod credentials;
mod cron_runs;
mod custom_domains;
mod database_backups;
mod database_links;
mod fault_controls;
mod git_reads;
mod terraform;
pub use database_links::DatabaseCredentials;
pub use git_reads::{Contributor, DockerfileCheck, COMMITS_LISTED};
pub use terraform::DEFAULT_TERRAFORM_VERSIONS;
mod deployment_logs;
mod deployment_rules;
mod deployments;
mod environments;
mod events;
mod fixtures;
mod git_tokens;
mod helm_repositories;
mod hierarchy;
mod histories;
mod hosts;
mod image_deploys;
mod job_cleanup;
mod listings;
mod live;
mod members;
mod metadata_groups;
mod org_webhooks;
mod organizations;
mod previews;
mod registries;
mod restrictions;
mod running;
mod service_children;
mod service_clone;
mod service_kinds;
mod service_output;
mod shells;
mod stages;
mod statuses;
mod unit;
mod usage;
mod variable_import;
mod variables;
mod webhooks;
mod worker;

pub use catalog::AssociatedService;
pub use cron_runs::CronPass;
pub use custom_domains::DOMAIN_KINDS;
pub use deployment_logs::{hint, EnvironmentLog, NamedLogLine, LOG_LINES};
pub use deployment_rules::RulePass;
pub use deployments::{refusal, Chosen, Deletion, DeployInput, Selection};
pub use environments::{CloneInput, EnvironmentDetails, EnvironmentInput, EnvironmentUpdate};
pub use events::{AuditCursor, AuditPage, STREAM_BATCH};
pub use git_tokens::{GitTokenDetails, GitTokenInput};
pub use helm_repositories::{HelmRepositoryDetails, HelmRepositoryInput};
pub use hierarchy::{ClusterDetails, ClusterInput, ProjectDetails, ProjectInput};
pub use histories::{BatchHistory, HistoryEntry, HistoryPage, HistoryPaging};
pub use image_deploys::ImageDeployInput;
pub use job_cleanup::CleanedJobs;
pub use listings::{ClusterEnvironment, ServiceLight, ServiceScope};
pub use live::{LiveEnvironment, LiveScope, LiveService};
pub use members::{InvitationDetails, InviteInput, MemberRef, RoleChange};
pub use metadata_groups::{GroupDetails, GROUPED_KINDS};
pub use org_webhooks::{DeliveryPass, Outbound};
pub use organizations::{ApiTokenInput, NewApiToken, OrganizationDetails, OrganizationUpdate};
pub use previews::{
    PreviewSettings, Previewed, PREVIEW_COMMAND, PULL_REQUEST_BRANCH, PULL_REQUEST_COMMIT_ID,
    PULL_REQUEST_NUMBER,
};
pub use registries::{RegistryDetails, RegistryInput};
pub use restrictions::RESTRICTED_KINDS;
pub use running::PublicLink;
pub use service_clone::CloneServiceInput;
pub use shells::{OpenedShell, ShellTicket};
pub use stages::{StageDetails, StageInput, StagedService};
pub use statuses::{EnvironmentStatus, EnvironmentStatuses, StagedStatuses};
pub use unit::UnitWork;
pub use usage::{UsageSample, UsageWatch, USAGE_PERIOD};
pub use variable_import::{ImportInput, ImportReport, ImportedVariable};
pub use variables::{
    AliasInput, NamedAt, OverrideInput, ScopedVariableInput, VariableDetails, VariableEdit,
    VariableInput,
};
pub use webhooks::{Delivery, GitIntegration, Received};
pub use worker::{worker_id, Worker, LEASE, RETRY_BACKOFF, SWITCHED_WHEN_LOST, WORKER_LOST};

use crate::auth::{Action, Principal};
use crate::clock::Clock;
use crate::error::{Conflict, DomainError, DomainResult, StoreError};
use crate::model::Record;
use crate::pagination::{Page, PageRequest};
use crate::ports::{Repo, Store, Tx, Unit};
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use time::OffsetDateTime;

/// The application: the use cases, over a store and a clock.
#[derive(Clone)]
pub struct Capstan {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    git: Option<GitIntegration>,
    /// Where clients reach this API (invitation links point there).
    public_url: String,
    /// How custom domains are checked: the resolver, and the host name or address they must
    /// point at.
    resolver: Arc<dyn crate::dns::Resolver>,
    domain_target: Option<String>,
    /// What one service may ask of the shared hosts.
    bounds: crate::model::Bounds,
    /// Where an organization may point a cluster.
    docker_hosts: crate::model::DockerHostsPolicy,
    /// Who hears how deployments end (metrics).
    observer: Arc<dyn crate::observe::Observer>,
    /// Where webhook deliveries go out; none: they wait.
    outbound: Option<Arc<Outbound>>,
    /// Holds and failures a test suite asked of the engine.
    engine_controls: Arc<fault_controls::EngineControls>,
    /// How many API tokens an organization may hold: each is a rate-limit quota of its own.
    max_api_tokens: u64,
    /// What runs the workloads, for the use cases that act on them outside a deployment
    /// (cleaning failed jobs); none: there is nothing to act on.
    engine: Option<Arc<dyn crate::engine::Engine>>,
    /// What fetches git repositories for the API's reads of them; none: not read.
    checkouts: Option<Arc<dyn crate::git::Checkouts>>,
    /// The terraform engines and versions offered.
    terraform_versions: Vec<(crate::model::TerraformEngine, String)>,
    /// Where the router answers services' public ports; none: links name the published ports.
    router: Option<crate::model::RouterAddress>,
    /// The last DNS check of each custom domain the router asked about (by name and CDN use),
    /// passed or not, and when.
    domain_checks: Arc<std::sync::Mutex<DomainChecks>>,
    /// The operator's limits on pull requests' previews.
    previews: previews::PreviewSettings,
    /// Whether shells may be opened in running replicas (CAPSTAN_SHELLS).
    shells: bool,
    /// The readers of watched services' usage, one per service.
    usage_readers: Arc<usage::UsageReaders>,
}

/// Each custom domain's last DNS check (by name and CDN use): passed or not, and when.
type DomainChecks = HashMap<(String, bool), (bool, OffsetDateTime)>;

/// The API tokens an organization may hold unless the operator says otherwise.
pub const DEFAULT_MAX_API_TOKENS: u64 = 100;

impl Capstan {
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>) -> Self {
        Self {
            store,
            clock,
            git: None,
            public_url: "http://127.0.0.1:8080".into(),
            resolver: Arc::new(crate::dns::NoResolver),
            domain_target: None,
            bounds: crate::model::Bounds::default(),
            docker_hosts: crate::model::DockerHostsPolicy::default(),
            observer: Arc::new(crate::observe::NoObserver),
            outbound: None,
            engine_controls: Arc::default(),
            max_api_tokens: DEFAULT_MAX_API_TOKENS,
            engine: None,
            checkouts: None,
            terraform_versions: terraform::DEFAULT_TERRAFORM_VERSIONS
                .iter()
                .map(|(e, v)| (*e, (*v).to_string()))
                .collect(),
            router: None,
            domain_checks: Arc::default(),
            previews: previews::PreviewSettings::default(),
            shells: true,
            usage_readers: Arc::default(),
        }
    }

    /// Links name the router's host names (it serves services' public ports).
    pub fn with_router(mut self, router: crate::model::RouterAddress) -> Self {
        self.router = Some(router);
        self
    }

    /// Offers these terraform engines and versions.
    pub fn with_terraform_versions(
        mut self,
        versions: Vec<(crate::model::TerraformEngine, String)>,
    ) -> Self {
        self.terraform_versions = versions;
        self
    }

    /// Reads git repositories (Dockerfiles, directories, commits) through `checkouts`.
    pub fn with_checkouts(mut self, checkouts: Arc<dyn crate::git::Checkouts>) -> Self {
        self.checkouts = Some(checkouts);
        self
    }

    /// Acts on what `engine` runs outside deployments too.
    pub fn with_engine(mut self, engine: Arc<dyn crate::engine::Engine>) -> Self {
        self.engine = Some(engine);
        self
    }

    /// Lets an organization hold at most `max` API tokens (created through the API).
    pub fn with_shells(mut self, shells: bool) -> Self {
        self.shells = shells;
        self
    }

    pub fn with_previews(mut self, previews: previews::PreviewSettings) -> Self {
        self.previews = previews;
        self
    }

    pub fn with_max_api_tokens(mut self, max: u64) -> Self {
        self.max_api_tokens = max;
        self
    }

    /// Reads time from `clock`.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Reports how deployments end to `observer`.
    pub fn with_observer(mut self, observer: Arc<dyn crate::observe::Observer>) -> Self {
        self.observer = observer;
        self
    }

    /// How many deployment requests wait and run, across the installation.
    pub async fn queue_depth(&self) -> DomainResult<crate::ports::QueueDepth> {
        Ok(self.store.queue_depth().await?)
    }

    /// Checks custom domains with `resolver` against `target` (a host name or an address).
    pub fn with_domain_check(
        mut self,
        resolver: Arc<dyn crate::dns::Resolver>,
        target: Option<String>,
    ) -> Self {
        self.resolver = resolver;
        self.domain_target = target.filter(|t| !t.trim().is_empty());
        self
    }

    /// With the operator's rules on where an organization may point a cluster.
    pub fn with_docker_hosts(mut self, policy: crate::model::DockerHostsPolicy) -> Self {
        self.docker_hosts = policy;
        self
    }

    /// With the operator's bounds on what one service may ask.
    pub fn with_bounds(mut self, bounds: crate::model::Bounds) -> Self {
        self.bounds = bounds;
        self
    }

    /// The host name or address custom domains must point at, when configured.
    pub fn domain_target(&self) -> Option<&str> {
        self.domain_target.as_deref()
    }

    /// The address clients reach this API at.
    pub fn with_public_url(mut self, url: &str) -> Self {
        self.public_url = url.trim_end_matches('/').to_string();
        self
    }

    /// With the git providers, for webhook status, repair and delivery.
    pub fn with_git(mut self, git: GitIntegration) -> Self {
        self.git = Some(git);
        self
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// What background tasks wait on: rung as the store commits changes.
    pub fn changes(&self) -> &crate::changes::Changes {
        self.store.changes()
    }

    fn now(&self) -> OffsetDateTime {
        self.clock.now()
    }

    /// Completes when the clock is moved (a manual clock's), for tasks that sleep until an hour.
    pub fn clock_moved(&self) -> Option<crate::changes::Rung<'_>> {
        self.clock.moved()
    }

    /// How long from the clock's now until `at` (zero once it is past).
    pub fn until(&self, at: OffsetDateTime) -> std::time::Duration {
        (at - self.now()).try_into().unwrap_or_default()
    }

    /// How many times this process has used a database connection (metrics).
    pub fn connections_lent(&self) -> u64 {
        self.store.connections_lent()
    }

    /// Whether the store answers (for readiness probes).
    pub async fn ready(&self) -> DomainResult<()> {
        self.store.ping().await.map_err(Into::into)
    }

    /// A unit of work for reads.
    async fn reading(&self) -> DomainResult<Box<dyn Tx>> {
        Ok(self.store.read().await?)
    }

    /// A unit of work for reads that must agree with each other (statuses).
    async fn snapshot(&self) -> DomainResult<Box<dyn Tx>> {
        Ok(self.store.snapshot().await?)
    }

    /// Loads a record and checks the principal may perform `action` on it:
    /// unknown id: 404; another organization's or a role that does not allow it: 403.
    /// In a write unit the record stays locked until the unit ends.
    async fn load<T: Record>(
        &self,
        tx: &mut Unit,
        p: &Principal,
        id: T::Id,
        action: Action,
    ) -> DomainResult<T>
    where
        dyn Tx: Repo<T>,
    {
        admitted(p, Repo::<T>::get(tx, id).await?, action)
    }

    /// Checks the principal may perform `action` on `parent`, whose children `page` holds:
    /// children carry their parent's organization, so the parent is read only when the page
    /// has none (an unknown parent answers 404, not an empty page). A list costs one read.
    async fn authorize_children<P: Record, T: Record>(
        &self,
        tx: &mut Unit,
        p: &Principal,
        parent: P::Id,
        page: &Page<T>,
        action: Action,
    ) -> DomainResult<()>
    where
        dyn Tx: Repo<P>,
    {
        match page.items.first() {
            Some(child) => Ok(p.authorize(child.organization_id(), action)?),
            None => self.load::<P>(tx, p, parent, action).await.map(drop),
        }
    }

    /// As `load`, for paths that also name the organization: a record that is not in that
    /// organization is not found there.
    async fn load_in_org<T: Record>(
        &self,
        tx: &mut Unit,
        p: &Principal,
        org: crate::ids::OrganizationId,
        id: T::Id,
        action: Action,
    ) -> DomainResult<T>
    where
        dyn Tx: Repo<T>,
    {
        self.load::<crate::model::Organization>(tx, p, org, Action::ReadOrganization)
            .await?;
        let item: T = self.load(tx, p, id, action).await?;
        if item.organization_id() != org {
            return Err(DomainError::NotFound(T::KIND));
        }
        Ok(item)
    }

    /// The records with these ids (repeated or unknown ids allowed), by id, in one query.
    ///
    /// Not an `async fn`: the ids are collected before the future is made, so it does not hold
    /// the caller's iterator, whose borrows would defeat the compiler's proof that the work
    /// of a unit is `Send` (see [`Capstan::in_unit`]).
    fn by_id<'a, T: Record>(
        &'a self,
        tx: &'a mut Unit,
        ids: impl IntoIterator<Item = T::Id>,
    ) -> impl Future<Output = DomainResult<HashMap<T::Id, T>>> + Send + 'a
    where
        dyn Tx: Repo<T>,
    {
        let mut ids: Vec<T::Id> = ids.into_iter().collect();
        ids.sort();
        ids.dedup();
        async move {
            if ids.is_empty() {
                return Ok(HashMap::new());
            }
            Ok(Repo::<T>::get_many(tx, &ids)
                .await?
                .into_iter()
                .map(|r| (r.id(), r))
                .collect())
        }
    }

    async fn list<T: Record>(
        &self,
        tx: &mut Unit,
        parent: T::Parent,
        page: PageRequest,
    ) -> DomainResult<Page<T>>
    where
        dyn Tx: Repo<T>,
    {
        Ok(Repo::<T>::list(tx, parent, page).await?)
    }

    /// Holds each of `projects` (repeats allowed), in id order: units that hold several
    /// projects take them in one order, so they cannot wait on each other.
    async fn lock_projects(
        &self,
        tx: &mut Unit,
        projects: impl IntoIterator<Item = crate::ids::ProjectId> + Send,
    ) -> DomainResult<()> {
        let held: std::collections::BTreeSet<_> = projects.into_iter().collect();
        for project in held {
            tx.lock(crate::ports::Scope::Project(project)).await?;
        }
        Ok(())
    }

    /// Every record under `parent`, page after page.
    async fn every<T: Record>(&self, tx: &mut Unit, parent: T::Parent) -> DomainResult<Vec<T>>
    where
        dyn Tx: Repo<T>,
    {
        let mut out = Vec::new();
        for number in 1.. {
            let request = PageRequest::new(number, crate::pagination::MAX_PAGE_SIZE)?;
            let page = Repo::<T>::list(tx, parent, request).await?;
            let last = page.items.is_empty();
            out.extend(page.items);
            if last || out.len() as u64 >= page.total_count {
                break;
            }
        }
        Ok(out)
    }

    async fn insert<T: Record + Named>(
        &self,
        tx: &mut Unit,
        item: &T,
        parent: &'static str,
    ) -> DomainResult<()>
    where
        dyn Tx: Repo<T>,
    {
        Repo::<T>::insert(tx, item)
            .await
            .map_err(|e| name_conflict::<T>(e, item.name(), parent))
    }

    async fn update<T: Record + Named>(
        &self,
        tx: &mut Unit,
        item: &T,
        parent: &'static str,
    ) -> DomainResult<()>
    where
        dyn Tx: Repo<T>,
    {
        Repo::<T>::update(tx, item)
            .await
            .map_err(|e| name_conflict::<T>(e, item.name(), parent))
    }

    /// Deletes a record; `in_use` says what still refers to it when the store refuses.
    async fn delete<T: Record>(
        &self,
        tx: &mut Unit,
        id: T::Id,
        in_use: &'static str,
    ) -> DomainResult<()>
    where
        dyn Tx: Repo<T>,
    {
        Repo::<T>::delete(tx, id).await.map_err(|e| match e {
            StoreError::InUse => DomainError::Conflict(Conflict::InUse {
                kind: T::KIND,
                by: in_use,
            }),
            StoreError::NotFound => DomainError::NotFound(T::KIND),
            other => other.into(),
        })
    }
}

/// Records whose name is unique (case-insensitively) under their parent.
pub trait Named {
    fn name(&self) -> &str;
}

macro_rules! named {
    ($($t:ty),*) => {$(impl Named for $t { fn name(&self) -> &str { self.name.as_str() } })*};
}
named!(
    crate::model::Project,
    crate::model::Cluster,
    crate::model::Environment,
    crate::model::Service,
    crate::model::ContainerRegistry,
    crate::model::GitToken,
    crate::model::HelmRepository,
    crate::model::CloudCredentials,
    crate::model::ApiToken,
    crate::model::Organization,
    crate::model::DeploymentStage,
    crate::model::MetadataGroup,
    crate::model::ProjectDeploymentRule
);

fn name_conflict<T: Record>(e: StoreError, name: &str, parent: &'static str) -> DomainError {
    match e {
        StoreError::Duplicate => DomainError::Conflict(Conflict::NameTaken {
            kind: T::KIND,
            name: name.to_string(),
            parent,
        }),
        StoreError::NotFound => DomainError::NotFound(T::KIND),
        other => other.into(),
    }
}

/// A record read by id as every path to one answers it: unknown, 404; another organization's, or
/// a role that does not allow `action`, 403.
fn admitted<T: Record>(p: &Principal, found: Option<T>, action: Action) -> DomainResult<T> {
    let item = found.ok_or(DomainError::NotFound(T::KIND))?;
    p.authorize(item.organization_id(), action)?;
    Ok(item)
}
