//! The generic repository port, implemented once per table by one macro; each query body is
//! written once and runs on both backends.

use crate::db::{db_run, into_page, load_by_ids, page_rows, store_error, LoadRows};
use crate::rows::*;
use crate::schema;
use crate::session::Session;
use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use domain::changes::Change;
use domain::error::{StoreError, StoreResult};
use domain::model::*;
use domain::pagination::{Page, PageRequest};
use domain::ports::Repo;

macro_rules! repo {
    // Deleting these deletes API tokens (an organization takes its tokens with it).
    ($record:ty, $row:ty, $table:ident, |$q:ident, $parent:ident| $filter:expr, deletes_tokens) => {
        repo!(@impl $record, $row, $table, |$q, $parent| $filter, true, None);
    };
    // Writing these changes what the background tasks waiting for `$change` act on.
    ($record:ty, $row:ty, $table:ident, |$q:ident, $parent:ident| $filter:expr, rings $change:ident) => {
        repo!(@impl $record, $row, $table, |$q, $parent| $filter, false, Some(Change::$change));
    };
    ($record:ty, $row:ty, $table:ident, |$q:ident, $parent:ident| $filter:expr) => {
        repo!(@impl $record, $row, $table, |$q, $parent| $filter, false, None);
    };
    (@impl $record:ty, $row:ty, $table:ident, |$q:ident, $parent:ident| $filter:expr, $tokens:literal, $rings:expr) => {
        #[async_trait]
        impl Repo<$record> for Session {
            async fn insert(&mut self, item: &$record) -> StoreResult<()> {
                let (conn, cipher) = self.parts()?;
                let row = item.to_row(cipher)?;
                db_run!(*conn, |c| diesel::insert_into(schema::$table::table)
                    .values(&row)
                    .execute(c)
                    .await)
                .map_err(store_error)?;
                self.rings($rings);
                Ok(())
            }

            async fn get(&mut self, id: <$record as Record>::Id) -> StoreResult<Option<$record>> {
                let (conn, cipher) = self.parts()?;
                let rows: Vec<$row> = db_run!(*conn, |c| LoadRows::load_rows(
                    c,
                    schema::$table::table
                        .find(id)
                        .select(<$row>::as_select())
                        .limit(1)
                )
                .await)
                .map_err(store_error)?;
                let row = rows.into_iter().next();
                row.map(|r| <$record>::from_row(r, cipher)).transpose()
            }

            async fn get_many(
                &mut self,
                ids: &[<$record as Record>::Id],
            ) -> StoreResult<Vec<$record>> {
                if ids.is_empty() {
                    return Ok(Vec::new());
                }
                let (conn, cipher) = self.parts()?;
                let rows: Vec<$row> = load_by_ids!(*conn, ids, schema::$table::id, |by_id| {
                    schema::$table::table
                        .filter(by_id)
                        .select(<$row>::as_select())
                })
                .map_err(store_error)?;
                rows.into_iter()
                    .map(|r| <$record>::from_row(r, cipher))
                    .collect()
            }

            async fn update(&mut self, item: &$record) -> StoreResult<()> {
                let (conn, cipher) = self.parts()?;
                let row = item.to_row(cipher)?;
                let n = db_run!(*conn, |c| diesel::update(
                    schema::$table::table.find(&row.id)
                )
                .set(&row)
                .execute(c)
                .await)
                .map_err(store_error)?;
                if n == 0 {
                    return Err(StoreError::NotFound);
                }
                self.rings($rings);
                Ok(())
            }

            async fn delete(&mut self, id: <$record as Record>::Id) -> StoreResult<()> {
                let (conn, _) = self.parts()?;
                let n = db_run!(*conn, |c| diesel::delete(schema::$table::table.find(id))
                    .execute(c)
                    .await)
                .map_err(store_error)?;
                if n == 0 {
                    return Err(StoreError::NotFound);
                }
                if $tokens {
                    self.tokens_deleted();
                }
                self.rings($rings);
                Ok(())
            }

            async fn list(
                &mut self,
                $parent: <$record as Record>::Parent,
                page: PageRequest,
            ) -> StoreResult<Page<$record>> {
                let (conn, cipher) = self.parts()?;
                let (rows, total): (Vec<$row>, i64) = db_run!(*conn, |c| {
                    use schema::$table;
                    let filtered = || {
                        let $q = $table::table.into_boxed();
                        $filter
                    };
                    page_rows!(c, page, $table, $row, filtered)
                })?;
                into_page::<$record>(rows, total, page, cipher)
            }
        }
    };
}

repo!(
    Organization,
    OrganizationRow,
    organizations,
    |q, _parent| q,
    deletes_tokens
);
repo!(
    ApiToken,
    ApiTokenRow,
    api_tokens,
    |q, org| q.filter(schema::api_tokens::organization_id.eq(org)),
    deletes_tokens
);
repo!(
    CloudCredentials,
    CredentialsRow,
    cloud_credentials,
    |q, org| q.filter(schema::cloud_credentials::organization_id.eq(org))
);
// A cluster's deployment is queued on the cluster itself.
repo!(Cluster, ClusterRow, clusters, |q, org| q
    .filter(schema::clusters::organization_id.eq(org)), rings Queue);
repo!(Project, ProjectRow, projects, |q, org| q
    .filter(schema::projects::organization_id.eq(org)));
repo!(Environment, EnvironmentRow, environments, |q, project| q
    .filter(schema::environments::project_id.eq(project)));
repo!(
    ContainerRegistry,
    RegistryRow,
    container_registries,
    |q, org| q.filter(schema::container_registries::organization_id.eq(org))
);
repo!(
    HelmRepository,
    HelmRepositoryRow,
    helm_repositories,
    |q, org| q.filter(schema::helm_repositories::organization_id.eq(org))
);
repo!(GitToken, GitTokenRow, git_tokens, |q, org| q
    .filter(schema::git_tokens::organization_id.eq(org)));
repo!(
    DatabaseBackup,
    DatabaseBackupRow,
    database_backups,
    |q, database| q.filter(schema::database_backups::database_id.eq(database))
);
repo!(Service, ServiceRow, services, |q, env| q
    .filter(schema::services::environment_id.eq(env)));
repo!(Variable, VariableRow, variables, |q, parent| q.filter(
    schema::variables::parent_id.eq(domain::ids::StrictUuid(parent))
));
repo!(
    DeploymentRequest,
    DeploymentRequestRow,
    deployment_requests,
    |q, service| q.filter(schema::deployment_requests::service_id.eq(service)),
    rings Queue
);
repo!(
    MetadataGroup,
    MetadataGroupRow,
    metadata_groups,
    |q, org| q.filter(schema::metadata_groups::organization_id.eq(org))
);
repo!(
    CustomDomain,
    CustomDomainRow,
    custom_domains,
    |q, service| q.filter(schema::custom_domains::service_id.eq(service))
);
repo!(
    DeploymentRestriction,
    DeploymentRestrictionRow,
    deployment_restrictions,
    |q, service| q.filter(schema::deployment_restrictions::service_id.eq(service))
);
repo!(Invitation, InvitationRow, invitations, |q, org| q
    .filter(schema::invitations::organization_id.eq(org)));
repo!(
    DeploymentStage,
    DeploymentStageRow,
    deployment_stages,
    |q, env| q.filter(schema::deployment_stages::environment_id.eq(env))
);
repo!(
    ProjectDeploymentRule,
    ProjectDeploymentRuleRow,
    project_deployment_rules,
    |q, project| q.filter(schema::project_deployment_rules::project_id.eq(project)),
    rings Rules
);
repo!(
    EnvironmentDeploymentRule,
    EnvironmentDeploymentRuleRow,
    environment_deployment_rules,
    |q, environment| q.filter(schema::environment_deployment_rules::id.eq(environment)),
    rings Rules
);
repo!(
    OrganizationWebhook,
    OrganizationWebhookRow,
    organization_webhooks,
    |q, org| q.filter(schema::organization_webhooks::organization_id.eq(org))
);
repo!(
    WebhookAttempt,
    WebhookAttemptRow,
    webhook_attempts,
    |q, webhook| q.filter(schema::webhook_attempts::webhook_id.eq(webhook))
);
