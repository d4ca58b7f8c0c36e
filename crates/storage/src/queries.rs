//! Queries beyond the generic repository: token lookup, service counts, health.

use crate::db::{
    db_run, into_page, left_joined, load_by_ids, page_rows, store_error, Db, LoadRows,
};
use crate::mark_changed::MarkChanged;
use crate::rows::*;
use crate::schema::{
    api_tokens, custom_domains, environments, service_metadata_groups, services, variables,
};
use crate::session::Session;
use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use domain::error::StoreResult;
use domain::ids::*;
use domain::model::*;
use domain::pagination::{Page, PageRequest};
use domain::ports::{
    Health, ServiceFilter, ServiceLink, ServiceQueries, TokenStore, VariableQueries,
};
use std::collections::HashMap;

#[async_trait]
impl TokenStore for Db {
    async fn find_token_by_hash(&self, hash: &str) -> StoreResult<Option<ApiToken>> {
        let generation = match self.tokens.as_ref().map(|cache| cache.get(hash)) {
            Some((Some(token), _)) => return Ok(Some(token)),
            Some((None, generation)) => Some(generation),
            None => None,
        };
        let mut session = self.session().await?;
        let (conn, cipher) = session.parts()?;
        let row: Option<ApiTokenRow> = db_run!(*conn, |c| api_tokens::table
            .filter(api_tokens::token_hash.eq(hash))
            .select(ApiTokenRow::as_select())
            .first(c)
            .await
            .optional())
        .map_err(store_error)?;
        let token = row.map(|r| ApiToken::from_row(r, cipher)).transpose()?;
        if let (Some(cache), Some(generation), Some(token)) = (&self.tokens, generation, &token) {
            cache.remember(hash, token, generation);
        }
        Ok(token)
    }
}

fn count_map<K: std::hash::Hash + Eq>(rows: Vec<(Option<K>, i64)>) -> HashMap<K, u64> {
    rows.into_iter()
        .filter_map(|(k, n)| k.map(|k| (k, n.max(0) as u64)))
        .collect()
}

#[async_trait]
impl ServiceQueries for Session {
    async fn service_group_ids(
        &mut self,
        ids: &[ServiceId],
    ) -> StoreResult<Vec<(ServiceId, MetadataGroupId)>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        use service_metadata_groups::dsl::{group_id, service_id};
        let (conn, _) = self.parts()?;
        load_by_ids!(*conn, ids, service_id, |by_service| {
            service_metadata_groups::table
                .filter(by_service)
                .select((service_id, group_id))
        })
        .map_err(store_error)
    }

    async fn service_with_group_ids(
        &mut self,
        service: ServiceId,
    ) -> StoreResult<Option<(Service, Vec<MetadataGroupId>)>> {
        use service_metadata_groups::dsl::{group_id, service_id};
        let (conn, cipher) = self.parts()?;
        // A row per attached group (the service's columns repeated), or one with no group.
        let rows: Vec<(crate::rows::ServiceRow, Option<MetadataGroupId>)> =
            db_run!(*conn, |c| LoadRows::load_rows(
                c,
                services::table
                    .left_join(service_metadata_groups::table.on(service_id.eq(services::id)))
                    .filter(services::id.eq(service))
                    .select((crate::rows::ServiceRow::as_select(), group_id.nullable()))
            )
            .await)
            .map_err(store_error)?;
        let Some((row, groups)) = left_joined(rows) else {
            return Ok(None);
        };
        Ok(Some((Service::from_row(row, cipher)?, groups)))
    }

    async fn set_service_groups(
        &mut self,
        service: ServiceId,
        groups: &[MetadataGroupId],
    ) -> StoreResult<()> {
        let (conn, _) = self.parts()?;
        db_run!(*conn, |c| diesel::delete(
            service_metadata_groups::table.filter(service_metadata_groups::service_id.eq(service))
        )
        .execute(c)
        .await)
        .map_err(store_error)?;
        for group in groups {
            db_run!(*conn, |c| diesel::insert_into(
                service_metadata_groups::table
            )
            .values((
                service_metadata_groups::service_id.eq(service),
                service_metadata_groups::group_id.eq(group),
            ))
            .execute(c)
            .await)
            .map_err(store_error)?;
        }
        Ok(())
    }

    async fn group_service_ids(&mut self, group: MetadataGroupId) -> StoreResult<Vec<ServiceId>> {
        let (conn, _) = self.parts()?;
        db_run!(*conn, |c| service_metadata_groups::table
            .filter(service_metadata_groups::group_id.eq(group))
            .select(service_metadata_groups::service_id)
            .order(service_metadata_groups::service_id)
            .load(c)
            .await)
        .map_err(store_error)
    }

    async fn custom_domain_named(&mut self, domain: &str) -> StoreResult<Option<CustomDomain>> {
        let domain = domain.to_string();
        let (conn, cipher) = self.parts()?;
        let row: Option<CustomDomainRow> = db_run!(*conn, |c| custom_domains::table
            .filter(custom_domains::domain.eq(domain.clone()))
            .select(CustomDomainRow::as_select())
            .first(c)
            .await
            .optional())
        .map_err(store_error)?;
        row.map(|r| CustomDomain::from_row(r, cipher)).transpose()
    }

    async fn custom_domains_of(
        &mut self,
        services: &[ServiceId],
    ) -> StoreResult<Vec<CustomDomain>> {
        let services = services.to_vec();
        let (conn, cipher) = self.parts()?;
        let rows: Vec<CustomDomainRow> = db_run!(*conn, |c| custom_domains::table
            .filter(custom_domains::service_id.eq_any(services.clone()))
            .select(CustomDomainRow::as_select())
            .order(custom_domains::domain)
            .load(c)
            .await)
        .map_err(store_error)?;
        rows.into_iter()
            .map(|r| CustomDomain::from_row(r, cipher))
            .collect()
    }

    async fn custom_domain_names(&mut self) -> StoreResult<Vec<String>> {
        let (conn, _) = self.parts()?;
        db_run!(*conn, |c| custom_domains::table
            .select(custom_domains::domain)
            .order(custom_domains::domain)
            .load(c)
            .await)
        .map_err(store_error)
    }

    async fn list_services_of_kind(
        &mut self,
        environment: EnvironmentId,
        kind: ServiceKind,
        out_of_date_only: bool,
        page: PageRequest,
    ) -> StoreResult<Page<Service>> {
        let (conn, cipher) = self.parts()?;
        // Not boxed: diesel finds a typed query's prepared statement by its type, a boxed one
        // by SQL text it writes out again on every run; this is the list clients read most.
        let of_kind = || {
            services::table
                .filter(services::environment_id.eq(environment))
                .filter(services::kind.eq(kind))
        };
        let (rows, total): (Vec<ServiceRow>, i64) = db_run!(*conn, |c| {
            if out_of_date_only {
                let out_of_date = DeploymentStatus::OutOfDate;
                let filtered = || of_kind().filter(services::deployment_status.eq(out_of_date));
                page_rows!(c, page, services, ServiceRow, filtered)
            } else {
                page_rows!(c, page, services, ServiceRow, of_kind)
            }
        })?;
        into_page::<Service>(rows, total, page, cipher)
    }

    async fn count_services_by(
        &mut self,
        link: ServiceLink,
        ids: &[uuid::Uuid],
    ) -> StoreResult<HashMap<uuid::Uuid, u64>> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let keys: Vec<StrictUuid> = ids.iter().copied().map(StrictUuid).collect();
        let (conn, _) = self.parts()?;
        macro_rules! count_by {
            ($column:expr) => {
                db_run!(*conn, |c| services::table
                    .filter($column.eq_any(&keys))
                    .group_by($column)
                    .select(($column, diesel::dsl::count_star()))
                    .load::<(Option<StrictUuid>, i64)>(c)
                    .await)
            };
        }
        let rows = match link {
            ServiceLink::Registry => count_by!(services::registry_id),
            ServiceLink::GitToken => count_by!(services::git_token_id),
            ServiceLink::HelmRepository => count_by!(services::helm_repository_id),
            ServiceLink::MetadataGroup => db_run!(*conn, |c| service_metadata_groups::table
                .filter(service_metadata_groups::group_id.eq_any(&keys))
                .group_by(service_metadata_groups::group_id)
                .select((
                    service_metadata_groups::group_id.nullable(),
                    diesel::dsl::count_star()
                ))
                .load::<(Option<StrictUuid>, i64)>(c)
                .await),
        }
        .map_err(store_error)?;
        let rows = rows.into_iter().map(|(k, n)| (k.map(|k| k.0), n));
        Ok(count_map(rows.collect()))
    }

    async fn pull_request_previews(&mut self) -> StoreResult<Vec<Environment>> {
        let (conn, cipher) = self.parts()?;
        let rows: Vec<EnvironmentRow> = db_run!(*conn, |c| environments::table
            .filter(environments::pull_request.is_not_null())
            .order((environments::created_at, environments::id))
            .select(EnvironmentRow::as_select())
            .load(c)
            .await)
        .map_err(store_error)?;
        rows.into_iter()
            .map(|r| Environment::from_row(r, cipher))
            .collect()
    }

    async fn count_environments_by_project(
        &mut self,
        projects: &[ProjectId],
    ) -> StoreResult<HashMap<ProjectId, u64>> {
        if projects.is_empty() {
            return Ok(HashMap::new());
        }
        let (conn, _) = self.parts()?;
        let rows: Vec<(ProjectId, i64)> = db_run!(*conn, |c| environments::table
            .filter(environments::project_id.eq_any(projects))
            .group_by(environments::project_id)
            .select((environments::project_id, diesel::dsl::count_star()))
            .load(c)
            .await)
        .map_err(store_error)?;
        Ok(count_map(
            rows.into_iter().map(|(k, n)| (Some(k), n)).collect(),
        ))
    }

    async fn find_services(
        &mut self,
        filter: &ServiceFilter,
        page: PageRequest,
    ) -> StoreResult<Page<Service>> {
        let (conn, cipher) = self.parts()?;
        let (rows, total): (Vec<ServiceRow>, i64) = db_run!(*conn, |c| {
            let filtered = || {
                let mut q = services::table.into_boxed();
                if let Some(v) = filter.organization {
                    q = q.filter(services::organization_id.eq(v));
                }
                if let Some(v) = filter.project {
                    q = q.filter(services::project_id.eq(v));
                }
                if let Some(v) = filter.environment {
                    q = q.filter(services::environment_id.eq(v));
                }
                if let Some(v) = filter.cluster {
                    q = q.filter(
                        services::environment_id.eq_any(
                            environments::table
                                .filter(environments::cluster_id.eq(v))
                                .select(environments::id),
                        ),
                    );
                }
                if let Some(v) = filter.registry {
                    q = q.filter(services::registry_id.eq(v));
                }
                if let Some(v) = filter.git_token {
                    q = q.filter(services::git_token_id.eq(v));
                }
                if let Some(v) = filter.helm_repository {
                    q = q.filter(services::helm_repository_id.eq(v));
                }
                if let Some(v) = filter.kind {
                    q = q.filter(services::kind.eq(v));
                }
                q
            };
            page_rows!(c, page, services, ServiceRow, filtered)
        })?;
        into_page::<Service>(rows, total, page, cipher)
    }

    async fn find_environments(
        &mut self,
        organization: OrganizationId,
        cluster: Option<ClusterId>,
        page: PageRequest,
    ) -> StoreResult<Page<Environment>> {
        let (conn, cipher) = self.parts()?;
        let (rows, total): (Vec<EnvironmentRow>, i64) = db_run!(*conn, |c| {
            let filtered = || {
                let mut q = environments::table
                    .filter(environments::organization_id.eq(organization))
                    .into_boxed();
                if let Some(v) = cluster {
                    q = q.filter(environments::cluster_id.eq(v));
                }
                q
            };
            page_rows!(c, page, environments, EnvironmentRow, filtered)
        })?;
        into_page::<Environment>(rows, total, page, cipher)
    }
}

#[async_trait]
impl VariableQueries for Session {
    async fn list_variables(
        &mut self,
        parents: &[uuid::Uuid],
        secret: Option<bool>,
        page: PageRequest,
    ) -> StoreResult<Page<Variable>> {
        let parents: Vec<StrictUuid> = parents.iter().copied().map(StrictUuid).collect();
        let (conn, cipher) = self.parts()?;
        let (rows, total): (Vec<VariableRow>, i64) = db_run!(*conn, |c| {
            let filtered = || {
                let q = variables::table
                    .filter(variables::parent_id.eq_any(parents.clone()))
                    .into_boxed();
                match secret {
                    Some(s) => q.filter(variables::is_secret.eq(s)),
                    None => q,
                }
            };
            page_rows!(c, page, variables, VariableRow, filtered)
        })?;
        into_page::<Variable>(rows, total, page, cipher)
    }

    async fn database_link_variables(&mut self, database: ServiceId) -> StoreResult<Vec<Variable>> {
        let (conn, cipher) = self.parts()?;
        let rows: Vec<VariableRow> = db_run!(*conn, |c| variables::table
            .filter(variables::linked_database_id.eq(database))
            .order((variables::created_at, variables::id))
            .select(VariableRow::as_select())
            .load(c)
            .await)
        .map_err(store_error)?;
        rows.into_iter()
            .map(|r| Variable::from_row(r, cipher))
            .collect()
    }

    async fn mark_out_of_date(
        &mut self,
        reach: VariableParent,
        now: time::OffsetDateTime,
    ) -> StoreResult<u64> {
        let (conn, _) = self.parts()?;
        // One statement, so one round trip inside the caller's unit.
        let n = match reach {
            VariableParent::Project(id) => {
                let mark = MarkChanged::<services::project_id>::new(id.to_string(), now);
                db_run!(*conn, |c| mark.execute(c).await)
            }
            VariableParent::Environment(id) => {
                let mark = MarkChanged::<services::environment_id>::new(id.to_string(), now);
                db_run!(*conn, |c| mark.execute(c).await)
            }
            VariableParent::Service(id, _) => {
                let mark = MarkChanged::<services::id>::new(id.to_string(), now);
                db_run!(*conn, |c| mark.execute(c).await)
            }
        }
        .map_err(store_error)?;
        Ok(n as u64)
    }
}

#[async_trait]
impl Health for Db {
    async fn ping(&self) -> StoreResult<()> {
        self.read(|mut conn| async move {
            db_run!(conn, |c| diesel::sql_query("SELECT 1").execute(c).await)
                .map_err(store_error)?;
            Ok(())
        })
        .await
    }

    fn connections_lent(&self) -> u64 {
        std::sync::atomic::AtomicU64::load(&self.lent, std::sync::atomic::Ordering::Relaxed)
    }
}
