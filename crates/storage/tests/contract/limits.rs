//! Rate limits and idempotency keys (`RateLimitStore`, `IdempotencyStore`).

use crate::common::*;

contract!(
    rate_limit_leases_never_overlap,
    idempotency_keys_replay_or_refuse,
);

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
