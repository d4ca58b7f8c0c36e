//! The pieces every stored form is made of: how one member's stored value turns into the
//! domain's and back ([`Form`]), values stored as their text ([`Text`]), and the macro that
//! declares a stored struct member for member beside the domain struct it holds.

use serde::{de, Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;
use std::fmt::Display;
use std::str::FromStr;

/// A stored value of a domain value: written from it, read back into it.
pub(super) trait Form: Sized {
    type Domain;
    fn write(value: &Self::Domain) -> Self;
    fn read(self) -> Self::Domain;
}

/// Values whose stored form is themselves: plain data the API's members cannot rename.
macro_rules! stored_as_is {
    ($($ty:ty),* $(,)?) => {$(
        impl Form for $ty {
            type Domain = $ty;
            fn write(value: &$ty) -> Self {
                value.clone()
            }
            fn read(self) -> $ty {
                self
            }
        }
    )*};
}

stored_as_is!(
    String,
    bool,
    i64,
    uuid::Uuid,
    serde_json::Value,
    time::OffsetDateTime
);

impl<T: Form> Form for Option<T> {
    type Domain = Option<T::Domain>;
    fn write(value: &Self::Domain) -> Self {
        value.as_ref().map(T::write)
    }
    fn read(self) -> Self::Domain {
        self.map(T::read)
    }
}

impl<T: Form> Form for Vec<T> {
    type Domain = Vec<T::Domain>;
    fn write(value: &Self::Domain) -> Self {
        value.iter().map(T::write).collect()
    }
    fn read(self) -> Self::Domain {
        self.into_iter().map(T::read).collect()
    }
}

impl<T: Form> Form for BTreeMap<String, T> {
    type Domain = BTreeMap<String, T::Domain>;
    fn write(value: &Self::Domain) -> Self {
        value
            .iter()
            .map(|(k, v)| (k.clone(), T::write(v)))
            .collect()
    }
    fn read(self) -> Self::Domain {
        self.into_iter().map(|(k, v)| (k, v.read())).collect()
    }
}

/// A closed set's value or a typed id, stored as its text: the wire name or id the record's
/// columns hold too, not what the serde derive of the domain type writes for the API.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Text<T>(pub(super) T);

impl<T: Display> Serialize for Text<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&self.0)
    }
}

impl<'de, T: FromStr> Deserialize<'de> for Text<T>
where
    T::Err: Display,
{
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = std::borrow::Cow::<str>::deserialize(deserializer)?;
        text.parse()
            .map(Text)
            .map_err(|e| de::Error::custom(format!("{text:?}: {e}")))
    }
}

impl<T: Copy> Form for Text<T> {
    type Domain = T;
    fn write(value: &T) -> Self {
        Text(*value)
    }
    fn read(self) -> T {
        self.0
    }
}

/// `#[serde(default = "number::<N>")]`: the value a record stored before its member read as.
pub(super) fn number<const N: i64>() -> i64 {
    N
}

/// Declares `$stored`, the stored form of the domain struct `$domain`: the same members
/// (serde attributes give their stored names and what records that lack them read as), each
/// converted by its [`Form`].
///
/// With `+ runtime` (applications, containers) or `+ workload` (jobs), the members of the
/// spec's `runtime` ([`domain::model::Runtime`], whose `workload` is a
/// [`domain::model::Workload`]) or of its `workload` follow the kind's own at the same level,
/// as they have been stored since they existed. They are listed here rather than read through
/// `#[serde(flatten)]`, which buffers every member of every record before it reads one (and
/// lists read many).
macro_rules! stored {
    ($(#[$meta:meta])* $stored:ident => $domain:ident {
        $($(#[$attr:meta])* $field:ident: $ty:ty),* $(,)?
    }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
        pub(super) struct $stored {
            $($(#[$attr])* $field: $ty,)*
        }

        impl Form for $stored {
            type Domain = $domain;
            fn write(value: &$domain) -> Self {
                Self { $($field: <$ty as Form>::write(&value.$field),)* }
            }
            fn read(self) -> $domain {
                $domain { $($field: self.$field.read(),)* }
            }
        }
    };

    ($(#[$meta:meta])* $stored:ident => $domain:ident + runtime {
        $($(#[$attr:meta])* $field:ident: $ty:ty),* $(,)?
    }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
        pub(super) struct $stored {
            $($(#[$attr])* $field: $ty,)*
            ports: Vec<StoredPort>,
            arguments: Vec<String>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            entrypoint: Option<String>,
            auto_deploy: bool,
            cpu: i64,
            memory: i64,
            min_running_instances: i64,
            max_running_instances: i64,
            #[serde(default)]
            storage: Vec<StoredVolume>,
            #[serde(default)]
            gpu: i64,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            ephemeral_storage_in_gib: Option<i64>,
            #[serde(default)]
            cpu_architecture: Text<domain::model::CpuArchitecture>,
            #[serde(default)]
            auto_preview: bool,
            #[serde(default)]
            healthchecks: StoredHealthchecks,
            #[serde(default)]
            icon_uri: String,
        }

        impl Form for $stored {
            type Domain = $domain;
            fn write(value: &$domain) -> Self {
                let r = &value.runtime;
                let w = &r.workload;
                Self {
                    $($field: <$ty as Form>::write(&value.$field),)*
                    ports: Form::write(&r.ports),
                    arguments: r.arguments.clone(),
                    entrypoint: r.entrypoint.clone(),
                    auto_deploy: r.auto_deploy,
                    cpu: r.cpu,
                    memory: r.memory,
                    min_running_instances: r.min_running_instances,
                    max_running_instances: r.max_running_instances,
                    storage: Form::write(&r.storage),
                    gpu: w.gpu,
                    ephemeral_storage_in_gib: w.ephemeral_storage_in_gib,
                    cpu_architecture: Text(w.cpu_architecture),
                    auto_preview: w.auto_preview,
                    healthchecks: Form::write(&w.healthchecks),
                    icon_uri: w.icon_uri.clone(),
                }
            }
            fn read(self) -> $domain {
                $domain {
                    $($field: self.$field.read(),)*
                    runtime: domain::model::Runtime {
                        ports: self.ports.read(),
                        arguments: self.arguments,
                        entrypoint: self.entrypoint,
                        auto_deploy: self.auto_deploy,
                        cpu: self.cpu,
                        memory: self.memory,
                        min_running_instances: self.min_running_instances,
                        max_running_instances: self.max_running_instances,
                        storage: self.storage.read(),
                        workload: domain::model::Workload {
                            gpu: self.gpu,
                            ephemeral_storage_in_gib: self.ephemeral_storage_in_gib,
                            cpu_architecture: self.cpu_architecture.0,
                            auto_preview: self.auto_preview,
                            healthchecks: self.healthchecks.read(),
                            icon_uri: self.icon_uri,
                        },
                    },
                }
            }
        }
    };

    ($(#[$meta:meta])* $stored:ident => $domain:ident + workload {
        $($(#[$attr:meta])* $field:ident: $ty:ty),* $(,)?
    }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
        pub(super) struct $stored {
            $($(#[$attr])* $field: $ty,)*
            #[serde(default)]
            gpu: i64,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            ephemeral_storage_in_gib: Option<i64>,
            #[serde(default)]
            cpu_architecture: Text<domain::model::CpuArchitecture>,
            #[serde(default)]
            auto_preview: bool,
            #[serde(default)]
            healthchecks: StoredHealthchecks,
            #[serde(default)]
            icon_uri: String,
        }

        impl Form for $stored {
            type Domain = $domain;
            fn write(value: &$domain) -> Self {
                let w = &value.workload;
                Self {
                    $($field: <$ty as Form>::write(&value.$field),)*
                    gpu: w.gpu,
                    ephemeral_storage_in_gib: w.ephemeral_storage_in_gib,
                    cpu_architecture: Text(w.cpu_architecture),
                    auto_preview: w.auto_preview,
                    healthchecks: Form::write(&w.healthchecks),
                    icon_uri: w.icon_uri.clone(),
                }
            }
            fn read(self) -> $domain {
                $domain {
                    $($field: self.$field.read(),)*
                    workload: domain::model::Workload {
                        gpu: self.gpu,
                        ephemeral_storage_in_gib: self.ephemeral_storage_in_gib,
                        cpu_architecture: self.cpu_architecture.0,
                        auto_preview: self.auto_preview,
                        healthchecks: self.healthchecks.read(),
                        icon_uri: self.icon_uri,
                    },
                }
            }
        }
    };
}
