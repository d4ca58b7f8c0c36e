//! Members that several service kinds share beyond how they run: health probes, volumes, GPU
//! and ephemeral storage, CPU architecture, preview environments, the icon, resource maxima.

use super::{CpuArchitecture, Port, ServiceKind, StorageType};
use crate::error::DomainError;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The most a service may ask for: CPU in millicores, memory in MiB, GPUs. Shown on
/// applications, containers and jobs as `maximum_*` (databases: CPU and memory), and enforced
/// on their requests.
pub const MAXIMUM_CPU: i64 = 16_000;
pub const MAXIMUM_MEMORY: i64 = 65_536;
pub const MAXIMUM_GPU: i64 = 8;

/// The icon a service shows when created without one.
pub fn default_icon(kind: ServiceKind) -> String {
    format!("app://capstan/{}", kind.path_segment())
}

/// An icon is any absolute URI (`app://...`, `https://...`).
pub fn icon_uri(kind: ServiceKind, value: Option<String>) -> Result<String, DomainError> {
    match value {
        None => Ok(default_icon(kind)),
        Some(v) => match url::Url::parse(v.trim()) {
            Ok(_) => Ok(v.trim().to_string()),
            Err(_) => Err(DomainError::invalid(
                "icon_uri",
                "must be an absolute URI such as app://capstan/application",
            )),
        },
    }
}

/// `value`, or `default`, checked to lie in `0..=maximum`.
pub fn bounded(
    field: &str,
    value: Option<i64>,
    default: i64,
    maximum: i64,
) -> Result<i64, DomainError> {
    let v = value.unwrap_or(default);
    if (0..=maximum).contains(&v) {
        Ok(v)
    } else {
        Err(DomainError::invalid(
            field,
            format!("must be between 0 and {maximum}"),
        ))
    }
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecProbe {
    pub command: Vec<String>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GrpcProbe {
    pub port: i64,
    #[serde(default)]
    pub service: Option<String>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HttpProbe {
    pub port: i64,
    #[serde(default = "root")]
    pub path: String,
    #[serde(default = "http")]
    pub scheme: String,
}

fn root() -> String {
    "/".into()
}

fn http() -> String {
    "HTTP".into()
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TcpProbe {
    pub port: i64,
    #[serde(default)]
    pub host: Option<String>,
}

/// How a probe checks the service: exactly one of the four.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProbeType {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec: Option<ExecProbe>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc: Option<GrpcProbe>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpProbe>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpProbe>,
}

/// A probe with the public API's defaults for its timings.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Probe {
    #[serde(rename = "type", default)]
    pub probe_type: ProbeType,
    #[serde(default = "thirty")]
    pub initial_delay_seconds: i64,
    #[serde(default = "ten")]
    pub period_seconds: i64,
    #[serde(default = "five")]
    pub timeout_seconds: i64,
    #[serde(default = "one")]
    pub success_threshold: i64,
    #[serde(default = "nine")]
    pub failure_threshold: i64,
}

fn thirty() -> i64 {
    30
}
fn ten() -> i64 {
    10
}
fn five() -> i64 {
    5
}
fn one() -> i64 {
    1
}
fn nine() -> i64 {
    9
}

impl Probe {
    /// A TCP probe on `port` with the default timings.
    pub fn tcp(port: i64) -> Self {
        Self {
            probe_type: ProbeType {
                tcp: Some(TcpProbe { port, host: None }),
                ..Default::default()
            },
            initial_delay_seconds: thirty(),
            period_seconds: ten(),
            timeout_seconds: five(),
            success_threshold: one(),
            failure_threshold: nine(),
        }
    }

    fn validate(&self, field: &str) -> Result<(), DomainError> {
        let t = &self.probe_type;
        let set = [
            t.exec.is_some(),
            t.grpc.is_some(),
            t.http.is_some(),
            t.tcp.is_some(),
        ];
        if set.iter().filter(|s| **s).count() != 1 {
            return Err(DomainError::invalid(
                format!("{field}.type"),
                "exactly one of exec, grpc, http or tcp is required",
            ));
        }
        let port = t
            .grpc
            .as_ref()
            .map(|g| g.port)
            .or(t.http.as_ref().map(|h| h.port))
            .or(t.tcp.as_ref().map(|t| t.port));
        if let Some(port) = port {
            if !(1..=65535).contains(&port) {
                return Err(DomainError::invalid(
                    format!("{field}.type.port"),
                    "must be between 1 and 65535",
                ));
            }
        }
        // The path goes into the request line the probe sends: a CR or LF there would write
        // headers of its own, any control character or space a request of another shape.
        if let Some(http) = &t.http {
            let clean = !http
                .path
                .chars()
                .any(|c| c.is_control() || c.is_whitespace());
            if !http.path.starts_with('/') || !clean {
                return Err(DomainError::invalid(
                    format!("{field}.type.http.path"),
                    "must be an absolute path without spaces or control characters",
                ));
            }
        }
        if let Some(exec) = &t.exec {
            if exec.command.is_empty() {
                return Err(DomainError::invalid(
                    format!("{field}.type.exec.command"),
                    "must name a command",
                ));
            }
        }
        for (name, value, min) in [
            ("initial_delay_seconds", self.initial_delay_seconds, 0),
            ("period_seconds", self.period_seconds, 1),
            ("timeout_seconds", self.timeout_seconds, 1),
            ("success_threshold", self.success_threshold, 1),
            ("failure_threshold", self.failure_threshold, 1),
        ] {
            if value < min {
                return Err(DomainError::invalid(
                    format!("{field}.{name}"),
                    format!("must be at least {min}"),
                ));
            }
        }
        Ok(())
    }
}

/// When the service is ready for traffic, and when it must be restarted.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Healthchecks {
    #[serde(default)]
    pub readiness_probe: Option<Probe>,
    #[serde(default)]
    pub liveness_probe: Option<Probe>,
}

impl Healthchecks {
    /// As sent; when not sent, TCP probes on the default port (none without ports).
    pub fn validate(sent: Option<Healthchecks>, ports: &[Port]) -> Result<Self, DomainError> {
        let Some(checks) = sent else {
            let port = ports.iter().find(|p| p.is_default).or(ports.first());
            return Ok(match port {
                Some(p) => Healthchecks {
                    readiness_probe: Some(Probe::tcp(p.internal_port)),
                    liveness_probe: Some(Probe::tcp(p.internal_port)),
                },
                None => Healthchecks::default(),
            });
        };
        if let Some(p) = &checks.readiness_probe {
            p.validate("healthchecks.readiness_probe")?;
        }
        if let Some(p) = &checks.liveness_probe {
            p.validate("healthchecks.liveness_probe")?;
        }
        Ok(checks)
    }
}

/// A persistent volume of an application or container.
fn volume_id() -> Uuid {
    crate::ids::fresh("Volume")
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Volume {
    #[serde(default = "volume_id")]
    pub id: Uuid,
    #[serde(rename = "type")]
    pub storage_type: StorageType,
    pub size: i64,
    pub mount_point: String,
}

pub fn volumes(sent: Option<Vec<Volume>>) -> Result<Vec<Volume>, DomainError> {
    let sent = sent.unwrap_or_default();
    for (i, v) in sent.iter().enumerate() {
        if v.size < 1 {
            return Err(DomainError::invalid(
                format!("storage[{i}].size"),
                "must be at least 1 (GiB)",
            ));
        }
        if !v.mount_point.starts_with('/') {
            return Err(DomainError::invalid(
                format!("storage[{i}].mount_point"),
                "must be an absolute path",
            ));
        }
        if sent[..i].iter().any(|o| o.mount_point == v.mount_point) {
            return Err(DomainError::invalid(
                format!("storage[{i}].mount_point"),
                "is already mounted by another volume",
            ));
        }
    }
    Ok(sent)
}

/// What applications, containers and jobs share beyond CPU and memory.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Workload {
    #[serde(default)]
    pub gpu: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ephemeral_storage_in_gib: Option<i64>,
    #[serde(default)]
    pub cpu_architecture: CpuArchitecture,
    #[serde(default)]
    pub auto_preview: bool,
    #[serde(default)]
    pub healthchecks: Healthchecks,
    #[serde(default)]
    pub icon_uri: String,
}

/// The request members of a [`Workload`].
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Default, Deserialize)]
pub struct WorkloadInput {
    #[serde(default)]
    pub gpu: Option<i64>,
    #[serde(default)]
    pub ephemeral_storage_in_gib: Option<i64>,
    #[serde(default)]
    pub cpu_architecture: Option<CpuArchitecture>,
    #[serde(default)]
    pub auto_preview: Option<bool>,
    #[serde(default)]
    pub healthchecks: Option<Healthchecks>,
    #[serde(default)]
    pub icon_uri: Option<String>,
}

impl WorkloadInput {
    /// `auto_preview` defaults as the public description says for the kind (true for
    /// applications); health probes default from `ports`.
    pub fn validate(self, kind: ServiceKind, ports: &[Port]) -> Result<Workload, DomainError> {
        if let Some(size) = self.ephemeral_storage_in_gib {
            if size < 0 {
                return Err(DomainError::invalid(
                    "ephemeral_storage_in_gib",
                    "must be at least 0",
                ));
            }
        }
        Ok(Workload {
            gpu: bounded("gpu", self.gpu, 0, MAXIMUM_GPU)?,
            ephemeral_storage_in_gib: self.ephemeral_storage_in_gib,
            cpu_architecture: self.cpu_architecture.unwrap_or_default(),
            auto_preview: self
                .auto_preview
                .unwrap_or(kind == ServiceKind::Application),
            healthchecks: Healthchecks::validate(self.healthchecks, ports)?,
            icon_uri: icon_uri(kind, self.icon_uri)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn port(internal_port: i64) -> Port {
        Port {
            id: Uuid::new_v4(),
            name: None,
            internal_port,
            external_port: None,
            publicly_accessible: false,
            protocol: super::super::PortProtocol::Http,
            is_default: true,
            port_type: None,
            service_name: None,
            namespace: None,
            service_selectors: None,
        }
    }

    #[test]
    fn healthchecks_default_to_tcp_probes_on_the_default_port() {
        let checks = Healthchecks::validate(None, &[port(8080)]).unwrap();
        assert_eq!(checks.readiness_probe, Some(Probe::tcp(8080)));
        assert_eq!(checks.liveness_probe, Some(Probe::tcp(8080)));
        assert_eq!(
            Healthchecks::validate(None, &[]).unwrap(),
            Healthchecks::default()
        );
    }

    #[test]
    fn probes_are_checked_and_keep_what_was_sent() {
        let sent: Healthchecks = serde_json::from_value(json!({
            "readiness_probe": {"type": {"http": {"port": 80, "path": "/ready"}}, "period_seconds": 3}
        }))
        .unwrap();
        let kept = Healthchecks::validate(Some(sent.clone()), &[]).unwrap();
        assert_eq!(kept, sent);
        let shown = serde_json::to_value(&kept).unwrap();
        assert_eq!(
            shown["readiness_probe"]["type"],
            json!({"http": {"port": 80, "path": "/ready", "scheme": "HTTP"}})
        );
        assert_eq!(shown["readiness_probe"]["failure_threshold"], 9);
        for (body, field) in [
            (
                json!({"liveness_probe": {"type": {}}}),
                "healthchecks.liveness_probe.type",
            ),
            (
                json!({"liveness_probe": {"type": {"tcp": {"port": 0}}}}),
                "healthchecks.liveness_probe.type.port",
            ),
            (
                json!({"readiness_probe": {"type": {"exec": {"command": []}}}}),
                "healthchecks.readiness_probe.type.exec.command",
            ),
            (
                json!({"readiness_probe": {"type": {"http": {"port": 80,
                       "path": "/ready HTTP/1.0\r\nX-Injected: 1\r\n"}}}}),
                "healthchecks.readiness_probe.type.http.path",
            ),
            (
                json!({"liveness_probe": {"type": {"http": {"port": 80, "path": "ready"}}}}),
                "healthchecks.liveness_probe.type.http.path",
            ),
            (
                json!({"readiness_probe": {"type": {"tcp": {"port": 80}}, "period_seconds": 0}}),
                "healthchecks.readiness_probe.period_seconds",
            ),
        ] {
            let sent: Healthchecks = serde_json::from_value(body).unwrap();
            let err = Healthchecks::validate(Some(sent), &[]).unwrap_err();
            assert!(err.to_string().starts_with(field), "{err}");
        }
    }

    #[test]
    fn workload_defaults_and_bounds() {
        let w = WorkloadInput::default()
            .validate(ServiceKind::Application, &[])
            .unwrap();
        assert!(w.auto_preview);
        assert_eq!(w.icon_uri, "app://capstan/application");
        assert_eq!((w.gpu, w.cpu_architecture), (0, CpuArchitecture::Amd64));
        let c = WorkloadInput::default()
            .validate(ServiceKind::Container, &[])
            .unwrap();
        assert!(!c.auto_preview);
        let err = WorkloadInput {
            gpu: Some(MAXIMUM_GPU + 1),
            ..Default::default()
        }
        .validate(ServiceKind::Job, &[])
        .unwrap_err();
        assert!(err.to_string().starts_with("gpu:"), "{err}");
        let err = WorkloadInput {
            icon_uri: Some("not a uri".into()),
            ..Default::default()
        }
        .validate(ServiceKind::Job, &[])
        .unwrap_err();
        assert!(err.to_string().starts_with("icon_uri:"), "{err}");
    }

    #[test]
    fn volumes_need_a_size_and_distinct_absolute_mount_points() {
        let v = |size: i64, mount: &str| Volume {
            id: Uuid::new_v4(),
            storage_type: StorageType::FastSsd,
            size,
            mount_point: mount.into(),
        };
        assert!(volumes(Some(vec![v(10, "/data")])).is_ok());
        for (sent, field) in [
            (vec![v(0, "/data")], "storage[0].size"),
            (vec![v(1, "data")], "storage[0].mount_point"),
            (vec![v(1, "/d"), v(1, "/d")], "storage[1].mount_point"),
        ] {
            let err = volumes(Some(sent)).unwrap_err();
            assert!(err.to_string().starts_with(field), "{err}");
        }
    }
}
