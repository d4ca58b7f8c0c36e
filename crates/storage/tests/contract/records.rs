//! Records through `Repo`: round trips, names, pages, parents and children, and the queries
//! over services and what hangs off them.

use crate::common::*;

contract!(
    records_round_trip,
    ids_and_enums_are_stored_as_their_text,
    names_are_unique_case_insensitively_per_parent,
    lists_are_paged_in_creation_order,
    deleting_a_parent_removes_its_children,
    referenced_rows_cannot_be_deleted,
    services_of_every_kind_round_trip_and_filter_by_kind,
    usage_counts_are_grouped,
    missing_rows_are_reported,
    a_preview_keeps_its_pull_request_and_is_found_by_it,
    stages_hold_services_and_keep_their_order,
    link_variables_are_found_by_database_and_go_with_it,
    restrictions_are_kept_once_per_service_and_go_with_it,
    custom_domains_are_unique_across_organizations,
    groups_are_attached_and_held_by_their_services,
    services_and_environments_are_named_with_their_parents,
);

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

async fn a_preview_keeps_its_pull_request_and_is_found_by_it(db: Db) {
    let (_, c, p, plain) = hierarchy(&db).await;
    let mut preview = environment_in(&p, c.id, "prod (preview #7)");
    preview.mode = EnvironmentMode::Preview;
    preview.pull_request = Some(PreviewOf {
        provider: GitProvider::HostB,
        repository: "acme/api".into(),
        number: 7,
        url: "https://git.example.com/acme/api/-/merge_requests/7".into(),
        head_branch: "feature".into(),
        head_commit: "c0ffee".into(),
        blueprint_environment_id: plain.id,
        comment_id: None,
        last_activity_at: now(),
    });
    Repo::<Environment>::insert(&mut db.session().await.unwrap(), &preview)
        .await
        .unwrap();
    let read = Repo::<Environment>::get(&mut db.session().await.unwrap(), preview.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read, preview);
    let found = db
        .session()
        .await
        .unwrap()
        .pull_request_previews()
        .await
        .unwrap();
    assert_eq!(found, [preview.clone()], "only previews of pull requests");

    // The comment's id, kept once written.
    let mut commented = preview.clone();
    if let Some(pr) = commented.pull_request.as_mut() {
        pr.comment_id = Some("501".into());
    }
    Repo::<Environment>::update(&mut db.session().await.unwrap(), &commented)
        .await
        .unwrap();
    let read = Repo::<Environment>::get(&mut db.session().await.unwrap(), preview.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        read.pull_request.unwrap().comment_id.as_deref(),
        Some("501")
    );
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
