//! `Capstan::in_unit`, the one way use cases write, on a real store (SQLite and PostgreSQL):
//! what its work wrote is kept when the work succeeds, and none of it when the work fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use capstan_storage::Db;
use domain::clock::{Clock, SystemClock};
use domain::error::{Conflict, DomainError};
use domain::ids::*;
use domain::model::*;
use domain::ports::{Repo, Scope, Store};
use domain::services::Capstan;
use std::sync::Arc;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite() {
    let (db, _url, _guard) = capstan_storage::testing::sqlite().await;
    a_unit_keeps_what_its_work_wrote_only_when_the_work_succeeds(db).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres() {
    let Some((db, _url)) = capstan_storage::testing::postgres().await else {
        return;
    };
    a_unit_keeps_what_its_work_wrote_only_when_the_work_succeeds(db).await;
}

fn project_in(org: OrganizationId, name: &str) -> Project {
    let now = SystemClock.now();
    Project {
        id: ProjectId::generate(),
        organization_id: org,
        name: Name::parse("name", name).unwrap(),
        description: None,
        created_at: now,
        updated_at: now,
    }
}

async fn a_unit_keeps_what_its_work_wrote_only_when_the_work_succeeds(db: Db) {
    let now = SystemClock.now();
    let org = Organization {
        id: OrganizationId::generate(),
        name: Name::parse("name", "Acme").unwrap(),
        description: None,
        plan: OrganizationPlan::Free,
        created_at: now,
        updated_at: now,
    };
    let capstan = Capstan::new(Arc::new(db.clone()), Arc::new(SystemClock));
    let held = [Scope::Organization(org.id)];

    // On a spawned task, as the engine runs use cases: the unit's work must be `Send`.
    let kept = project_in(org.id, "kept");
    let answer = tokio::spawn({
        let (capstan, org, kept) = (capstan.clone(), org.clone(), kept.clone());
        async move {
            capstan
                .in_unit(&held, async |tx| {
                    Repo::<Organization>::insert(tx, &org).await?;
                    Repo::<Project>::insert(tx, &kept).await?;
                    Ok("kept")
                })
                .await
        }
    })
    .await
    .unwrap()
    .unwrap();
    assert_eq!(answer, "kept");

    let refused = project_in(org.id, "refused");
    let failed = capstan
        .in_unit(&held, async |tx| {
            Repo::<Project>::insert(tx, &refused).await?;
            assert!(Repo::<Project>::get(tx, refused.id).await?.is_some());
            Err::<(), _>(DomainError::state("refused after writing"))
        })
        .await;
    assert!(
        matches!(&failed, Err(DomainError::Conflict(Conflict::State(why))) if why == "refused after writing"),
        "{failed:?}"
    );

    let mut reader = Store::snapshot(&db).await.unwrap();
    let kept_now = Repo::<Project>::get(&mut *reader, kept.id).await.unwrap();
    let refused_now = Repo::<Project>::get(&mut *reader, refused.id)
        .await
        .unwrap();
    assert_eq!(kept_now.map(|p| p.name), Some(kept.name));
    assert!(refused_now.is_none(), "the failed unit's insert was kept");
}
