//! The deployment queue (`DeploymentQueue`, `QueueClaims`): one request per environment,
//! exclusive claims, leases, batches and stages, and the activity and history they leave.

use crate::common::*;

contract!(
    the_queue_runs_one_request_per_environment,
    claims_are_exclusive_under_concurrency,
    expired_claims_are_reclaimed_once,
    canceling_an_environment_spares_deletions,
    activity_and_history_come_from_the_queue,
    a_variable_change_makes_a_deployed_service_out_of_date,
    a_batch_runs_in_stage_order_and_a_failure_cancels_later_stages,
    batches_and_service_requests_are_paged_newest_first,
    an_environment_deletion_joins_pending_requests_only,
);

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
        first.target, a1.target,
        "what it deploys, a node to move to included"
    );
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
