//! What every module of the contract shares: the `contract!` macro that runs a test on both
//! backends, each on a fresh database, and the records most tests start from.

pub(crate) use capstan_storage::{testing, Db};
pub(crate) use domain::auth::Role;
pub(crate) use domain::clock::{Clock, SystemClock};
pub(crate) use domain::error::StoreError;
pub(crate) use domain::ids::*;
pub(crate) use domain::model::*;
pub(crate) use domain::pagination::PageRequest;
pub(crate) use domain::ports::{
    Canceled, DaemonClaims, DeliveryClaims, DeploymentQueue, EventLog, Health, IdempotencyClaim,
    IdempotencyStore, Maintenance, QueueClaims, RateLimitStore, Repo, RuleQueries, Scope,
    ServiceLink, ServiceQueries, StageQueries, Store, StoredResponse, TokenStore, VariableQueries,
};
pub(crate) use domain::ratelimit::Gcra;
pub(crate) use domain::secret::Secret;
pub(crate) use serde_json::json;

/// Runs each named test once on SQLite and once on PostgreSQL (when one is configured).
macro_rules! contract {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let (db, _url, _guard) = capstan_storage::testing::sqlite().await;
                    super::$name(db).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let Some((db, _url)) = capstan_storage::testing::postgres().await else { return };
                    super::$name(db).await;
                }
            )*
        }
    };
}

pub(crate) fn now() -> time::OffsetDateTime {
    SystemClock.now()
}

pub(crate) async fn org(db: &Db) -> Organization {
    let o = Organization {
        id: OrganizationId::generate(),
        name: Name::parse("name", "Acme").unwrap(),
        description: Some("d".into()),
        plan: OrganizationPlan::Free,
        created_at: now(),
        updated_at: now(),
    };
    Repo::<Organization>::insert(&mut db.session().await.unwrap(), &o)
        .await
        .unwrap();
    o
}

pub(crate) fn project_in(org: OrganizationId, name: &str) -> Project {
    Project {
        id: ProjectId::generate(),
        organization_id: org,
        name: Name::parse("name", name).unwrap(),
        description: None,
        created_at: now(),
        updated_at: now(),
    }
}

pub(crate) async fn cluster(db: &Db, org: OrganizationId, name: &str) -> Cluster {
    let c = Cluster {
        id: ClusterId::generate(),
        organization_id: org,
        name: Name::parse("name", name).unwrap(),
        description: None,
        region: "eu-west-3".into(),
        cloud_provider: CloudProvider::CloudA,
        spec: ClusterSpec::default(),
        advanced_settings: Default::default(),
        run: ClusterRun::default(),
        created_at: now(),
        updated_at: now(),
    };
    Repo::<Cluster>::insert(&mut db.session().await.unwrap(), &c)
        .await
        .unwrap();
    c
}

pub(crate) fn environment_in(p: &Project, cluster: ClusterId, name: &str) -> Environment {
    Environment {
        id: EnvironmentId::generate(),
        organization_id: p.organization_id,
        project_id: p.id,
        cluster_id: cluster,
        name: Name::parse("name", name).unwrap(),
        mode: EnvironmentMode::Staging,
        last_updated_by: None,
        pull_request: None,
        created_at: now(),
        updated_at: now(),
    }
}

/// An organization with a cluster, a project and an environment.
pub(crate) async fn hierarchy(db: &Db) -> (Organization, Cluster, Project, Environment) {
    let o = org(db).await;
    let c = cluster(db, o.id, "main").await;
    let p = project_in(o.id, "shop");
    Repo::<Project>::insert(&mut db.session().await.unwrap(), &p)
        .await
        .unwrap();
    let e = environment_in(&p, c.id, "prod");
    Repo::<Environment>::insert(&mut db.session().await.unwrap(), &e)
        .await
        .unwrap();
    (o, c, p, e)
}

pub(crate) fn service_in(
    env: &Environment,
    kind: ServiceKind,
    name: &str,
    body: serde_json::Value,
) -> Service {
    let mut body = body;
    body["name"] = json!(name);
    let draft = ServiceDraft::parse(kind, &body, None).unwrap();
    Service {
        id: ServiceId::generate(),
        organization_id: env.organization_id,
        project_id: env.project_id,
        environment_id: env.id,
        name: draft.name,
        description: draft.description,
        spec: draft.spec,
        deployment_status: DeploymentStatus::NeverDeployed,
        advanced_settings: Default::default(),
        groups: Vec::new(),
        created_at: now(),
        updated_at: now(),
    }
}

pub(crate) async fn registry(db: &Db, org: OrganizationId, name: &str) -> ContainerRegistry {
    let r = ContainerRegistry {
        id: ContainerRegistryId::generate(),
        organization_id: org,
        name: Name::parse("name", name).unwrap(),
        kind: RegistryKind::DockerHub,
        url: "https://docker.io".into(),
        description: None,
        cluster_id: None,
        config: RegistryConfig {
            username: Some("bob".into()),
            ..Default::default()
        },
        secret_config: Secret::new(r#"{"password":"p"}"#),
        created_at: now(),
        updated_at: now(),
    };
    Repo::<ContainerRegistry>::insert(&mut db.session().await.unwrap(), &r)
        .await
        .unwrap();
    r
}

pub(crate) async fn git_token(db: &Db, org: OrganizationId, name: &str) -> GitToken {
    let t = GitToken {
        id: GitTokenId::generate(),
        organization_id: org,
        name: Name::parse("name", name).unwrap(),
        description: None,
        provider: GitProvider::HostA,
        token: Secret::new("ghp_x"),
        workspace: None,
        git_api_url: None,
        // Written and read back by the round trip (a column added after the table).
        expired_at: Some(time::Date::from_calendar_date(2027, time::Month::March, 31).unwrap()),
        created_at: now(),
        updated_at: now(),
    };
    Repo::<GitToken>::insert(&mut db.session().await.unwrap(), &t)
        .await
        .unwrap();
    t
}

pub(crate) fn container_body(registry: ContainerRegistryId) -> serde_json::Value {
    json!({"registry_id": registry, "image_name": "nginx", "tag": "1.27"})
}

pub(crate) fn request(
    env: &Environment,
    service: &Service,
    action: DeploymentAction,
) -> DeploymentRequest {
    let id = DeploymentRequestId::generate();
    DeploymentRequest {
        id,
        organization_id: env.organization_id,
        environment_id: env.id,
        service_id: service.id,
        action,
        requested_by: "test".into(),
        target: DeployTarget {
            git_commit_id: Some("abc".into()),
            move_to_node: Some("10.0.0.7".into()),
            ..Default::default()
        },
        status: RequestStatus::Queued,
        state: ServiceState::queued(action),
        batch_id: id.0,
        snapshot: DeploymentSnapshot {
            name: service.name.to_string(),
            move_to_node: Some("10.0.0.7".into()),
            ..Default::default()
        },
        steps: vec![],
        reason: None,
        claimed_by: None,
        lease_until: None,
        cancel_requested: false,
        created_at: now(),
        started_at: None,
        finished_at: None,
        position: 0,
        origin: Origin::Api,
    }
}

pub(crate) async fn request_for(
    db: &Db,
    env: &Environment,
    service: &Service,
) -> DeploymentRequest {
    let r = request(env, service, DeploymentAction::Deploy);
    db.session()
        .await
        .unwrap()
        .enqueue(std::slice::from_ref(&r))
        .await
        .unwrap();
    r
}

pub(crate) fn lease() -> time::OffsetDateTime {
    now() + time::Duration::minutes(1)
}

pub(crate) async fn claim(db: &Db, worker: &str) -> Option<DeploymentRequest> {
    db.claim_next(worker, now(), lease()).await.unwrap()
}

/// Ends a claimed request as its worker would.
pub(crate) async fn end(db: &Db, mut r: DeploymentRequest, status: RequestStatus) -> Option<bool> {
    r.finish(status, None, now());
    db.session().await.unwrap().record(&r).await.unwrap()
}

/// `n` environments of one project, each with a database service.
pub(crate) async fn environments(db: &Db, n: usize) -> Vec<(Environment, Service)> {
    let (_o, c, p, e) = hierarchy(db).await;
    let mut out = Vec::new();
    for i in 0..n {
        let env = if i == 0 {
            e.clone()
        } else {
            let env = environment_in(&p, c.id, &format!("env{i}"));
            Repo::<Environment>::insert(&mut db.session().await.unwrap(), &env)
                .await
                .unwrap();
            env
        };
        let s = service_in(
            &env,
            ServiceKind::Database,
            "db",
            json!({"type": "REDIS", "version": "7", "mode": "CONTAINER"}),
        );
        Repo::<Service>::insert(&mut db.session().await.unwrap(), &s)
            .await
            .unwrap();
        out.push((env, s));
    }
    out
}

pub(crate) fn hours(auto_stop: bool) -> Schedule {
    Schedule {
        auto_stop,
        timezone: "Europe/Paris".into(),
        start: time::Time::from_hms(8, 30, 0).unwrap(),
        stop: time::Time::from_hms(19, 0, 15).unwrap(),
        weekdays: vec![Weekday::Monday, Weekday::Sunday],
    }
}

pub(crate) fn event_in(
    org: OrganizationId,
    at: time::OffsetDateTime,
    event_type: Option<EventType>,
) -> OrgEvent {
    OrgEvent {
        id: EventId::generate(),
        organization_id: org,
        position: None,
        created_at: at,
        event_type,
        target_type: TargetType::Project,
        target_id: Some(uuid::Uuid::new_v4()),
        target_name: "web".into(),
        sub_target_type: None,
        change: "created".into(),
        origin: Origin::Api,
        triggered_by: "token:t".into(),
        project_id: None,
        project_name: String::new(),
        environment_id: None,
        environment_name: String::new(),
        environment_mode: None,
        service_id: None,
        user_agent: Some("tests".into()),
        deployment: None,
    }
}

pub(crate) fn running(env: &Environment, s: &Service, state: RunState, port: u16) -> RunningState {
    RunningState {
        service_id: s.id,
        environment_id: env.id,
        state,
        replicas: vec![Replica {
            name: "capstan-x-0".into(),
            image: "busybox:1".into(),
            state,
            restart_count: 2,
            engine_restarts: 1,
            events: vec![ReplicaEvent {
                at: time::OffsetDateTime::UNIX_EPOCH,
                reason: ReplicaEventReason::OomKilled,
                message: "killed: out of memory".into(),
            }],
            started_at: Some(time::OffsetDateTime::UNIX_EPOCH),
            finished_at: None,
            exit_code: Some(3),
            reason: Some("CrashLoop".into()),
            message: Some("exited with code 3".into()),
            healthy: Some(false),
            node: Some("capswarm-n2".into()),
        }],
        endpoints: vec![Endpoint {
            internal_port: 8080,
            host: "127.0.0.1".into(),
            port,
        }],
        observed_at: time::OffsetDateTime::UNIX_EPOCH + time::Duration::seconds(5),
        reported_by: None,
    }
}
