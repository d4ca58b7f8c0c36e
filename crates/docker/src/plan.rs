//! What a service becomes on Docker, decided without a daemon: the image to run, the command,
//! the environment, the files, the ports, the limits and the labels of each replica. The engine
//! turns a [`ContainerPlan`] into Docker's create body; tests read it directly.

use bollard::models::RestartPolicyNameEnum;
use bollard::models::{
    ContainerCreateBody, EndpointSettings, HostConfig, Mount, MountType, NetworkingConfig,
    PortBinding, RestartPolicy,
};
use bollard::query_parameters::ListContainersOptions;
use domain::engine::EngineError;
use domain::ids::ServiceId;
use domain::model::{
    DeploymentAction, DeploymentRequest, JobCommand, JobSpec, Probe, RegistryAccess, RegistryKind,
    Runtime, Service, ServiceSpec, WorkloadInputs,
};
use std::collections::HashMap;

/// Labels every object Capstan makes carries: how it finds its own.
pub const LABEL_SERVICE: &str = "capstan.service";
pub const LABEL_ENVIRONMENT: &str = "capstan.environment";
pub const LABEL_PROJECT: &str = "capstan.project";
pub const LABEL_ORGANIZATION: &str = "capstan.organization";
/// The installation that made it (its identity is kept in its database, shared by its
/// instances): an installation acts only on what carries its own.
pub const LABEL_INSTALLATION: &str = "capstan.installation";
pub const LABEL_REQUEST: &str = "capstan.deployment-request";
pub const LABEL_REPLICA: &str = "capstan.replica";
/// What the object is: a long-running `service` replica or a `job` execution.
pub const LABEL_ROLE: &str = "capstan.role";
/// A replica's liveness probe (JSON), for the prober to find it by.
pub const LABEL_LIVENESS: &str = "capstan.liveness";

/// Docker's filter for the containers (running or not) whose labels match each of `labels`
/// (`key`, or `key=value`).
pub fn labelled(labels: Vec<String>) -> ListContainersOptions {
    ListContainersOptions {
        all: true,
        filters: Some(HashMap::from([("label".to_string(), labels)])),
        ..Default::default()
    }
}

/// The label filter of a service's containers.
pub fn of_service(service: ServiceId) -> String {
    format!("{LABEL_SERVICE}={}", service.0)
}

/// One file variable, written into the container before it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedFile {
    pub path: String,
    pub content: Vec<u8>,
}

/// A port the container listens on, published on the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlannedPort {
    pub internal: u16,
    /// The host port it had before (kept across redeploys); none lets Docker choose.
    pub host: Option<u16>,
    /// Publicly accessible: published at the publish address. Any other port is published
    /// only on the host's loopback, for Capstan's own probes, never at another address.
    pub public: bool,
}

/// Where a port not publicly accessible is published.
pub const LOOPBACK: &str = "127.0.0.1";

/// Whether a port binding's (or a host's) address is a loopback one.
pub fn is_loopback(address: Option<&str>) -> bool {
    address
        .and_then(|ip| ip.parse::<std::net::IpAddr>().ok())
        .is_some_and(|ip| ip.is_loopback())
}

/// A named volume mounted into the container (a database's data): never a host path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedVolume {
    pub name: String,
    pub target: String,
}

/// One container to create.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerPlan {
    pub name: String,
    pub image: String,
    pub entrypoint: Option<Vec<String>>,
    pub cmd: Option<Vec<String>>,
    /// `KEY=value`, in key order.
    pub env: Vec<String>,
    pub labels: HashMap<String, String>,
    pub ports: Vec<PlannedPort>,
    pub files: Vec<PlannedFile>,
    pub nano_cpus: i64,
    pub memory_bytes: i64,
    /// Docker restarts a long-running service that exits, once it was deployed; a job's
    /// execution is not restarted.
    pub restarts: bool,
    /// Docker's init runs as its process 1 and passes signals on: an application's server
    /// then hears the SIGTERM that retires it (as process 1 it would ignore it) and stops
    /// once its requests are served, rather than being killed at the end of its grace period.
    pub init: bool,
    pub publish_address: String,
    pub volume: Option<PlannedVolume>,
    /// Its environment's network, and the names it is reached at there.
    pub network: String,
    pub aliases: Vec<String>,
}

/// The network of an environment's containers: each reaches the others (a database at the
/// host name its connection variables give).
pub fn network_name(environment: domain::ids::EnvironmentId) -> String {
    format!("capstan-env-{}", environment.0.simple())
}

/// The host interface of an environment's network: `cap` and the id's last twelve hex digits
/// (its random part), fifteen characters as Linux allows, matched by the firewall's `cap+`.
pub fn bridge_name(environment: domain::ids::EnvironmentId) -> String {
    let id = environment.0.simple().to_string();
    format!("cap{}", &id[id.len() - 12..])
}

/// The volume keeping a terraform service's state.
pub fn state_volume_name(service: ServiceId) -> String {
    format!("capstan-tfstate-{}", service.0.simple())
}

/// The volume keeping a database's data.
pub fn volume_name(service: ServiceId) -> String {
    format!("capstan-data-{}", service.0.simple())
}

/// The image reference Docker pulls and runs: the registry's host before the name, except for
/// Docker Hub (and a name that already names its registry).
pub fn image_reference(registry: Option<&RegistryAccess>, name: &str, tag: &str) -> String {
    let host = registry
        .filter(|r| r.kind != RegistryKind::DockerHub)
        .map(|r| {
            r.url
                .trim_start_matches("https://")
                .trim_start_matches("http://")
                .trim_end_matches('/')
                .to_string()
        })
        .filter(|h| !h.is_empty() && !name.starts_with(&format!("{h}/")));
    let name = match host {
        Some(h) => format!("{h}/{name}"),
        None => name.to_string(),
    };
    if tag.is_empty() {
        name
    } else {
        format!("{name}:{tag}")
    }
}

/// The host (without its port) an image reference is pulled from, as Docker reads it: a
/// first part with a dot, a port or `localhost` names a registry; anything else is Docker
/// Hub's.
pub fn registry_host(image: &str) -> String {
    let first = image.split('/').next().unwrap_or_default();
    let names_registry =
        image.contains('/') && (first.contains('.') || first.contains(':') || first == "localhost");
    if !names_registry {
        return "registry-1.docker.io".into();
    }
    if let Some(rest) = first.strip_prefix('[') {
        return rest.split(']').next().unwrap_or_default().to_string();
    }
    first.split(':').next().unwrap_or_default().to_string()
}

/// The name of a service's replica: stable, so a redeploy finds and replaces it.
pub fn replica_name(service: &Service, replica: usize) -> String {
    format!("capstan-{}-{replica}", service.id.0.simple())
}

pub fn labels(r: &DeploymentRequest, service: &Service, role: &str) -> HashMap<String, String> {
    HashMap::from([
        (
            LABEL_ORGANIZATION.into(),
            service.organization_id.0.to_string(),
        ),
        (LABEL_PROJECT.into(), service.project_id.0.to_string()),
        (
            LABEL_ENVIRONMENT.into(),
            service.environment_id.0.to_string(),
        ),
        (LABEL_SERVICE.into(), service.id.0.to_string()),
        (LABEL_REQUEST.into(), r.id.0.to_string()),
        (LABEL_ROLE.into(), role.into()),
    ])
}

fn env(inputs: &WorkloadInputs) -> Vec<String> {
    inputs
        .environment
        .iter()
        .map(|e| format!("{}={}", e.key, e.value.expose()))
        .collect()
}

fn files(inputs: &WorkloadInputs) -> Vec<PlannedFile> {
    inputs
        .files
        .iter()
        .map(|f| PlannedFile {
            path: f.mount_path.clone(),
            content: f.content.expose().as_bytes().to_vec(),
        })
        .collect()
}

fn command(
    entrypoint: Option<&str>,
    arguments: &[String],
) -> (Option<Vec<String>>, Option<Vec<String>>) {
    let entrypoint = entrypoint
        .filter(|e| !e.trim().is_empty())
        .map(|e| vec![e.to_string()]);
    let cmd = (!arguments.is_empty()).then(|| arguments.to_vec());
    (entrypoint, cmd)
}

/// Millicores as Docker's billionths of a CPU; MiB as bytes.
pub fn limits(cpu: i64, memory: i64) -> (i64, i64) {
    (cpu.max(1) * 1_000_000, memory.max(6) * 1024 * 1024)
}

/// What a long-running service runs as: a container's or an application's runtime.
fn runtime_of(spec: &ServiceSpec) -> Option<&Runtime> {
    match spec {
        ServiceSpec::Container(c) => Some(&c.runtime),
        ServiceSpec::Application(a) => Some(&a.runtime),
        _ => None,
    }
}

/// The image a container service runs: its image at its tag, from its registry.
pub fn container_image(service: &Service, inputs: &WorkloadInputs) -> Option<String> {
    match &service.spec {
        ServiceSpec::Container(c) => Some(image_reference(
            inputs.registry.as_ref(),
            &c.image_name,
            &c.tag,
        )),
        _ => None,
    }
}

/// The replicas of a container service or an application running `image`, each keeping the
/// host ports `previous` gives it.
pub fn service_replicas(
    r: &DeploymentRequest,
    service: &Service,
    image: &str,
    inputs: &WorkloadInputs,
    publish_address: &str,
    previous: &HashMap<(usize, u16), u16>,
) -> Result<Vec<ContainerPlan>, EngineError> {
    let Some(runtime) = runtime_of(&service.spec) else {
        return Err(refused(&service.spec).into());
    };
    let (entrypoint, cmd) = command(runtime.entrypoint.as_deref(), &runtime.arguments);
    let (nano_cpus, memory_bytes) = limits(runtime.cpu, runtime.memory);
    let replicas = usize::try_from(runtime.min_running_instances.max(1)).unwrap_or(1);
    let mut plans = Vec::with_capacity(replicas);
    for replica in 0..replicas {
        let mut labels = labels(r, service, "service");
        labels.insert(LABEL_REPLICA.into(), replica.to_string());
        if let Some(probe) = &runtime.workload.healthchecks.liveness_probe {
            if let Ok(json) = serde_json::to_string(probe) {
                labels.insert(LABEL_LIVENESS.into(), json);
            }
        }
        let ports = runtime
            .ports
            .iter()
            .filter_map(|p| Some((u16::try_from(p.internal_port).ok()?, p.publicly_accessible)))
            .map(|(internal, public)| PlannedPort {
                internal,
                host: previous.get(&(replica, internal)).copied(),
                public,
            })
            .collect();
        plans.push(ContainerPlan {
            name: replica_name(service, replica),
            image: image.to_string(),
            entrypoint: entrypoint.clone(),
            cmd: cmd.clone(),
            env: env(inputs),
            labels,
            ports,
            files: files(inputs),
            nano_cpus,
            memory_bytes,
            restarts: true,
            init: true,
            publish_address: publish_address.to_string(),
            volume: None,
            network: network_name(service.environment_id),
            aliases: Vec::new(),
        });
    }
    Ok(plans)
}

/// What a job runs for a request, if anything: a cron job its command at a run its schedule
/// asked for (its deployment keeps the schedule, and runs nothing); a lifecycle job its
/// `on_start` at deployment, `on_stop` when stopped and `on_delete` when deleted, each only
/// when the job has it.
pub fn job_command(
    job: &JobSpec,
    action: DeploymentAction,
    scheduled_run: bool,
) -> Option<JobCommand> {
    use DeploymentAction as A;
    let schedule = &job.schedule;
    if let Some(cron) = &schedule.cronjob {
        return (matches!(action, A::Deploy | A::Redeploy) && scheduled_run).then(|| JobCommand {
            entrypoint: cron.entrypoint.clone(),
            arguments: cron.arguments.clone(),
        });
    }
    match action {
        A::Deploy | A::Redeploy => schedule.on_start.clone(),
        A::Stop => schedule.on_stop.clone(),
        A::Delete | A::Uninstall => schedule.on_delete.clone(),
        _ => None,
    }
}

/// The image a job from a registry runs; `None` for a job built from git.
pub fn job_image(job: &JobSpec, inputs: &WorkloadInputs) -> Option<String> {
    let source = job.source.image.as_ref()?;
    Some(image_reference(
        inputs.registry.as_ref(),
        &source.image_name,
        &source.tag,
    ))
}

/// What one execution of a job runs: `run` in `image`, its `attempt`-th try (from 0).
pub struct Execution<'a> {
    pub run: &'a JobCommand,
    pub image: &'a str,
    pub attempt: i64,
}

/// One execution of a job.
pub fn job_execution(
    r: &DeploymentRequest,
    service: &Service,
    job: &JobSpec,
    execution: Execution<'_>,
    inputs: &WorkloadInputs,
    publish_address: &str,
) -> ContainerPlan {
    let Execution {
        run,
        image,
        attempt,
    } = execution;
    let (entrypoint, arguments) = (run.entrypoint.as_deref(), run.arguments.as_slice());
    let (entrypoint, cmd) = command(entrypoint, arguments);
    let (nano_cpus, memory_bytes) = limits(job.cpu, job.memory);
    let mut labels = labels(r, service, "job");
    labels.insert(LABEL_REPLICA.into(), attempt.to_string());
    ContainerPlan {
        name: format!(
            "capstan-{}-run-{}-{attempt}",
            service.id.0.simple(),
            r.id.0.simple()
        ),
        image: image.to_string(),
        entrypoint,
        cmd,
        env: env(inputs),
        labels,
        ports: job
            .port
            .and_then(|p| u16::try_from(p).ok())
            .map(|internal| PlannedPort {
                internal,
                host: None,
                public: false,
            })
            .into_iter()
            .collect(),
        files: files(inputs),
        nano_cpus,
        memory_bytes,
        restarts: false,
        init: false,
        publish_address: publish_address.to_string(),
        volume: None,
        network: network_name(service.environment_id),
        aliases: Vec::new(),
    }
}

/// Why the Docker engine does not run a kind yet.
pub fn refused(spec: &ServiceSpec) -> String {
    let (kind, missing) = match spec {
        ServiceSpec::Helm(_) => ("HELM", "helm charts (they need Kubernetes)"),
        ServiceSpec::Terraform(_) => ("TERRAFORM", "running terraform"),
        ServiceSpec::Container(_)
        | ServiceSpec::Application(_)
        | ServiceSpec::Job(_)
        | ServiceSpec::Database(_) => ("this", "nothing"),
    };
    format!("the Docker engine does not run {kind} services yet: {missing} is not supported")
}

/// The readiness probe Capstan runs itself from the host, through the published port.
pub fn readiness(service: &Service) -> Option<&Probe> {
    service.spec.healthchecks()?.readiness_probe.as_ref()
}

/// What a deployed service's replicas are given once they run and are ready: Docker restarts
/// one that exits, until it is stopped.
pub fn restart_policy() -> RestartPolicy {
    RestartPolicy {
        name: Some(RestartPolicyNameEnum::UNLESS_STOPPED),
        maximum_retry_count: None,
    }
}

/// How many processes (threads included) one workload's container may hold: a fork bomb in
/// one organization's workload must not exhaust the host every organization shares.
pub const PIDS_LIMIT: i64 = 2048;

impl ContainerPlan {
    /// Docker's create body. Never privileged, no added capability, no new privileges, no
    /// host path mounted, a bounded number of processes: the files are copied in before the
    /// start.
    pub fn body(&self) -> ContainerCreateBody {
        let port_bindings = self
            .ports
            .iter()
            .map(|p| {
                (
                    format!("{}/tcp", p.internal),
                    Some(vec![PortBinding {
                        host_ip: Some(if p.public {
                            self.publish_address.clone()
                        } else {
                            LOOPBACK.to_string()
                        }),
                        host_port: Some(p.host.map(|h| h.to_string()).unwrap_or_default()),
                    }]),
                )
            })
            .collect();
        ContainerCreateBody {
            image: Some(self.image.clone()),
            entrypoint: self.entrypoint.clone(),
            cmd: self.cmd.clone(),
            env: Some(self.env.clone()),
            labels: Some(self.labels.clone()),
            exposed_ports: Some(
                self.ports
                    .iter()
                    .map(|p| format!("{}/tcp", p.internal))
                    .collect(),
            ),
            host_config: Some(HostConfig {
                nano_cpus: Some(self.nano_cpus),
                memory: Some(self.memory_bytes),
                port_bindings: Some(port_bindings),
                privileged: Some(false),
                init: Some(self.init),
                security_opt: Some(vec!["no-new-privileges:true".into()]),
                pids_limit: Some(PIDS_LIMIT),
                // Not restarted until it is deployed: a start that fails shows its own exit,
                // and is not left crash-looping (see `restart_policy`).
                restart_policy: Some(RestartPolicy {
                    name: Some(RestartPolicyNameEnum::NO),
                    maximum_retry_count: None,
                }),
                mounts: self.volume.as_ref().map(|v| {
                    vec![Mount {
                        typ: Some(MountType::VOLUME),
                        source: Some(v.name.clone()),
                        target: Some(v.target.clone()),
                        ..Default::default()
                    }]
                }),
                network_mode: Some(self.network.clone()),
                ..Default::default()
            }),
            networking_config: Some(NetworkingConfig {
                endpoints_config: Some(HashMap::from([(
                    self.network.clone(),
                    EndpointSettings {
                        aliases: Some(self.aliases.clone()),
                        ..Default::default()
                    },
                )])),
            }),
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use domain::ids::*;
    use domain::model::*;
    use domain::secret::Secret;
    use serde_json::json;
    use time::OffsetDateTime;

    fn container(body: serde_json::Value) -> Service {
        let runtime: RuntimeInput = serde_json::from_value(body.clone()).unwrap();
        let workload: WorkloadInput = serde_json::from_value(body.clone()).unwrap();
        let input: ContainerInput = serde_json::from_value(body).unwrap();
        let now = OffsetDateTime::now_utc();
        Service {
            id: ServiceId::generate(),
            organization_id: OrganizationId::generate(),
            project_id: ProjectId::generate(),
            environment_id: EnvironmentId::generate(),
            name: Name::parse("name", "web").unwrap(),
            description: None,
            spec: ServiceSpec::Container(input.validate(runtime, workload).unwrap()),
            deployment_status: DeploymentStatus::NeverDeployed,
            advanced_settings: Default::default(),
            groups: Vec::new(),
            created_at: now,
            updated_at: now,
        }
    }

    fn request(service: &Service) -> DeploymentRequest {
        let id = DeploymentRequestId::generate();
        DeploymentRequest {
            id,
            organization_id: service.organization_id,
            environment_id: service.environment_id,
            service_id: service.id,
            action: DeploymentAction::Deploy,
            requested_by: "t".into(),
            target: DeployTarget::default(),
            status: RequestStatus::Running,
            state: ServiceState::Deploying,
            batch_id: id.0,
            snapshot: Default::default(),
            steps: vec![],
            reason: None,
            claimed_by: None,
            lease_until: None,
            cancel_requested: false,
            created_at: OffsetDateTime::now_utc(),
            started_at: None,
            finished_at: None,
            position: 0,
            origin: Origin::Api,
        }
    }

    fn inputs() -> WorkloadInputs {
        WorkloadInputs {
            environment: vec![
                EnvValue {
                    key: "A".into(),
                    value: Secret::new("1"),
                    secret: false,
                },
                EnvValue {
                    key: "TOKEN".into(),
                    value: Secret::new("s3cret"),
                    secret: true,
                },
            ],
            files: vec![FileValue {
                key: "CONFIG".into(),
                mount_path: "/etc/app.conf".into(),
                content: Secret::new("x=1"),
                secret: false,
            }],
            registry: Some(RegistryAccess {
                url: "https://registry.example.com/".into(),
                kind: RegistryKind::GenericCr,
                username: None,
                password: None,
            }),
            git: None,
        }
    }

    #[test]
    fn a_container_becomes_its_replicas_with_everything_it_was_given() {
        let s = container(json!({
            "registry_id": uuid::Uuid::new_v4(), "image_name": "team/web", "tag": "1.2",
            "name": "web", "entrypoint": "/bin/serve", "arguments": ["--port", "8080"],
            "cpu": 250, "memory": 128, "min_running_instances": 2, "max_running_instances": 2,
            "ports": [{"internal_port": 8080, "publicly_accessible": true}, {"internal_port": 9090}],
        }));
        let r = request(&s);
        let previous = HashMap::from([((0, 8080), 41000)]);
        let image = container_image(&s, &inputs()).unwrap();
        let plans = service_replicas(&r, &s, &image, &inputs(), "127.0.0.1", &previous).unwrap();
        assert_eq!(plans.len(), 2, "min_running_instances replicas");
        let first = &plans[0];
        assert_eq!(first.image, "registry.example.com/team/web:1.2");
        assert_eq!(first.entrypoint, Some(vec!["/bin/serve".to_string()]));
        assert_eq!(
            first.cmd,
            Some(vec!["--port".to_string(), "8080".to_string()])
        );
        assert_eq!(first.env, ["A=1", "TOKEN=s3cret"]);
        assert_eq!(first.files[0].path, "/etc/app.conf");
        assert_eq!(first.nano_cpus, 250_000_000, "a quarter of a CPU");
        assert_eq!(first.memory_bytes, 128 * 1024 * 1024);
        assert_eq!(
            first.ports,
            [
                PlannedPort {
                    internal: 8080,
                    host: Some(41000),
                    public: true,
                },
                PlannedPort {
                    internal: 9090,
                    host: None,
                    public: false,
                },
            ],
            "the host port it had is kept"
        );
        assert_eq!(plans[1].ports[0].host, None, "the other replica had none");
        assert_ne!(first.name, plans[1].name);
        assert_eq!(first.labels[LABEL_SERVICE], s.id.0.to_string());
        assert_eq!(
            first.labels[LABEL_ENVIRONMENT],
            s.environment_id.0.to_string()
        );
        assert_eq!(first.labels[LABEL_PROJECT], s.project_id.0.to_string());
        assert_eq!(
            first.labels[LABEL_ORGANIZATION],
            s.organization_id.0.to_string()
        );
        assert_eq!(first.labels[LABEL_REQUEST], r.id.0.to_string());
        assert_eq!(first.labels[LABEL_REPLICA], "0");
        // Its liveness probe (by default TCP on its default port) travels with it.
        let liveness: Probe = serde_json::from_str(&first.labels[LABEL_LIVENESS]).unwrap();
        assert_eq!(liveness, Probe::tcp(8080));

        let body = first.body();
        let host = body.host_config.unwrap();
        assert_eq!(host.privileged, Some(false));
        assert_eq!(host.init, Some(true), "signals reach the server");
        assert_eq!(host.cap_add, None, "no added capability");
        assert_eq!(host.binds, None, "no host path");
        assert_eq!(host.mounts, None, "no host path, no volume");
        assert_eq!(host.network_mode, Some(network_name(s.environment_id)));
        assert_eq!(
            host.security_opt,
            Some(vec!["no-new-privileges:true".into()])
        );
        assert_eq!(host.pids_limit, Some(PIDS_LIMIT));
        let binding = &host.port_bindings.unwrap()["8080/tcp"].clone().unwrap()[0];
        assert_eq!(binding.host_ip.as_deref(), Some("127.0.0.1"));
        assert_eq!(binding.host_port.as_deref(), Some("41000"));
    }

    #[test]
    fn a_port_not_publicly_accessible_is_published_only_on_the_loopback() {
        let s = container(json!({
            "registry_id": uuid::Uuid::new_v4(), "image_name": "web", "tag": "1", "name": "web",
            "ports": [{"internal_port": 8080, "publicly_accessible": true}, {"internal_port": 9090}],
        }));
        let image = container_image(&s, &inputs()).unwrap();
        let plans = service_replicas(
            &request(&s),
            &s,
            &image,
            &inputs(),
            "10.1.2.3",
            &HashMap::new(),
        )
        .unwrap();
        let bindings = plans[0].body().host_config.unwrap().port_bindings.unwrap();
        let ip = |port: &str| bindings[port].clone().unwrap()[0].host_ip.clone().unwrap();
        assert_eq!(ip("8080/tcp"), "10.1.2.3");
        assert_eq!(ip("9090/tcp"), "127.0.0.1");
    }

    fn job(schedule: serde_json::Value) -> JobSpec {
        let image = json!({"image_name": "x", "tag": "1", "registry_id": uuid::Uuid::new_v4()});
        let body = json!({"source": {"image": image}, "schedule": schedule});
        let workload: WorkloadInput = serde_json::from_value(json!({})).unwrap();
        let input: JobInput = serde_json::from_value(body).unwrap();
        input.validate(workload).unwrap()
    }

    #[test]
    fn a_job_runs_the_command_its_schedule_gives_each_action() {
        use DeploymentAction as A;
        let cmd = |c: &str| json!({"entrypoint": "sh", "arguments": ["-c", c]});
        let lifecycle = job(json!({"on_start": cmd("start"), "on_stop": cmd("stop"),
                                   "on_delete": cmd("delete")}));
        let ran = |j: &JobSpec, a| job_command(j, a, false).map(|c| c.arguments[1].clone());
        assert_eq!(ran(&lifecycle, A::Deploy).as_deref(), Some("start"));
        assert_eq!(ran(&lifecycle, A::Redeploy).as_deref(), Some("start"));
        assert_eq!(ran(&lifecycle, A::Stop).as_deref(), Some("stop"));
        assert_eq!(ran(&lifecycle, A::Delete).as_deref(), Some("delete"));
        assert_eq!(ran(&lifecycle, A::Uninstall).as_deref(), Some("delete"));
        assert_eq!(ran(&lifecycle, A::Restart), None);
        let only_stop = job(json!({"on_stop": cmd("stop")}));
        assert_eq!(ran(&only_stop, A::Deploy), None, "nothing to start");
        assert_eq!(ran(&only_stop, A::Delete), None);
        let cron = job(json!({"cronjob": {"scheduled_at": "*/5 * * * *",
            "entrypoint": "sh", "arguments": ["-c", "tick"]}}));
        assert_eq!(
            ran(&cron, A::Deploy),
            None,
            "its deployment keeps the schedule"
        );
        let scheduled = job_command(&cron, A::Deploy, true).map(|c| c.arguments[1].clone());
        assert_eq!(scheduled.as_deref(), Some("tick"), "a run at its schedule");
        assert_eq!(ran(&cron, A::Stop), None);
    }

    #[test]
    fn an_image_is_pulled_from_the_host_its_reference_names() {
        assert_eq!(registry_host("busybox:1"), "registry-1.docker.io");
        assert_eq!(registry_host("team/web:1"), "registry-1.docker.io");
        assert_eq!(
            registry_host("registry.example.com/team/web:1"),
            "registry.example.com"
        );
        assert_eq!(registry_host("127.0.0.1:5000/web:1"), "127.0.0.1");
        assert_eq!(registry_host("localhost/web"), "localhost");
        assert_eq!(registry_host("[::1]:5000/web:1"), "::1");
    }

    #[test]
    fn image_references_name_their_registry_except_docker_hub() {
        let hub = RegistryAccess {
            url: "https://docker.io".into(),
            kind: RegistryKind::DockerHub,
            username: None,
            password: None,
        };
        assert_eq!(
            image_reference(Some(&hub), "library/redis", "7"),
            "library/redis:7"
        );
        assert_eq!(image_reference(None, "busybox", ""), "busybox");
        let own = RegistryAccess {
            url: "https://r.example.com".into(),
            kind: RegistryKind::GenericCr,
            ..hub
        };
        assert_eq!(
            image_reference(Some(&own), "r.example.com/app", "1"),
            "r.example.com/app:1"
        );
        assert_eq!(
            image_reference(Some(&own), "app", "1"),
            "r.example.com/app:1"
        );
    }

    #[test]
    fn kinds_the_engine_cannot_run_yet_are_refused_naming_what_is_missing() {
        let s = container(json!({
            "registry_id": uuid::Uuid::new_v4(), "image_name": "x", "tag": "1", "name": "x",
        }));
        let mut app = s.clone();
        app.spec = ServiceSpec::Helm(
            serde_json::from_value::<HelmInput>(json!({
                "name": "chart", "source": {"helm_repository": {
                    "repository": uuid::Uuid::new_v4(), "chart_name": "c", "chart_version": "1"}},
                "arguments": [], "allow_cluster_wide_resources": false, "auto_deploy": false,
                "values_override": {"set": [], "set_string": [], "set_json": []}}))
            .unwrap()
            .validate()
            .unwrap(),
        );
        let why = service_replicas(
            &request(&app),
            &app,
            "x",
            &inputs(),
            "127.0.0.1",
            &HashMap::new(),
        )
        .unwrap_err();
        let why = why.to_string();
        assert!(why.contains("HELM") && why.contains("Kubernetes"), "{why}");
    }
}
