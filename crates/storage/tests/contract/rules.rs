//! Deployment rules (`RuleQueries`): round trips, and the environments whose turn is due.

use crate::common::*;

contract!(
    deployment_rules_round_trip_and_hold_their_cluster,
    due_environment_rules_are_found_most_overdue_first,
);

async fn deployment_rules_round_trip_and_hold_their_cluster(db: Db) {
    let (o, c, p, e) = hierarchy(&db).await;
    let mut session = db.session().await.unwrap();
    let rule = |name: &str| ProjectDeploymentRule {
        id: DeploymentRuleId::generate(),
        organization_id: o.id,
        project_id: p.id,
        name: Name::parse("name", name).unwrap(),
        description: Some("hours".into()),
        mode: EnvironmentMode::Staging,
        cluster_id: c.id,
        wildcard: "feat-*".into(),
        priority_index: 3,
        schedule: hours(true),
        created_at: now(),
        updated_at: now(),
    };
    let first = rule("Previews");
    Repo::<ProjectDeploymentRule>::insert(&mut session, &first)
        .await
        .unwrap();
    assert_eq!(
        Repo::<ProjectDeploymentRule>::get(&mut session, first.id)
            .await
            .unwrap(),
        Some(first.clone())
    );
    assert!(matches!(
        Repo::<ProjectDeploymentRule>::insert(&mut session, &rule("PREVIEWS")).await,
        Err(StoreError::Duplicate)
    ));
    // The cluster a rule targets cannot go; the project takes its rules with it.
    assert!(matches!(
        Repo::<Cluster>::delete(&mut session, c.id).await,
        Err(StoreError::InUse)
    ));

    let mut env_rule = EnvironmentDeploymentRule::new(e.id, o.id, hours(true), now());
    env_rule.auto_preview = true;
    assert!(env_rule.next_turn_at.is_some());
    Repo::<EnvironmentDeploymentRule>::insert(&mut session, &env_rule)
        .await
        .unwrap();
    assert_eq!(
        Repo::<EnvironmentDeploymentRule>::get(&mut session, e.id)
            .await
            .unwrap(),
        Some(env_rule.clone())
    );
    env_rule.schedule = hours(false);
    env_rule.plan(now());
    assert_eq!(env_rule.next_turn_at, None);
    Repo::<EnvironmentDeploymentRule>::update(&mut session, &env_rule)
        .await
        .unwrap();
    assert_eq!(
        Repo::<EnvironmentDeploymentRule>::get(&mut session, e.id)
            .await
            .unwrap(),
        Some(env_rule.clone())
    );
    Repo::<Environment>::delete(&mut session, e.id)
        .await
        .unwrap();
    assert!(Repo::<EnvironmentDeploymentRule>::get(&mut session, e.id)
        .await
        .unwrap()
        .is_none());
    Repo::<Project>::delete(&mut session, p.id).await.unwrap();
    assert!(Repo::<ProjectDeploymentRule>::get(&mut session, first.id)
        .await
        .unwrap()
        .is_none());
}

async fn due_environment_rules_are_found_most_overdue_first(db: Db) {
    let (o, c, p, _) = hierarchy(&db).await;
    let mut session = db.session().await.unwrap();
    let t0 = now();
    let mut due = Vec::new();
    for (i, offset) in [-5i64, 10, -60, 0].into_iter().enumerate() {
        let env = environment_in(&p, c.id, &format!("env-{i}"));
        Repo::<Environment>::insert(&mut session, &env)
            .await
            .unwrap();
        let mut rule = EnvironmentDeploymentRule::new(env.id, o.id, hours(true), t0);
        rule.next_turn_at = Some(t0 + time::Duration::minutes(offset));
        Repo::<EnvironmentDeploymentRule>::insert(&mut session, &rule)
            .await
            .unwrap();
        due.push(env.id);
    }
    let never = environment_in(&p, c.id, "never");
    Repo::<Environment>::insert(&mut session, &never)
        .await
        .unwrap();
    Repo::<EnvironmentDeploymentRule>::insert(
        &mut session,
        &EnvironmentDeploymentRule::new(never.id, o.id, hours(false), t0),
    )
    .await
    .unwrap();
    assert_eq!(
        session.due_environment_rules(t0, 10).await.unwrap(),
        vec![due[2], due[0], due[3]]
    );
    assert_eq!(
        session.due_environment_rules(t0, 1).await.unwrap(),
        vec![due[2]]
    );
    // The scheduler sleeps until the earliest hour, due or not.
    assert_eq!(
        session
            .next_rule_turn()
            .await
            .unwrap()
            .map(|t| t.unix_timestamp()),
        Some((t0 - time::Duration::minutes(60)).unix_timestamp())
    );
}
