//! Clusters (`DaemonClaims` and the cluster claims of `QueueClaims`): claimed once, found
//! with their Docker hosts, their logs, the daemon they were deployed on.

use crate::common::*;

contract!(
    clusters_are_claimed_once_and_found_when_their_worker_dies,
    on_premise_clusters_are_found_across_organizations_with_their_docker_host,
    a_clusters_log_reads_newest_lines_oldest_first_and_goes_with_it,
    clusters_keep_the_daemon_they_were_deployed_on,
);

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
        nodes: vec![NodeDaemonSpec {
            address: "10.0.0.6".into(),
            endpoint: "tcp://10.0.0.6:2376".into(),
        }],
        image_registry: Some("10.0.0.5:5000/builds".into()),
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

async fn clusters_keep_the_daemon_they_were_deployed_on(db: Db) {
    let (mine, first, _, _) = hierarchy(&db).await;
    let second = cluster(&db, mine.id, "second").await;
    let (theirs, their_cluster, _, _) = hierarchy(&db).await;
    let mut session = db.session().await.unwrap();
    assert!(session.daemon_organizations("D1").await.unwrap().is_empty());
    for c in [&first, &second] {
        session
            .set_cluster_daemon(c.id, mine.id, &host("D1"))
            .await
            .unwrap();
    }
    session
        .set_cluster_daemon(their_cluster.id, theirs.id, &host("D2"))
        .await
        .unwrap();
    assert_eq!(
        session.daemon_organizations("D1").await.unwrap(),
        [mine.id],
        "once per organization"
    );
    // A cluster deployed again on another daemon keeps only that one, and what it is.
    let swarm = ClaimedDaemon {
        id: "swarm:D3".into(),
        kind: DockerHostKind::Swarm,
    };
    session
        .set_cluster_daemon(second.id, mine.id, &swarm)
        .await
        .unwrap();
    let mut found = session
        .cluster_daemons(&[first.id, second.id, their_cluster.id])
        .await
        .unwrap();
    found.sort_by_key(|(cluster, _)| *cluster);
    let mut wanted = vec![
        (first.id, host("D1")),
        (second.id, swarm),
        (their_cluster.id, host("D2")),
    ];
    wanted.sort_by_key(|(cluster, _)| *cluster);
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

fn host(id: &str) -> ClaimedDaemon {
    ClaimedDaemon {
        id: id.into(),
        kind: DockerHostKind::Host,
    }
}
