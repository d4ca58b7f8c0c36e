//! API tokens (`TokenStore`): found by hash, and deleted for every server at once.

use crate::common::*;

contract!(tokens_are_found_by_hash,);

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
