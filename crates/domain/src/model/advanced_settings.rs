//! Advanced settings: a flat map of dotted keys, each typed and with a default. One mechanism
//! for every table of settings (clusters here, services in `service_settings_tables`); a record
//! stores only the values set on it.

use crate::error::DomainError;
use serde_json::{Map, Value};

/// What values a setting takes.
#[derive(Debug, Clone, Copy)]
pub enum SettingKind {
    Int {
        min: Option<i64>,
        max: Option<i64>,
        nullable: bool,
    },
    Bool,
    Text {
        nullable: bool,
    },
    OneOf(&'static [&'static str]),
    TextList,
    TextMap,
}

/// One setting: its key, its kind, its default (JSON text).
#[derive(Debug, Clone, Copy)]
pub struct Setting {
    pub key: &'static str,
    pub kind: SettingKind,
    pub default: &'static str,
}

pub const fn int(key: &'static str, min: Option<i64>, default: &'static str) -> Setting {
    Setting {
        key,
        kind: SettingKind::Int {
            min,
            max: None,
            nullable: false,
        },
        default,
    }
}

pub const fn boolean(key: &'static str, default: &'static str) -> Setting {
    Setting {
        key,
        kind: SettingKind::Bool,
        default,
    }
}

pub const fn text(key: &'static str, default: &'static str) -> Setting {
    Setting {
        key,
        kind: SettingKind::Text { nullable: false },
        default,
    }
}

pub const fn one_of(
    key: &'static str,
    values: &'static [&'static str],
    default: &'static str,
) -> Setting {
    Setting {
        key,
        kind: SettingKind::OneOf(values),
        default,
    }
}

pub const fn int_in(key: &'static str, min: i64, max: i64, default: &'static str) -> Setting {
    Setting {
        key,
        kind: SettingKind::Int {
            min: Some(min),
            max: Some(max),
            nullable: false,
        },
        default,
    }
}

/// An integer that may be null, and is by default.
pub const fn nullable_int(key: &'static str, min: i64) -> Setting {
    Setting {
        key,
        kind: SettingKind::Int {
            min: Some(min),
            max: None,
            nullable: true,
        },
        default: "null",
    }
}

/// A string that may be null, and is by default.
pub const fn nullable_text(key: &'static str) -> Setting {
    Setting {
        key,
        kind: SettingKind::Text { nullable: true },
        default: "null",
    }
}

pub const fn text_list(key: &'static str, default: &'static str) -> Setting {
    Setting {
        key,
        kind: SettingKind::TextList,
        default,
    }
}

pub const fn text_map(key: &'static str) -> Setting {
    Setting {
        key,
        kind: SettingKind::TextMap,
        default: "{}",
    }
}

impl SettingKind {
    /// Why `value` is not one of this kind's values.
    fn refuse(&self, value: &Value) -> Option<String> {
        match (self, value) {
            (SettingKind::Int { nullable: true, .. }, Value::Null)
            | (SettingKind::Text { nullable: true }, Value::Null) => None,
            (SettingKind::Int { min, max, .. }, Value::Number(n)) => match n.as_i64() {
                None => Some("must be an integer".into()),
                Some(v) if min.is_some_and(|m| v < m) => {
                    Some(format!("must be at least {}", min.unwrap_or_default()))
                }
                Some(v) if max.is_some_and(|m| v > m) => {
                    Some(format!("must be at most {}", max.unwrap_or_default()))
                }
                Some(_) => None,
            },
            (SettingKind::Int { .. }, _) => Some("must be an integer".into()),
            (SettingKind::Bool, Value::Bool(_)) => None,
            (SettingKind::Bool, _) => Some("must be true or false".into()),
            (SettingKind::Text { .. }, Value::String(_)) => None,
            (SettingKind::Text { .. }, _) => Some("must be a string".into()),
            (SettingKind::OneOf(values), Value::String(s)) if values.contains(&s.as_str()) => None,
            (SettingKind::OneOf(values), _) => Some(format!(
                "must be one of {}",
                values
                    .iter()
                    .map(|v| if v.is_empty() { "\"\"" } else { v })
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            (SettingKind::TextList, Value::Array(items)) if items.iter().all(Value::is_string) => {
                None
            }
            (SettingKind::TextList, _) => Some("must be a list of strings".into()),
            (SettingKind::TextMap, Value::Object(m)) if m.values().all(Value::is_string) => None,
            (SettingKind::TextMap, _) => Some("must be an object of strings".into()),
        }
    }
}

/// A table of settings, made of parts that several tables share.
pub struct SettingsTable(pub &'static [&'static [Setting]]);

impl SettingsTable {
    pub fn settings(&self) -> impl Iterator<Item = &'static Setting> {
        self.0.iter().flat_map(|part| part.iter())
    }

    /// Every setting with its default.
    pub fn defaults(&self) -> Map<String, Value> {
        self.shown(&Map::new())
    }

    /// Every setting with its value: the one set, else the default.
    pub fn shown(&self, set: &Map<String, Value>) -> Map<String, Value> {
        self.settings()
            .map(|s| {
                let value = set
                    .get(s.key)
                    .cloned()
                    .unwrap_or_else(|| serde_json::from_str(s.default).unwrap_or(Value::Null));
                (s.key.to_string(), value)
            })
            .collect()
    }

    /// The values set after an edit: each sent key is checked (an unknown key, or a value of
    /// the wrong type or range, is refused naming the key); a key not sent keeps its value; a
    /// value equal to the default is not kept apart from it.
    pub fn edit(
        &self,
        set: &Map<String, Value>,
        sent: &Value,
    ) -> Result<Map<String, Value>, DomainError> {
        let Value::Object(sent) = sent else {
            return Err(DomainError::invalid("body", "must be a JSON object"));
        };
        let mut out = set.clone();
        for (key, value) in sent {
            let setting = self
                .settings()
                .find(|s| s.key == key)
                .ok_or_else(|| DomainError::invalid(key.clone(), "is not an advanced setting"))?;
            if let Some(why) = setting.kind.refuse(value) {
                return Err(DomainError::invalid(key.clone(), why));
            }
            if serde_json::from_str::<Value>(setting.default).ok().as_ref() == Some(value) {
                out.remove(key);
            } else {
                out.insert(key.clone(), value.clone());
            }
        }
        Ok(out)
    }
}

const CPU_M: Option<i64> = Some(1);
const ANYWHERE: &str = r#"["0.0.0.0/0"]"#;

/// A cluster's advanced settings (the keys of the public description's
/// `ClusterAdvancedSettings`), with Capstan's defaults; docs/records.md lists them.
pub static CLUSTER_SETTINGS: SettingsTable = SettingsTable(&[CLUSTER]);

const CLUSTER: &[Setting] = &[
    int("cloudA.cloudwatch.eks_logs_retention_days", Some(0), "90"),
    boolean("cloudA.vpc.enable_s3_flow_logs", "false"),
    int("cloudA.vpc.flow_logs_retention_days", Some(0), "365"),
    boolean("cloudA.vpc.enable_nat_gateway_secondary_eip", "false"),
    int("loki.log_retention_in_week", Some(1), "12"),
    one_of(
        "loki.deployment_mode",
        &["single_binary", "simple_scalable"],
        r#""single_binary""#,
    ),
    int("loki.single_binary.cpu_request_m", CPU_M, "100"),
    int("loki.single_binary.cpu_limit_m", CPU_M, "1000"),
    int("loki.single_binary.memory_request_mib", CPU_M, "512"),
    int("loki.single_binary.memory_limit_mib", CPU_M, "2048"),
    int("loki.write.cpu_request_m", CPU_M, "100"),
    int("loki.write.cpu_limit_m", CPU_M, "1000"),
    int("loki.write.memory_request_mib", CPU_M, "256"),
    int("loki.write.memory_limit_mib", CPU_M, "1024"),
    int("loki.read.cpu_request_m", CPU_M, "100"),
    int("loki.read.cpu_limit_m", CPU_M, "1000"),
    int("loki.read.memory_request_mib", CPU_M, "256"),
    int("loki.read.memory_limit_mib", CPU_M, "1024"),
    int("loki.backend.cpu_request_m", CPU_M, "100"),
    int("loki.backend.cpu_limit_m", CPU_M, "1000"),
    int("loki.backend.memory_request_mib", CPU_M, "256"),
    int("loki.backend.memory_limit_mib", CPU_M, "1024"),
    int("registry.image_retention_time", Some(0), "31536000"),
    Setting {
        key: "cloud_provider.container_registry.tags",
        kind: SettingKind::TextMap,
        default: "{}",
    },
    boolean("cloudA.eks.enable_alb_controller", "true"),
    boolean("cloudA.eks.enable_efs_addon", "false"),
    one_of(
        "cloudA.eks.efs.throughput_mode",
        &["bursting", "elastic", "provisioned"],
        r#""elastic""#,
    ),
    one_of(
        "cloudA.eks.efs.performance_mode",
        &["generalPurpose", "maxIO"],
        r#""generalPurpose""#,
    ),
    one_of(
        "cloudA.eks.efs.transition_to_ia",
        &[
            "AFTER_1_DAY",
            "AFTER_7_DAYS",
            "AFTER_14_DAYS",
            "AFTER_30_DAYS",
            "AFTER_60_DAYS",
            "AFTER_90_DAYS",
            "",
        ],
        r#""AFTER_30_DAYS""#,
    ),
    text("load_balancer.size", r#""lb-s""#),
    boolean("database.postgresql.deny_any_access", "false"),
    Setting {
        key: "database.postgresql.allowed_cidrs",
        kind: SettingKind::TextList,
        default: ANYWHERE,
    },
    boolean("database.mysql.deny_any_access", "false"),
    Setting {
        key: "database.mysql.allowed_cidrs",
        kind: SettingKind::TextList,
        default: ANYWHERE,
    },
    boolean("database.mongodb.deny_any_access", "false"),
    Setting {
        key: "database.mongodb.allowed_cidrs",
        kind: SettingKind::TextList,
        default: ANYWHERE,
    },
    boolean("database.redis.deny_any_access", "false"),
    Setting {
        key: "database.redis.allowed_cidrs",
        kind: SettingKind::TextList,
        default: ANYWHERE,
    },
    text("cloudA.iam.admin_group", r#""Admins""#),
    one_of(
        "cloudA.eks.ec2.metadata_imds",
        &["optional", "required"],
        r#""required""#,
    ),
    text("cloudA.eks.ec2.ami", r#""AmazonLinux2023""#),
    int("pleco.resources_ttl", None, "-1"),
    one_of(
        "registry.mirroring_mode",
        &["Cluster", "Service"],
        r#""Service""#,
    ),
    int("nginx.vcpu.request_in_milli_cpu", CPU_M, "100"),
    int("nginx.vcpu.limit_in_milli_cpu", CPU_M, "500"),
    int("nginx.memory.request_in_mib", CPU_M, "768"),
    int("nginx.memory.limit_in_mib", CPU_M, "768"),
    Setting {
        key: "envoy.gateway_api.http_request_timeout_seconds",
        kind: SettingKind::Int {
            min: Some(0),
            max: None,
            nullable: true,
        },
        default: "null",
    },
    Setting {
        key: "envoy.gateway_api.http_connection_idle_timeout_seconds",
        kind: SettingKind::Int {
            min: Some(0),
            max: None,
            nullable: true,
        },
        default: "null",
    },
    Setting {
        key: "envoy.gateway_api.retry.num_retries",
        kind: SettingKind::Int {
            min: Some(0),
            max: None,
            nullable: true,
        },
        default: "null",
    },
    Setting {
        key: "envoy.gateway_api.retry.retry_on",
        kind: SettingKind::Text { nullable: true },
        default: "null",
    },
    Setting {
        key: "envoy.gateway_api.retry.http_status_codes",
        kind: SettingKind::Text { nullable: true },
        default: "null",
    },
    Setting {
        key: "envoy.gateway_api.retry.per_try_timeout_seconds",
        kind: SettingKind::Int {
            min: Some(1),
            max: None,
            nullable: true,
        },
        default: "null",
    },
    Setting {
        key: "nginx.hpa.cpu_utilization_percentage_threshold",
        kind: SettingKind::Int {
            min: Some(1),
            max: Some(100),
            nullable: false,
        },
        default: "50",
    },
    int("nginx.hpa.min_number_instances", Some(1), "2"),
    int("nginx.hpa.max_number_instances", Some(1), "25"),
    text("storageclass.fast_ssd", r#""gp3""#),
    boolean("qovery.static_ip_mode", "false"),
    Setting {
        key: "k8s.api.allowed_public_access_cidrs",
        kind: SettingKind::TextList,
        default: ANYWHERE,
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_default_is_a_value_of_its_kind() {
        let tables = [&CLUSTER_SETTINGS].into_iter().chain(
            super::super::service_settings_tables::ALL
                .iter()
                .map(|(_, t)| *t),
        );
        for table in tables {
            let mut keys = std::collections::HashSet::new();
            for s in table.settings() {
                let default: Value = serde_json::from_str(s.default).unwrap();
                assert_eq!(s.kind.refuse(&default), None, "{}", s.key);
                assert!(keys.insert(s.key), "{} twice in one table", s.key);
            }
        }
    }

    #[test]
    fn edits_are_checked_kept_and_shown_over_the_defaults() {
        let set = CLUSTER_SETTINGS
            .edit(
                &Map::new(),
                &json!({"loki.log_retention_in_week": 4, "cloudA.eks.enable_alb_controller": true}),
            )
            .unwrap();
        // The default sent back is not kept apart.
        assert_eq!(
            set,
            json!({"loki.log_retention_in_week": 4})
                .as_object()
                .cloned()
                .unwrap()
        );
        let shown = CLUSTER_SETTINGS.shown(&set);
        assert_eq!(shown["loki.log_retention_in_week"], 4);
        assert_eq!(shown["loki.deployment_mode"], "single_binary");
        assert_eq!(shown.len(), CLUSTER_SETTINGS.settings().count());
        let later = CLUSTER_SETTINGS
            .edit(&set, &json!({"qovery.static_ip_mode": true}))
            .unwrap();
        assert_eq!(later.len(), 2, "a key not sent keeps its value");
        for (sent, message) in [
            (json!({"nope": 1}), "nope: is not an advanced setting"),
            (
                json!({"loki.log_retention_in_week": "4"}),
                "loki.log_retention_in_week: must be an integer",
            ),
            (
                json!({"loki.log_retention_in_week": 0}),
                "loki.log_retention_in_week: must be at least 1",
            ),
            (
                json!({"nginx.hpa.cpu_utilization_percentage_threshold": 101}),
                "nginx.hpa.cpu_utilization_percentage_threshold: must be at most 100",
            ),
            (
                json!({"loki.deployment_mode": "cluster"}),
                "loki.deployment_mode: must be one of single_binary, simple_scalable",
            ),
            (
                json!({"database.redis.allowed_cidrs": [1]}),
                "database.redis.allowed_cidrs: must be a list of strings",
            ),
            (json!([]), "body: must be a JSON object"),
        ] {
            let err = CLUSTER_SETTINGS.edit(&set, &sent).unwrap_err();
            assert_eq!(err.to_string(), message);
        }
        assert!(CLUSTER_SETTINGS
            .edit(&set, &json!({"envoy.gateway_api.retry.num_retries": null}))
            .is_ok());
    }
}
