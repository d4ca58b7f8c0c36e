//! The event log, webhook deliveries and the audit log (`EventLog`, `DeliveryClaims`).

use crate::common::*;

contract!(
    events_get_positions_in_the_order_they_are_sequenced,
    deliveries_are_claimed_once_and_settled_by_their_claimant,
    the_audit_log_filters_and_pages_by_time,
);

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
