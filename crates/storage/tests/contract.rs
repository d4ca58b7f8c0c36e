//! The storage contract: one suite, run against SQLite and PostgreSQL, each test on a fresh
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! database.

use capstan_storage::{testing, Db};
use domain::auth::Role;
use domain::clock::{Clock, SystemClock};
use domain::error::StoreError;
use domain::ids::*;
use domain::model::*;
use domain::pagination::PageRequest;
use domain::ports::{
    Canceled, DaemonClaims, DeliveryClaims, DeploymentQueue, EventLog, Health, IdempotencyClaim,
    IdempotencyStore, Maintenance, QueueClaims, RateLimitStore, Repo, RuleQueries, Scope,
    ServiceLink, ServiceQueries, StageQueries, Store, StoredResponse, TokenStore, VariableQueries,
};
use domain::ratelimit::Gcra;
use domain::secret::Secret;
use serde_json::json;

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

contract!(
    records_round_trip,
    running_states_are_replaced_per_service_and_go_with_it,
    all_running_states_are_read_at_once,
    deployment_logs_are_read_by_environment_in_order_and_go_with_it,
    service_output_is_kept_once_filtered_trimmed_and_goes_with_its_service,
    cron_turns_are_kept_per_job_due_in_order_and_go_with_it,
    database_backups_are_kept_per_database_updated_and_go_with_it,
    ids_and_enums_are_stored_as_their_text,
    names_are_unique_case_insensitively_per_parent,
    lists_are_paged_in_creation_order,
    deleting_a_parent_removes_its_children,
    referenced_rows_cannot_be_deleted,
    tokens_are_found_by_hash,
    services_of_every_kind_round_trip_and_filter_by_kind,
    usage_counts_are_grouped,
    missing_rows_are_reported,
    health_answers,
    secrets_are_encrypted_at_rest,
    the_queue_runs_one_request_per_environment,
    claims_are_exclusive_under_concurrency,
    clusters_are_claimed_once_and_found_when_their_worker_dies,
    on_premise_clusters_are_found_across_organizations_with_their_docker_host,
    a_clusters_log_reads_newest_lines_oldest_first_and_goes_with_it,
    expired_claims_are_reclaimed_once,
    canceling_an_environment_spares_deletions,
    activity_and_history_come_from_the_queue,
    a_variable_change_makes_a_deployed_service_out_of_date,
    a_unit_dropped_before_commit_leaves_nothing,
    a_committed_unit_rings_what_it_changed_and_a_dropped_one_nothing,
    a_snapshot_sees_one_state_from_its_first_read,
    a_locked_scope_is_held_until_commit,
    rate_limit_leases_never_overlap,
    idempotency_keys_replay_or_refuse,
    stages_hold_services_and_keep_their_order,
    a_batch_runs_in_stage_order_and_a_failure_cancels_later_stages,
    batches_and_service_requests_are_paged_newest_first,
    an_environment_deletion_joins_pending_requests_only,
    link_variables_are_found_by_database_and_go_with_it,
    restrictions_are_kept_once_per_service_and_go_with_it,
    custom_domains_are_unique_across_organizations,
    clusters_keep_the_daemon_they_were_deployed_on,
    groups_are_attached_and_held_by_their_services,
    deployment_rules_round_trip_and_hold_their_cluster,
    due_environment_rules_are_found_most_overdue_first,
    events_get_positions_in_the_order_they_are_sequenced,
    deliveries_are_claimed_once_and_settled_by_their_claimant,
    the_audit_log_filters_and_pages_by_time,
    services_and_environments_are_named_with_their_parents,
    a_reset_empties_every_table_or_keeps_the_tokens,
    a_snapshot_is_restored_exactly,
    a_rotated_key_reseals_every_secret_and_nothing_else,
);

fn now() -> time::OffsetDateTime {
    SystemClock.now()
}

async fn org(db: &Db) -> Organization {
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

fn project_in(org: OrganizationId, name: &str) -> Project {
    Project {
        id: ProjectId::generate(),
        organization_id: org,
        name: Name::parse("name", name).unwrap(),
        description: None,
        created_at: now(),
        updated_at: now(),
    }
}

async fn cluster(db: &Db, org: OrganizationId, name: &str) -> Cluster {
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

fn environment_in(p: &Project, cluster: ClusterId, name: &str) -> Environment {
    Environment {
        id: EnvironmentId::generate(),
        organization_id: p.organization_id,
        project_id: p.id,
        cluster_id: cluster,
        name: Name::parse("name", name).unwrap(),
        mode: EnvironmentMode::Staging,
        last_updated_by: None,
        created_at: now(),
        updated_at: now(),
    }
}

/// An organization with a cluster, a project and an environment.
async fn hierarchy(db: &Db) -> (Organization, Cluster, Project, Environment) {
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

fn service_in(
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

async fn registry(db: &Db, org: OrganizationId, name: &str) -> ContainerRegistry {
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

async fn git_token(db: &Db, org: OrganizationId, name: &str) -> GitToken {
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

fn container_body(registry: ContainerRegistryId) -> serde_json::Value {
    json!({"registry_id": registry, "image_name": "nginx", "tag": "1.27"})
}

async fn records_round_trip(db: Db) {
    let (o, c, p, e) = hierarchy(&db).await;
    assert_eq!(
        Repo::<Organization>::get(&mut db.session().await.unwrap(), o.id)
            .await
            .unwrap(),
        Some(o.clone())
    );
    assert_eq!(
        Repo::<Cluster>::get(&mut db.session().await.unwrap(), c.id)
            .await
            .unwrap(),
        Some(c.clone())
    );
    assert_eq!(
        Repo::<Project>::get(&mut db.session().await.unwrap(), p.id)
            .await
            .unwrap(),
        Some(p.clone())
    );
    assert_eq!(
        Repo::<Environment>::get(&mut db.session().await.unwrap(), e.id)
            .await
            .unwrap(),
        Some(e.clone())
    );
    let r = registry(&db, o.id, "hub").await;
    assert_eq!(
        Repo::<ContainerRegistry>::get(&mut db.session().await.unwrap(), r.id)
            .await
            .unwrap(),
        Some(r.clone())
    );
    let t = git_token(&db, o.id, "gh").await;
    assert_eq!(
        Repo::<GitToken>::get(&mut db.session().await.unwrap(), t.id)
            .await
            .unwrap(),
        Some(t)
    );

    let mut edited = p.clone();
    edited.name = Name::parse("name", "Shop 2").unwrap();
    edited.description = Some("new".into());
    Repo::<Project>::update(&mut db.session().await.unwrap(), &edited)
        .await
        .unwrap();
    assert_eq!(
        Repo::<Project>::get(&mut db.session().await.unwrap(), p.id)
            .await
            .unwrap(),
        Some(edited)
    );

    let many = Repo::<Cluster>::get_many(
        &mut db.session().await.unwrap(),
        &[c.id, ClusterId::generate()],
    )
    .await
    .unwrap();
    assert_eq!(many, vec![c]);
    assert!(
        Repo::<Project>::get(&mut db.session().await.unwrap(), ProjectId::generate())
            .await
            .unwrap()
            .is_none()
    );
}

/// Rows hold the domain's types; the columns still hold the text they always did: ids
/// hyphenated in lowercase, enums by their wire names.
async fn ids_and_enums_are_stored_as_their_text(db: Db) {
    let (o, c, p, e) = hierarchy(&db).await;
    let text = |s: &str| vec![Some(s.to_string())];
    for (table, column, expected) in [
        ("organizations", "id", o.id.to_string()),
        ("organizations", "plan", "FREE".into()),
        ("clusters", "cloud_provider", "CLOUDA".into()),
        ("clusters", "state", c.run.state.as_str().into()),
        ("environments", "id", e.id.to_string()),
        ("environments", "organization_id", o.id.to_string()),
        ("environments", "project_id", p.id.to_string()),
        ("environments", "cluster_id", c.id.to_string()),
        ("environments", "mode", "STAGING".into()),
    ] {
        assert_eq!(
            testing::raw_column(&db, table, column).await,
            text(&expected),
            "{table}.{column}"
        );
    }
    assert_eq!(
        testing::raw_column(&db, "environments", "last_updated_by").await,
        vec![None]
    );
}

async fn names_are_unique_case_insensitively_per_parent(db: Db) {
    let (o, c, p, e) = hierarchy(&db).await;
    let dup =
        Repo::<Project>::insert(&mut db.session().await.unwrap(), &project_in(o.id, "SHOP")).await;
    assert!(matches!(dup, Err(StoreError::Duplicate)), "{dup:?}");
    let other = org(&db).await;
    Repo::<Project>::insert(
        &mut db.session().await.unwrap(),
        &project_in(other.id, "shop"),
    )
    .await
    .unwrap();

    let dup_env = Repo::<Environment>::insert(
        &mut db.session().await.unwrap(),
        &environment_in(&p, c.id, "PROD"),
    )
    .await;
    assert!(matches!(dup_env, Err(StoreError::Duplicate)));

    let r = registry(&db, o.id, "hub").await;
    let s = service_in(&e, ServiceKind::Container, "Web", container_body(r.id));
    Repo::<Service>::insert(&mut db.session().await.unwrap(), &s)
        .await
        .unwrap();
    // Another kind with the same name in the same environment is still a clash.
    let db_service = service_in(
        &e,
        ServiceKind::Database,
        "web",
        json!({"type": "REDIS", "version": "7", "mode": "CONTAINER"}),
    );
    assert!(matches!(
        Repo::<Service>::insert(&mut db.session().await.unwrap(), &db_service).await,
        Err(StoreError::Duplicate)
    ));

    // Renaming onto a taken name is refused too.
    let second = project_in(o.id, "billing");
    Repo::<Project>::insert(&mut db.session().await.unwrap(), &second)
        .await
        .unwrap();
    let mut renamed = second.clone();
    renamed.name = Name::parse("name", "Shop").unwrap();
    assert!(matches!(
        Repo::<Project>::update(&mut db.session().await.unwrap(), &renamed).await,
        Err(StoreError::Duplicate)
    ));
}

async fn lists_are_paged_in_creation_order(db: Db) {
    let o = org(&db).await;
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(cluster(&db, o.id, &format!("c{i}")).await.id);
    }
    let page = Repo::<Cluster>::list(
        &mut db.session().await.unwrap(),
        o.id,
        PageRequest::new(2, 2).unwrap(),
    )
    .await
    .unwrap();
    assert_eq!(page.total_count, 5);
    assert_eq!(page.total_pages(), 3);
    assert_eq!(
        page.items.iter().map(|c| c.id).collect::<Vec<_>>(),
        ids[2..4].to_vec()
    );
    let past = Repo::<Cluster>::list(
        &mut db.session().await.unwrap(),
        o.id,
        PageRequest::new(9, 2).unwrap(),
    )
    .await
    .unwrap();
    assert!(past.items.is_empty());
    assert_eq!(past.total_count, 5);
    // The last page, part full and exactly full: the total without a count.
    for (page, size, items) in [(3, 2, &ids[4..]), (1, 5, &ids[..]), (1, 9, &ids[..])] {
        let last = Repo::<Cluster>::list(
            &mut db.session().await.unwrap(),
            o.id,
            PageRequest::new(page, size).unwrap(),
        )
        .await
        .unwrap();
        assert_eq!(last.total_count, 5, "page {page} of {size}");
        assert_eq!(
            last.items.iter().map(|c| c.id).collect::<Vec<_>>(),
            items.to_vec()
        );
    }
    // A full page with more after it: the extra row is not answered.
    let first = Repo::<Cluster>::list(
        &mut db.session().await.unwrap(),
        o.id,
        PageRequest::new(1, 4).unwrap(),
    )
    .await
    .unwrap();
    assert_eq!(first.total_count, 5);
    assert_eq!(
        first.items.iter().map(|c| c.id).collect::<Vec<_>>(),
        ids[..4].to_vec()
    );
    let other = org(&db).await;
    let none = Repo::<Cluster>::list(
        &mut db.session().await.unwrap(),
        other.id,
        PageRequest::default(),
    )
    .await
    .unwrap();
    assert_eq!(none.total_count, 0);
}

async fn deleting_a_parent_removes_its_children(db: Db) {
    let (o, c, p, e) = hierarchy(&db).await;
    let r = registry(&db, o.id, "hub").await;
    let s = service_in(&e, ServiceKind::Container, "web", container_body(r.id));
    Repo::<Service>::insert(&mut db.session().await.unwrap(), &s)
        .await
        .unwrap();

    Repo::<Project>::delete(&mut db.session().await.unwrap(), p.id)
        .await
        .unwrap();
    assert!(
        Repo::<Environment>::get(&mut db.session().await.unwrap(), e.id)
            .await
            .unwrap()
            .is_none()
    );
    assert!(Repo::<Service>::get(&mut db.session().await.unwrap(), s.id)
        .await
        .unwrap()
        .is_none());
    assert!(Repo::<Cluster>::get(&mut db.session().await.unwrap(), c.id)
        .await
        .unwrap()
        .is_some());

    let token = ApiToken {
        id: ApiTokenId::generate(),
        organization_id: o.id,
        name: Name::parse("name", "ci").unwrap(),
        description: None,
        role: Role::Admin,
        token_hash: "h1".into(),
        created_at: now(),
        updated_at: now(),
        last_used_at: None,
    };
    Repo::<ApiToken>::insert(&mut db.session().await.unwrap(), &token)
        .await
        .unwrap();
    Repo::<Organization>::delete(&mut db.session().await.unwrap(), o.id)
        .await
        .unwrap();
    assert!(Repo::<Cluster>::get(&mut db.session().await.unwrap(), c.id)
        .await
        .unwrap()
        .is_none());
    assert!(
        Repo::<ContainerRegistry>::get(&mut db.session().await.unwrap(), r.id)
            .await
            .unwrap()
            .is_none()
    );
    assert!(db.find_token_by_hash("h1").await.unwrap().is_none());
}

async fn referenced_rows_cannot_be_deleted(db: Db) {
    let (o, c, _p, e) = hierarchy(&db).await;
    assert!(matches!(
        Repo::<Cluster>::delete(&mut db.session().await.unwrap(), c.id).await,
        Err(StoreError::InUse)
    ));

    let r = registry(&db, o.id, "hub").await;
    let s = service_in(&e, ServiceKind::Container, "web", container_body(r.id));
    Repo::<Service>::insert(&mut db.session().await.unwrap(), &s)
        .await
        .unwrap();
    assert!(matches!(
        Repo::<ContainerRegistry>::delete(&mut db.session().await.unwrap(), r.id).await,
        Err(StoreError::InUse)
    ));

    let t = git_token(&db, o.id, "gh").await;
    let app = service_in(
        &e,
        ServiceKind::Application,
        "api",
        json!({"git_repository": {"url": "https://github.com/acme/api", "git_token_id": t.id}}),
    );
    Repo::<Service>::insert(&mut db.session().await.unwrap(), &app)
        .await
        .unwrap();
    assert!(matches!(
        Repo::<GitToken>::delete(&mut db.session().await.unwrap(), t.id).await,
        Err(StoreError::InUse)
    ));

    Repo::<Service>::delete(&mut db.session().await.unwrap(), app.id)
        .await
        .unwrap();
    Repo::<GitToken>::delete(&mut db.session().await.unwrap(), t.id)
        .await
        .unwrap();
    Repo::<Environment>::delete(&mut db.session().await.unwrap(), e.id)
        .await
        .unwrap();
    Repo::<Cluster>::delete(&mut db.session().await.unwrap(), c.id)
        .await
        .unwrap();
}

/// Every table of the schema, as the database lists it (the migrations' own aside).
async fn tables(db: &Db) -> std::collections::BTreeSet<String> {
    testing::schema_columns(db)
        .await
        .into_iter()
        .map(|(table, _)| table)
        .filter(|t| !t.starts_with("__diesel"))
        .collect()
}

#[tokio::test]
async fn every_table_is_listed_for_maintenance() {
    let (db, _url, _guard) = testing::sqlite().await;
    let listed: std::collections::BTreeSet<String> = capstan_storage::TABLES
        .iter()
        .chain(capstan_storage::KEPT_TABLES)
        .map(|t| t.to_string())
        .collect();
    assert_eq!(tables(&db).await, listed);
}

async fn a_reset_empties_every_table_or_keeps_the_tokens(db: Db) {
    let (o, _, _, env) = hierarchy(&db).await;
    let s = service_in(
        &env,
        ServiceKind::Container,
        "web",
        container_body(registry(&db, o.id, "r").await.id),
    );
    let mut unit = Store::write(&db).await.unwrap();
    Repo::<Service>::insert(&mut *unit, &s).await.unwrap();
    unit.commit().await.unwrap();
    request_for(&db, &env, &s).await;
    let tokenless = org(&db).await;
    let token = ApiToken {
        id: ApiTokenId::generate(),
        organization_id: o.id,
        name: Name::parse("name", "kept").unwrap(),
        description: None,
        role: Role::Admin,
        token_hash: domain::auth::hash_token("cap_kept"),
        created_at: now(),
        updated_at: now(),
        last_used_at: None,
    };
    let mut unit = Store::write(&db).await.unwrap();
    Repo::<ApiToken>::insert(&mut *unit, &token).await.unwrap();
    unit.commit().await.unwrap();
    let hash = domain::auth::hash_token("cap_kept");
    assert!(db.find_token_by_hash(&hash).await.unwrap().is_some());

    db.reset(true).await.unwrap();
    let mut read = db.session().await.unwrap();
    assert!(Repo::<Organization>::get(&mut read, o.id)
        .await
        .unwrap()
        .is_some());
    assert!(Repo::<Organization>::get(&mut read, tokenless.id)
        .await
        .unwrap()
        .is_none());
    assert!(Repo::<Environment>::get(&mut read, env.id)
        .await
        .unwrap()
        .is_none());
    assert!(Repo::<Service>::get(&mut read, s.id)
        .await
        .unwrap()
        .is_none());
    assert_eq!(db.find_token_by_hash(&hash).await.unwrap(), Some(token));
    assert_eq!(db.queue_depth().await.unwrap(), Default::default());
    drop(read);

    let mut session = db.session().await.unwrap();
    let installation = session.installation_id("before").await.unwrap();
    drop(session);
    db.reset(false).await.unwrap();
    assert_eq!(
        db.session()
            .await
            .unwrap()
            .installation_id("after")
            .await
            .unwrap(),
        installation,
        "who the installation is outlives any reset"
    );
    assert!(
        db.find_token_by_hash(&hash).await.unwrap().is_none(),
        "forgotten, even from memory"
    );
    for table in capstan_storage::TABLES {
        assert!(
            testing::raw_column(&db, table, "CAST(NULL AS TEXT)")
                .await
                .is_empty(),
            "{table} is empty"
        );
    }
}

async fn a_snapshot_is_restored_exactly(db: Db) {
    let name = |n: &str| SnapshotName::parse("name", n).unwrap();
    let (o, cluster, project, env) = hierarchy(&db).await;
    let s = service_in(
        &env,
        ServiceKind::Container,
        "web",
        container_body(registry(&db, o.id, "r").await.id),
    );
    let mut unit = Store::write(&db).await.unwrap();
    Repo::<Service>::insert(&mut *unit, &s).await.unwrap();
    unit.commit().await.unwrap();
    let request = request_for(&db, &env, &s).await;
    assert!(db.snapshots().await.unwrap().is_empty());

    let saved = db.save_snapshot(&name("s1"), now()).await.unwrap();
    assert_eq!(saved.name, name("s1"));
    assert!(saved.rows >= 7, "{saved:?}");
    assert!(matches!(
        db.save_snapshot(&name("s1"), now()).await,
        Err(StoreError::Duplicate)
    ));
    db.save_snapshot(&name("s2"), now()).await.unwrap();
    let listed = db.snapshots().await.unwrap();
    assert_eq!(
        listed.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        ["s1", "s2"]
    );
    assert_eq!(listed[0].rows, saved.rows);

    // Changed every way: removed, added, and the whole store emptied.
    let mut unit = Store::write(&db).await.unwrap();
    Repo::<Environment>::delete(&mut *unit, env.id)
        .await
        .unwrap();
    unit.commit().await.unwrap();
    let later = project_in(o.id, "LATER");
    let mut unit = Store::write(&db).await.unwrap();
    Repo::<Project>::insert(&mut *unit, &later).await.unwrap();
    unit.commit().await.unwrap();

    db.restore_snapshot(&name("s1")).await.unwrap();
    let mut read = db.session().await.unwrap();
    assert_eq!(
        Repo::<Organization>::get(&mut read, o.id).await.unwrap(),
        Some(o.clone())
    );
    assert_eq!(
        Repo::<Cluster>::get(&mut read, cluster.id).await.unwrap(),
        Some(cluster.clone())
    );
    assert_eq!(
        Repo::<Project>::get(&mut read, project.id).await.unwrap(),
        Some(project.clone())
    );
    assert_eq!(
        Repo::<Environment>::get(&mut read, env.id).await.unwrap(),
        Some(env.clone())
    );
    assert_eq!(
        Repo::<Service>::get(&mut read, s.id).await.unwrap(),
        Some(s.clone())
    );
    assert_eq!(
        Repo::<DeploymentRequest>::get(&mut read, request.id)
            .await
            .unwrap(),
        Some(request.clone())
    );
    assert_eq!(
        Repo::<Project>::get(&mut read, later.id).await.unwrap(),
        None
    );
    drop(read);

    db.reset(false).await.unwrap();
    db.restore_snapshot(&name("s2")).await.unwrap();
    let mut read = db.session().await.unwrap();
    assert_eq!(
        Repo::<Service>::get(&mut read, s.id).await.unwrap(),
        Some(s)
    );
    drop(read);
    assert_eq!(
        db.snapshots().await.unwrap().len(),
        2,
        "a reset keeps snapshots"
    );

    db.delete_snapshot(&name("s1")).await.unwrap();
    assert!(matches!(
        db.delete_snapshot(&name("s1")).await,
        Err(StoreError::NotFound)
    ));
    assert!(matches!(
        db.restore_snapshot(&name("s1")).await,
        Err(StoreError::NotFound)
    ));
    assert_eq!(db.snapshots().await.unwrap().len(), 1);
}

async fn a_rotated_key_reseals_every_secret_and_nothing_else(db: Db) {
    let (o, _c, p, e) = hierarchy(&db).await;
    let token = git_token(&db, o.id, "gh").await;
    let reg = registry(&db, o.id, "hub").await;
    let variable = |key: &str, value: &str, is_secret: bool| Variable {
        id: VariableId::generate(),
        organization_id: o.id,
        project_id: p.id,
        environment_id: Some(e.id),
        service_id: None,
        scope: VariableScope::Environment,
        key: VariableKey::parse(key).unwrap(),
        value: Some(Secret::new(value)),
        is_secret,
        variable_type: VariableType::Value,
        mount_path: None,
        description: None,
        enable_interpolation_in_file: None,
        aliased_variable_id: None,
        overridden_variable_id: None,
        secret_manager_access_id: None,
        linked_database_id: None,
        created_at: now(),
        updated_at: now(),
    };
    let secret = variable("S", "pl41n-rotated", true);
    // A plain value that reads like a sealed one is the client's text: left as it is.
    let lookalike = variable("P", "enc:v1:AAAA", false);
    for v in [&secret, &lookalike] {
        Repo::<Variable>::insert(&mut db.session().await.unwrap(), v)
            .await
            .unwrap();
    }
    db.claim_idempotency_key("p", "k", "h", now(), now())
        .await
        .unwrap();
    db.save_idempotent_response(
        "p",
        "k",
        &StoredResponse {
            status: 201,
            body: "{\"v\":\"pl41n-answer\"}".into(),
        },
    )
    .await
    .unwrap();

    let new_key = [7u8; 32];
    let resealed = db.rotate_key(&new_key).await.unwrap();
    assert_eq!(resealed, 4, "token, registry, secret, answer");
    let new_id = capstan_storage::key_id(&new_key);
    for (table, column) in [
        ("git_tokens", "token"),
        ("container_registries", "secret_config"),
        ("idempotency_keys", "response_body"),
    ] {
        for stored in testing::raw_column(&db, table, column).await {
            let stored = stored.unwrap();
            assert!(
                stored.starts_with(&format!("enc:v2:{new_id}:")),
                "{table}.{column}: {stored}"
            );
        }
    }
    let values: Vec<String> = testing::raw_column(&db, "variables", "value")
        .await
        .into_iter()
        .flatten()
        .collect();
    assert!(values.contains(&"enc:v1:AAAA".to_string()), "{values:?}");
    assert!(!values.iter().any(|v| v.contains("pl41n")));
    // The new key alone opens everything; the old one alone opens nothing.
    let only_new = db
        .clone()
        .with_cipher(capstan_storage::Cipher::new(&new_key));
    let mut read = only_new.session().await.unwrap();
    assert_eq!(
        Repo::<Variable>::get(&mut read, secret.id)
            .await
            .unwrap()
            .unwrap()
            .value,
        secret.value
    );
    assert_eq!(
        Repo::<GitToken>::get(&mut read, token.id)
            .await
            .unwrap()
            .unwrap()
            .token,
        token.token
    );
    assert_eq!(
        Repo::<ContainerRegistry>::get(&mut read, reg.id)
            .await
            .unwrap()
            .unwrap()
            .secret_config,
        reg.secret_config
    );
    drop(read);
    let only_old = db
        .clone()
        .with_cipher(capstan_storage::Cipher::new(&testing::TEST_KEY));
    assert!(
        Repo::<Variable>::get(&mut only_old.session().await.unwrap(), secret.id)
            .await
            .is_err()
    );
    // What the rotated store writes from now on is sealed with the new key; a second rotation
    // to the same key has nothing to do.
    let later = variable("T", "pl41n-later", true);
    Repo::<Variable>::insert(&mut db.session().await.unwrap(), &later)
        .await
        .unwrap();
    assert_eq!(
        Repo::<Variable>::get(&mut only_new.session().await.unwrap(), later.id)
            .await
            .unwrap()
            .unwrap()
            .value,
        later.value
    );
    assert_eq!(db.rotate_key(&new_key).await.unwrap(), 0);
}

async fn tokens_are_found_by_hash(db: Db) {
    let o = Organization {
        id: OrganizationId::generate(),
        name: Name::parse("name", "Boot").unwrap(),
        description: None,
        plan: OrganizationPlan::Free,
        created_at: now(),
        updated_at: now(),
    };
    let t = ApiToken {
        id: ApiTokenId::generate(),
        organization_id: o.id,
        name: Name::parse("name", "first").unwrap(),
        description: Some("cli".into()),
        role: Role::Devops,
        token_hash: domain::auth::hash_token("cap_secret"),
        created_at: now(),
        updated_at: now(),
        last_used_at: None,
    };
    let mut unit = Store::write(&db).await.unwrap();
    Repo::<Organization>::insert(&mut *unit, &o).await.unwrap();
    Repo::<ApiToken>::insert(&mut *unit, &t).await.unwrap();
    unit.commit().await.unwrap();
    let found = db
        .find_token_by_hash(&domain::auth::hash_token("cap_secret"))
        .await
        .unwrap();
    assert_eq!(found, Some(t.clone()));
    assert!(db.find_token_by_hash("nope").await.unwrap().is_none());

    // A unit is all or nothing: a second organization whose token clashes leaves nothing.
    let o2 = Organization {
        id: OrganizationId::generate(),
        ..o.clone()
    };
    let t2 = ApiToken {
        id: ApiTokenId::generate(),
        organization_id: o2.id,
        ..t.clone()
    };
    let mut unit = Store::write(&db).await.unwrap();
    Repo::<Organization>::insert(&mut *unit, &o2).await.unwrap();
    assert!(matches!(
        Repo::<ApiToken>::insert(&mut *unit, &t2).await,
        Err(StoreError::Duplicate)
    ));
    drop(unit);
    assert!(
        Repo::<Organization>::get(&mut db.session().await.unwrap(), o2.id)
            .await
            .unwrap()
            .is_none()
    );

    // Found again (an embedded store remembers it), then deleted in a write unit: not found
    // from the moment the unit commits, and still found until then.
    assert!(db
        .find_token_by_hash(&t.token_hash)
        .await
        .unwrap()
        .is_some());
    let mut unit = Store::write(&db).await.unwrap();
    Repo::<ApiToken>::delete(&mut *unit, t.id).await.unwrap();
    assert!(db
        .find_token_by_hash(&t.token_hash)
        .await
        .unwrap()
        .is_some());
    unit.commit().await.unwrap();
    assert!(db
        .find_token_by_hash(&t.token_hash)
        .await
        .unwrap()
        .is_none());

    // An organization takes its tokens with it.
    let t3 = ApiToken {
        id: ApiTokenId::generate(),
        token_hash: domain::auth::hash_token("cap_third"),
        ..t.clone()
    };
    Repo::<ApiToken>::insert(&mut db.session().await.unwrap(), &t3)
        .await
        .unwrap();
    assert!(db
        .find_token_by_hash(&t3.token_hash)
        .await
        .unwrap()
        .is_some());
    Repo::<Organization>::delete(&mut db.session().await.unwrap(), o.id)
        .await
        .unwrap();
    assert!(db
        .find_token_by_hash(&t3.token_hash)
        .await
        .unwrap()
        .is_none());
}

async fn services_of_every_kind_round_trip_and_filter_by_kind(db: Db) {
    let (o, _c, _p, e) = hierarchy(&db).await;
    let r = registry(&db, o.id, "hub").await;
    let t = git_token(&db, o.id, "gh").await;
    let git = json!({"url": "https://github.com/acme/api", "git_token_id": t.id, "branch": "dev"});
    let bodies = [
        (
            ServiceKind::Application,
            json!({"git_repository": git, "ports": [{"internal_port": 8080}]}),
        ),
        (ServiceKind::Container, container_body(r.id)),
        (
            ServiceKind::Database,
            json!({"type": "POSTGRESQL", "version": "16", "mode": "MANAGED"}),
        ),
        (
            ServiceKind::Job,
            json!({"source": {"docker": {"git_repository": git}}}),
        ),
        (
            ServiceKind::Helm,
            json!({"source": {"git_repository": git}, "arguments": ["--wait"], "auto_deploy": true,
            "values_override": {"file": {"raw": {"values": [{"name": "v.yaml", "content": "a: 1"}]}}},
            "ports": [{"internal_port": 80, "service_name": "web"}]}),
        ),
        (
            ServiceKind::Terraform,
            json!({"terraform_files_source": {"git_repository": git}}),
        ),
    ];
    let mut created = Vec::new();
    for (i, (kind, body)) in bodies.into_iter().enumerate() {
        let s = service_in(&e, kind, &format!("s{i}"), body);
        Repo::<Service>::insert(&mut db.session().await.unwrap(), &s)
            .await
            .unwrap();
        assert_eq!(
            Repo::<Service>::get(&mut db.session().await.unwrap(), s.id)
                .await
                .unwrap(),
            Some(s.clone())
        );
        created.push(s);
    }
    for s in &created {
        let page = db
            .session()
            .await
            .unwrap()
            .list_services_of_kind(e.id, s.kind(), false, PageRequest::default())
            .await
            .unwrap();
        assert_eq!(page.items, vec![s.clone()], "{:?}", s.kind());
    }
    let all = Repo::<Service>::list(
        &mut db.session().await.unwrap(),
        e.id,
        PageRequest::default(),
    )
    .await
    .unwrap();
    assert_eq!(all.total_count, 6);
}

async fn usage_counts_are_grouped(db: Db) {
    let (o, c, p, e) = hierarchy(&db).await;
    let used = registry(&db, o.id, "used").await;
    let unused = registry(&db, o.id, "unused").await;
    for i in 0..3 {
        let s = service_in(
            &e,
            ServiceKind::Container,
            &format!("c{i}"),
            container_body(used.id),
        );
        Repo::<Service>::insert(&mut db.session().await.unwrap(), &s)
            .await
            .unwrap();
    }
    let counts = db
        .session()
        .await
        .unwrap()
        .count_services_by(ServiceLink::Registry, &[used.id.0, unused.id.0])
        .await
        .unwrap();
    assert_eq!(counts.get(&used.id.0), Some(&3));
    assert_eq!(counts.get(&unused.id.0), None);

    let t = git_token(&db, o.id, "gh").await;
    let app = service_in(
        &e,
        ServiceKind::Application,
        "api",
        json!({"git_repository": {"url": "https://github.com/acme/api", "git_token_id": t.id}}),
    );
    Repo::<Service>::insert(&mut db.session().await.unwrap(), &app)
        .await
        .unwrap();
    let counts = db
        .session()
        .await
        .unwrap()
        .count_services_by(ServiceLink::GitToken, &[t.id.0])
        .await
        .unwrap();
    assert_eq!(counts.get(&t.id.0), Some(&1));

    let empty = project_in(o.id, "empty");
    Repo::<Project>::insert(&mut db.session().await.unwrap(), &empty)
        .await
        .unwrap();
    let staging = environment_in(&p, c.id, "staging");
    Repo::<Environment>::insert(&mut db.session().await.unwrap(), &staging)
        .await
        .unwrap();
    let counts = db
        .session()
        .await
        .unwrap()
        .count_environments_by_project(&[p.id, empty.id])
        .await
        .unwrap();
    assert_eq!(counts.get(&p.id), Some(&2));
    assert_eq!(counts.get(&empty.id), None);
}

async fn missing_rows_are_reported(db: Db) {
    let ghost = project_in(OrganizationId::generate(), "ghost");
    assert!(matches!(
        Repo::<Project>::update(&mut db.session().await.unwrap(), &ghost).await,
        Err(StoreError::NotFound)
    ));
    assert!(matches!(
        Repo::<Project>::delete(&mut db.session().await.unwrap(), ghost.id).await,
        Err(StoreError::NotFound)
    ));
}

async fn health_answers(db: Db) {
    db.ping().await.unwrap();
}

async fn secrets_are_encrypted_at_rest(db: Db) {
    let (o, _c, p, e) = hierarchy(&db).await;
    git_token(&db, o.id, "gh").await;
    registry(&db, o.id, "hub").await;
    let creds = CloudCredentials {
        id: CredentialsId::generate(),
        organization_id: o.id,
        name: Name::parse("name", "aws").unwrap(),
        details: CredentialsDetails::CloudAStatic {
            access_key_id: "AKIA".into(),
        },
        secret: Secret::new("pl41n-creds"),
        created_at: now(),
        updated_at: now(),
    };
    Repo::<CloudCredentials>::insert(&mut db.session().await.unwrap(), &creds)
        .await
        .unwrap();
    // Every provider's kind reads back as written.
    for (name, details) in [
        (
            "role",
            CredentialsDetails::CloudARole {
                role_arn: "arn:role".into(),
            },
        ),
        (
            "alt",
            CredentialsDetails::AltCloud {
                altcloud_access_key: "SCW1".into(),
                altcloud_project_id: "p".into(),
                altcloud_organization_id: "o".into(),
            },
        ),
        (
            "tenant",
            CredentialsDetails::CloudC {
                subscription_id: "s".into(),
                tenant_id: "t".into(),
                application_id: "a".into(),
                application_object_id: "b".into(),
            },
        ),
    ] {
        let other = CloudCredentials {
            id: CredentialsId::generate(),
            name: Name::parse("name", name).unwrap(),
            details,
            secret: Secret::new(format!("pl41n-{name}")),
            ..creds.clone()
        };
        Repo::<CloudCredentials>::insert(&mut db.session().await.unwrap(), &other)
            .await
            .unwrap();
        let back = Repo::<CloudCredentials>::get(&mut db.session().await.unwrap(), other.id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(back.details, other.details);
        assert_eq!(back.secret, other.secret);
    }
    let secret = Variable {
        id: VariableId::generate(),
        organization_id: o.id,
        project_id: p.id,
        environment_id: Some(e.id),
        service_id: None,
        scope: VariableScope::Environment,
        key: VariableKey::parse("K").unwrap(),
        value: Some(Secret::new("pl41n-variable")),
        is_secret: true,
        variable_type: VariableType::Value,
        mount_path: None,
        description: None,
        enable_interpolation_in_file: None,
        aliased_variable_id: None,
        overridden_variable_id: None,
        secret_manager_access_id: None,
        linked_database_id: None,
        created_at: now(),
        updated_at: now(),
    };
    Repo::<Variable>::insert(&mut db.session().await.unwrap(), &secret)
        .await
        .unwrap();
    let plain = Variable {
        id: VariableId::generate(),
        key: VariableKey::parse("P").unwrap(),
        value: Some(Secret::new("visible")),
        is_secret: false,
        ..secret.clone()
    };
    Repo::<Variable>::insert(&mut db.session().await.unwrap(), &plain)
        .await
        .unwrap();

    for (table, column, plaintext) in [
        ("git_tokens", "token", "ghp_x"),
        ("container_registries", "secret_config", "\"p\""),
        ("cloud_credentials", "secret_access_key", "pl41n-creds"),
    ] {
        for stored in testing::raw_column(&db, table, column).await {
            let stored = stored.unwrap();
            assert!(
                stored.starts_with("enc:v2:") && !stored.contains(plaintext),
                "{table}.{column}: {stored}"
            );
        }
    }
    let values = testing::raw_column(&db, "variables", "value").await;
    assert!(
        values.iter().flatten().any(|v| v == "visible"),
        "non-secrets stay readable"
    );
    assert!(!values
        .iter()
        .flatten()
        .any(|v| v.contains("pl41n-variable")));
    // Read back through the port, the values are whole again.
    assert_eq!(
        Repo::<Variable>::get(&mut db.session().await.unwrap(), secret.id)
            .await
            .unwrap()
            .unwrap()
            .value,
        Some(Secret::new("pl41n-variable"))
    );
    assert_eq!(
        Repo::<CloudCredentials>::get(&mut db.session().await.unwrap(), creds.id)
            .await
            .unwrap()
            .unwrap()
            .secret,
        Secret::new("pl41n-creds")
    );
}

fn request(env: &Environment, service: &Service, action: DeploymentAction) -> DeploymentRequest {
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
            ..Default::default()
        },
        status: RequestStatus::Queued,
        state: ServiceState::queued(action),
        batch_id: id.0,
        snapshot: DeploymentSnapshot {
            name: service.name.to_string(),
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

async fn request_for(db: &Db, env: &Environment, service: &Service) -> DeploymentRequest {
    let r = request(env, service, DeploymentAction::Deploy);
    db.session()
        .await
        .unwrap()
        .enqueue(std::slice::from_ref(&r))
        .await
        .unwrap();
    r
}

fn lease() -> time::OffsetDateTime {
    now() + time::Duration::minutes(1)
}

async fn claim(db: &Db, worker: &str) -> Option<DeploymentRequest> {
    db.claim_next(worker, now(), lease()).await.unwrap()
}

/// Ends a claimed request as its worker would.
async fn end(db: &Db, mut r: DeploymentRequest, status: RequestStatus) -> Option<bool> {
    r.finish(status, None, now());
    db.session().await.unwrap().record(&r).await.unwrap()
}

/// `n` environments of one project, each with a database service.
async fn environments(db: &Db, n: usize) -> Vec<(Environment, Service)> {
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

async fn the_queue_runs_one_request_per_environment(db: Db) {
    let envs = environments(&db, 2).await;
    let a1 = request_for(&db, &envs[0].0, &envs[0].1).await;
    let a2 = request_for(&db, &envs[0].0, &envs[0].1).await;
    let b1 = request_for(&db, &envs[1].0, &envs[1].1).await;
    let first = claim(&db, "w").await.unwrap();
    assert_eq!(first.id, a1.id);
    assert_eq!(first.status, RequestStatus::Running);
    assert_eq!(first.claimed_by.as_deref(), Some("w"));
    assert!(first.started_at.is_some() && first.lease_until.is_some());
    assert_eq!(first.snapshot, a1.snapshot);
    assert_eq!(
        claim(&db, "w").await.unwrap().id,
        b1.id,
        "another environment may run"
    );
    assert!(claim(&db, "w").await.is_none(), "a2 waits for a1");
    let mut stolen = first.clone();
    stolen.claimed_by = Some("other".into());
    assert_eq!(
        end(&db, stolen, RequestStatus::Success).await,
        None,
        "only the claimer writes"
    );
    assert_eq!(
        end(&db, first.clone(), RequestStatus::Success).await,
        Some(false)
    );
    assert_eq!(claim(&db, "w").await.unwrap().id, a2.id);
    let done: DeploymentRequest = Repo::get(&mut db.session().await.unwrap(), a1.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(done.status, RequestStatus::Success);
    assert!(done.finished_at.is_some());
    assert_eq!(
        end(&db, first, RequestStatus::Error).await,
        None,
        "ended once"
    );
}

async fn claims_are_exclusive_under_concurrency(db: Db) {
    let envs = environments(&db, 6).await;
    let mut firsts = std::collections::HashSet::new();
    for (env, s) in &envs {
        firsts.insert(request_for(&db, env, s).await.id);
        request_for(&db, env, s).await;
    }
    let mut workers = Vec::new();
    for w in 0..4 {
        let db = db.clone();
        workers.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            for _ in 0..10 {
                if let Some(r) = claim(&db, &format!("w{w}")).await {
                    mine.push(r);
                }
            }
            mine
        }));
    }
    let mut claimed = Vec::new();
    for w in workers {
        claimed.extend(w.await.unwrap());
    }
    let ids: std::collections::HashSet<_> = claimed.iter().map(|r| r.id).collect();
    assert_eq!(ids.len(), claimed.len(), "no request claimed twice");
    let envs_running: std::collections::HashSet<_> =
        claimed.iter().map(|r| r.environment_id).collect();
    assert_eq!(
        envs_running.len(),
        claimed.len(),
        "one running request per environment"
    );
    assert_eq!(claimed.len(), 6);
    assert_eq!(
        ids, firsts,
        "each environment starts its oldest request first"
    );
}

async fn expired_claims_are_reclaimed_once(db: Db) {
    let envs = environments(&db, 2).await;
    let a = request_for(&db, &envs[0].0, &envs[0].1).await;
    request_for(&db, &envs[1].0, &envs[1].1).await;
    let past = now() - time::Duration::seconds(1);
    let dead = db.claim_next("dead", now(), past).await.unwrap().unwrap();
    claim(&db, "alive").await.unwrap();
    let (a1, a2) = tokio::join!(
        db.reclaim_expired("new1", now(), lease()),
        db.reclaim_expired("new2", now(), lease())
    );
    let mut got: Vec<DeploymentRequest> = a1.unwrap();
    got.extend(a2.unwrap());
    assert_eq!(got.iter().map(|r| r.id).collect::<Vec<_>>(), vec![a.id]);
    assert!(matches!(
        got[0].claimed_by.as_deref(),
        Some("new1" | "new2")
    ));
    assert!(db
        .reclaim_expired("new3", now(), lease())
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        end(&db, dead, RequestStatus::Success).await,
        None,
        "the dead worker no longer holds it"
    );
    let mut ended = got.remove(0);
    ended.reason = Some("worker died".into());
    let reason = ended.reason.clone();
    ended.finish(RequestStatus::Error, reason, now());
    assert_eq!(
        db.session().await.unwrap().record(&ended).await.unwrap(),
        Some(false)
    );
    let read: DeploymentRequest = Repo::get(&mut db.session().await.unwrap(), a.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read.reason.as_deref(), Some("worker died"));
    assert_eq!(read.status, RequestStatus::Error);
}

async fn canceling_an_environment_spares_deletions(db: Db) {
    let envs = environments(&db, 1).await;
    let (env, s) = &envs[0];
    let running = request_for(&db, env, s).await;
    let waiting = request_for(&db, env, s).await;
    let deletion = request(env, s, DeploymentAction::Delete);
    db.session()
        .await
        .unwrap()
        .enqueue(std::slice::from_ref(&deletion))
        .await
        .unwrap();
    let claimed = claim(&db, "w").await.unwrap();
    assert_eq!(claimed.id, running.id);
    assert_eq!(
        db.session()
            .await
            .unwrap()
            .cancel_pending(env.id, None, "canceled by test", now())
            .await
            .unwrap(),
        Canceled {
            ended: vec![waiting.id],
            flagged: 1
        },
        "the waiting request ends, the running one is asked to stop"
    );
    assert_eq!(
        db.session().await.unwrap().record(&claimed).await.unwrap(),
        Some(true),
        "the worker hears of it"
    );
    let w: DeploymentRequest = Repo::get(&mut db.session().await.unwrap(), waiting.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(w.status, RequestStatus::Canceled);
    assert_eq!(w.state, ServiceState::Canceled);
    assert_eq!(w.reason.as_deref(), Some("canceled by test"));
    let d: DeploymentRequest = Repo::get(&mut db.session().await.unwrap(), deletion.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(d.status, RequestStatus::Queued);
    assert_eq!(
        db.session()
            .await
            .unwrap()
            .cancel_pending(env.id, None, "again", now())
            .await
            .unwrap(),
        Canceled::default()
    );
}

async fn activity_and_history_come_from_the_queue(db: Db) {
    let envs = environments(&db, 1).await;
    let (env, s) = &envs[0];
    let empty = db
        .session()
        .await
        .unwrap()
        .environment_activity(env.id)
        .await
        .unwrap();
    assert_eq!(empty, EnvironmentActivity::default());
    same_as_separate_reads(&db, env, s).await;
    let first = request_for(&db, env, s).await;
    let claimed = claim(&db, "w").await.unwrap();
    end(&db, claimed, RequestStatus::Success).await.unwrap();
    let second = request_for(&db, env, s).await;
    let restart = request(env, s, DeploymentAction::Restart);
    db.session()
        .await
        .unwrap()
        .enqueue(std::slice::from_ref(&restart))
        .await
        .unwrap();
    let claimed = claim(&db, "w").await.unwrap();
    assert_eq!(claimed.id, second.id);

    let activity = db
        .session()
        .await
        .unwrap()
        .environment_activity(env.id)
        .await
        .unwrap();
    assert_eq!(activity.running.as_ref().map(|r| r.id), Some(second.id));
    assert_eq!(
        activity.pending.iter().map(|r| r.id).collect::<Vec<_>>(),
        vec![second.id, restart.id]
    );
    assert_eq!(activity.last_batch, Some(restart.batch_id));

    let mut expected = vec![first.id, second.id, restart.id];
    expected.sort();
    // The service's requests and the environment's activity, read at once.
    let (together, mut requests) = db
        .session()
        .await
        .unwrap()
        .activity_of(env.id, &[s.id])
        .await
        .unwrap();
    assert_eq!(together, activity);
    same_as_separate_reads(&db, env, s).await;
    requests.sort_by_key(|r| r.id);
    assert_eq!(
        requests.iter().map(|r| r.id).collect::<Vec<_>>(),
        expected,
        "pending ones and the latest ended"
    );

    let deployments = [DeploymentAction::Deploy, DeploymentAction::Redeploy];
    let history = db
        .session()
        .await
        .unwrap()
        .service_requests(s.id, Some(&deployments), None, 10)
        .await
        .unwrap();
    assert_eq!(history.len(), 2, "restarts are not deployments");
    assert_eq!(
        history.iter().map(|r| r.id).collect::<Vec<_>>(),
        vec![second.id, first.id],
        "newest first"
    );

    // Once everything has ended, the latest batch is the newest ended request's.
    let running = db
        .session()
        .await
        .unwrap()
        .environment_activity(env.id)
        .await
        .unwrap()
        .running
        .unwrap();
    end(&db, running, RequestStatus::Success).await.unwrap();
    let restarted = claim(&db, "w").await.unwrap();
    assert_eq!(restarted.id, restart.id);
    end(&db, restarted, RequestStatus::Success).await.unwrap();
    let idle = db
        .session()
        .await
        .unwrap()
        .environment_activity(env.id)
        .await
        .unwrap();
    assert!(idle.pending.is_empty() && idle.running.is_none());
    assert_eq!(idle.last_batch, Some(restart.batch_id));
    same_as_separate_reads(&db, env, s).await;
    assert!(db
        .session()
        .await
        .unwrap()
        .service_with_activity(ServiceId::generate())
        .await
        .unwrap()
        .is_none());
}

/// `service_with_activity` reads what `get` and `activity_of` read one after the other.
async fn same_as_separate_reads(db: &Db, env: &Environment, s: &Service) {
    let mut session = db.session().await.unwrap();
    let (service, activity, mut requests) =
        session.service_with_activity(s.id).await.unwrap().unwrap();
    let alone: Service = Repo::get(&mut session, s.id).await.unwrap().unwrap();
    let (expected_activity, mut expected) = session.activity_of(env.id, &[s.id]).await.unwrap();
    assert_eq!(service, alone);
    assert_eq!(activity, expected_activity);
    requests.sort_by_key(|r| r.id);
    expected.sort_by_key(|r| r.id);
    assert_eq!(requests, expected);
}

async fn a_variable_change_makes_a_deployed_service_out_of_date(db: Db) {
    let envs = environments(&db, 1).await;
    let (env, s) = &envs[0];
    let mark = |at| {
        let db = db.clone();
        let id = s.id;
        async move {
            db.session()
                .await
                .unwrap()
                .mark_out_of_date(VariableParent::Service(id, ServiceKind::Database), at)
                .await
                .unwrap()
        }
    };
    let read = || {
        let db = db.clone();
        let id = s.id;
        async move {
            let service: Service = Repo::get(&mut db.session().await.unwrap(), id)
                .await
                .unwrap()
                .unwrap();
            service
        }
    };
    // Never deployed and nothing asked for: its next deployment comes after the change anyway.
    assert_eq!(mark(now() + time::Duration::seconds(1)).await, 0);
    assert_eq!(read().await.updated_at, s.updated_at);
    // A deployment waiting: it must not count as deploying the change.
    let waiting = request_for(&db, env, s).await;
    let changed = now() + time::Duration::seconds(2);
    assert_eq!(mark(changed).await, 1);
    let marked = read().await;
    assert_eq!(marked.updated_at, changed);
    assert_eq!(marked.deployment_status, DeploymentStatus::NeverDeployed);
    let claimed = claim(&db, "w").await.unwrap();
    assert_eq!(claimed.id, waiting.id);
    end(&db, claimed, RequestStatus::Success).await.unwrap();
    let s = &read().await;

    let mut deployed = s.clone();
    deployed.deployment_status = DeploymentStatus::UpToDate;
    Repo::<Service>::update(&mut db.session().await.unwrap(), &deployed)
        .await
        .unwrap();
    let later = now() + time::Duration::seconds(1);
    assert_eq!(
        db.session()
            .await
            .unwrap()
            .mark_out_of_date(VariableParent::Service(s.id, ServiceKind::Database), later)
            .await
            .unwrap(),
        1
    );
    let read: Service = Repo::get(&mut db.session().await.unwrap(), s.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read.deployment_status, DeploymentStatus::OutOfDate);
    assert_eq!(
        read.updated_at, later,
        "a variable change is a change of the service"
    );
}

async fn a_unit_dropped_before_commit_leaves_nothing(db: Db) {
    let o = org(&db).await;
    let p = project_in(o.id, "kept");
    let mut unit = Store::write(&db).await.unwrap();
    Repo::<Project>::insert(&mut *unit, &p).await.unwrap();
    let gone = project_in(o.id, "gone");
    Repo::<Project>::insert(&mut *unit, &gone).await.unwrap();
    unit.commit().await.unwrap();

    let mut unit = Store::write(&db).await.unwrap();
    Repo::<Project>::delete(&mut *unit, p.id).await.unwrap();
    Repo::<Project>::insert(&mut *unit, &project_in(o.id, "never"))
        .await
        .unwrap();
    drop(unit);
    // The rollback of a dropped unit may run after the drop; the next unit sees none of it.
    let mut reader = Store::snapshot(&db).await.unwrap();
    let names: Vec<String> = Repo::<Project>::list(&mut *reader, o.id, PageRequest::all())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|p| p.name.to_string())
        .collect();
    assert_eq!(names, vec!["kept", "gone"]);
}

/// What commits after a snapshot's first read stays out of it to its end, the first read
/// included (PostgreSQL sends BEGIN with it), and snapshots dropped without an end leave their
/// connections out of any transaction.
async fn a_snapshot_sees_one_state_from_its_first_read(db: Db) {
    let (o, _, _, _) = hierarchy(&db).await;
    let description = |p: &Project| p.description.clone().unwrap_or_default();
    let mut project = project_in(o.id, "watched");
    project.description = Some("before".into());
    Repo::<Project>::insert(&mut db.session().await.unwrap(), &project)
        .await
        .unwrap();
    for round in 0..20 {
        let mut snapshot = Store::snapshot(&db).await.unwrap();
        let first: Project = Repo::get(&mut *snapshot, project.id)
            .await
            .unwrap()
            .unwrap();
        let mut writer = Store::write(&db).await.unwrap();
        let mut changed = first.clone();
        changed.description = Some(format!("round {round}"));
        Repo::<Project>::update(&mut *writer, &changed)
            .await
            .unwrap();
        writer.commit().await.unwrap();
        let again: Project = Repo::get(&mut *snapshot, project.id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(description(&again), description(&first), "round {round}");
        let projects = Repo::<Project>::list(&mut *snapshot, o.id, PageRequest::all())
            .await
            .unwrap();
        assert!(projects
            .items
            .iter()
            .any(|p| p.id == project.id && description(p) == description(&first)));
        drop(snapshot);
        // A connection handed on inside the dropped snapshot would show the old state.
        let fresh: Project = Repo::get(&mut *Store::snapshot(&db).await.unwrap(), project.id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(description(&fresh), format!("round {round}"));
    }
}

/// A scope locked by one write unit is held until it commits: another unit that locks it
/// waits, then reads what the first wrote.
async fn a_locked_scope_is_held_until_commit(db: Db) {
    let envs = environments(&db, 1).await;
    let (env, s) = envs[0].clone();
    let db = std::sync::Arc::new(db);
    let mut first = Store::write(&*db).await.unwrap();
    first.lock(Scope::Environment(env.id)).await.unwrap();
    let mut read: Service = Repo::get(&mut *first, s.id).await.unwrap().unwrap();
    read.description = Some("first".into());
    let (started_tx, started) = tokio::sync::oneshot::channel();
    let second = {
        let db = db.clone();
        tokio::spawn(async move {
            let _ = started_tx.send(());
            let mut second = Store::write(&*db).await.unwrap();
            second.lock(Scope::EnvironmentOf(s.id)).await.unwrap();
            let mut seen: Service = Repo::get(&mut *second, s.id).await.unwrap().unwrap();
            let before = seen.description.clone();
            seen.description = Some(format!(
                "{} then second",
                before.clone().unwrap_or_default()
            ));
            Repo::<Service>::update(&mut *second, &seen).await.unwrap();
            second.commit().await.unwrap();
            before
        })
    };
    started.await.unwrap();
    // Give the second unit every chance to run ahead if the lock did not hold it.
    tokio::time::sleep(std::time::Duration::from_millis(150)).await;
    Repo::<Service>::update(&mut *first, &read).await.unwrap();
    first.commit().await.unwrap();
    assert_eq!(second.await.unwrap().as_deref(), Some("first"));
    let last: Service = Repo::get(&mut db.session().await.unwrap(), s.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(last.description.as_deref(), Some("first then second"));
}

async fn rate_limit_leases_never_overlap(db: Db) {
    let gcra = Gcra::per_hour(50);
    let now = 1_700_000_000_000_000;
    // Twenty concurrent leases of three cells on one key, new at first: together they take
    // exactly the fifty cells of the window, never more.
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let db = db.clone();
        tasks.push(tokio::spawn(async move {
            db.gcra_lease("token:a", gcra, now, 3).await.unwrap()
        }));
    }
    let mut granted = 0;
    for t in tasks {
        granted += t.await.unwrap().granted;
    }
    assert_eq!(granted, 50);
    let refused = db.gcra_lease("token:a", gcra, now, 1).await.unwrap();
    assert_eq!(refused.granted, 0);
    assert_eq!(refused.tat_us, now + 50 * gcra.interval_us());
    assert_eq!(
        db.gcra_lease("token:b", gcra, now, 1)
            .await
            .unwrap()
            .granted,
        1,
        "keys are apart"
    );
    let later = now + 2 * gcra.interval_us();
    assert_eq!(
        db.gcra_lease("token:a", gcra, later, 5)
            .await
            .unwrap()
            .granted,
        2,
        "refilled by two intervals"
    );
}

async fn idempotency_keys_replay_or_refuse(db: Db) {
    let t0 = now();
    let claim = |principal: &'static str,
                 key: &'static str,
                 hash: &'static str,
                 at: time::OffsetDateTime| {
        let db = db.clone();
        async move {
            db.claim_idempotency_key(principal, key, hash, at, at - time::Duration::days(1))
                .await
                .unwrap()
        }
    };
    assert_eq!(claim("p", "k", "h1", t0).await, IdempotencyClaim::Claimed);
    assert_eq!(
        claim("p", "k", "h1", t0).await,
        IdempotencyClaim::Replay(None),
        "in flight"
    );
    let answer = StoredResponse {
        status: 201,
        body: r#"{"token":"cap_secret"}"#.into(),
    };
    db.save_idempotent_response("p", "k", &answer)
        .await
        .unwrap();
    assert_eq!(
        claim("p", "k", "h1", t0).await,
        IdempotencyClaim::Replay(Some(answer.clone()))
    );
    assert_eq!(claim("p", "k", "h2", t0).await, IdempotencyClaim::Mismatch);
    assert_eq!(
        claim("q", "k", "h2", t0).await,
        IdempotencyClaim::Claimed,
        "per principal"
    );
    let stored =
        capstan_storage::testing::raw_column(&db, "idempotency_keys", "response_body").await;
    assert!(
        stored.iter().flatten().all(|b| !b.contains("cap_secret")),
        "answers are encrypted at rest"
    );
    // A key a day old is forgotten.
    let tomorrow = t0 + time::Duration::days(1) + time::Duration::seconds(1);
    assert_eq!(
        claim("p", "k", "h2", tomorrow).await,
        IdempotencyClaim::Claimed
    );
    // A released key (its request failed) can be claimed again.
    assert_eq!(claim("p", "r", "h", t0).await, IdempotencyClaim::Claimed);
    db.release_idempotency_key("p", "r").await.unwrap();
    assert_eq!(claim("p", "r", "h", t0).await, IdempotencyClaim::Claimed);
}

/// The migrations leave both backends with the same tables and columns.
#[tokio::test]
async fn both_backends_end_with_the_same_tables_and_columns() {
    let (sqlite, _url, _guard) = testing::sqlite().await;
    let Some((postgres, _)) = testing::postgres().await else {
        return;
    };
    let sqlite = testing::schema_columns(&sqlite).await;
    let postgres = testing::schema_columns(&postgres).await;
    assert!(sqlite.len() > 50, "the schema was read: {sqlite:?}");
    assert_eq!(sqlite, postgres);
}

/// On a SQLite file a write unit returns only once an fsync of the log, begun after the unit
/// started committing, has completed; concurrent writers all get that guarantee.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_writes_are_on_disk_when_they_return() {
    let (db, _url, _guard) = testing::sqlite().await;
    let o = org(&db).await;
    let (started, completed) = testing::log_syncs(&db).await.expect("a file has a log");
    assert_eq!(started, completed, "no sync is running");
    let mut tx = db.write().await.unwrap();
    Repo::<Project>::insert(&mut *tx, &project_in(o.id, "ONE"))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let (_, after) = testing::log_syncs(&db).await.unwrap();
    assert!(
        after > started,
        "the commit waited for a sync it did not start before"
    );

    let writers: Vec<_> = (0..32)
        .map(|i| {
            let db = db.clone();
            tokio::spawn(async move {
                let mut tx = db.write().await.unwrap();
                Repo::<Project>::insert(&mut *tx, &project_in(o.id, &format!("P{i}")))
                    .await
                    .unwrap();
                let (begun, _) = testing::log_syncs(&db).await.unwrap();
                tx.commit().await.unwrap();
                let (_, done) = testing::log_syncs(&db).await.unwrap();
                assert!(
                    done > begun,
                    "writer {i} answered before its commit was synced"
                );
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap();
    }
    let (_, total) = testing::log_syncs(&db).await.unwrap();
    assert!(total - after <= 32, "at most one sync per writer");
    let projects = Repo::<Project>::list(
        &mut db.session().await.unwrap(),
        o.id,
        PageRequest::new(1, 100).unwrap(),
    )
    .await
    .unwrap();
    assert_eq!(projects.total_count, 33);
}

/// Servers sharing a PostgreSQL database remember no tokens: a token deleted through one is
/// not found through another on its very next lookup, whether it goes alone or with its
/// organization.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_deleted_through_one_server_fails_through_another() {
    let Some((first, url)) = testing::postgres().await else {
        return;
    };
    let second = Db::connect(&url, 4, &testing::TEST_KEY).await.unwrap();
    let o = org(&first).await;
    let token = |name: &str| ApiToken {
        id: ApiTokenId::generate(),
        organization_id: o.id,
        name: Name::parse("name", name).unwrap(),
        description: None,
        role: Role::Admin,
        token_hash: domain::auth::hash_token(&format!("cap_{name}")),
        created_at: now(),
        updated_at: now(),
        last_used_at: None,
    };
    let (alone, with_org) = (token("alone"), token("withorg"));
    for t in [&alone, &with_org] {
        Repo::<ApiToken>::insert(&mut first.session().await.unwrap(), t)
            .await
            .unwrap();
        for _ in 0..3 {
            assert!(second
                .find_token_by_hash(&t.token_hash)
                .await
                .unwrap()
                .is_some());
        }
        assert!(!testing::token_remembered(&second, &t.token_hash));
    }

    let mut unit = Store::write(&first).await.unwrap();
    Repo::<ApiToken>::delete(&mut *unit, alone.id)
        .await
        .unwrap();
    unit.commit().await.unwrap();
    assert!(second
        .find_token_by_hash(&alone.token_hash)
        .await
        .unwrap()
        .is_none());
    assert!(second
        .find_token_by_hash(&with_org.token_hash)
        .await
        .unwrap()
        .is_some());

    let mut unit = Store::write(&first).await.unwrap();
    Repo::<Organization>::delete(&mut *unit, o.id)
        .await
        .unwrap();
    unit.commit().await.unwrap();
    assert!(second
        .find_token_by_hash(&with_org.token_hash)
        .await
        .unwrap()
        .is_none());
}

/// On PostgreSQL, units that share a scope go on together, and a unit that locks it waits for
/// all of them. (A SQLite write unit is the only writer: there is nothing to share.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_scopes_go_on_together_and_hold_off_a_lock() {
    let Some((db, _url)) = testing::postgres().await else {
        return;
    };
    let envs = environments(&db, 1).await;
    let (env, s) = envs[0].clone();
    let db = std::sync::Arc::new(db);
    let mut first = Store::write(&*db).await.unwrap();
    first.share(Scope::EnvironmentOf(s.id)).await.unwrap();
    let mut second = Store::write(&*db).await.unwrap();
    tokio::time::timeout(
        std::time::Duration::from_secs(5),
        second.share(Scope::Environment(env.id)),
    )
    .await
    .expect("a shared scope does not wait for another unit sharing it")
    .unwrap();
    let locker = {
        let db = db.clone();
        tokio::spawn(async move {
            let mut third = Store::write(&*db).await.unwrap();
            third.lock(Scope::Environment(env.id)).await.unwrap();
            third.commit().await.unwrap();
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(150)).await;
    assert!(!locker.is_finished(), "a lock waits for the units sharing");
    first.commit().await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert!(!locker.is_finished(), "a lock waits for every unit sharing");
    second.commit().await.unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(5), locker)
        .await
        .expect("the lock is taken once nobody shares")
        .unwrap();
}

fn stage_in(env: &Environment, name: &str, order: i32) -> DeploymentStage {
    DeploymentStage::new(env, Name::parse("name", name).unwrap(), None, order, now())
}

async fn stages_hold_services_and_keep_their_order(db: Db) {
    let envs = environments(&db, 1).await;
    let (env, service) = &envs[0];
    let mut tx = db.session().await.unwrap();
    let first = stage_in(env, "first", 1);
    let second = stage_in(env, "second", 2);
    for s in [&second, &first] {
        Repo::<DeploymentStage>::insert(&mut tx, s).await.unwrap();
    }
    let clash = stage_in(env, "FIRST", 3);
    assert!(matches!(
        Repo::<DeploymentStage>::insert(&mut tx, &clash).await,
        Err(StoreError::Duplicate)
    ));
    let ids: Vec<_> = tx
        .stages_of(env.id)
        .await
        .unwrap()
        .iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(ids, [first.id, second.id], "in deployment order");
    assert_eq!(tx.stage_member(service.id).await.unwrap(), None);
    let member = StageMember::new(service.id, &first, false, now());
    tx.put_stage_member(&member).await.unwrap();
    // Moving keeps the attachment's id.
    let moved = StageMember {
        stage_id: second.id,
        is_skipped: true,
        ..member.clone()
    };
    tx.put_stage_member(&moved).await.unwrap();
    let found = tx.stage_member(service.id).await.unwrap().unwrap();
    assert_eq!(
        (found.id, found.stage_id, found.is_skipped),
        (member.id, second.id, true)
    );
    assert_eq!(tx.stage_members(env.id).await.unwrap().len(), 1);
    assert!(
        matches!(
            Repo::<DeploymentStage>::delete(&mut tx, second.id).await,
            Err(StoreError::InUse)
        ),
        "a stage holding a service cannot go"
    );
    tx.set_stage_orders(&[(second.id, 1), (first.id, 2)], now())
        .await
        .unwrap();
    let ids: Vec<_> = tx
        .stages_of(env.id)
        .await
        .unwrap()
        .iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(ids, [second.id, first.id]);
    Repo::<DeploymentStage>::delete(&mut tx, first.id)
        .await
        .unwrap();
    // The service takes its attachment with it, and the environment its stages.
    Repo::<Service>::delete(&mut tx, service.id).await.unwrap();
    assert!(tx.stage_members(env.id).await.unwrap().is_empty());
    Repo::<Environment>::delete(&mut tx, env.id).await.unwrap();
    assert!(tx.stages_of(env.id).await.unwrap().is_empty());
}

async fn a_batch_runs_in_stage_order_and_a_failure_cancels_later_stages(db: Db) {
    let envs = environments(&db, 1).await;
    let (env, a) = &envs[0];
    let mut services = vec![a.clone()];
    for name in ["b", "c", "d"] {
        let s = service_in(
            env,
            ServiceKind::Database,
            name,
            json!({"type": "REDIS", "version": "7", "mode": "CONTAINER"}),
        );
        Repo::<Service>::insert(&mut db.session().await.unwrap(), &s)
            .await
            .unwrap();
        services.push(s);
    }
    let batch = uuid::Uuid::new_v4();
    // Asked for together, in the reverse of the order their stages run.
    let requests: Vec<DeploymentRequest> = services
        .iter()
        .zip([3, 2, 1, 4])
        .map(|(s, position)| DeploymentRequest {
            batch_id: batch,
            position,
            // The last stage's is a deletion: it goes to its end whatever fails before it.
            ..request(
                env,
                s,
                if position == 4 {
                    DeploymentAction::Delete
                } else {
                    DeploymentAction::Deploy
                },
            )
        })
        .map(|mut r| {
            r.created_at = requests_time();
            r
        })
        .collect();
    db.session()
        .await
        .unwrap()
        .enqueue(&requests)
        .await
        .unwrap();
    let first = claim(&db, "w").await.unwrap();
    assert_eq!(first.id, requests[2].id, "the first stage runs first");
    assert_eq!(end(&db, first, RequestStatus::Success).await, Some(false));
    let second = claim(&db, "w").await.unwrap();
    assert_eq!(second.id, requests[1].id);
    let canceled = db
        .session()
        .await
        .unwrap()
        .cancel_later_stages(batch, second.position, "an earlier stage failed", now())
        .await
        .unwrap();
    assert_eq!(
        canceled.len(),
        1,
        "only the later stage's deployment, not the deletion"
    );
    assert_eq!(end(&db, second, RequestStatus::Error).await, Some(false));
    let deletion = claim(&db, "w").await.unwrap();
    assert_eq!(
        deletion.id, requests[3].id,
        "the later deployment never runs"
    );
    assert_eq!(
        end(&db, deletion, RequestStatus::Success).await,
        Some(false)
    );
    assert!(claim(&db, "w").await.is_none());
    let last: DeploymentRequest = Repo::get(&mut db.session().await.unwrap(), requests[0].id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(last.status, RequestStatus::Canceled);
    assert_eq!(last.state, ServiceState::Canceled);
    assert_eq!(last.reason.as_deref(), Some("an earlier stage failed"));
    let all = db
        .session()
        .await
        .unwrap()
        .batch_requests(&[batch])
        .await
        .unwrap();
    assert_eq!(all.len(), 4);
    let by_own_id = db
        .session()
        .await
        .unwrap()
        .batch_requests(&[requests[1].id.0])
        .await
        .unwrap();
    assert_eq!(by_own_id.len(), 1, "a request is found by its own id too");
}

async fn an_environment_deletion_joins_pending_requests_only(db: Db) {
    let envs = environments(&db, 1).await;
    let (env, service) = &envs[0];
    let waiting = request(env, service, DeploymentAction::Delete);
    let mut ended = request(env, service, DeploymentAction::Delete);
    ended.status = RequestStatus::Success;
    let mut tx = db.session().await.unwrap();
    tx.enqueue(&[waiting.clone(), ended.clone()]).await.unwrap();
    assert!(!waiting.deletes_environment());
    tx.join_environment_deletion(&[waiting.clone(), ended.clone()])
        .await
        .unwrap();
    let read = Repo::<DeploymentRequest>::get(&mut tx, waiting.id)
        .await
        .unwrap()
        .unwrap();
    assert!(read.deletes_environment(), "a waiting request is joined");
    assert_eq!(
        read.status,
        RequestStatus::Queued,
        "and nothing else changes"
    );
    assert_eq!(read.snapshot.name, waiting.snapshot.name);
    let read = Repo::<DeploymentRequest>::get(&mut tx, ended.id)
        .await
        .unwrap()
        .unwrap();
    assert!(!read.deletes_environment(), "an ended one is not");
}

/// One instant for a whole batch (its requests share their creation time).
fn requests_time() -> time::OffsetDateTime {
    let t = now();
    t.replace_nanosecond(0).unwrap()
}

async fn batches_and_service_requests_are_paged_newest_first(db: Db) {
    let envs = environments(&db, 1).await;
    let (env, service) = &envs[0];
    let mut made = Vec::new();
    for minute in 0..3 {
        let mut r = request(env, service, DeploymentAction::Deploy);
        r.created_at = requests_time() + time::Duration::minutes(minute);
        db.session()
            .await
            .unwrap()
            .enqueue(std::slice::from_ref(&r))
            .await
            .unwrap();
        made.push(r);
    }
    let mut tx = db.session().await.unwrap();
    let batches = tx.environment_batches(env.id, None, 10).await.unwrap();
    assert_eq!(
        batches,
        [made[2].batch_id, made[1].batch_id, made[0].batch_id]
    );
    let after = tx
        .environment_batches(env.id, Some(made[2].batch_id), 1)
        .await
        .unwrap();
    assert_eq!(after, [made[1].batch_id]);
    let requests = tx
        .service_requests(service.id, None, None, 2)
        .await
        .unwrap();
    let ids: Vec<_> = requests.iter().map(|r| r.id).collect();
    assert_eq!(ids, [made[2].id, made[1].id]);
    let older = tx
        .service_requests(service.id, None, Some(made[1].id), 5)
        .await
        .unwrap();
    assert_eq!(older.iter().map(|r| r.id).collect::<Vec<_>>(), [made[0].id]);
    let pending = tx
        .cancel_pending(env.id, Some(made[1].batch_id), "by test", now())
        .await
        .unwrap();
    assert_eq!(pending.touched(), 1, "only that batch");
    // A service's requests outlive it (histories), and go with its environment.
    Repo::<Service>::delete(&mut tx, service.id).await.unwrap();
    assert_eq!(
        tx.service_requests(service.id, None, None, 10)
            .await
            .unwrap()
            .len(),
        3
    );
    Repo::<Environment>::delete(&mut tx, env.id).await.unwrap();
    assert!(tx
        .service_requests(service.id, None, None, 10)
        .await
        .unwrap()
        .is_empty());
}

async fn clusters_are_claimed_once_and_found_when_their_worker_dies(db: Db) {
    let (o, mut c, _, _) = hierarchy(&db).await;
    let idle = cluster(&db, o.id, "idle").await;
    assert!(
        db.claim_cluster("w1", now()).await.unwrap().is_none(),
        "nothing queued"
    );
    c.spec.instance_type = Some("t3a.large".into());
    c.advanced_settings
        .insert("loki.log_retention_in_week".into(), json!(4));
    c.queue(ClusterAction::Deploy, now()).unwrap();
    Repo::<Cluster>::update(&mut db.session().await.unwrap(), &c)
        .await
        .unwrap();
    let lease = now() + time::Duration::seconds(30);
    let claimed = db.claim_cluster("w1", lease).await.unwrap().unwrap();
    assert_eq!(claimed.id, c.id);
    assert_eq!(claimed.run.state, ClusterState::Deploying);
    assert_eq!(claimed.run.claimed_by.as_deref(), Some("w1"));
    assert_eq!(claimed.spec, c.spec, "the rest reads back as written");
    assert_eq!(claimed.advanced_settings, c.advanced_settings);
    assert!(
        db.claim_cluster("w2", lease).await.unwrap().is_none(),
        "claimed once"
    );
    assert!(db.expired_clusters(now()).await.unwrap().is_empty());
    let later = db
        .expired_clusters(lease + time::Duration::seconds(1))
        .await
        .unwrap();
    assert_eq!(later.iter().map(|c| c.id).collect::<Vec<_>>(), vec![c.id]);
    let back = Repo::<Cluster>::get(&mut db.session().await.unwrap(), idle.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(back.run, ClusterRun::default());
}

async fn on_premise_clusters_are_found_across_organizations_with_their_docker_host(db: Db) {
    let (o, _, _, _) = hierarchy(&db).await;
    assert!(db.on_premise_clusters().await.unwrap().is_empty());
    let mut own = cluster(&db, o.id, "own").await;
    own.cloud_provider = CloudProvider::OnPremise;
    own.spec.docker = Some(DockerEndpointSpec {
        endpoint: "tcp://10.0.0.5:2376".into(),
        publish_address: Some("10.0.0.5".into()),
    });
    Repo::<Cluster>::update(&mut db.session().await.unwrap(), &own)
        .await
        .unwrap();
    let (other_org, _, _, _) = hierarchy(&db).await;
    let mut theirs = cluster(&db, other_org.id, "theirs").await;
    theirs.cloud_provider = CloudProvider::OnPremise;
    Repo::<Cluster>::update(&mut db.session().await.unwrap(), &theirs)
        .await
        .unwrap();
    let found = db.on_premise_clusters().await.unwrap();
    let mut ids: Vec<_> = found.iter().map(|c| c.id).collect();
    let mut want = vec![own.id, theirs.id];
    ids.sort();
    want.sort();
    assert_eq!(ids, want, "every organization's, and no other provider's");
    let back = found.iter().find(|c| c.id == own.id).unwrap();
    assert_eq!(back.spec.docker, own.spec.docker, "the host reads back");
}

async fn a_clusters_log_reads_newest_lines_oldest_first_and_goes_with_it(db: Db) {
    let (o, _, _, _) = hierarchy(&db).await;
    let c = cluster(&db, o.id, "logged").await;
    let other = cluster(&db, o.id, "other").await;
    let line = |cluster: ClusterId, position: i64, step: ClusterLogStep| ClusterLogLine {
        cluster_id: cluster,
        position,
        at: now(),
        step,
        level: if step == ClusterLogStep::CreateError {
            LogLevel::Error
        } else {
            LogLevel::Info
        },
        message: format!("line {position}"),
    };
    let failed = line(c.id, 11, ClusterLogStep::CreateError);
    let mut tx = Store::write(&db).await.unwrap();
    tx.append_cluster_logs(&[
        line(c.id, 10, ClusterLogStep::Create),
        failed.clone(),
        line(other.id, 1, ClusterLogStep::Create),
    ])
    .await
    .unwrap();
    tx.append_cluster_logs(&[line(c.id, 20, ClusterLogStep::Created)])
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let mut tx = Store::read(&db).await.unwrap();
    let all = tx.cluster_logs(c.id, 10).await.unwrap();
    assert_eq!(
        all.iter().map(|l| l.position).collect::<Vec<_>>(),
        [10, 11, 20]
    );
    assert_eq!(
        (
            &all[1].step,
            &all[1].level,
            &all[1].message,
            all[1].cluster_id
        ),
        (
            &failed.step,
            &failed.level,
            &failed.message,
            failed.cluster_id
        )
    );
    assert!((all[1].at - failed.at).abs() < time::Duration::seconds(1));
    let newest = tx.cluster_logs(c.id, 2).await.unwrap();
    assert_eq!(
        newest.iter().map(|l| l.position).collect::<Vec<_>>(),
        [11, 20],
        "the newest, oldest first"
    );
    drop(tx);
    Repo::<Cluster>::delete(&mut db.session().await.unwrap(), c.id)
        .await
        .unwrap();
    let mut tx = Store::read(&db).await.unwrap();
    assert!(tx.cluster_logs(c.id, 10).await.unwrap().is_empty());
    assert_eq!(tx.cluster_logs(other.id, 10).await.unwrap().len(), 1);
}

async fn link_variables_are_found_by_database_and_go_with_it(db: Db) {
    let (_, _, _, e) = hierarchy(&db).await;
    let database = |name: &str| {
        service_in(
            &e,
            ServiceKind::Database,
            name,
            json!({"type": "POSTGRESQL", "version": "16", "mode": "CONTAINER"}),
        )
    };
    let (first, second) = (database("first"), database("second"));
    let app = service_in(
        &e,
        ServiceKind::Application,
        "app",
        json!({"git_repository": {"url": "https://github.com/acme/api.git"}}),
    );
    let mut session = db.session().await.unwrap();
    for s in [&first, &second, &app] {
        Repo::<Service>::insert(&mut session, s).await.unwrap();
    }
    let link = |db: &Service, key: &str, at: i64| Variable {
        id: VariableId::generate(),
        organization_id: e.organization_id,
        project_id: e.project_id,
        environment_id: Some(e.id),
        service_id: Some(app.id),
        scope: VariableScope::BuiltIn,
        key: VariableKey::parse(key).unwrap(),
        value: Some(Secret::new("v")),
        is_secret: false,
        variable_type: VariableType::BuiltIn,
        mount_path: None,
        description: None,
        enable_interpolation_in_file: None,
        aliased_variable_id: None,
        overridden_variable_id: None,
        secret_manager_access_id: None,
        linked_database_id: Some(db.id),
        created_at: now() + time::Duration::seconds(at),
        updated_at: now(),
    };
    let (port, host, other) = (
        link(&first, "FIRST_PORT", 2),
        link(&first, "FIRST_HOST", 1),
        link(&second, "SECOND_HOST", 0),
    );
    for v in [&port, &host, &other] {
        Repo::<Variable>::insert(&mut session, v).await.unwrap();
    }
    let keys = |vs: Vec<Variable>| -> Vec<String> {
        vs.iter().map(|v| v.key.as_str().to_string()).collect()
    };
    let found = session.database_link_variables(first.id).await.unwrap();
    assert_eq!(found[0].linked_database_id, Some(first.id));
    assert_eq!(keys(found), ["FIRST_HOST", "FIRST_PORT"]);
    assert!(session
        .database_link_variables(app.id)
        .await
        .unwrap()
        .is_empty());
    Repo::<Service>::delete(&mut session, first.id)
        .await
        .unwrap();
    assert!(Repo::<Variable>::get(&mut session, port.id)
        .await
        .unwrap()
        .is_none());
    assert_eq!(
        keys(session.database_link_variables(second.id).await.unwrap()),
        ["SECOND_HOST"]
    );
}

async fn restrictions_are_kept_once_per_service_and_go_with_it(db: Db) {
    let (_, _, _, e) = hierarchy(&db).await;
    let app = service_in(
        &e,
        ServiceKind::Application,
        "app",
        json!({"git_repository": {"url": "https://github.com/acme/api.git"}}),
    );
    let mut session = db.session().await.unwrap();
    Repo::<Service>::insert(&mut session, &app).await.unwrap();
    let restriction = |mode, value: &str| DeploymentRestriction {
        id: DeploymentRestrictionId::generate(),
        organization_id: e.organization_id,
        service_id: app.id,
        mode,
        restriction_type: RestrictionType::Path,
        value: value.into(),
        created_at: now(),
        updated_at: now(),
    };
    let first = restriction(RestrictionMode::Match, "api/");
    Repo::<DeploymentRestriction>::insert(&mut session, &first)
        .await
        .unwrap();
    let again = restriction(RestrictionMode::Match, "api/");
    assert!(matches!(
        Repo::<DeploymentRestriction>::insert(&mut session, &again).await,
        Err(StoreError::Duplicate)
    ));
    let other = DeploymentRestriction {
        created_at: now() + time::Duration::seconds(1),
        ..restriction(RestrictionMode::Exclude, "api/")
    };
    Repo::<DeploymentRestriction>::insert(&mut session, &other)
        .await
        .unwrap();
    let listed = Repo::<DeploymentRestriction>::list(&mut session, app.id, PageRequest::all())
        .await
        .unwrap();
    assert_eq!(listed.items, vec![first.clone(), other.clone()]);
    Repo::<Service>::delete(&mut session, app.id).await.unwrap();
    assert!(Repo::<DeploymentRestriction>::get(&mut session, first.id)
        .await
        .unwrap()
        .is_none());
}

async fn clusters_keep_the_daemon_they_were_deployed_on(db: Db) {
    let (mine, first, _, _) = hierarchy(&db).await;
    let second = cluster(&db, mine.id, "second").await;
    let (theirs, their_cluster, _, _) = hierarchy(&db).await;
    let mut session = db.session().await.unwrap();
    assert!(session.daemon_organizations("D1").await.unwrap().is_empty());
    for c in [&first, &second] {
        session
            .set_cluster_daemon(c.id, mine.id, "D1")
            .await
            .unwrap();
    }
    session
        .set_cluster_daemon(their_cluster.id, theirs.id, "D2")
        .await
        .unwrap();
    assert_eq!(
        session.daemon_organizations("D1").await.unwrap(),
        [mine.id],
        "once per organization"
    );
    // A cluster deployed again on another daemon keeps only that one.
    session
        .set_cluster_daemon(second.id, mine.id, "D3")
        .await
        .unwrap();
    let mut found = session
        .cluster_daemons(&[first.id, second.id, their_cluster.id])
        .await
        .unwrap();
    found.sort();
    let mut wanted = vec![
        (first.id, "D1".to_string()),
        (second.id, "D3".to_string()),
        (their_cluster.id, "D2".to_string()),
    ];
    wanted.sort();
    assert_eq!(found, wanted);
    assert!(session.cluster_daemons(&[]).await.unwrap().is_empty());
    drop(session);
    // The claim goes with its cluster.
    Repo::<Cluster>::delete(&mut db.session().await.unwrap(), second.id)
        .await
        .unwrap();
    let mut session = db.session().await.unwrap();
    assert!(session.daemon_organizations("D3").await.unwrap().is_empty());
    assert_eq!(session.daemon_organizations("D1").await.unwrap(), [mine.id]);
    assert_eq!(
        session.daemon_organizations("D2").await.unwrap(),
        [theirs.id]
    );
    // The installation is who it first said it was, for every instance.
    assert_eq!(session.installation_id("first").await.unwrap(), "first");
    assert_eq!(session.installation_id("second").await.unwrap(), "first");
}

async fn custom_domains_are_unique_across_organizations(db: Db) {
    let (_, _, _, e) = hierarchy(&db).await;
    let (_, _, _, other_env) = hierarchy(&db).await;
    let app = |env: &Environment| {
        service_in(
            env,
            ServiceKind::Application,
            "app",
            json!({"git_repository": {"url": "https://github.com/acme/api.git"}}),
        )
    };
    let (mine, theirs) = (app(&e), app(&other_env));
    let mut session = db.session().await.unwrap();
    for s in [&mine, &theirs] {
        Repo::<Service>::insert(&mut session, s).await.unwrap();
    }
    let domain = |s: &Service| CustomDomain {
        id: CustomDomainId::generate(),
        organization_id: s.organization_id,
        service_id: s.id,
        domain: "www.acme.com".into(),
        generate_certificate: true,
        use_cdn: false,
        created_at: now(),
        updated_at: now(),
    };
    let held = domain(&mine);
    Repo::<CustomDomain>::insert(&mut session, &held)
        .await
        .unwrap();
    assert!(matches!(
        Repo::<CustomDomain>::insert(&mut session, &domain(&theirs)).await,
        Err(StoreError::Duplicate)
    ));
    assert_eq!(
        session.custom_domain_named("www.acme.com").await.unwrap(),
        Some(held.clone())
    );
    assert_eq!(session.custom_domain_named("acme.com").await.unwrap(), None);
    let wildcard = CustomDomain {
        domain: "*.shop.acme.com".into(),
        ..domain(&theirs)
    };
    Repo::<CustomDomain>::insert(&mut session, &wildcard)
        .await
        .unwrap();
    assert_eq!(
        session.custom_domain_names().await.unwrap(),
        ["*.shop.acme.com", "www.acme.com"],
        "every organization's names, wildcards too"
    );
    Repo::<CustomDomain>::delete(&mut session, wildcard.id)
        .await
        .unwrap();
    assert_eq!(
        session
            .custom_domains_of(&[mine.id, theirs.id])
            .await
            .unwrap(),
        vec![held.clone()]
    );
    assert!(session
        .custom_domains_of(&[theirs.id])
        .await
        .unwrap()
        .is_empty());
    Repo::<Service>::delete(&mut session, mine.id)
        .await
        .unwrap();
    assert_eq!(
        session.custom_domain_named("www.acme.com").await.unwrap(),
        None
    );
    Repo::<CustomDomain>::insert(&mut session, &domain(&theirs))
        .await
        .unwrap();
}

async fn groups_are_attached_and_held_by_their_services(db: Db) {
    let (o, _, _, e) = hierarchy(&db).await;
    let app = service_in(
        &e,
        ServiceKind::Application,
        "app",
        json!({"git_repository": {"url": "https://github.com/acme/api.git"}}),
    );
    let mut session = db.session().await.unwrap();
    Repo::<Service>::insert(&mut session, &app).await.unwrap();
    let group = |name: &str| MetadataGroup {
        id: MetadataGroupId::generate(),
        organization_id: o.id,
        kind: GroupKind::Labels,
        name: Name::parse("name", name).unwrap(),
        entries: vec![GroupEntry {
            key: "team".into(),
            value: "core".into(),
            propagate_to_cloud_provider: Some(true),
        }],
        scopes: vec![],
        created_at: now(),
        updated_at: now(),
    };
    let (a, b) = (group("a"), group("b"));
    for g in [&a, &b] {
        Repo::<MetadataGroup>::insert(&mut session, g)
            .await
            .unwrap();
    }
    assert_eq!(
        Repo::<MetadataGroup>::get(&mut session, a.id)
            .await
            .unwrap(),
        Some(a.clone())
    );
    assert!(matches!(
        Repo::<MetadataGroup>::insert(&mut session, &group("A")).await,
        Err(StoreError::Duplicate)
    ));
    let read = |groups: Option<(Service, Vec<MetadataGroupId>)>| {
        groups.map(|(s, mut g)| {
            g.sort();
            (s.id, g)
        })
    };
    assert_eq!(
        read(session.service_with_group_ids(app.id).await.unwrap()),
        Some((app.id, vec![])),
        "a service with no group reads back alone"
    );
    session
        .set_service_groups(app.id, &[a.id, b.id])
        .await
        .unwrap();
    let mut both = vec![a.id, b.id];
    both.sort();
    assert_eq!(
        read(session.service_with_group_ids(app.id).await.unwrap()),
        Some((app.id, both)),
        "every attached group, the service once"
    );
    assert_eq!(
        read(
            session
                .service_with_group_ids(ServiceId::generate())
                .await
                .unwrap()
        ),
        None
    );
    session.set_service_groups(app.id, &[b.id]).await.unwrap();
    assert_eq!(
        session.service_group_ids(&[app.id]).await.unwrap(),
        vec![(app.id, b.id)]
    );
    assert_eq!(session.group_service_ids(b.id).await.unwrap(), vec![app.id]);
    assert!(matches!(
        Repo::<MetadataGroup>::delete(&mut session, b.id).await,
        Err(StoreError::InUse)
    ));
    Repo::<Service>::delete(&mut session, app.id).await.unwrap();
    assert!(session.group_service_ids(b.id).await.unwrap().is_empty());
    Repo::<MetadataGroup>::delete(&mut session, b.id)
        .await
        .unwrap();
}

fn hours(auto_stop: bool) -> Schedule {
    Schedule {
        auto_stop,
        timezone: "Europe/Paris".into(),
        start: time::Time::from_hms(8, 30, 0).unwrap(),
        stop: time::Time::from_hms(19, 0, 15).unwrap(),
        weekdays: vec![Weekday::Monday, Weekday::Sunday],
    }
}

async fn deployment_rules_round_trip_and_hold_their_cluster(db: Db) {
    let (o, c, p, e) = hierarchy(&db).await;
    let mut session = db.session().await.unwrap();
    let rule = |name: &str| ProjectDeploymentRule {
        id: DeploymentRuleId::generate(),
        organization_id: o.id,
        project_id: p.id,
        name: Name::parse("name", name).unwrap(),
        description: Some("hours".into()),
        mode: EnvironmentMode::Staging,
        cluster_id: c.id,
        wildcard: "feat-*".into(),
        priority_index: 3,
        schedule: hours(true),
        created_at: now(),
        updated_at: now(),
    };
    let first = rule("Previews");
    Repo::<ProjectDeploymentRule>::insert(&mut session, &first)
        .await
        .unwrap();
    assert_eq!(
        Repo::<ProjectDeploymentRule>::get(&mut session, first.id)
            .await
            .unwrap(),
        Some(first.clone())
    );
    assert!(matches!(
        Repo::<ProjectDeploymentRule>::insert(&mut session, &rule("PREVIEWS")).await,
        Err(StoreError::Duplicate)
    ));
    // The cluster a rule targets cannot go; the project takes its rules with it.
    assert!(matches!(
        Repo::<Cluster>::delete(&mut session, c.id).await,
        Err(StoreError::InUse)
    ));

    let mut env_rule = EnvironmentDeploymentRule::new(e.id, o.id, hours(true), now());
    env_rule.auto_preview = true;
    assert!(env_rule.next_turn_at.is_some());
    Repo::<EnvironmentDeploymentRule>::insert(&mut session, &env_rule)
        .await
        .unwrap();
    assert_eq!(
        Repo::<EnvironmentDeploymentRule>::get(&mut session, e.id)
            .await
            .unwrap(),
        Some(env_rule.clone())
    );
    env_rule.schedule = hours(false);
    env_rule.plan(now());
    assert_eq!(env_rule.next_turn_at, None);
    Repo::<EnvironmentDeploymentRule>::update(&mut session, &env_rule)
        .await
        .unwrap();
    assert_eq!(
        Repo::<EnvironmentDeploymentRule>::get(&mut session, e.id)
            .await
            .unwrap(),
        Some(env_rule.clone())
    );
    Repo::<Environment>::delete(&mut session, e.id)
        .await
        .unwrap();
    assert!(Repo::<EnvironmentDeploymentRule>::get(&mut session, e.id)
        .await
        .unwrap()
        .is_none());
    Repo::<Project>::delete(&mut session, p.id).await.unwrap();
    assert!(Repo::<ProjectDeploymentRule>::get(&mut session, first.id)
        .await
        .unwrap()
        .is_none());
}

async fn due_environment_rules_are_found_most_overdue_first(db: Db) {
    let (o, c, p, _) = hierarchy(&db).await;
    let mut session = db.session().await.unwrap();
    let t0 = now();
    let mut due = Vec::new();
    for (i, offset) in [-5i64, 10, -60, 0].into_iter().enumerate() {
        let env = environment_in(&p, c.id, &format!("env-{i}"));
        Repo::<Environment>::insert(&mut session, &env)
            .await
            .unwrap();
        let mut rule = EnvironmentDeploymentRule::new(env.id, o.id, hours(true), t0);
        rule.next_turn_at = Some(t0 + time::Duration::minutes(offset));
        Repo::<EnvironmentDeploymentRule>::insert(&mut session, &rule)
            .await
            .unwrap();
        due.push(env.id);
    }
    let never = environment_in(&p, c.id, "never");
    Repo::<Environment>::insert(&mut session, &never)
        .await
        .unwrap();
    Repo::<EnvironmentDeploymentRule>::insert(
        &mut session,
        &EnvironmentDeploymentRule::new(never.id, o.id, hours(false), t0),
    )
    .await
    .unwrap();
    assert_eq!(
        session.due_environment_rules(t0, 10).await.unwrap(),
        vec![due[2], due[0], due[3]]
    );
    assert_eq!(
        session.due_environment_rules(t0, 1).await.unwrap(),
        vec![due[2]]
    );
    // The scheduler sleeps until the earliest hour, due or not.
    assert_eq!(
        session
            .next_rule_turn()
            .await
            .unwrap()
            .map(|t| t.unix_timestamp()),
        Some((t0 - time::Duration::minutes(60)).unix_timestamp())
    );
}

fn event_in(
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

async fn append(db: &Db, e: &OrgEvent) {
    let mut tx = db.write().await.unwrap();
    tx.append_event(e).await.unwrap();
    tx.commit().await.unwrap();
}

async fn events_get_positions_in_the_order_they_are_sequenced(db: Db) {
    let o = org(&db).await;
    let other = org(&db).await;
    let base = now();
    let made: Vec<OrgEvent> = (0..3)
        .map(|i| {
            event_in(
                o.id,
                base + time::Duration::milliseconds(i),
                Some(EventType::Create),
            )
        })
        .collect();
    for e in &made {
        append(&db, e).await;
    }
    let elsewhere = event_in(other.id, base, Some(EventType::Create));
    append(&db, &elsewhere).await;
    assert!(db.has_unsequenced_events().await.unwrap());
    let mut tx = db.write().await.unwrap();
    tx.lock(Scope::EventLog).await.unwrap();
    let waiting = tx.unsequenced_events(10).await.unwrap();
    let ids: Vec<EventId> = waiting.iter().map(|e| e.id).collect();
    assert_eq!(ids.len(), 4);
    assert_eq!(waiting[0].position, None);
    // Sequenced in two passes; an id given twice keeps its first position.
    tx.sequence_events(&ids[..2]).await.unwrap();
    tx.sequence_events(&ids).await.unwrap();
    tx.commit().await.unwrap();
    assert!(!db.has_unsequenced_events().await.unwrap());
    let mut tx = db.read().await.unwrap();
    let mine = tx.events_after(o.id, 0, 10).await.unwrap();
    let positions: Vec<i64> = mine.iter().map(|e| e.position.unwrap()).collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{positions:?}");
    assert_eq!(
        mine.iter().map(|e| e.id).collect::<Vec<_>>(),
        made.iter().map(|e| e.id).collect::<Vec<_>>(),
        "the organization's events only, in position order"
    );
    assert_eq!(
        mine[0],
        OrgEvent {
            position: mine[0].position,
            ..made[0].clone()
        },
        "round trip"
    );
    let after_first = tx.events_after(o.id, positions[0], 10).await.unwrap();
    assert_eq!(after_first.len(), 2);
    assert_eq!(tx.last_position(o.id).await.unwrap(), positions[2]);
    assert_eq!(
        tx.last_position(OrganizationId::generate()).await.unwrap(),
        0
    );
    // An event appended now, once sequenced, comes after every earlier one.
    drop(tx);
    let late = event_in(
        o.id,
        base - time::Duration::hours(1),
        Some(EventType::Update),
    );
    append(&db, &late).await;
    let mut tx = db.write().await.unwrap();
    tx.lock(Scope::EventLog).await.unwrap();
    let waiting = tx.unsequenced_events(10).await.unwrap();
    assert_eq!(waiting.iter().map(|e| e.id).collect::<Vec<_>>(), [late.id]);
    tx.sequence_events(&[late.id]).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = db.read().await.unwrap();
    let tail = tx.events_after(o.id, positions[2], 10).await.unwrap();
    assert_eq!(tail.iter().map(|e| e.id).collect::<Vec<_>>(), [late.id]);
}

fn webhook_in(org: OrganizationId) -> OrganizationWebhook {
    OrganizationWebhook {
        id: WebhookId::generate(),
        organization_id: org,
        kind: OrganizationWebhookKind::Standard,
        target_url: "https://hooks.example.com/in".into(),
        target_secret: Some(Secret::new("hook-secret")),
        description: Some("d".into()),
        enabled: true,
        events: vec![OrganizationWebhookEvent::DeploymentStarted],
        project_names_filter: vec!["web*".into()],
        environment_types_filter: vec![EnvironmentMode::Production],
        created_at: now(),
        updated_at: now(),
    }
}

async fn deliveries_are_claimed_once_and_settled_by_their_claimant(db: Db) {
    let o = org(&db).await;
    let hook = webhook_in(o.id);
    Repo::<OrganizationWebhook>::insert(&mut db.session().await.unwrap(), &hook)
        .await
        .unwrap();
    let read: OrganizationWebhook = Repo::get(&mut db.session().await.unwrap(), hook.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read.target_secret.unwrap().expose(), "hook-secret");
    assert_eq!(read.project_names_filter, hook.project_names_filter);
    assert_eq!(read.environment_types_filter, hook.environment_types_filter);
    let mut deliveries = Vec::new();
    for _ in 0..5 {
        let e = event_in(o.id, now(), None);
        append(&db, &e).await;
        deliveries.push(WebhookDelivery {
            id: DeliveryId::generate(),
            webhook_id: hook.id,
            organization_id: o.id,
            event_id: e.id,
            matched_event: OrganizationWebhookEvent::DeploymentStarted,
            payload: json!({"type": "DEPLOYMENT_STARTED"}),
            state: DeliveryState::Pending,
            attempts: 0,
            next_attempt_at: now() - time::Duration::seconds(1),
            created_at: now(),
        });
    }
    let mut tx = db.write().await.unwrap();
    tx.insert_deliveries(&deliveries).await.unwrap();
    // One delivery per webhook and event.
    assert!(tx.insert_deliveries(&deliveries[..1]).await.is_err());
    drop(tx);
    let mut tx = db.write().await.unwrap();
    tx.insert_deliveries(&deliveries).await.unwrap();
    tx.commit().await.unwrap();
    let at = now();
    let mut senders = Vec::new();
    for w in 0..4 {
        let db = db.clone();
        senders.push(tokio::spawn(async move {
            db.claim_deliveries(&format!("s{w}"), at, at + time::Duration::seconds(30), 2)
                .await
                .unwrap()
                .into_iter()
                .map(|d| (format!("s{w}"), d))
                .collect::<Vec<_>>()
        }));
    }
    let mut claimed = Vec::new();
    for s in senders {
        claimed.extend(s.await.unwrap());
    }
    let ids: std::collections::HashSet<_> = claimed.iter().map(|(_, d)| d.id).collect();
    assert_eq!(ids.len(), claimed.len(), "no delivery claimed twice");
    let more = db
        .claim_deliveries("late", at, at + time::Duration::seconds(30), 10)
        .await
        .unwrap();
    assert_eq!(
        claimed.len() + more.len(),
        5,
        "every due delivery is claimed"
    );
    claimed.extend(more.into_iter().map(|d| ("late".to_string(), d)));
    // Settled only by the sender that holds it.
    let (holder, mut first) = claimed[0].clone();
    first.state = DeliveryState::Delivered;
    first.attempts = 1;
    let mut tx = db.write().await.unwrap();
    assert!(!tx.settle_delivery(&first, "someone-else").await.unwrap());
    assert!(tx.settle_delivery(&first, &holder).await.unwrap());
    // A failed attempt that will be retried later.
    let (holder, mut second) = claimed[1].clone();
    second.attempts = 1;
    second.next_attempt_at = at + time::Duration::seconds(60);
    assert!(tx.settle_delivery(&second, &holder).await.unwrap());
    tx.commit().await.unwrap();
    let none = db
        .claim_deliveries("again", at, at + time::Duration::seconds(30), 10)
        .await
        .unwrap();
    assert!(none.is_empty(), "held, delivered or not due yet: {none:?}");
    // Nothing can be claimed before the claims lapse (30 s), the one retried later counted at
    // its hour (60 s); once the claims lapse, the earliest due time is past.
    let seconds =
        |t: Option<time::OffsetDateTime>| t.map(|t| (t - at).as_seconds_f64().round() as i64);
    assert_eq!(seconds(db.next_delivery_due(at).await.unwrap()), Some(30));
    let lapsed = at + time::Duration::seconds(31);
    assert!(seconds(db.next_delivery_due(lapsed).await.unwrap()).is_some_and(|s| s <= 0));
    // Once the claims lapse (their sender died), what is still pending is claimed again;
    // the delivered one never is, the one retried later only when due.
    let later = at + time::Duration::seconds(45);
    let again = db
        .claim_deliveries("heir", later, later + time::Duration::seconds(30), 10)
        .await
        .unwrap();
    let again: std::collections::HashSet<_> = again.iter().map(|d| d.id).collect();
    assert_eq!(again.len(), 3);
    assert!(!again.contains(&first.id) && !again.contains(&second.id));
    // While the heir still holds the others.
    let due = at + time::Duration::seconds(60);
    let retried = db
        .claim_deliveries("heir2", due, due + time::Duration::seconds(30), 10)
        .await
        .unwrap();
    assert_eq!(
        retried.iter().map(|d| d.id).collect::<Vec<_>>(),
        [second.id]
    );
    assert_eq!(retried[0].attempts, 1);
    // The delivery log, and its end with its webhook.
    let attempt = WebhookAttempt {
        id: AttemptId::generate(),
        delivery_id: first.id,
        webhook_id: hook.id,
        organization_id: o.id,
        created_at: now(),
        kind: OrganizationWebhookKind::Standard,
        matched_event: OrganizationWebhookEvent::DeploymentStarted,
        target_url: hook.target_url.clone(),
        request: json!({"type": "DEPLOYMENT_STARTED"}),
        status_code: 200,
        response_body: Some("ok".into()),
        error: None,
        duration_ms: 12,
        attempt: 1,
    };
    Repo::<WebhookAttempt>::insert(&mut db.session().await.unwrap(), &attempt)
        .await
        .unwrap();
    let log = Repo::<WebhookAttempt>::list(
        &mut db.session().await.unwrap(),
        hook.id,
        PageRequest::new(1, 10).unwrap(),
    )
    .await
    .unwrap();
    assert_eq!(log.items.len(), 1);
    assert_eq!(log.items[0].response_body.as_deref(), Some("ok"));
    Repo::<OrganizationWebhook>::delete(&mut db.session().await.unwrap(), hook.id)
        .await
        .unwrap();
    let log = Repo::<WebhookAttempt>::list(
        &mut db.session().await.unwrap(),
        hook.id,
        PageRequest::new(1, 10).unwrap(),
    )
    .await
    .unwrap();
    assert!(log.items.is_empty());
    let after = now() + time::Duration::hours(1);
    assert!(db
        .claim_deliveries("gone", after, after + time::Duration::seconds(30), 10)
        .await
        .unwrap()
        .is_empty());
}

async fn the_audit_log_filters_and_pages_by_time(db: Db) {
    let o = org(&db).await;
    let base = now();
    let at = |ms: i64| base + time::Duration::milliseconds(ms);
    let created = event_in(o.id, at(0), Some(EventType::Create));
    let mut updated = event_in(o.id, at(10), Some(EventType::Update));
    updated.origin = Origin::Cli;
    updated.triggered_by = "user:u".into();
    let progress = event_in(o.id, at(20), None);
    let deleted = event_in(o.id, at(30), Some(EventType::Delete));
    for e in [&created, &updated, &progress, &deleted] {
        append(&db, e).await;
    }
    let mut tx = db.read().await.unwrap();
    let all = EventFilter::default();
    let ids = |v: Vec<OrgEvent>| v.into_iter().map(|e| e.id).collect::<Vec<_>>();
    assert_eq!(
        ids(tx.audit_events(o.id, &all, None, false, 10).await.unwrap()),
        [deleted.id, updated.id, created.id],
        "newest first, progress left out"
    );
    assert_eq!(
        ids(tx
            .audit_events(o.id, &all, Some(at(10)), false, 10)
            .await
            .unwrap()),
        [created.id],
        "strictly older than the token"
    );
    assert_eq!(
        ids(tx
            .audit_events(o.id, &all, Some(at(0)), true, 10)
            .await
            .unwrap()),
        [updated.id, deleted.id],
        "strictly newer, oldest first"
    );
    for (filter, want) in [
        (
            EventFilter {
                event_type: Some(EventType::Update),
                ..Default::default()
            },
            vec![updated.id],
        ),
        (
            EventFilter {
                origin: Some(Origin::Cli),
                ..Default::default()
            },
            vec![updated.id],
        ),
        (
            EventFilter {
                triggered_by: Some("user:u".into()),
                ..Default::default()
            },
            vec![updated.id],
        ),
        (
            EventFilter {
                target_id: created.target_id,
                target_type: Some(TargetType::Project),
                ..Default::default()
            },
            vec![created.id],
        ),
        (
            EventFilter {
                from: Some(at(10)),
                to: Some(at(30)),
                ..Default::default()
            },
            vec![deleted.id, updated.id],
        ),
        (
            EventFilter {
                target_type: Some(TargetType::Cluster),
                ..Default::default()
            },
            vec![],
        ),
    ] {
        assert_eq!(
            ids(tx
                .audit_events(o.id, &filter, None, false, 10)
                .await
                .unwrap()),
            want,
            "{filter:?}"
        );
    }
    assert_eq!(
        ids(tx.audit_events(o.id, &all, None, false, 1).await.unwrap()),
        [deleted.id]
    );
    assert!(tx
        .audit_events(OrganizationId::generate(), &all, None, false, 10)
        .await
        .unwrap()
        .is_empty());
}

async fn a_committed_unit_rings_what_it_changed_and_a_dropped_one_nothing(db: Db) {
    use domain::changes::Change;
    use futures_util::FutureExt;
    let o = org(&db).await;
    let changes = db.changes();
    let queue = changes.listen(Change::Queue);
    let events = changes.listen(Change::Events);
    let mut unit = db.write().await.unwrap();
    unit.append_event(&event_in(o.id, now(), None))
        .await
        .unwrap();
    drop(unit);
    let mut unit = db.write().await.unwrap();
    unit.append_event(&event_in(o.id, now(), None))
        .await
        .unwrap();
    let mut events = std::pin::pin!(events);
    assert!(
        events.as_mut().now_or_never().is_none(),
        "rung by a unit dropped, or before its commit"
    );
    unit.commit().await.unwrap();
    assert!(
        events.now_or_never().is_some(),
        "the commit rang for its event"
    );
    assert!(queue.now_or_never().is_none(), "nothing was queued");
}

async fn services_and_environments_are_named_with_their_parents(db: Db) {
    let (o, _c, p, e) = hierarchy(&db).await;
    let r = registry(&db, o.id, "hub").await;
    let web = service_in(&e, ServiceKind::Container, "web", container_body(r.id));
    let api = service_in(&e, ServiceKind::Container, "api", container_body(r.id));
    let mut s = db.session().await.unwrap();
    Repo::<Service>::insert(&mut s, &web).await.unwrap();
    Repo::<Service>::insert(&mut s, &api).await.unwrap();
    let environment = EnvironmentNamed {
        id: e.id,
        name: "prod".into(),
        mode: e.mode,
        project: ProjectNamed {
            id: p.id,
            name: "shop".into(),
        },
    };
    // One id (a statement kept prepared) and several (a list), an unknown one left out.
    let one = s.services_named(&[web.id]).await.unwrap();
    assert_eq!(
        one,
        vec![ServiceNamed {
            id: web.id,
            name: "web".into(),
            kind: ServiceKind::Container,
            environment: environment.clone(),
        }]
    );
    let mut both = s
        .services_named(&[web.id, api.id, ServiceId::generate()])
        .await
        .unwrap();
    both.sort_by(|a, b| a.name.cmp(&b.name));
    assert_eq!(
        both.iter()
            .map(|n| (n.id, n.name.as_str()))
            .collect::<Vec<_>>(),
        vec![(api.id, "api"), (web.id, "web")]
    );
    assert!(s.services_named(&[]).await.unwrap().is_empty());
    assert_eq!(
        s.environments_named(&[e.id, EnvironmentId::generate()])
            .await
            .unwrap(),
        vec![environment]
    );
}

fn log_line(r: &DeploymentRequest, position: i64, at: time::OffsetDateTime) -> DeploymentLogLine {
    DeploymentLogLine {
        request_id: r.id,
        environment_id: r.environment_id,
        service_id: r.service_id,
        position,
        at,
        step: StepName::Deployment,
        level: if position == 0 {
            LogLevel::Info
        } else {
            LogLevel::Error
        },
        message: format!("line {position} of {}", r.id),
    }
}

async fn deployment_logs_are_read_by_environment_in_order_and_go_with_it(db: Db) {
    let envs = environments(&db, 2).await;
    let (env, s) = &envs[0];
    let (other_env, other_s) = &envs[1];
    let first = request_for(&db, env, s).await;
    let second = request_for(&db, env, s).await;
    let elsewhere = request_for(&db, other_env, other_s).await;
    let t = now();
    // Written out of order, in two units: the read orders them by time, then position.
    let later = [
        log_line(&second, 0, t + time::Duration::seconds(2)),
        log_line(&second, 1, t + time::Duration::seconds(2)),
    ];
    let earlier = [
        log_line(&first, 0, t),
        log_line(&first, 1, t + time::Duration::seconds(1)),
        log_line(&elsewhere, 0, t),
    ];
    for lines in [&later[..], &earlier[..]] {
        let mut tx = db.write().await.unwrap();
        tx.append_logs(lines).await.unwrap();
        tx.commit().await.unwrap();
    }
    let mut unit = db.read().await.unwrap();
    let all = unit.environment_logs(env.id, 1000).await.unwrap();
    let mut expected = vec![earlier[0].clone(), earlier[1].clone()];
    expected.extend(later.iter().cloned());
    assert_eq!(all, expected, "the environment's lines, oldest first");
    let newest = unit.environment_logs(env.id, 3).await.unwrap();
    assert_eq!(
        newest,
        expected[1..].to_vec(),
        "the newest three, oldest first"
    );
    assert_eq!(
        unit.environment_logs(other_env.id, 1000).await.unwrap(),
        vec![earlier[2].clone()]
    );
    drop(unit);
    // A line is written once: the same place in a request's log is refused.
    let mut tx = db.write().await.unwrap();
    assert!(tx.append_logs(&earlier[..1]).await.is_err());
    drop(tx);
    Repo::<Environment>::delete(&mut db.session().await.unwrap(), env.id)
        .await
        .unwrap();
    let mut unit = db.read().await.unwrap();
    assert!(unit
        .environment_logs(env.id, 1000)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        unit.environment_logs(other_env.id, 1000)
            .await
            .unwrap()
            .len(),
        1
    );
}

fn running(env: &Environment, s: &Service, state: RunState, port: u16) -> RunningState {
    RunningState {
        service_id: s.id,
        environment_id: env.id,
        state,
        replicas: vec![Replica {
            name: "capstan-x-0".into(),
            image: "busybox:1".into(),
            state,
            restart_count: 2,
            started_at: Some(time::OffsetDateTime::UNIX_EPOCH),
            finished_at: None,
            exit_code: Some(3),
            reason: Some("CrashLoop".into()),
            message: Some("exited with code 3".into()),
            healthy: Some(false),
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

async fn running_states_are_replaced_per_service_and_go_with_it(db: Db) {
    let envs = environments(&db, 2).await;
    let (env, s) = &envs[0];
    let (other_env, other) = &envs[1];
    let mut tx = db.write().await.unwrap();
    assert!(
        tx.running_states(&[s.id]).await.unwrap().is_empty(),
        "not seen yet"
    );
    tx.put_running_state(&running(env, s, RunState::Error, 41000))
        .await
        .unwrap();
    let replaced = running(env, s, RunState::Running, 41001);
    tx.put_running_state(&replaced).await.unwrap();
    let elsewhere = running(other_env, other, RunState::Stopped, 41002);
    tx.put_running_state(&elsewhere).await.unwrap();
    tx.commit().await.unwrap();
    let mut unit = db.read().await.unwrap();
    assert_eq!(
        unit.running_states(&[s.id]).await.unwrap(),
        vec![replaced.clone()]
    );
    let mut both = unit.running_states(&[s.id, other.id]).await.unwrap();
    both.sort_by_key(|r| r.endpoints[0].port);
    assert_eq!(both, vec![replaced, elsewhere.clone()]);
    assert!(unit
        .running_states(&[ServiceId::generate()])
        .await
        .unwrap()
        .is_empty());
    drop(unit);
    Repo::<Service>::delete(&mut db.session().await.unwrap(), s.id)
        .await
        .unwrap();
    let mut unit = db.read().await.unwrap();
    assert!(
        unit.running_states(&[s.id]).await.unwrap().is_empty(),
        "gone with its service"
    );
    assert_eq!(
        unit.running_states(&[other.id]).await.unwrap(),
        vec![elsewhere]
    );
}

async fn all_running_states_are_read_at_once(db: Db) {
    let envs = environments(&db, 2).await;
    let (env, s) = &envs[0];
    let (other_env, other) = &envs[1];
    let mut tx = db.write().await.unwrap();
    assert!(tx.all_running_states().await.unwrap().is_empty());
    let publishing = running(env, s, RunState::Running, 41010);
    tx.put_running_state(&publishing).await.unwrap();
    let mut stopped = running(other_env, other, RunState::Stopped, 41011);
    stopped.endpoints.clear();
    tx.put_running_state(&stopped).await.unwrap();
    tx.commit().await.unwrap();
    let mut unit = db.read().await.unwrap();
    let mut all = unit.all_running_states().await.unwrap();
    all.sort_by_key(|r| r.endpoints.len());
    assert_eq!(all, vec![stopped, publishing]);
}

fn output(env: &Environment, s: &Service, replica: &str, second: i64) -> OutputLine {
    let at = time::OffsetDateTime::UNIX_EPOCH + time::Duration::seconds(1_800_000_000 + second);
    OutputLine {
        id: uuid::Uuid::new_v4(),
        service_id: s.id,
        environment_id: env.id,
        replica: replica.into(),
        request_id: (second % 2 == 0).then_some(DeploymentRequestId(uuid::Uuid::from_u128(7))),
        version: "1.2".into(),
        position: i64::try_from(at.unix_timestamp_nanos()).unwrap(),
        at,
        stream: if second % 3 == 0 {
            OutputStream::Stderr
        } else {
            OutputStream::Stdout
        },
        message: format!("{replica} line {second}"),
    }
}

async fn service_output_is_kept_once_filtered_trimmed_and_goes_with_its_service(db: Db) {
    let envs = environments(&db, 2).await;
    let (env, s) = &envs[0];
    let (other_env, other) = &envs[1];
    let a: Vec<OutputLine> = (0..6).map(|i| output(env, s, "capstan-a-0", i)).collect();
    let b: Vec<OutputLine> = (0..3).map(|i| output(env, s, "capstan-a-1", i)).collect();
    let elsewhere = output(other_env, other, "capstan-b-0", 0);
    let mut tx = db.write().await.unwrap();
    tx.append_output(&a[..4]).await.unwrap();
    tx.append_output(&b).await.unwrap();
    tx.append_output(std::slice::from_ref(&elsewhere))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    // A second reader of the same output sends lines kept already: they stay as they were.
    let mut again = a.clone();
    again[0].message = "read twice".into();
    let mut tx = db.write().await.unwrap();
    tx.append_output(&again).await.unwrap();
    tx.commit().await.unwrap();
    let mut unit = db.read().await.unwrap();
    let all = unit
        .service_output(s.id, &OutputQuery::default(), 100)
        .await
        .unwrap();
    assert_eq!(all.len(), 9);
    assert_eq!(
        all[0].message, "capstan-a-0 line 0",
        "the first read is kept"
    );
    let positions: Vec<i64> = all.iter().map(|l| l.position).collect();
    let mut sorted = positions.clone();
    sorted.sort();
    assert_eq!(positions, sorted, "oldest first");
    assert_eq!(
        all.iter().find(|l| l.id == a[5].id),
        Some(&a[5]),
        "kept whole"
    );
    let newest = unit
        .service_output(s.id, &OutputQuery::default(), 2)
        .await
        .unwrap();
    assert_eq!(
        newest,
        vec![a[4].clone(), a[5].clone()],
        "the newest, oldest first"
    );
    let one_replica = OutputQuery {
        replica: Some("capstan-a-1".into()),
        ..Default::default()
    };
    assert_eq!(
        unit.service_output(s.id, &one_replica, 100).await.unwrap(),
        b
    );
    let after = OutputQuery {
        after: Some(a[3].position),
        ..Default::default()
    };
    assert_eq!(
        unit.service_output(s.id, &after, 100).await.unwrap(),
        vec![a[4].clone(), a[5].clone()]
    );
    let of_request = OutputQuery {
        request: Some(DeploymentRequestId(uuid::Uuid::from_u128(7))),
        since: Some(a[1].at),
        ..Default::default()
    };
    let found = unit.service_output(s.id, &of_request, 100).await.unwrap();
    // Lines of one instant come in their replicas' order.
    assert_eq!(
        found.iter().map(|l| l.message.as_str()).collect::<Vec<_>>(),
        [
            "capstan-a-0 line 2",
            "capstan-a-1 line 2",
            "capstan-a-0 line 4"
        ]
    );
    drop(unit);
    // Trimmed to the newest lines of the service; the other service keeps its own.
    let mut tx = db.write().await.unwrap();
    tx.trim_output(s.id, 3).await.unwrap();
    tx.trim_output(other.id, 3).await.unwrap();
    tx.commit().await.unwrap();
    let mut unit = db.read().await.unwrap();
    let kept = unit
        .service_output(s.id, &OutputQuery::default(), 100)
        .await
        .unwrap();
    assert_eq!(kept, vec![a[3].clone(), a[4].clone(), a[5].clone()]);
    drop(unit);
    Repo::<Service>::delete(&mut db.session().await.unwrap(), s.id)
        .await
        .unwrap();
    let mut unit = db.read().await.unwrap();
    assert!(unit
        .service_output(s.id, &OutputQuery::default(), 100)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        unit.service_output(other.id, &OutputQuery::default(), 100)
            .await
            .unwrap(),
        vec![elsewhere]
    );
}

async fn cron_turns_are_kept_per_job_due_in_order_and_go_with_it(db: Db) {
    let envs = environments(&db, 2).await;
    let (env, a) = &envs[0];
    let (other_env, b) = &envs[1];
    let at = |minute: i64| {
        time::OffsetDateTime::UNIX_EPOCH + time::Duration::seconds(1_800_000_000 + minute * 60)
    };
    let turn = |env: &Environment, s: &Service, minute| CronTurn {
        service_id: s.id,
        environment_id: env.id,
        next_run_at: at(minute),
    };
    let mut tx = db.write().await.unwrap();
    assert_eq!(tx.next_cron_turn().await.unwrap(), None);
    tx.put_cron_turn(&turn(env, a, 10)).await.unwrap();
    tx.put_cron_turn(&turn(env, a, 5)).await.unwrap();
    tx.put_cron_turn(&turn(other_env, b, 7)).await.unwrap();
    tx.commit().await.unwrap();
    let mut unit = db.read().await.unwrap();
    assert_eq!(
        unit.cron_turn(a.id).await.unwrap(),
        Some(turn(env, a, 5)),
        "replaced"
    );
    assert_eq!(unit.next_cron_turn().await.unwrap(), Some(at(5)));
    assert!(unit.due_cron_turns(at(4), 10).await.unwrap().is_empty());
    assert_eq!(
        unit.due_cron_turns(at(7), 10).await.unwrap(),
        vec![turn(env, a, 5), turn(other_env, b, 7)],
        "earliest first, at the minute included"
    );
    assert_eq!(unit.due_cron_turns(at(7), 1).await.unwrap().len(), 1);
    drop(unit);
    let mut tx = db.write().await.unwrap();
    tx.delete_cron_turn(a.id).await.unwrap();
    tx.commit().await.unwrap();
    let mut unit = db.read().await.unwrap();
    assert_eq!(unit.cron_turn(a.id).await.unwrap(), None);
    assert_eq!(unit.next_cron_turn().await.unwrap(), Some(at(7)));
    drop(unit);
    Repo::<Service>::delete(&mut db.session().await.unwrap(), b.id)
        .await
        .unwrap();
    let mut unit = db.read().await.unwrap();
    assert_eq!(
        unit.next_cron_turn().await.unwrap(),
        None,
        "gone with its job"
    );
}

async fn database_backups_are_kept_per_database_updated_and_go_with_it(db: Db) {
    let envs = environments(&db, 2).await;
    let (_, a) = &envs[0];
    let (_, b) = &envs[1];
    let now = time::OffsetDateTime::UNIX_EPOCH + time::Duration::seconds(1_800_000_000);
    let backup = |s: &Service, name: &str| DatabaseBackup {
        id: BackupId::generate(),
        organization_id: s.organization_id,
        database_id: s.id,
        name: name.into(),
        message: "before the migration".into(),
        state: BackupState::Running,
        size_bytes: 0,
        reason: None,
        created_at: now,
        updated_at: now,
    };
    let (first, second, other) = (backup(a, "one"), backup(a, "two"), backup(b, "three"));
    let mut tx = db.write().await.unwrap();
    for b in [&first, &second, &other] {
        Repo::<DatabaseBackup>::insert(&mut *tx, b).await.unwrap();
    }
    let mut done = first.clone();
    done.state = BackupState::Failed;
    done.reason = Some("pg_dump: connection refused".into());
    done.size_bytes = 12;
    Repo::<DatabaseBackup>::update(&mut *tx, &done)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let mut unit = db.read().await.unwrap();
    assert_eq!(
        Repo::<DatabaseBackup>::get(&mut *unit, first.id)
            .await
            .unwrap(),
        Some(done),
        "updated as a whole"
    );
    let page = domain::pagination::PageRequest::new(1, 100).unwrap();
    let listed = Repo::<DatabaseBackup>::list(&mut *unit, a.id, page)
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 2, "only its database's");
    drop(unit);
    Repo::<Service>::delete(&mut db.session().await.unwrap(), a.id)
        .await
        .unwrap();
    let mut unit = db.read().await.unwrap();
    assert_eq!(
        Repo::<DatabaseBackup>::get(&mut *unit, second.id)
            .await
            .unwrap(),
        None,
        "gone with its database"
    );
    assert!(Repo::<DatabaseBackup>::get(&mut *unit, other.id)
        .await
        .unwrap()
        .is_some());
}
