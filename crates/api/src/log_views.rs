//! Deployment logs as the public API shows them: `EnvironmentLogs` (v2, `/logs`) and
//! `EnvironmentLog` (v1, `/log`).

use domain::model::{LogLevel, ServiceKind};
use domain::services::{EnvironmentLog, NamedLogLine};
use serde::Serialize;
use time::OffsetDateTime;
use utoipa::ToSchema;
use uuid::Uuid;

#[derive(Serialize, ToSchema)]
pub struct EnvironmentLogs {
    /// The line's level: `info`, `warning` or `error`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    #[serde(with = "time::serde::rfc3339")]
    pub timestamp: OffsetDateTime,
    pub details: LogDetails,
    pub error: Option<LogError>,
    pub message: Option<LogMessage>,
}

#[derive(Serialize, ToSchema)]
pub struct LogDetails {
    pub organization_id: Uuid,
    pub cluster_id: Uuid,
    /// The deployment request that wrote it.
    pub execution_id: String,
    pub transmitter: Transmitter,
    pub stage: LogStage,
}

#[derive(Serialize, ToSchema)]
pub struct Transmitter {
    pub id: Uuid,
    pub name: String,
    #[serde(rename = "type")]
    pub kind: String,
}

#[derive(Serialize, ToSchema)]
pub struct LogStage {
    pub step: String,
    pub id: Option<Uuid>,
    pub name: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub struct LogError {
    pub tag: String,
    pub user_log_message: String,
    pub hint_message: String,
    pub underlying_error: UnderlyingError,
}

#[derive(Serialize, ToSchema)]
pub struct UnderlyingError {
    pub message: String,
    pub full_details: String,
}

#[derive(Serialize, ToSchema)]
pub struct LogMessage {
    pub safe_message: String,
    pub full_details: String,
}

fn kind_name(kind: Option<ServiceKind>) -> String {
    match kind {
        Some(ServiceKind::Terraform) => "TerraformService".into(),
        Some(k) => {
            let upper = k.as_str();
            let mut name = upper[..1].to_string();
            name.push_str(&upper[1..].to_ascii_lowercase());
            name
        }
        None => "Service".into(),
    }
}

impl EnvironmentLogs {
    pub fn all(log: EnvironmentLog) -> Vec<Self> {
        let (org, cluster) = (log.organization_id.0, log.cluster_id.0);
        log.lines
            .into_iter()
            .map(|named| Self::of(named, org, cluster))
            .collect()
    }

    fn of(named: NamedLogLine, org: Uuid, cluster: Uuid) -> Self {
        let NamedLogLine {
            line,
            service,
            hint,
        } = named;
        let (name, kind) = service.map_or((String::new(), None), |(n, k)| (n, Some(k)));
        let message = line.message;
        let error = (line.level == LogLevel::Error).then(|| LogError {
            tag: "DEPLOYMENT_ERROR".into(),
            user_log_message: message.clone(),
            hint_message: hint.unwrap_or_default().into(),
            underlying_error: UnderlyingError {
                message: message.clone(),
                full_details: message.clone(),
            },
        });
        Self {
            kind: match line.level {
                LogLevel::Info => "info",
                LogLevel::Warning => "warning",
                LogLevel::Error => "error",
            },
            timestamp: line.at,
            details: LogDetails {
                organization_id: org,
                cluster_id: cluster,
                execution_id: line.request_id.0.to_string(),
                transmitter: Transmitter {
                    id: line.service_id.0,
                    name,
                    kind: kind_name(kind),
                },
                stage: LogStage {
                    step: line.step.as_str().into(),
                    id: None,
                    name: None,
                },
            },
            error,
            message: Some(LogMessage {
                safe_message: message.clone(),
                full_details: message,
            }),
        }
    }
}

/// v1's line. `service` and `status` are required by the public description without a
/// schema; they carry the service's name and the line's state.
#[derive(Serialize, ToSchema)]
pub struct EnvironmentLogV1 {
    pub id: Uuid,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    pub service: String,
    pub status: &'static str,
    pub scope: LogScope,
    pub state: &'static str,
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execution_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub struct LogScope {
    /// APPLICATION, DATABASE or ENVIRONMENT.
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub name: String,
    pub id: Uuid,
}

#[derive(Serialize, ToSchema)]
pub struct EnvironmentLogV1List {
    pub results: Vec<EnvironmentLogV1>,
}

impl EnvironmentLogV1List {
    pub fn of(log: EnvironmentLog) -> Self {
        let results = log
            .lines
            .into_iter()
            .map(
                |NamedLogLine {
                     line,
                     service,
                     hint,
                 }| {
                    let error = line.level == LogLevel::Error;
                    let (name, kind) = service.map_or((String::new(), None), |(n, k)| (n, Some(k)));
                    let state = if error {
                        "DEPLOYMENT_ERROR"
                    } else {
                        "DEPLOYMENT_IN_PROGRESS"
                    };
                    // A line's id, stable across reads: its request and its place there.
                    let id = Uuid::new_v5(&line.request_id.0, line.position.to_string().as_bytes());
                    EnvironmentLogV1 {
                        id,
                        created_at: line.at,
                        service: name.clone(),
                        status: state,
                        scope: LogScope {
                            kind: if kind == Some(ServiceKind::Database) {
                                "DATABASE"
                            } else {
                                "APPLICATION"
                            },
                            name,
                            id: line.service_id.0,
                        },
                        state,
                        message: Some(line.message),
                        execution_id: error.then(|| line.request_id.0.to_string()),
                        hint: hint.map(str::to_string),
                    }
                },
            )
            .collect();
        Self { results }
    }
}
