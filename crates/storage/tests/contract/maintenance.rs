//! What only a store can do for maintenance (`Maintenance`, `Health`): every table reset,
//! snapshotted and resealed; the schema the same on both backends; secrets sealed at rest.

use crate::common::*;

contract!(
    health_answers,
    secrets_are_encrypted_at_rest,
    a_reset_empties_every_table_or_keeps_the_tokens,
    a_snapshot_is_restored_exactly,
    a_rotated_key_reseals_every_secret_and_nothing_else,
);

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
