//! Row types of the portable schema and their conversions to and from domain records.
//!
//! Ids and closed values are held as the domain's own types (its `diesel` feature), which
//! their text columns read and write as the same text the API shows: nothing here parses them.

use crate::cipher::Cipher;
use crate::schema::*;
use diesel::prelude::*;
use domain::auth::Role;
use domain::error::{StoreError, StoreResult};
use domain::ids::*;
use domain::model::Name;
use domain::model::*;
use domain::secret::Secret;
use time::{OffsetDateTime, PrimitiveDateTime, UtcOffset};

pub fn ts(t: OffsetDateTime) -> PrimitiveDateTime {
    let utc = t.to_offset(UtcOffset::UTC);
    PrimitiveDateTime::new(utc.date(), utc.time())
}

pub fn utc(t: PrimitiveDateTime) -> OffsetDateTime {
    t.assume_utc()
}

/// A JSON column's text.
fn json_text<T: serde::Serialize>(value: &T) -> StoreResult<String> {
    serde_json::to_string(value).map_err(|e| StoreError::Other(format!("unwritable JSON: {e}")))
}

/// A JSON column read back.
fn json_value<T: serde::de::DeserializeOwned>(column: &str, text: &str) -> StoreResult<T> {
    serde_json::from_str(text)
        .map_err(|e| StoreError::Other(format!("unreadable {column} in store: {e}")))
}

/// A record's row, with its secret members encrypted.
pub trait ToRow {
    type Row;
    fn to_row(&self, cipher: &Cipher) -> StoreResult<Self::Row>;
}

/// A record read back from its row, its secret members decrypted.
pub trait FromRow: ToRow + Sized {
    fn from_row(row: Self::Row, cipher: &Cipher) -> StoreResult<Self>;
}

macro_rules! row {
    ($name:ident, $table:ident { $($field:ident : $ty:ty),* $(,)? }) => {
        #[derive(Debug, Clone, Queryable, Selectable, Insertable, AsChangeset)]
        #[diesel(table_name = $table, treat_none_as_null = true, treat_none_as_default_value = false)]
        #[diesel(check_for_backend(diesel::pg::Pg, diesel::sqlite::Sqlite))]
        pub struct $name { $(pub $field: $ty),* }
    };
}

row!(
    OrganizationRow,
    organizations {
        id: OrganizationId,
        name: String,
        description: Option<String>,
        plan: OrganizationPlan,
        created_at: PrimitiveDateTime,
        updated_at: PrimitiveDateTime,
    }
);

impl ToRow for Organization {
    type Row = OrganizationRow;
    fn to_row(&self, _cipher: &Cipher) -> StoreResult<OrganizationRow> {
        let o = self;
        Ok(OrganizationRow {
            id: o.id,
            name: o.name.to_string(),
            description: o.description.clone(),
            plan: o.plan,
            created_at: ts(o.created_at),
            updated_at: ts(o.updated_at),
        })
    }
}

impl FromRow for Organization {
    fn from_row(r: OrganizationRow, _cipher: &Cipher) -> StoreResult<Self> {
        Ok(Self {
            id: r.id,
            name: Name::stored(r.name),
            description: r.description,
            plan: r.plan,
            created_at: utc(r.created_at),
            updated_at: utc(r.updated_at),
        })
    }
}

row!(
    ApiTokenRow,
    api_tokens {
        id: ApiTokenId,
        organization_id: OrganizationId,
        name: String,
        description: Option<String>,
        role: Role,
        token_hash: String,
        created_at: PrimitiveDateTime,
        updated_at: PrimitiveDateTime,
        last_used_at: Option<PrimitiveDateTime>,
    }
);

impl ToRow for ApiToken {
    type Row = ApiTokenRow;
    fn to_row(&self, _cipher: &Cipher) -> StoreResult<ApiTokenRow> {
        let t = self;
        Ok(ApiTokenRow {
            id: t.id,
            organization_id: t.organization_id,
            name: t.name.to_string(),
            description: t.description.clone(),
            role: t.role,
            token_hash: t.token_hash.clone(),
            created_at: ts(t.created_at),
            updated_at: ts(t.updated_at),
            last_used_at: t.last_used_at.map(ts),
        })
    }
}

impl FromRow for ApiToken {
    fn from_row(r: ApiTokenRow, _cipher: &Cipher) -> StoreResult<Self> {
        Ok(Self {
            id: r.id,
            organization_id: r.organization_id,
            name: Name::stored(r.name),
            description: r.description,
            role: r.role,
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
        id: CredentialsId,
        organization_id: OrganizationId,
        name: String,
        name_key: String,
        access_key_id: String,
        secret_access_key: String,
        created_at: PrimitiveDateTime,
        updated_at: PrimitiveDateTime,
        details: String,
    }
);

impl ToRow for CloudCredentials {
    type Row = CredentialsRow;
    fn to_row(&self, cipher: &Cipher) -> StoreResult<CredentialsRow> {
        let c = self;
        // The key id stays in its column too, as rows of cloudA access keys always had it.
        let access_key_id = match &c.details {
            CredentialsDetails::CloudAStatic { access_key_id } => access_key_id.clone(),
            CredentialsDetails::CloudARole { role_arn } => role_arn.clone(),
            CredentialsDetails::AltCloud {
                altcloud_access_key,
                ..
            } => altcloud_access_key.clone(),
            CredentialsDetails::CloudC {
                subscription_id, ..
            } => subscription_id.clone(),
            CredentialsDetails::OnPremise {} => String::new(),
        };
        Ok(CredentialsRow {
            id: c.id,
            organization_id: c.organization_id,
            name: c.name.to_string(),
            name_key: c.name.key(),
            access_key_id,
            secret_access_key: cipher.encrypt(c.secret.expose())?,
            created_at: ts(c.created_at),
            updated_at: ts(c.updated_at),
            details: serde_json::to_string(&c.details)
                .map_err(|e| StoreError::Other(e.to_string()))?,
        })
    }
}

impl FromRow for CloudCredentials {
    fn from_row(r: CredentialsRow, cipher: &Cipher) -> StoreResult<Self> {
        let details = if r.details == "{}" {
            CredentialsDetails::CloudAStatic {
                access_key_id: r.access_key_id,
            }
        } else {
            serde_json::from_str(&r.details)
                .map_err(|e| StoreError::Other(format!("stored credentials: {e}")))?
        };
        Ok(Self {
            id: r.id,
            organization_id: r.organization_id,
            name: Name::stored(r.name),
            details,
            secret: Secret::new(cipher.decrypt(&r.secret_access_key)?),
            created_at: utc(r.created_at),
            updated_at: utc(r.updated_at),
        })
    }
}

row!(
    MetadataGroupRow,
    metadata_groups {
        id: MetadataGroupId,
        organization_id: OrganizationId,
        kind: GroupKind,
        name: String,
        name_key: String,
        entries: String,
        scopes: String,
        created_at: PrimitiveDateTime,
        updated_at: PrimitiveDateTime,
    }
);

impl ToRow for MetadataGroup {
    type Row = MetadataGroupRow;
    fn to_row(&self, _cipher: &Cipher) -> StoreResult<MetadataGroupRow> {
        Ok(MetadataGroupRow {
            id: self.id,
            organization_id: self.organization_id,
            kind: self.kind,
            name: self.name.to_string(),
            name_key: self.name.key(),
            entries: json_text(&self.entries)?,
            scopes: json_text(&self.scopes)?,
            created_at: ts(self.created_at),
            updated_at: ts(self.updated_at),
        })
    }
}

impl FromRow for MetadataGroup {
    fn from_row(r: MetadataGroupRow, _cipher: &Cipher) -> StoreResult<Self> {
        Ok(Self {
            id: r.id,
            organization_id: r.organization_id,
            kind: r.kind,
            name: Name::stored(r.name),
            entries: json_value("entries", &r.entries)?,
            scopes: json_value("scopes", &r.scopes)?,
            created_at: utc(r.created_at),
            updated_at: utc(r.updated_at),
        })
    }
}

row!(
    CustomDomainRow,
    custom_domains {
        id: CustomDomainId,
        organization_id: OrganizationId,
        service_id: ServiceId,
        domain: String,
        generate_certificate: bool,
        use_cdn: bool,
        created_at: PrimitiveDateTime,
        updated_at: PrimitiveDateTime,
    }
);

impl ToRow for CustomDomain {
    type Row = CustomDomainRow;
    fn to_row(&self, _cipher: &Cipher) -> StoreResult<CustomDomainRow> {
        Ok(CustomDomainRow {
            id: self.id,
            organization_id: self.organization_id,
            service_id: self.service_id,
            domain: self.domain.clone(),
            generate_certificate: self.generate_certificate,
            use_cdn: self.use_cdn,
            created_at: ts(self.created_at),
            updated_at: ts(self.updated_at),
        })
    }
}

impl FromRow for CustomDomain {
    fn from_row(r: CustomDomainRow, _cipher: &Cipher) -> StoreResult<Self> {
        Ok(Self {
            id: r.id,
            organization_id: r.organization_id,
            service_id: r.service_id,
            domain: r.domain,
            generate_certificate: r.generate_certificate,
            use_cdn: r.use_cdn,
            created_at: utc(r.created_at),
            updated_at: utc(r.updated_at),
        })
    }
}

row!(
    DeploymentRestrictionRow,
    deployment_restrictions {
        id: DeploymentRestrictionId,
        organization_id: OrganizationId,
        service_id: ServiceId,
        mode: RestrictionMode,
        restriction_type: RestrictionType,
        value: String,
        created_at: PrimitiveDateTime,
        updated_at: PrimitiveDateTime,
    }
);

impl ToRow for DeploymentRestriction {
    type Row = DeploymentRestrictionRow;
    fn to_row(&self, _cipher: &Cipher) -> StoreResult<DeploymentRestrictionRow> {
        Ok(DeploymentRestrictionRow {
            id: self.id,
            organization_id: self.organization_id,
            service_id: self.service_id,
            mode: self.mode,
            restriction_type: self.restriction_type,
            value: self.value.clone(),
            created_at: ts(self.created_at),
            updated_at: ts(self.updated_at),
        })
    }
}

impl FromRow for DeploymentRestriction {
    fn from_row(r: DeploymentRestrictionRow, _cipher: &Cipher) -> StoreResult<Self> {
        Ok(Self {
            id: r.id,
            organization_id: r.organization_id,
            service_id: r.service_id,
            mode: r.mode,
            restriction_type: r.restriction_type,
            value: r.value,
            created_at: utc(r.created_at),
            updated_at: utc(r.updated_at),
        })
    }
}

row!(
    InvitationRow,
    invitations {
        id: InvitationId,
        organization_id: OrganizationId,
        email: String,
        email_key: String,
        role: Role,
        inviter: String,
        created_at: PrimitiveDateTime,
        updated_at: PrimitiveDateTime,
        expires_at: PrimitiveDateTime,
    }
);

impl ToRow for Invitation {
    type Row = InvitationRow;
    fn to_row(&self, _cipher: &Cipher) -> StoreResult<InvitationRow> {
        Ok(InvitationRow {
            id: self.id,
            organization_id: self.organization_id,
            email: self.email.clone(),
            email_key: self.email_key(),
            role: self.role,
            inviter: self.inviter.clone(),
            created_at: ts(self.created_at),
            updated_at: ts(self.updated_at),
            expires_at: ts(self.expires_at),
        })
    }
}

impl FromRow for Invitation {
    fn from_row(r: InvitationRow, _cipher: &Cipher) -> StoreResult<Self> {
        Ok(Self {
            id: r.id,
            organization_id: r.organization_id,
            email: r.email,
            role: r.role,
            inviter: r.inviter,
            created_at: utc(r.created_at),
            updated_at: utc(r.updated_at),
            expires_at: utc(r.expires_at),
        })
    }
}

row!(
    ClusterRow,
    clusters {
        id: ClusterId,
        organization_id: OrganizationId,
        name: String,
        name_key: String,
        description: Option<String>,
        region: String,
        cloud_provider: CloudProvider,
        created_at: PrimitiveDateTime,
        updated_at: PrimitiveDateTime,
        spec: String,
        advanced_settings: String,
        state: ClusterState,
        deployment_status: DeploymentStatus,
        state_reason: Option<String>,
        queued_at: Option<PrimitiveDateTime>,
        last_deployment_date: Option<PrimitiveDateTime>,
        last_execution_id: Option<String>,
        claimed_by: Option<String>,
        lease_until: Option<PrimitiveDateTime>,
    }
);

impl ToRow for Cluster {
    type Row = ClusterRow;
    fn to_row(&self, _cipher: &Cipher) -> StoreResult<ClusterRow> {
        let c = self;
        let json = |v: serde_json::Result<String>| v.map_err(|e| StoreError::Other(e.to_string()));
        Ok(ClusterRow {
            id: c.id,
            organization_id: c.organization_id,
            name: c.name.to_string(),
            name_key: c.name.key(),
            description: c.description.clone(),
            region: c.region.clone(),
            cloud_provider: c.cloud_provider,
            created_at: ts(c.created_at),
            updated_at: ts(c.updated_at),
            spec: json(serde_json::to_string(&c.spec))?,
            advanced_settings: json(serde_json::to_string(&c.advanced_settings))?,
            state: c.run.state,
            deployment_status: c.run.deployment_status,
            state_reason: c.run.reason.clone(),
            queued_at: c.run.queued_at.map(ts),
            last_deployment_date: c.run.last_deployment_date.map(ts),
            last_execution_id: c.run.last_execution_id.clone(),
            claimed_by: c.run.claimed_by.clone(),
            lease_until: c.run.lease_until.map(ts),
        })
    }
}

impl FromRow for Cluster {
    fn from_row(r: ClusterRow, _cipher: &Cipher) -> StoreResult<Self> {
        let unreadable = |e: serde_json::Error| StoreError::Other(format!("stored cluster: {e}"));
        Ok(Self {
            id: r.id,
            organization_id: r.organization_id,
            name: Name::stored(r.name),
            description: r.description,
            region: r.region,
            cloud_provider: r.cloud_provider,
            spec: serde_json::from_str(&r.spec).map_err(unreadable)?,
            advanced_settings: serde_json::from_str(&r.advanced_settings).map_err(unreadable)?,
            run: ClusterRun {
                state: r.state,
                deployment_status: r.deployment_status,
                reason: r.state_reason,
                queued_at: r.queued_at.map(utc),
                last_deployment_date: r.last_deployment_date.map(utc),
                last_execution_id: r.last_execution_id,
                claimed_by: r.claimed_by,
                lease_until: r.lease_until.map(utc),
            },
            created_at: utc(r.created_at),
            updated_at: utc(r.updated_at),
        })
    }
}

row!(
    ProjectRow,
    projects {
        id: ProjectId,
        organization_id: OrganizationId,
        name: String,
        name_key: String,
        description: Option<String>,
        created_at: PrimitiveDateTime,
        updated_at: PrimitiveDateTime,
    }
);

impl ToRow for Project {
    type Row = ProjectRow;
    fn to_row(&self, _cipher: &Cipher) -> StoreResult<ProjectRow> {
        let p = self;
        Ok(ProjectRow {
            id: p.id,
            organization_id: p.organization_id,
            name: p.name.to_string(),
            name_key: p.name.key(),
            description: p.description.clone(),
            created_at: ts(p.created_at),
            updated_at: ts(p.updated_at),
        })
    }
}

impl FromRow for Project {
    fn from_row(r: ProjectRow, _cipher: &Cipher) -> StoreResult<Self> {
        Ok(Self {
            id: r.id,
            organization_id: r.organization_id,
            name: Name::stored(r.name),
            description: r.description,
            created_at: utc(r.created_at),
            updated_at: utc(r.updated_at),
        })
    }
}

row!(
    EnvironmentRow,
    environments {
        id: EnvironmentId,
        organization_id: OrganizationId,
        project_id: ProjectId,
        cluster_id: ClusterId,
        name: String,
        name_key: String,
        mode: EnvironmentMode,
        last_updated_by: Option<StrictUuid>,
        pull_request: Option<String>,
        created_at: PrimitiveDateTime,
        updated_at: PrimitiveDateTime,
    }
);

impl ToRow for Environment {
    type Row = EnvironmentRow;
    fn to_row(&self, _cipher: &Cipher) -> StoreResult<EnvironmentRow> {
        let e = self;
        Ok(EnvironmentRow {
            id: e.id,
            organization_id: e.organization_id,
            project_id: e.project_id,
            cluster_id: e.cluster_id,
            name: e.name.to_string(),
            name_key: e.name.key(),
            mode: e.mode,
            last_updated_by: e.last_updated_by.map(StrictUuid),
            pull_request: e.pull_request.as_ref().map(json_text).transpose()?,
            created_at: ts(e.created_at),
            updated_at: ts(e.updated_at),
        })
    }
}

impl FromRow for Environment {
    fn from_row(r: EnvironmentRow, _cipher: &Cipher) -> StoreResult<Self> {
        Ok(Self {
            id: r.id,
            organization_id: r.organization_id,
            project_id: r.project_id,
            cluster_id: r.cluster_id,
            name: Name::stored(r.name),
            mode: r.mode,
            last_updated_by: r.last_updated_by.map(|u| u.0),
            pull_request: r
                .pull_request
                .as_deref()
                .map(|text| json_value("pull_request", text))
                .transpose()?,
            created_at: utc(r.created_at),
            updated_at: utc(r.updated_at),
        })
    }
}

row!(
    RegistryRow,
    container_registries {
        id: ContainerRegistryId,
        organization_id: OrganizationId,
        name: String,
        name_key: String,
        kind: RegistryKind,
        url: String,
        description: Option<String>,
        cluster_id: Option<ClusterId>,
        config: String,
        secret_config: String,
        created_at: PrimitiveDateTime,
        updated_at: PrimitiveDateTime,
    }
);

impl ToRow for ContainerRegistry {
    type Row = RegistryRow;
    fn to_row(&self, cipher: &Cipher) -> StoreResult<RegistryRow> {
        let r = self;
        Ok(RegistryRow {
            id: r.id,
            organization_id: r.organization_id,
            name: r.name.to_string(),
            name_key: r.name.key(),
            kind: r.kind,
            url: r.url.clone(),
            description: r.description.clone(),
            cluster_id: r.cluster_id,
            config: serde_json::to_string(&r.config)
                .map_err(|e| StoreError::Other(e.to_string()))?,
            secret_config: cipher.encrypt(r.secret_config.expose())?,
            created_at: ts(r.created_at),
            updated_at: ts(r.updated_at),
        })
    }
}

impl FromRow for ContainerRegistry {
    fn from_row(r: RegistryRow, cipher: &Cipher) -> StoreResult<Self> {
        Ok(Self {
            id: r.id,
            organization_id: r.organization_id,
            name: Name::stored(r.name),
            kind: r.kind,
            url: r.url,
            description: r.description,
            cluster_id: r.cluster_id,
            config: serde_json::from_str(&r.config)
                .map_err(|e| StoreError::Other(format!("unreadable registry config: {e}")))?,
            secret_config: Secret::new(cipher.decrypt(&r.secret_config)?),
            created_at: utc(r.created_at),
            updated_at: utc(r.updated_at),
        })
    }
}

row!(
    HelmRepositoryRow,
    helm_repositories {
        id: HelmRepositoryId,
        organization_id: OrganizationId,
        name: String,
        name_key: String,
        kind: HelmRepositoryKind,
        url: String,
        description: Option<String>,
        skip_tls_verification: bool,
        config: String,
        secret_config: String,
        created_at: PrimitiveDateTime,
        updated_at: PrimitiveDateTime,
    }
);

impl ToRow for HelmRepository {
    type Row = HelmRepositoryRow;
    fn to_row(&self, cipher: &Cipher) -> StoreResult<HelmRepositoryRow> {
        let r = self;
        Ok(HelmRepositoryRow {
            id: r.id,
            organization_id: r.organization_id,
            name: r.name.to_string(),
            name_key: r.name.key(),
            kind: r.kind,
            url: r.url.clone(),
            description: r.description.clone(),
            skip_tls_verification: r.skip_tls_verification,
            config: serde_json::to_string(&r.config)
                .map_err(|e| StoreError::Other(e.to_string()))?,
            secret_config: cipher.encrypt(r.secret_config.expose())?,
            created_at: ts(r.created_at),
            updated_at: ts(r.updated_at),
        })
    }
}

impl FromRow for HelmRepository {
    fn from_row(r: HelmRepositoryRow, cipher: &Cipher) -> StoreResult<Self> {
        Ok(Self {
            id: r.id,
            organization_id: r.organization_id,
            name: Name::stored(r.name),
            kind: r.kind,
            url: r.url,
            description: r.description,
            skip_tls_verification: r.skip_tls_verification,
            config: serde_json::from_str(&r.config).map_err(|e| {
                StoreError::Other(format!("unreadable helm repository config: {e}"))
            })?,
            secret_config: Secret::new(cipher.decrypt(&r.secret_config)?),
            created_at: utc(r.created_at),
            updated_at: utc(r.updated_at),
        })
    }
}

row!(
    GitTokenRow,
    git_tokens {
        id: GitTokenId,
        organization_id: OrganizationId,
        name: String,
        name_key: String,
        provider: GitProvider,
        token: String,
        description: Option<String>,
        workspace: Option<String>,
        git_api_url: Option<String>,
        created_at: PrimitiveDateTime,
        updated_at: PrimitiveDateTime,
        expired_at: Option<String>,
    }
);

impl ToRow for GitToken {
    type Row = GitTokenRow;
    fn to_row(&self, cipher: &Cipher) -> StoreResult<GitTokenRow> {
        let t = self;
        Ok(GitTokenRow {
            id: t.id,
            organization_id: t.organization_id,
            name: t.name.to_string(),
            name_key: t.name.key(),
            provider: t.provider,
            token: cipher.encrypt(t.token.expose())?,
            description: t.description.clone(),
            workspace: t.workspace.clone(),
            git_api_url: t.git_api_url.clone(),
            created_at: ts(t.created_at),
            updated_at: ts(t.updated_at),
            expired_at: t.expired_at.map(|d| d.to_string()),
        })
    }
}

impl FromRow for GitToken {
    fn from_row(r: GitTokenRow, cipher: &Cipher) -> StoreResult<Self> {
        Ok(Self {
            id: r.id,
            organization_id: r.organization_id,
            name: Name::stored(r.name),
            description: r.description,
            provider: r.provider,
            token: Secret::new(cipher.decrypt(&r.token)?),
            workspace: r.workspace,
            git_api_url: r.git_api_url,
            expired_at: r
                .expired_at
                .map(|d| {
                    domain::model::expiry_date("expired_at", &d).map_err(|_| {
                        StoreError::Other(format!("unreadable expired_at in store: {d:?}"))
                    })
                })
                .transpose()?,
            created_at: utc(r.created_at),
            updated_at: utc(r.updated_at),
        })
    }
}

row!(
    ServiceRow,
    services {
        id: ServiceId,
        organization_id: OrganizationId,
        project_id: ProjectId,
        environment_id: EnvironmentId,
        kind: ServiceKind,
        name: String,
        name_key: String,
        description: Option<String>,
        spec: String,
        registry_id: Option<ContainerRegistryId>,
        git_token_id: Option<GitTokenId>,
        created_at: PrimitiveDateTime,
        updated_at: PrimitiveDateTime,
        deployment_status: DeploymentStatus,
        helm_repository_id: Option<HelmRepositoryId>,
        advanced_settings: String,
    }
);

impl ToRow for Service {
    type Row = ServiceRow;
    fn to_row(&self, _cipher: &Cipher) -> StoreResult<ServiceRow> {
        let s = self;
        Ok(ServiceRow {
            id: s.id,
            organization_id: s.organization_id,
            project_id: s.project_id,
            environment_id: s.environment_id,
            kind: s.kind(),
            name: s.name.to_string(),
            name_key: s.name.key(),
            description: s.description.clone(),
            spec: crate::stored_specs::write(&s.spec)?,
            registry_id: s.spec.registry_id(),
            git_token_id: s.spec.git_token_id(),
            created_at: ts(s.created_at),
            updated_at: ts(s.updated_at),
            deployment_status: s.deployment_status,
            helm_repository_id: s.spec.helm_repository_id(),
            advanced_settings: json_text(&s.advanced_settings)?,
        })
    }
}

impl FromRow for Service {
    fn from_row(r: ServiceRow, _cipher: &Cipher) -> StoreResult<Self> {
        Ok(Self {
            id: r.id,
            organization_id: r.organization_id,
            project_id: r.project_id,
            environment_id: r.environment_id,
            name: Name::stored(r.name),
            description: r.description,
            spec: crate::stored_specs::read(r.kind, &r.spec)?,
            deployment_status: r.deployment_status,
            advanced_settings: json_value("advanced_settings", &r.advanced_settings)?,
            groups: Vec::new(),
            created_at: utc(r.created_at),
            updated_at: utc(r.updated_at),
        })
    }
}

row!(
    VariableRow,
    variables {
        id: VariableId,
        organization_id: OrganizationId,
        project_id: ProjectId,
        environment_id: Option<EnvironmentId>,
        service_id: Option<ServiceId>,
        parent_id: StrictUuid,
        scope: VariableScope,
        key: String,
        value: Option<String>,
        is_secret: bool,
        variable_type: VariableType,
        mount_path: Option<String>,
        description: Option<String>,
        enable_interpolation_in_file: Option<bool>,
        aliased_variable_id: Option<VariableId>,
        overridden_variable_id: Option<VariableId>,
        secret_manager_access_id: Option<StrictUuid>,
        created_at: PrimitiveDateTime,
        updated_at: PrimitiveDateTime,
        linked_database_id: Option<ServiceId>,
    }
);

impl ToRow for Variable {
    type Row = VariableRow;
    fn to_row(&self, cipher: &Cipher) -> StoreResult<VariableRow> {
        let v = self;
        let value = match (&v.value, v.is_secret) {
            (Some(secret), true) => Some(cipher.encrypt(secret.expose())?),
            (Some(plain), false) => Some(plain.expose().to_string()),
            (None, _) => None,
        };
        Ok(VariableRow {
            id: v.id,
            organization_id: v.organization_id,
            project_id: v.project_id,
            environment_id: v.environment_id,
            service_id: v.service_id,
            parent_id: StrictUuid(v.parent_id()),
            scope: v.scope,
            key: v.key.to_string(),
            value,
            is_secret: v.is_secret,
            variable_type: v.variable_type,
            mount_path: v.mount_path.clone(),
            description: v.description.clone(),
            enable_interpolation_in_file: v.enable_interpolation_in_file,
            aliased_variable_id: v.aliased_variable_id,
            overridden_variable_id: v.overridden_variable_id,
            secret_manager_access_id: v.secret_manager_access_id.map(StrictUuid),
            created_at: ts(v.created_at),
            updated_at: ts(v.updated_at),
            linked_database_id: v.linked_database_id,
        })
    }
}

impl FromRow for Variable {
    fn from_row(r: VariableRow, cipher: &Cipher) -> StoreResult<Self> {
        let value = match (r.value, r.is_secret) {
            (Some(sealed), true) => Some(Secret::new(cipher.decrypt(&sealed)?)),
            (Some(plain), false) => Some(Secret::new(plain)),
            (None, _) => None,
        };
        Ok(Self {
            id: r.id,
            organization_id: r.organization_id,
            project_id: r.project_id,
            environment_id: r.environment_id,
            service_id: r.service_id,
            scope: r.scope,
            key: VariableKey::stored(r.key),
            value,
            is_secret: r.is_secret,
            variable_type: r.variable_type,
            mount_path: r.mount_path,
            description: r.description,
            enable_interpolation_in_file: r.enable_interpolation_in_file,
            aliased_variable_id: r.aliased_variable_id,
            overridden_variable_id: r.overridden_variable_id,
            secret_manager_access_id: r.secret_manager_access_id.map(|u| u.0),
            linked_database_id: r.linked_database_id,
            created_at: utc(r.created_at),
            updated_at: utc(r.updated_at),
        })
    }
}

row!(
    DeploymentRequestRow,
    deployment_requests {
        id: DeploymentRequestId,
        organization_id: OrganizationId,
        environment_id: EnvironmentId,
        service_id: ServiceId,
        action: DeploymentAction,
        requested_by: String,
        git_commit_id: Option<String>,
        image_tag: Option<String>,
        chart_version: Option<String>,
        status: RequestStatus,
        reason: Option<String>,
        claimed_by: Option<String>,
        created_at: PrimitiveDateTime,
        started_at: Option<PrimitiveDateTime>,
        finished_at: Option<PrimitiveDateTime>,
        state: ServiceState,
        batch_id: StrictUuid,
        snapshot: String,
        steps: String,
        lease_until: Option<PrimitiveDateTime>,
        cancel_requested: bool,
        position: i32,
        origin: Origin,
    }
);

impl ToRow for DeploymentRequest {
    type Row = DeploymentRequestRow;
    fn to_row(&self, _cipher: &Cipher) -> StoreResult<DeploymentRequestRow> {
        let r = self;
        Ok(DeploymentRequestRow {
            id: r.id,
            organization_id: r.organization_id,
            environment_id: r.environment_id,
            service_id: r.service_id,
            action: r.action,
            requested_by: r.requested_by.clone(),
            git_commit_id: r.target.git_commit_id.clone(),
            image_tag: r.target.image_tag.clone(),
            chart_version: r.target.chart_version.clone(),
            status: r.status,
            reason: r.reason.clone(),
            claimed_by: r.claimed_by.clone(),
            created_at: ts(r.created_at),
            started_at: r.started_at.map(ts),
            finished_at: r.finished_at.map(ts),
            state: r.state,
            batch_id: StrictUuid(r.batch_id),
            snapshot: json_text(&r.snapshot)?,
            steps: json_text(&r.steps)?,
            lease_until: r.lease_until.map(ts),
            cancel_requested: r.cancel_requested,
            position: r.position,
            origin: r.origin,
        })
    }
}

impl FromRow for DeploymentRequest {
    fn from_row(r: DeploymentRequestRow, _cipher: &Cipher) -> StoreResult<Self> {
        let snapshot: DeploymentSnapshot = json_value("snapshot", &r.snapshot)?;
        Ok(Self {
            id: r.id,
            organization_id: r.organization_id,
            environment_id: r.environment_id,
            service_id: r.service_id,
            action: r.action,
            requested_by: r.requested_by,
            target: DeployTarget {
                git_commit_id: r.git_commit_id,
                image_tag: r.image_tag,
                chart_version: r.chart_version,
                // Kept in the snapshot, which histories show.
                git_commit_author: snapshot.git_commit_author.clone(),
                scheduled_run: snapshot.scheduled_run,
                terraform_action: snapshot.terraform_action,
                move_to_node: snapshot.move_to_node.clone(),
            },
            status: r.status,
            reason: r.reason,
            claimed_by: r.claimed_by,
            created_at: utc(r.created_at),
            started_at: r.started_at.map(utc),
            finished_at: r.finished_at.map(utc),
            state: r.state,
            batch_id: r.batch_id.0,
            snapshot,
            steps: json_value("steps", &r.steps)?,
            lease_until: r.lease_until.map(utc),
            cancel_requested: r.cancel_requested,
            position: r.position,
            origin: r.origin,
        })
    }
}

row!(
    DeploymentStageRow,
    deployment_stages {
        id: DeploymentStageId,
        organization_id: OrganizationId,
        environment_id: EnvironmentId,
        name: String,
        name_key: String,
        description: Option<String>,
        deployment_order: i32,
        created_at: PrimitiveDateTime,
        updated_at: PrimitiveDateTime,
    }
);

impl ToRow for DeploymentStage {
    type Row = DeploymentStageRow;
    fn to_row(&self, _cipher: &Cipher) -> StoreResult<DeploymentStageRow> {
        Ok(DeploymentStageRow {
            id: self.id,
            organization_id: self.organization_id,
            environment_id: self.environment_id,
            name: self.name.to_string(),
            name_key: self.name.key(),
            description: self.description.clone(),
            deployment_order: self.deployment_order,
            created_at: ts(self.created_at),
            updated_at: ts(self.updated_at),
        })
    }
}

impl FromRow for DeploymentStage {
    fn from_row(r: DeploymentStageRow, _cipher: &Cipher) -> StoreResult<Self> {
        Ok(Self {
            id: r.id,
            organization_id: r.organization_id,
            environment_id: r.environment_id,
            name: Name::stored(r.name),
            description: r.description,
            deployment_order: r.deployment_order,
            created_at: utc(r.created_at),
            updated_at: utc(r.updated_at),
        })
    }
}

row!(
    StageMemberRow,
    deployment_stage_services {
        service_id: ServiceId,
        id: StrictUuid,
        stage_id: DeploymentStageId,
        environment_id: EnvironmentId,
        is_skipped: bool,
        created_at: PrimitiveDateTime,
        updated_at: PrimitiveDateTime,
    }
);

impl ToRow for StageMember {
    type Row = StageMemberRow;
    fn to_row(&self, _cipher: &Cipher) -> StoreResult<StageMemberRow> {
        Ok(StageMemberRow {
            service_id: self.service_id,
            id: StrictUuid(self.id),
            stage_id: self.stage_id,
            environment_id: self.environment_id,
            is_skipped: self.is_skipped,
            created_at: ts(self.created_at),
            updated_at: ts(self.updated_at),
        })
    }
}

impl FromRow for StageMember {
    fn from_row(r: StageMemberRow, _cipher: &Cipher) -> StoreResult<Self> {
        Ok(Self {
            id: r.id.0,
            service_id: r.service_id,
            stage_id: r.stage_id,
            environment_id: r.environment_id,
            is_skipped: r.is_skipped,
            created_at: utc(r.created_at),
            updated_at: utc(r.updated_at),
        })
    }
}

/// A rule's hours as their columns keep them: times of day as `HH:MM:SS`, weekdays as JSON.
const TIME_OF_DAY: &[time::format_description::BorrowedFormatItem<'static>] =
    time::macros::format_description!("[hour]:[minute]:[second]");

fn time_text(t: time::Time) -> StoreResult<String> {
    t.format(TIME_OF_DAY)
        .map_err(|e| StoreError::Other(format!("unwritable time of day: {e}")))
}

fn time_value(column: &str, text: &str) -> StoreResult<time::Time> {
    time::Time::parse(text, TIME_OF_DAY)
        .map_err(|_| StoreError::Other(format!("unreadable {column} in store: {text:?}")))
}

fn schedule_of(
    auto_stop: bool,
    timezone: String,
    start: &str,
    stop: &str,
    weekdays: &str,
) -> StoreResult<Schedule> {
    Ok(Schedule {
        auto_stop,
        timezone,
        start: time_value("start_time", start)?,
        stop: time_value("stop_time", stop)?,
        weekdays: json_value("weekdays", weekdays)?,
    })
}

row!(
    ProjectDeploymentRuleRow,
    project_deployment_rules {
        id: DeploymentRuleId,
        organization_id: OrganizationId,
        project_id: ProjectId,
        name: String,
        name_key: String,
        description: Option<String>,
        mode: EnvironmentMode,
        cluster_id: ClusterId,
        wildcard: String,
        priority_index: i32,
        auto_stop: bool,
        timezone: String,
        start_time: String,
        stop_time: String,
        weekdays: String,
        created_at: PrimitiveDateTime,
        updated_at: PrimitiveDateTime,
    }
);

impl ToRow for ProjectDeploymentRule {
    type Row = ProjectDeploymentRuleRow;
    fn to_row(&self, _cipher: &Cipher) -> StoreResult<ProjectDeploymentRuleRow> {
        let s = &self.schedule;
        Ok(ProjectDeploymentRuleRow {
            id: self.id,
            organization_id: self.organization_id,
            project_id: self.project_id,
            name: self.name.to_string(),
            name_key: self.name.key(),
            description: self.description.clone(),
            mode: self.mode,
            cluster_id: self.cluster_id,
            wildcard: self.wildcard.clone(),
            priority_index: self.priority_index,
            auto_stop: s.auto_stop,
            timezone: s.timezone.clone(),
            start_time: time_text(s.start)?,
            stop_time: time_text(s.stop)?,
            weekdays: json_text(&s.weekdays)?,
            created_at: ts(self.created_at),
            updated_at: ts(self.updated_at),
        })
    }
}

impl FromRow for ProjectDeploymentRule {
    fn from_row(r: ProjectDeploymentRuleRow, _cipher: &Cipher) -> StoreResult<Self> {
        Ok(Self {
            id: r.id,
            organization_id: r.organization_id,
            project_id: r.project_id,
            name: Name::stored(r.name),
            description: r.description,
            mode: r.mode,
            cluster_id: r.cluster_id,
            wildcard: r.wildcard,
            priority_index: r.priority_index,
            schedule: schedule_of(
                r.auto_stop,
                r.timezone,
                &r.start_time,
                &r.stop_time,
                &r.weekdays,
            )?,
            created_at: utc(r.created_at),
            updated_at: utc(r.updated_at),
        })
    }
}

row!(
    EnvironmentDeploymentRuleRow,
    environment_deployment_rules {
        id: EnvironmentId,
        organization_id: OrganizationId,
        on_demand_preview: bool,
        auto_preview: bool,
        auto_stop: bool,
        timezone: String,
        start_time: String,
        stop_time: String,
        weekdays: String,
        next_turn_at: Option<PrimitiveDateTime>,
        created_at: PrimitiveDateTime,
        updated_at: PrimitiveDateTime,
    }
);

impl ToRow for EnvironmentDeploymentRule {
    type Row = EnvironmentDeploymentRuleRow;
    fn to_row(&self, _cipher: &Cipher) -> StoreResult<EnvironmentDeploymentRuleRow> {
        let s = &self.schedule;
        Ok(EnvironmentDeploymentRuleRow {
            id: self.environment_id,
            organization_id: self.organization_id,
            on_demand_preview: self.on_demand_preview,
            auto_preview: self.auto_preview,
            auto_stop: s.auto_stop,
            timezone: s.timezone.clone(),
            start_time: time_text(s.start)?,
            stop_time: time_text(s.stop)?,
            weekdays: json_text(&s.weekdays)?,
            next_turn_at: self.next_turn_at.map(ts),
            created_at: ts(self.created_at),
            updated_at: ts(self.updated_at),
        })
    }
}

impl FromRow for EnvironmentDeploymentRule {
    fn from_row(r: EnvironmentDeploymentRuleRow, _cipher: &Cipher) -> StoreResult<Self> {
        Ok(Self {
            environment_id: r.id,
            organization_id: r.organization_id,
            on_demand_preview: r.on_demand_preview,
            auto_preview: r.auto_preview,
            schedule: schedule_of(
                r.auto_stop,
                r.timezone,
                &r.start_time,
                &r.stop_time,
                &r.weekdays,
            )?,
            next_turn_at: r.next_turn_at.map(utc),
            created_at: utc(r.created_at),
            updated_at: utc(r.updated_at),
        })
    }
}

row!(
    OrganizationWebhookRow,
    organization_webhooks {
        id: WebhookId,
        organization_id: OrganizationId,
        kind: OrganizationWebhookKind,
        target_url: String,
        target_secret: Option<String>,
        description: Option<String>,
        enabled: bool,
        events: String,
        project_names_filter: String,
        environment_types_filter: String,
        created_at: PrimitiveDateTime,
        updated_at: PrimitiveDateTime,
    }
);

impl ToRow for OrganizationWebhook {
    type Row = OrganizationWebhookRow;
    fn to_row(&self, cipher: &Cipher) -> StoreResult<OrganizationWebhookRow> {
        Ok(OrganizationWebhookRow {
            id: self.id,
            organization_id: self.organization_id,
            kind: self.kind,
            target_url: self.target_url.clone(),
            target_secret: self
                .target_secret
                .as_ref()
                .map(|s| cipher.encrypt(s.expose()))
                .transpose()?,
            description: self.description.clone(),
            enabled: self.enabled,
            events: json_text(&self.events)?,
            project_names_filter: json_text(&self.project_names_filter)?,
            environment_types_filter: json_text(&self.environment_types_filter)?,
            created_at: ts(self.created_at),
            updated_at: ts(self.updated_at),
        })
    }
}

impl FromRow for OrganizationWebhook {
    fn from_row(r: OrganizationWebhookRow, cipher: &Cipher) -> StoreResult<Self> {
        Ok(Self {
            id: r.id,
            organization_id: r.organization_id,
            kind: r.kind,
            target_url: r.target_url,
            target_secret: r
                .target_secret
                .map(|s| cipher.decrypt(&s).map(Secret::new))
                .transpose()?,
            description: r.description,
            enabled: r.enabled,
            events: json_value("events", &r.events)?,
            project_names_filter: json_value("project_names_filter", &r.project_names_filter)?,
            environment_types_filter: json_value(
                "environment_types_filter",
                &r.environment_types_filter,
            )?,
            created_at: utc(r.created_at),
            updated_at: utc(r.updated_at),
        })
    }
}

row!(
    WebhookAttemptRow,
    webhook_attempts {
        id: AttemptId,
        delivery_id: DeliveryId,
        webhook_id: WebhookId,
        organization_id: OrganizationId,
        created_at: PrimitiveDateTime,
        kind: OrganizationWebhookKind,
        matched_event: OrganizationWebhookEvent,
        target_url: String,
        request: String,
        status_code: i32,
        response_body: Option<String>,
        error: Option<String>,
        duration_ms: i64,
        attempt: i32,
    }
);

impl ToRow for WebhookAttempt {
    type Row = WebhookAttemptRow;
    fn to_row(&self, _cipher: &Cipher) -> StoreResult<WebhookAttemptRow> {
        Ok(WebhookAttemptRow {
            id: self.id,
            delivery_id: self.delivery_id,
            webhook_id: self.webhook_id,
            organization_id: self.organization_id,
            created_at: ts(self.created_at),
            kind: self.kind,
            matched_event: self.matched_event,
            target_url: self.target_url.clone(),
            request: json_text(&self.request)?,
            status_code: self.status_code,
            response_body: self.response_body.clone(),
            error: self.error.clone(),
            duration_ms: self.duration_ms,
            attempt: self.attempt,
        })
    }
}

impl FromRow for WebhookAttempt {
    fn from_row(r: WebhookAttemptRow, _cipher: &Cipher) -> StoreResult<Self> {
        Ok(Self {
            id: r.id,
            delivery_id: r.delivery_id,
            webhook_id: r.webhook_id,
            organization_id: r.organization_id,
            created_at: utc(r.created_at),
            kind: r.kind,
            matched_event: r.matched_event,
            target_url: r.target_url,
            request: json_value("request", &r.request)?,
            status_code: r.status_code,
            response_body: r.response_body,
            error: r.error,
            duration_ms: r.duration_ms,
            attempt: r.attempt,
        })
    }
}

row!(
    EventRow,
    events {
        id: EventId,
        organization_id: OrganizationId,
        position: Option<i64>,
        created_at: PrimitiveDateTime,
        event_type: Option<EventType>,
        target_type: TargetType,
        target_id: Option<StrictUuid>,
        sub_target_type: Option<SubTargetType>,
        origin: Origin,
        triggered_by: String,
        project_id: Option<ProjectId>,
        environment_id: Option<EnvironmentId>,
        body: String,
    }
);

impl ToRow for OrgEvent {
    type Row = EventRow;
    fn to_row(&self, _cipher: &Cipher) -> StoreResult<EventRow> {
        Ok(EventRow {
            id: self.id,
            organization_id: self.organization_id,
            position: self.position,
            created_at: ts(self.created_at),
            event_type: self.event_type,
            target_type: self.target_type,
            target_id: self.target_id.map(StrictUuid),
            sub_target_type: self.sub_target_type,
            origin: self.origin,
            triggered_by: self.triggered_by.clone(),
            project_id: self.project_id,
            environment_id: self.environment_id,
            body: json_text(self)?,
        })
    }
}

impl FromRow for OrgEvent {
    fn from_row(r: EventRow, _cipher: &Cipher) -> StoreResult<Self> {
        let mut event: OrgEvent = json_value("body", &r.body)?;
        event.position = r.position;
        event.created_at = utc(r.created_at);
        Ok(event)
    }
}

row!(
    DeliveryRow,
    webhook_deliveries {
        id: DeliveryId,
        webhook_id: WebhookId,
        organization_id: OrganizationId,
        event_id: EventId,
        matched_event: OrganizationWebhookEvent,
        payload: String,
        state: DeliveryState,
        attempts: i32,
        next_attempt_at: PrimitiveDateTime,
        claimed_by: Option<String>,
        lease_until: Option<PrimitiveDateTime>,
        created_at: PrimitiveDateTime,
    }
);

impl ToRow for WebhookDelivery {
    type Row = DeliveryRow;
    fn to_row(&self, _cipher: &Cipher) -> StoreResult<DeliveryRow> {
        Ok(DeliveryRow {
            id: self.id,
            webhook_id: self.webhook_id,
            organization_id: self.organization_id,
            event_id: self.event_id,
            matched_event: self.matched_event,
            payload: json_text(&self.payload)?,
            state: self.state,
            attempts: self.attempts,
            next_attempt_at: ts(self.next_attempt_at),
            claimed_by: None,
            lease_until: None,
            created_at: ts(self.created_at),
        })
    }
}

impl FromRow for WebhookDelivery {
    fn from_row(r: DeliveryRow, _cipher: &Cipher) -> StoreResult<Self> {
        Ok(Self {
            id: r.id,
            webhook_id: r.webhook_id,
            organization_id: r.organization_id,
            event_id: r.event_id,
            matched_event: r.matched_event,
            payload: json_value("payload", &r.payload)?,
            state: r.state,
            attempts: r.attempts,
            next_attempt_at: utc(r.next_attempt_at),
            created_at: utc(r.created_at),
        })
    }
}

row!(
    DatabaseBackupRow,
    database_backups {
        id: BackupId,
        organization_id: OrganizationId,
        database_id: ServiceId,
        name: String,
        message: String,
        state: BackupState,
        size_bytes: i64,
        reason: Option<String>,
        created_at: PrimitiveDateTime,
        updated_at: PrimitiveDateTime,
    }
);

impl ToRow for DatabaseBackup {
    type Row = DatabaseBackupRow;
    fn to_row(&self, _cipher: &Cipher) -> StoreResult<DatabaseBackupRow> {
        let b = self;
        Ok(DatabaseBackupRow {
            id: b.id,
            organization_id: b.organization_id,
            database_id: b.database_id,
            name: b.name.clone(),
            message: b.message.clone(),
            state: b.state,
            size_bytes: b.size_bytes,
            reason: b.reason.clone(),
            created_at: ts(b.created_at),
            updated_at: ts(b.updated_at),
        })
    }
}

impl FromRow for DatabaseBackup {
    fn from_row(r: DatabaseBackupRow, _cipher: &Cipher) -> StoreResult<Self> {
        Ok(Self {
            id: r.id,
            organization_id: r.organization_id,
            database_id: r.database_id,
            name: r.name,
            message: r.message,
            state: r.state,
            size_bytes: r.size_bytes,
            reason: r.reason,
            created_at: utc(r.created_at),
            updated_at: utc(r.updated_at),
        })
    }
}
