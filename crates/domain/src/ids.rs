//! Typed identifiers: an `EnvironmentId` cannot be passed where a `ProjectId` is expected.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use uuid::Uuid;

macro_rules! typed_id {
    ($($name:ident),* $(,)?) => {$(
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
        pub struct $name(pub Uuid);

        impl $name {
            /// A fresh random id.
            pub fn generate() -> Self {
                Self(Uuid::new_v4())
            }
            pub fn as_uuid(&self) -> Uuid {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }

        impl FromStr for $name {
            type Err = uuid::Error;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Uuid::parse_str(s).map(Self)
            }
        }

        impl From<Uuid> for $name {
            fn from(u: Uuid) -> Self {
                Self(u)
            }
        }
    )*};
}

typed_id!(
    OrganizationId,
    ApiTokenId,
    UserId,
    CredentialsId,
    ClusterId,
    ProjectId,
    EnvironmentId,
    ServiceId,
    ContainerRegistryId,
    GitTokenId,
    RoleId,
    VariableId,
    DeploymentRequestId,
    DeploymentStageId,
    InvitationId,
    HelmRepositoryId,
    DeploymentRestrictionId,
    CustomDomainId,
    MetadataGroupId,
    DeploymentRuleId,
    WebhookId,
    EventId,
    DeliveryId,
    AttemptId,
);
