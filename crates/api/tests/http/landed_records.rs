//! Records stored by a landed binary (`tests/fixtures/landed-aca6ffe`, see its README) read
//! back through the current app as that binary answered them: renaming a member of the API or
//! of the stored form must not lose or alter what is already stored.

use crate::common::{self, App, T};
use actix_web::http::Method;
use domain::auth::Role;
use serde_json::Value;
use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/landed-aca6ffe")
        .join(name)
}

/// The first member at which `now` differs from `then`, by its path, for a readable failure.
fn difference(path: &str, then: &Value, now: &Value) -> Option<String> {
    match (then, now) {
        (Value::Object(a), Value::Object(b)) => a
            .keys()
            .chain(b.keys().filter(|k| !a.contains_key(*k)))
            .find_map(|k| {
                let missing = Value::String("<absent>".into());
                difference(
                    &format!("{path}.{k}"),
                    a.get(k).unwrap_or(&missing),
                    b.get(k).unwrap_or(&missing),
                )
            }),
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => a
            .iter()
            .zip(b)
            .enumerate()
            .find_map(|(i, (x, y))| difference(&format!("{path}[{i}]"), x, y)),
        _ => (then != now).then(|| format!("{path}: recorded {then}, answered {now}")),
    }
}

async fn answers_as_recorded<S: App>(t: T<S>, answers: &str) {
    let recorded: Value = serde_json::from_str(answers).unwrap();
    let org = recorded["organization"].as_str().unwrap().parse().unwrap();
    let token = t
        .capstan
        .issue_token(org, Role::Admin, "landed")
        .await
        .unwrap()
        .value;
    let mut checked = 0;
    for section in ["gets", "lists"] {
        for (path, then) in recorded[section].as_object().unwrap() {
            let now = t
                .call(Some(&token), Method::GET, path, None)
                .await
                .expect(200);
            if let Some(d) = difference(path, then, &now.body) {
                panic!("{d}");
            }
            checked += 1;
        }
    }
    assert!(checked >= 11 + 6, "only {checked} answers recorded");
}

#[actix_rt::test]
async fn sqlite_records_read_back_unchanged() {
    let backend = common::sqlite_copy_of(&fixture("capstan.db")).await;
    answers_as_recorded(
        common::setup(backend).await,
        include_str!("../fixtures/landed-aca6ffe/answers-sqlite.json"),
    )
    .await;
}

#[actix_rt::test]
async fn postgres_records_read_back_unchanged() {
    let dump = include_str!("../fixtures/landed-aca6ffe/postgres.sql");
    let Some(backend) = common::postgres_loaded(dump).await else {
        return;
    };
    answers_as_recorded(
        common::setup(backend).await,
        include_str!("../fixtures/landed-aca6ffe/answers-postgres.json"),
    )
    .await;
}
