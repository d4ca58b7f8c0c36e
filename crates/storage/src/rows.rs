//! Row types of the portable schema and their conversions to and from domain records.

use crate::schema::*;
use diesel::prelude::*;
use domain::auth::Role;
use domain::error::{StoreError, StoreResult};
use domain::model::*;
use domain::secret::Secret;
use domain::validate::name_key;
use std::str::FromStr;
use time::{OffsetDateTime, PrimitiveDateTime, UtcOffset};

pub fn ts(t: OffsetDateTime) -> PrimitiveDateTime {
    let utc = t.to_offset(UtcOffset::UTC);
    PrimitiveDateTime::new(utc.date(), utc.time())
}

pub fn utc(t: PrimitiveDateTime) -> OffsetDateTime {
    t.assume_utc()
}

/// Parses a stored value (id or enum); a failure means the row was written by something else.
pub fn parse<T: FromStr>(column: &str, value: &str) -> StoreResult<T> {
    value
        .parse()
        .map_err(|_| StoreError::Other(format!("unreadable {column} in store: {value:?}")))
}

fn opt_parse<T: FromStr>(column: &str, value: Option<&str>) -> StoreResult<Option<T>> {
    value.map(|v| parse(column, v)).transpose()
}

macro_rules! row {
    ($name:ident, $table:ident { $($field:ident : $ty:ty),* $(,)? }) => {
        #[derive(Debug, Clone, Queryable, Selectable, Insertable, AsChangeset)]
        #[diesel(table_name = $table, treat_none_as_null = true)]
        #[diesel(check_for_backend(diesel::pg::Pg, diesel::sqlite::Sqlite))]
        pub struct $name { $(pub $field: $ty),* }
    };
}

row!(OrganizationRow, organizations {
    id: String, name: String, description: Option<String>, plan: String,
    created_at: PrimitiveDateTime, updated_at: PrimitiveDateTime,
});

impl From<&Organization> for OrganizationRow {
    fn from(o: &Organization) -> Self {
        Self {
            id: o.id.to_string(),
            name: o.name.clone(),
            description: o.description.clone(),
            plan: o.plan.as_str().into(),
            created_at: ts(o.created_at),
            updated_at: ts(o.updated_at),
        }
    }
}

impl TryFrom<OrganizationRow> for Organization {
    type Error = StoreError;
    fn try_from(r: OrganizationRow) -> StoreResult<Self> {
        Ok(Self {
            id: parse("id", &r.id)?,
            name: r.name,
            description: r.description,
            plan: parse("plan", &r.plan)?,
            created_at: utc(r.created_at),
            updated_at: utc(r.updated_at),
        })
    }
}

row!(ApiTokenRow, api_tokens {
    id: String, organization_id: String, name: String, description: Option<String>, role: String,
    token_hash: String, created_at: PrimitiveDateTime, updated_at: PrimitiveDateTime,
    last_used_at: Option<PrimitiveDateTime>,
});

impl From<&ApiToken> for ApiTokenRow {
    fn from(t: &ApiToken) -> Self {
        Self {
            id: t.id.to_string(),
            organization_id: t.organization_id.to_string(),
            name: t.name.clone(),
            description: t.description.clone(),
            role: t.role.name().into(),
            token_hash: t.token_hash.clone(),
            created_at: ts(t.created_at),
            updated_at: ts(t.updated_at),
            last_used_at: t.last_used_at.map(ts),
        }
    }
}

impl TryFrom<ApiTokenRow> for ApiToken {
    type Error = StoreError;
    fn try_from(r: ApiTokenRow) -> StoreResult<Self> {
        Ok(Self {
            id: parse("id", &r.id)?,
            organization_id: parse("organization_id", &r.organization_id)?,
            name: r.name,
            description: r.description,
            role: Role::from_name(&r.role)
                .ok_or_else(|| StoreError::Other(format!("unreadable role {:?}", r.role)))?,
            token_hash: r.token_hash,
            created_at: utc(r.created_at),
            updated_at: utc(r.updated_at),
            last_used_at: r.last_used_at.map(utc),
        })
    }
}

row!(
    CredentialsRow,
    cloud_credentials {
        id: String,
        organization_id: String,
        name: String,
        name_key: String,
        access_key_id: String,
        secret_access_key: String,
        created_at: PrimitiveDateTime,
        updated_at: PrimitiveDateTime,
    }
);

impl From<&CloudCredentials> for CredentialsRow {
    fn from(c: &CloudCredentials) -> Self {
        Self {
            id: c.id.to_string(),
            organization_id: c.organization_id.to_string(),
            name: c.name.clone(),
            name_key: name_key(&c.name),
            access_key_id: c.access_key_id.clone(),
            secret_access_key: c.secret_access_key.expose().to_string(),
            created_at: ts(c.created_at),
            updated_at: ts(c.updated_at),
        }
    }
}

impl TryFrom<CredentialsRow> for CloudCredentials {
    type Error = StoreError;
    fn try_from(r: CredentialsRow) -> StoreResult<Self> {
        Ok(Self {
            id: parse("id", &r.id)?,
            organization_id: parse("organization_id", &r.organization_id)?,
            name: r.name,
            access_key_id: r.access_key_id,
            secret_access_key: Secret::new(r.secret_access_key),
            created_at: utc(r.created_at),
            updated_at: utc(r.updated_at),
        })
    }
}

row!(ClusterRow, clusters {
    id: String, organization_id: String, name: String, name_key: String,
    description: Option<String>, region: String, cloud_provider: String,
    created_at: PrimitiveDateTime, updated_at: PrimitiveDateTime,
});

impl From<&Cluster> for ClusterRow {
    fn from(c: &Cluster) -> Self {
        Self {
            id: c.id.to_string(),
            organization_id: c.organization_id.to_string(),
            name: c.name.clone(),
            name_key: name_key(&c.name),
            description: c.description.clone(),
            region: c.region.clone(),
            cloud_provider: c.cloud_provider.as_str().into(),
            created_at: ts(c.created_at),
            updated_at: ts(c.updated_at),
        }
    }
}

impl TryFrom<ClusterRow> for Cluster {
    type Error = StoreError;
    fn try_from(r: ClusterRow) -> StoreResult<Self> {
        Ok(Self {
            id: parse("id", &r.id)?,
            organization_id: parse("organization_id", &r.organization_id)?,
            name: r.name,
            description: r.description,
            region: r.region,
            cloud_provider: parse("cloud_provider", &r.cloud_provider)?,
            created_at: utc(r.created_at),
            updated_at: utc(r.updated_at),
        })
    }
}

row!(ProjectRow, projects {
    id: String, organization_id: String, name: String, name_key: String,
    description: Option<String>, created_at: PrimitiveDateTime, updated_at: PrimitiveDateTime,
});

impl From<&Project> for ProjectRow {
    fn from(p: &Project) -> Self {
        Self {
            id: p.id.to_string(),
            organization_id: p.organization_id.to_string(),
            name: p.name.clone(),
            name_key: name_key(&p.name),
            description: p.description.clone(),
            created_at: ts(p.created_at),
            updated_at: ts(p.updated_at),
        }
    }
}

impl TryFrom<ProjectRow> for Project {
    type Error = StoreError;
    fn try_from(r: ProjectRow) -> StoreResult<Self> {
        Ok(Self {
            id: parse("id", &r.id)?,
            organization_id: parse("organization_id", &r.organization_id)?,
            name: r.name,
            description: r.description,
            created_at: utc(r.created_at),
            updated_at: utc(r.updated_at),
        })
    }
}

row!(EnvironmentRow, environments {
    id: String, organization_id: String, project_id: String, cluster_id: String, name: String,
    name_key: String, mode: String, last_updated_by: Option<String>,
    created_at: PrimitiveDateTime, updated_at: PrimitiveDateTime,
});

impl From<&Environment> for EnvironmentRow {
    fn from(e: &Environment) -> Self {
        Self {
            id: e.id.to_string(),
            organization_id: e.organization_id.to_string(),
            project_id: e.project_id.to_string(),
            cluster_id: e.cluster_id.to_string(),
            name: e.name.clone(),
            name_key: name_key(&e.name),
            mode: e.mode.as_str().into(),
            last_updated_by: e.last_updated_by.map(|u| u.to_string()),
            created_at: ts(e.created_at),
            updated_at: ts(e.updated_at),
        }
    }
}

impl TryFrom<EnvironmentRow> for Environment {
    type Error = StoreError;
    fn try_from(r: EnvironmentRow) -> StoreResult<Self> {
        Ok(Self {
            id: parse("id", &r.id)?,
            organization_id: parse("organization_id", &r.organization_id)?,
            project_id: parse("project_id", &r.project_id)?,
            cluster_id: parse("cluster_id", &r.cluster_id)?,
            name: r.name,
            mode: parse("mode", &r.mode)?,
            last_updated_by: opt_parse("last_updated_by", r.last_updated_by.as_deref())?,
            created_at: utc(r.created_at),
            updated_at: utc(r.updated_at),
        })
    }
}

row!(RegistryRow, container_registries {
    id: String, organization_id: String, name: String, name_key: String, kind: String, url: String,
    description: Option<String>, cluster_id: Option<String>, config: String, secret_config: String,
    created_at: PrimitiveDateTime, updated_at: PrimitiveDateTime,
});

impl From<&ContainerRegistry> for RegistryRow {
    fn from(r: &ContainerRegistry) -> Self {
        Self {
            id: r.id.to_string(),
            organization_id: r.organization_id.to_string(),
            name: r.name.clone(),
            name_key: name_key(&r.name),
            kind: r.kind.as_str().into(),
            url: r.url.clone(),
            description: r.description.clone(),
            cluster_id: r.cluster_id.map(|c| c.to_string()),
            config: serde_json::to_string(&r.config).unwrap_or_else(|_| "{}".into()),
            secret_config: r.secret_config.expose().to_string(),
            created_at: ts(r.created_at),
            updated_at: ts(r.updated_at),
        }
    }
}

impl TryFrom<RegistryRow> for ContainerRegistry {
    type Error = StoreError;
    fn try_from(r: RegistryRow) -> StoreResult<Self> {
        Ok(Self {
            id: parse("id", &r.id)?,
            organization_id: parse("organization_id", &r.organization_id)?,
            name: r.name,
            kind: parse("kind", &r.kind)?,
            url: r.url,
            description: r.description,
            cluster_id: opt_parse("cluster_id", r.cluster_id.as_deref())?,
            config: serde_json::from_str(&r.config)
                .map_err(|e| StoreError::Other(format!("unreadable registry config: {e}")))?,
            secret_config: Secret::new(r.secret_config),
            created_at: utc(r.created_at),
            updated_at: utc(r.updated_at),
        })
    }
}

row!(GitTokenRow, git_tokens {
    id: String, organization_id: String, name: String, name_key: String, provider: String,
    token: String, description: Option<String>, workspace: Option<String>,
    git_api_url: Option<String>, created_at: PrimitiveDateTime, updated_at: PrimitiveDateTime,
});

impl From<&GitToken> for GitTokenRow {
    fn from(t: &GitToken) -> Self {
        Self {
            id: t.id.to_string(),
            organization_id: t.organization_id.to_string(),
            name: t.name.clone(),
            name_key: name_key(&t.name),
            provider: t.provider.as_str().into(),
            token: t.token.expose().to_string(),
            description: t.description.clone(),
            workspace: t.workspace.clone(),
            git_api_url: t.git_api_url.clone(),
            created_at: ts(t.created_at),
            updated_at: ts(t.updated_at),
        }
    }
}

impl TryFrom<GitTokenRow> for GitToken {
    type Error = StoreError;
    fn try_from(r: GitTokenRow) -> StoreResult<Self> {
        Ok(Self {
            id: parse("id", &r.id)?,
            organization_id: parse("organization_id", &r.organization_id)?,
            name: r.name,
            description: r.description,
            provider: parse("provider", &r.provider)?,
            token: Secret::new(r.token),
            workspace: r.workspace,
            git_api_url: r.git_api_url,
            created_at: utc(r.created_at),
            updated_at: utc(r.updated_at),
        })
    }
}

row!(ServiceRow, services {
    id: String, organization_id: String, project_id: String, environment_id: String, kind: String,
    name: String, name_key: String, description: Option<String>, spec: String,
    registry_id: Option<String>, git_token_id: Option<String>,
    created_at: PrimitiveDateTime, updated_at: PrimitiveDateTime,
});

impl From<&Service> for ServiceRow {
    fn from(s: &Service) -> Self {
        Self {
            id: s.id.to_string(),
            organization_id: s.organization_id.to_string(),
            project_id: s.project_id.to_string(),
            environment_id: s.environment_id.to_string(),
            kind: s.kind().as_str().into(),
            name: s.name.clone(),
            name_key: name_key(&s.name),
            description: s.description.clone(),
            spec: s.spec.to_stored().unwrap_or_else(|_| "{}".into()),
            registry_id: s.spec.registry_id().map(|r| r.to_string()),
            git_token_id: s.spec.git_token_id().map(|t| t.to_string()),
            created_at: ts(s.created_at),
            updated_at: ts(s.updated_at),
        }
    }
}

impl TryFrom<ServiceRow> for Service {
    type Error = StoreError;
    fn try_from(r: ServiceRow) -> StoreResult<Self> {
        let kind: ServiceKind = parse("kind", &r.kind)?;
        Ok(Self {
            id: parse("id", &r.id)?,
            organization_id: parse("organization_id", &r.organization_id)?,
            project_id: parse("project_id", &r.project_id)?,
            environment_id: parse("environment_id", &r.environment_id)?,
            name: r.name,
            description: r.description,
            spec: ServiceSpec::from_stored(kind, &r.spec)
                .map_err(|e| StoreError::Other(format!("{e:?}")))?,
            created_at: utc(r.created_at),
            updated_at: utc(r.updated_at),
        })
    }
}
