//! Typed identifiers: an `EnvironmentId` cannot be passed where a `ProjectId` is expected.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use std::sync::Mutex;
use uuid::Uuid;

/// Where fresh ids come from. Random by default; seeded (`CAPSTAN_ID_SEED`), each kind of id
/// has its own sequence drawn from the seed, so a test suite that makes the same calls in the
/// same order gets the same ids run after run, whatever background work draws ids of other
/// kinds meanwhile.
#[derive(Debug, Default)]
pub struct IdSource {
    seed: Option<u64>,
    /// How many ids of each kind were drawn since the seed was set.
    drawn: std::collections::HashMap<&'static str, u64>,
}

impl IdSource {
    pub fn seeded(seed: u64) -> Self {
        Self {
            seed: Some(seed),
            drawn: Default::default(),
        }
    }

    /// Draws from `seed` from now on (none: random). The seed it already has goes on where
    /// it was: a second server of the same process, started with the same seed, must not
    /// draw again the ids the first already drew.
    pub fn reseed(&mut self, seed: Option<u64>) {
        if self.seed != seed {
            *self = Self {
                seed,
                drawn: Default::default(),
            };
        }
    }

    /// The next id of `kind`.
    pub fn next(&mut self, kind: &'static str) -> Uuid {
        let Some(seed) = self.seed else {
            return Uuid::new_v4();
        };
        let n = self.drawn.entry(kind).or_insert(0);
        *n += 1;
        let base = splitmix(seed ^ fnv(kind)).wrapping_add(n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let (high, low) = (splitmix(base), splitmix(base ^ 0xD1B5_4A32_D192_ED03));
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&high.to_be_bytes());
        bytes[8..].copy_from_slice(&low.to_be_bytes());
        // Still a version-4 UUID to anyone who reads it.
        uuid::Builder::from_random_bytes(bytes).into_uuid()
    }
}

/// SplitMix64's finalizer: spreads every bit of its input over the output.
fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// FNV-1a of a kind's name: its sequence's own start.
fn fnv(kind: &str) -> u64 {
    kind.bytes().fold(0xCBF2_9CE4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3)
    })
}

/// The process's id source. A process has one: ids are drawn from deep inside records'
/// constructors, where no handle reaches.
static SOURCE: Mutex<Option<IdSource>> = Mutex::new(None);

fn with_source<R>(f: impl FnOnce(&mut IdSource) -> R) -> R {
    let mut guard = SOURCE.lock().unwrap_or_else(|e| e.into_inner());
    f(guard.get_or_insert_with(IdSource::default))
}

/// A fresh id of `kind` from the process's source.
pub fn fresh(kind: &'static str) -> Uuid {
    with_source(|s| s.next(kind))
}

/// Draws every id of this process from `seed` from now on (none: random again).
pub fn seed_ids(seed: Option<u64>) {
    with_source(|s| s.reseed(seed));
}

/// A text that is not an id in the one form ids are written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotAnId;

impl fmt::Display for NotAnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not a UUID in its hyphenated form (8-4-4-4-12 hexadecimal digits)")
    }
}

impl std::error::Error for NotAnId {}

/// An id as the description's `format: uuid` has it: the hyphenated form only. The braced,
/// `urn:uuid:` and bare forms the uuid crate also reads name the same id in another spelling,
/// which no client of the API writes and no answer shows.
pub fn parse_uuid(s: &str) -> Result<Uuid, NotAnId> {
    if s.len() != 36 {
        return Err(NotAnId);
    }
    Uuid::try_parse(s).map_err(|_| NotAnId)
}

/// Reads an id strictly (see [`parse_uuid`]) from a string.
struct StrictVisitor;

impl serde::de::Visitor<'_> for StrictVisitor {
    type Value = Uuid;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a UUID in its hyphenated form")
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Uuid, E> {
        parse_uuid(v).map_err(|_| E::custom(format!("'{v}' is not a valid UUID")))
    }
}

/// `#[serde(deserialize_with = "strict_uuid")]` for a `Uuid` member of a request body.
pub fn strict_uuid<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Uuid, D::Error> {
    d.deserialize_str(StrictVisitor)
}

/// A `Uuid` read strictly, for members that hold several or may be absent, and for the
/// store's columns of plain UUIDs (no id type names them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "diesel",
    derive(diesel::expression::AsExpression, diesel::deserialize::FromSqlRow),
    diesel(sql_type = diesel::sql_types::Text)
)]
pub struct StrictUuid(pub Uuid);

#[cfg(feature = "diesel")]
text_column!(StrictUuid);

impl fmt::Display for StrictUuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl FromStr for StrictUuid {
    type Err = NotAnId;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_uuid(s).map(Self)
    }
}

impl<'de> Deserialize<'de> for StrictUuid {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(StrictVisitor).map(StrictUuid)
    }
}

/// `#[serde(deserialize_with = "strict_uuids")]` for a `Vec<Uuid>` member.
pub fn strict_uuids<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Uuid>, D::Error> {
    Ok(Vec::<StrictUuid>::deserialize(d)?
        .into_iter()
        .map(|u| u.0)
        .collect())
}

/// `#[serde(deserialize_with = "strict_uuid_option")]` for an `Option<Uuid>` member (with
/// `#[serde(default)]`).
pub fn strict_uuid_option<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Uuid>, D::Error> {
    Ok(Option::<StrictUuid>::deserialize(d)?.map(|u| u.0))
}

macro_rules! typed_id {
    ($($name:ident),* $(,)?) => {$(
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
        #[serde(transparent)]
        #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
        #[cfg_attr(
            feature = "diesel",
            derive(diesel::expression::AsExpression, diesel::deserialize::FromSqlRow),
            diesel(sql_type = diesel::sql_types::Text)
        )]
        pub struct $name(pub Uuid);

        #[cfg(feature = "diesel")]
        text_column!($name);

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                d.deserialize_str(StrictVisitor).map(Self)
            }
        }

        impl $name {
            /// A fresh id: random, or the next of this kind's seeded sequence
            /// (see [`seed_ids`]).
            pub fn generate() -> Self {
                Self(fresh(stringify!($name)))
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
            type Err = NotAnId;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                parse_uuid(s).map(Self)
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
    BackupId,
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_read_in_their_hyphenated_form_only() {
        let id = "67e55044-10b1-426f-9247-bb680e5fe0c8";
        assert_eq!(parse_uuid(id).unwrap().to_string(), id);
        assert!(
            parse_uuid(&id.to_uppercase()).is_ok(),
            "hex digits in either case"
        );
        for other in [
            "{67e55044-10b1-426f-9247-bb680e5fe0c8}",
            "urn:uuid:67e55044-10b1-426f-9247-bb680e5fe0c8",
            "67e5504410b1426f9247bb680e5fe0c8",
            "67e55044-10b1-426f-9247-bb680e5fe0c",
            "",
        ] {
            assert_eq!(parse_uuid(other), Err(NotAnId), "{other}");
            assert!(other.parse::<ProjectId>().is_err(), "{other}");
            let json = serde_json::Value::String(other.to_string());
            assert!(serde_json::from_value::<ProjectId>(json.clone()).is_err());
            assert!(serde_json::from_value::<StrictUuid>(json).is_err());
        }
        let read: ProjectId = serde_json::from_value(serde_json::json!(id)).unwrap();
        assert_eq!(read.to_string(), id);
    }

    #[test]
    fn a_seed_gives_the_same_ids_per_kind_whatever_else_is_drawn() {
        let mut a = IdSource::seeded(7);
        let mut b = IdSource::seeded(7);
        let first: Vec<Uuid> = (0..3).map(|_| a.next("ProjectId")).collect();
        b.next("EventId");
        let second: Vec<Uuid> = (0..3)
            .map(|_| {
                b.next("EventId");
                b.next("ProjectId")
            })
            .collect();
        assert_eq!(first, second);
        assert_eq!(first[0].get_version_num(), 4);
        assert_ne!(first[0], first[1]);
        assert_ne!(a.next("ServiceId"), a.next("ProjectId"));
        assert_ne!(IdSource::seeded(8).next("ProjectId"), first[0]);
    }

    #[test]
    fn the_same_seed_again_goes_on_and_another_starts_afresh() {
        let mut s = IdSource::seeded(7);
        let first = s.next("ProjectId");
        s.reseed(Some(7));
        let second = s.next("ProjectId");
        assert_ne!(first, second, "never drawn twice");
        assert_eq!(second, {
            let mut again = IdSource::seeded(7);
            again.next("ProjectId");
            again.next("ProjectId")
        });
        s.reseed(Some(8));
        assert_eq!(s.next("ProjectId"), IdSource::seeded(8).next("ProjectId"));
        s.reseed(None);
        assert_ne!(s.next("ProjectId"), s.next("ProjectId"));
    }

    #[test]
    fn unseeded_ids_are_random() {
        let mut s = IdSource::default();
        assert_ne!(s.next("ProjectId"), s.next("ProjectId"));
    }
}
