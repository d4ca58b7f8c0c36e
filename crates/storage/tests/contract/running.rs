//! What the engine reports and keeps per service: running states, deployment logs, output,
//! cron turns, database backups.

use crate::common::*;

contract!(
    running_states_are_replaced_per_service_and_go_with_it,
    all_running_states_are_read_at_once,
    deployment_logs_are_read_by_environment_in_order_and_go_with_it,
    service_output_is_kept_once_filtered_trimmed_and_goes_with_its_service,
    cron_turns_are_kept_per_job_due_in_order_and_go_with_it,
    database_backups_are_kept_per_database_updated_and_go_with_it,
);

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
