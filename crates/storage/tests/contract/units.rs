//! Units of work (`Store`): what a dropped unit leaves, what a commit rings, what a
//! snapshot sees, and how locked scopes are held.

use crate::common::*;

contract!(
    a_unit_dropped_before_commit_leaves_nothing,
    a_committed_unit_rings_what_it_changed_and_a_dropped_one_nothing,
    a_snapshot_sees_one_state_from_its_first_read,
    a_locked_scope_is_held_until_commit,
);

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
