//! The domain's ids and closed values in text columns, on a real connection of each backend:
//! written as exactly the text rows held when they kept strings, read back as themselves, and
//! a text that does not read is an error, never a panic.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use diesel::result::Error;
use diesel::sql_types::{Nullable, Text};
use diesel::IntoSql;
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use domain::auth::Role;
use domain::error::StoreError;
use domain::ids::{EnvironmentId, OrganizationId, StrictUuid};
use domain::model::ServiceState;

const ID: &str = "67e55044-10b1-426f-9247-bb680e5fe0c8";

/// What the store's callers are told of an unreadable value.
fn unreadable(e: Error) -> String {
    match crate::db::store_error(e) {
        StoreError::Other(message) => message,
        other => panic!("not an unreadable value: {other:?}"),
    }
}

/// Every check, on connection `$c` whose backend names an unnamed column `$field` (a macro:
/// the queries' types differ by backend).
macro_rules! checks {
    ($c:expr, $field:literal) => {{
        let (c, field) = ($c, $field);
        let id: OrganizationId = ID.parse().unwrap();

        let written: String = diesel::select(id.into_sql::<Text>())
            .get_result(c)
            .await
            .unwrap();
        assert_eq!(written, ID);
        let written: String = diesel::select(ServiceState::DeploymentQueued.into_sql::<Text>())
            .get_result(c)
            .await
            .unwrap();
        assert_eq!(written, "DEPLOYMENT_QUEUED");
        let written: String = diesel::select(Role::BillingManager.into_sql::<Text>())
            .get_result(c)
            .await
            .unwrap();
        assert_eq!(written, "BILLING_MANAGER");
        let written: Option<String> =
            diesel::select(None::<EnvironmentId>.into_sql::<Nullable<Text>>())
                .get_result(c)
                .await
                .unwrap();
        assert_eq!(written, None);

        let read: OrganizationId = diesel::select(ID.into_sql::<Text>())
            .get_result(c)
            .await
            .unwrap();
        assert_eq!(read, id);
        let read: StrictUuid = diesel::select(ID.into_sql::<Text>())
            .get_result(c)
            .await
            .unwrap();
        assert_eq!(read, StrictUuid(id.0));
        let read: ServiceState = diesel::select("STOP_QUEUED".into_sql::<Text>())
            .get_result(c)
            .await
            .unwrap();
        assert_eq!(read, ServiceState::StopQueued);
        // Roles were always read in any case.
        let read: Role = diesel::select("devops".into_sql::<Text>())
            .get_result(c)
            .await
            .unwrap();
        assert_eq!(read, Role::Devops);
        let read: Option<EnvironmentId> =
            diesel::select(None::<String>.into_sql::<Nullable<Text>>())
                .get_result(c)
                .await
                .unwrap();
        assert_eq!(read, None);

        let err = diesel::select("not-an-id".into_sql::<Text>())
            .get_result::<OrganizationId>(c)
            .await
            .unwrap_err();
        assert!(matches!(err, Error::DeserializationError(_)), "{err}");
        let cause = r#"unreadable OrganizationId in store: "not-an-id""#;
        assert_eq!(
            unreadable(err),
            format!("Error deserializing field '{field}': {cause}")
        );
        // Only the hyphenated form: another spelling of the id was not written by Capstan.
        let braced = format!("{{{ID}}}");
        let err = diesel::select(Some(braced).into_sql::<Nullable<Text>>())
            .get_result::<Option<EnvironmentId>>(c)
            .await
            .unwrap_err();
        assert!(matches!(err, Error::DeserializationError(_)), "{err}");
        let err = diesel::select("deployment_queued".into_sql::<Text>())
            .get_result::<ServiceState>(c)
            .await
            .unwrap_err();
        assert!(unreadable(err).contains("unreadable ServiceState"));
    }};
}

#[tokio::test]
async fn sqlite_stores_ids_and_enums_as_their_text() {
    let mut c = crate::db::SqliteConn::establish(":memory:").await.unwrap();
    checks!(&mut c, "?");
}

#[tokio::test]
async fn postgres_stores_ids_and_enums_as_their_text() {
    let url = crate::testing::postgres_admin_url();
    let mut c = match AsyncPgConnection::establish(&url).await {
        Ok(c) => c,
        Err(e) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("CI=true but PostgreSQL at {url} is unreachable: {e}")
        }
        Err(e) => return eprintln!("skipping PostgreSQL half: cannot connect to {url}: {e}"),
    };
    checks!(&mut c, "?column?");
}
