//! The stored form of a database.

use super::form::{Form, Text};
use domain::model::{DatabaseAccessibility, DatabaseMode, DatabaseSpec, DatabaseType};

stored!(StoredDatabase => DatabaseSpec {
    #[serde(rename = "type")]
    db_type: Text<DatabaseType>,
    version: String,
    mode: Text<DatabaseMode>,
    accessibility: Text<DatabaseAccessibility>,
    cpu: i64,
    memory: i64,
    storage: i64,
    #[serde(default)]
    icon_uri: String,
});
