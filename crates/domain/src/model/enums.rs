//! Closed sets of values. Each knows its wire name, used by the API and the store alike.

/// Declares a closed set of values with wire names (used by every enum of the model).
macro_rules! string_enum {
    ($(#[$meta:meta])* $name:ident { $($variant:ident => $wire:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
        #[cfg_attr(
            feature = "diesel",
            derive(diesel::expression::AsExpression, diesel::deserialize::FromSqlRow),
            diesel(sql_type = diesel::sql_types::Text)
        )]
        pub enum $name {
            $(#[serde(rename = $wire)] $variant),+
        }

        #[cfg(feature = "diesel")]
        text_column!($name);

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub const fn as_str(self) -> &'static str {
                match self { $($name::$variant => $wire),+ }
            }

            /// "A, B, C": for error messages listing the allowed values.
            pub fn allowed() -> String {
                [$($wire),+].join(", ")
            }
        }

        // Written by hand: the derive cannot read wire names passed through this macro.
        #[cfg(feature = "openapi")]
        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                utoipa::openapi::ObjectBuilder::new()
                    .schema_type(utoipa::openapi::schema::Type::String)
                    .enum_values(Some([$($wire),+]))
                    .into()
            }
        }

        #[cfg(feature = "openapi")]
        impl utoipa::ToSchema for $name {
            fn name() -> std::borrow::Cow<'static, str> {
                std::borrow::Cow::Borrowed(stringify!($name))
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($wire => Ok($name::$variant),)+
                    _ => Err(format!("must be one of {}", $name::allowed())),
                }
            }
        }
    };
}

string_enum!(
    /// The six kinds of service.
    ServiceKind {
        Application => "APPLICATION",
        Container => "CONTAINER",
        Database => "DATABASE",
        Job => "JOB",
        Helm => "HELM",
        Terraform => "TERRAFORM",
    }
);

impl ServiceKind {
    /// The path segment naming the kind: `/application/{id}`, `/environment/{id}/helm`.
    pub fn path_segment(self) -> &'static str {
        match self {
            ServiceKind::Application => "application",
            ServiceKind::Container => "container",
            ServiceKind::Database => "database",
            ServiceKind::Job => "job",
            ServiceKind::Helm => "helm",
            ServiceKind::Terraform => "terraform",
        }
    }

    pub fn noun(self) -> &'static str {
        self.path_segment()
    }
}

string_enum!(
    /// Whether a service runs its current configuration.
    DeploymentStatus {
        NeverDeployed => "NEVER_DEPLOYED",
        OutOfDate => "OUT_OF_DATE",
        UpToDate => "UP_TO_DATE",
    }
);

string_enum!(EnvironmentMode {
    Development => "DEVELOPMENT",
    Preview => "PREVIEW",
    Production => "PRODUCTION",
    Staging => "STAGING",
});

string_enum!(CloudProvider {
    CloudA => "CLOUDA",
    AltCloud => "ALTCLOUD",
    CloudC => "CLOUDC",
    OnPremise => "ON_PREMISE",
});

string_enum!(GitProvider {
    HostA => "HOSTA",
    HostB => "HOSTB",
    HostC => "HOSTC",
});

impl GitProvider {
    /// The API of the provider's hosted service, for tokens saved without their own.
    pub fn default_api_url(self) -> &'static str {
        match self {
            GitProvider::HostA => "https://api.github.com",
            GitProvider::HostB => "https://gitlab.com/api/v4",
            GitProvider::HostC => "https://api.bitbucket.org/2.0",
        }
    }
}

string_enum!(OrganizationPlan {
    Free => "FREE",
    Team => "TEAM",
    TeamYearly => "TEAM_YEARLY",
    Enterprise => "ENTERPRISE",
    EnterpriseYearly => "ENTERPRISE_YEARLY",
    Professional => "PROFESSIONAL",
    Business => "BUSINESS",
    User2025 => "USER_2025",
    Team2025 => "TEAM_2025",
    Business2025 => "BUSINESS_2025",
    Enterprise2025 => "ENTERPRISE_2025",
});

string_enum!(RegistryKind {
    Ecr => "ECR",
    AltCloudCr => "ALTCLOUD_CR",
    DockerHub => "DOCKER_HUB",
    HostACr => "HOSTA_CR",
    HostAEnterpriseCr => "HOSTA_ENTERPRISE_CR",
    HostBCr => "HOSTB_CR",
    PublicEcr => "PUBLIC_ECR",
    Docr => "DOCR",
    GenericCr => "GENERIC_CR",
    GcpArtifactRegistry => "GCP_ARTIFACT_REGISTRY",
    CloudCCr => "CLOUDC_CR",
});

impl RegistryKind {
    /// The address used when a registry of this kind is created without one.
    pub fn default_url(self) -> Option<&'static str> {
        match self {
            RegistryKind::DockerHub => Some("https://docker.io"),
            RegistryKind::PublicEcr => Some("https://public.ecr.aws"),
            RegistryKind::HostACr => Some("https://ghcr.io"),
            _ => None,
        }
    }
}

impl RegistryKind {
    /// The `config` members a registry of this kind is reached with (the secret ones among
    /// them are never shown back); `GET /availableContainerRegistry` lists them.
    pub fn config_members(self) -> &'static [&'static str] {
        match self {
            RegistryKind::Ecr => &["access_key_id", "secret_access_key", "region"],
            RegistryKind::AltCloudCr => &[
                "altcloud_access_key",
                "altcloud_secret_key",
                "altcloud_project_id",
                "region",
            ],
            RegistryKind::PublicEcr => &[],
            RegistryKind::GcpArtifactRegistry => &["region", "project_id", "json_credentials"],
            RegistryKind::CloudCCr => &["cloudC_tenant_id", "cloudC_subscription_id"],
            RegistryKind::DockerHub
            | RegistryKind::HostACr
            | RegistryKind::HostAEnterpriseCr
            | RegistryKind::HostBCr
            | RegistryKind::Docr
            | RegistryKind::GenericCr => &["username", "password"],
        }
    }
}

impl CloudProvider {
    /// The provider's name as people write it.
    pub fn display_name(self) -> &'static str {
        match self {
            CloudProvider::CloudA => "CloudA",
            CloudProvider::AltCloud => "AltCloud",
            CloudProvider::CloudC => "CloudC",
            CloudProvider::OnPremise => "On-premise",
        }
    }
}

string_enum!(HelmRepositoryKind {
    Https => "HTTPS",
    OciEcr => "OCI_ECR",
    OciScalewayCr => "OCI_SCALEWAY_CR",
    OciDockerHub => "OCI_DOCKER_HUB",
    OciPublicEcr => "OCI_PUBLIC_ECR",
    OciGenericCr => "OCI_GENERIC_CR",
    OciGithubCr => "OCI_GITHUB_CR",
    OciGitlabCr => "OCI_GITLAB_CR",
});

impl HelmRepositoryKind {
    /// The `config` members a repository of this kind is reached with.
    pub fn config_members(self) -> &'static [&'static str] {
        match self {
            HelmRepositoryKind::OciEcr => &["access_key_id", "secret_access_key", "region"],
            HelmRepositoryKind::OciScalewayCr => &[
                "altcloud_access_key",
                "altcloud_secret_key",
                "altcloud_project_id",
                "region",
            ],
            HelmRepositoryKind::OciPublicEcr => &[],
            HelmRepositoryKind::Https
            | HelmRepositoryKind::OciDockerHub
            | HelmRepositoryKind::OciGenericCr
            | HelmRepositoryKind::OciGithubCr
            | HelmRepositoryKind::OciGitlabCr => &["username", "password"],
        }
    }

    /// The address used when a repository of this kind is created without one.
    pub fn default_url(self) -> Option<&'static str> {
        match self {
            HelmRepositoryKind::OciDockerHub => Some("oci://registry-1.docker.io"),
            HelmRepositoryKind::OciPublicEcr => Some("oci://public.ecr.aws"),
            HelmRepositoryKind::OciGithubCr => Some("oci://ghcr.io"),
            HelmRepositoryKind::OciGitlabCr => Some("oci://registry.gitlab.com"),
            _ => None,
        }
    }
}

string_enum!(BuildMode {
    Docker => "DOCKER",
    Buildpacks => "BUILDPACKS",
});

string_enum!(PortProtocol {
    Http => "HTTP",
    Grpc => "GRPC",
    Tcp => "TCP",
    Udp => "UDP",
});

string_enum!(DatabaseType {
    Postgresql => "POSTGRESQL",
    Mysql => "MYSQL",
    Mongodb => "MONGODB",
    Redis => "REDIS",
});

string_enum!(DatabaseMode {
    Container => "CONTAINER",
    Managed => "MANAGED",
});

string_enum!(DatabaseAccessibility {
    Private => "PRIVATE",
    Public => "PUBLIC",
});

string_enum!(JobType {
    Cron => "CRON",
    Lifecycle => "LIFECYCLE",
});

string_enum!(CpuArchitecture {
    Amd64 => "AMD64",
    Arm64 => "ARM64",
});

// `string_enum!` takes no attributes on variants, so `#[default]` cannot be derived.
#[allow(clippy::derivable_impls)]
impl Default for CpuArchitecture {
    fn default() -> Self {
        CpuArchitecture::Amd64
    }
}

string_enum!(StorageType {
    FastSsd => "FAST_SSD",
});

string_enum!(
    /// What an automatic deployment of a terraform service runs.
    TerraformAction {
        Default => "DEFAULT",
        Plan => "PLAN",
        Noop => "NOOP",
    }
);

string_enum!(TerraformEngine {
    Terraform => "TERRAFORM",
    OpenTofu => "OPEN_TOFU",
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_names_round_trip() {
        for k in ServiceKind::ALL {
            assert_eq!(k.as_str().parse::<ServiceKind>(), Ok(*k));
            assert_eq!(
                serde_json::to_value(k).unwrap(),
                serde_json::json!(k.as_str())
            );
        }
        assert_eq!(
            "NOPE".parse::<EnvironmentMode>().unwrap_err(),
            "must be one of DEVELOPMENT, PREVIEW, PRODUCTION, STAGING"
        );
    }
}

string_enum!(
    /// Endpoint 15's status.
    WebhookState {
        Active => "ACTIVE",
        NotConfigured => "NOT_CONFIGURED",
        Misconfigured => "MISCONFIGURED",
        UnableToVerify => "UNABLE_TO_VERIFY",
    }
);
