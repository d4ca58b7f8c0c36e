//! The address, login and variables of a database's connection: what the applications linked
//! to it are given, and what its container is made to accept.

use super::{DatabaseType, Service, ServiceSpec};

/// The versions Capstan runs in containers, per type (the major versions the official images
/// publish and their makers support), newest first.
pub fn container_versions(db_type: DatabaseType) -> &'static [&'static str] {
    match db_type {
        DatabaseType::Postgresql => &["17", "16", "15", "14", "13"],
        DatabaseType::Mysql => &["8.4", "8.0"],
        DatabaseType::Mongodb => &["8.0", "7.0", "6.0"],
        DatabaseType::Redis => &["7", "6"],
    }
}

/// The connection a database offers, as its linked applications (and its own container) see
/// it.
pub struct DatabaseConnection {
    /// What its variables' names begin with.
    pub prefix: String,
    /// The name it is reached at in its environment's network.
    pub host: String,
    pub port: u16,
    pub login: &'static str,
    pub database_name: &'static str,
    pub scheme: &'static str,
}

impl DatabaseConnection {
    pub fn of(database: &Service) -> Option<Self> {
        let ServiceSpec::Database(spec) = &database.spec else {
            return None;
        };
        let short = database.id.0.simple().to_string()[..8].to_uppercase();
        let (kind, port, login, database_name, scheme) = match spec.db_type {
            DatabaseType::Postgresql => ("POSTGRESQL", 5432, "superuser", "postgres", "postgresql"),
            DatabaseType::Mysql => ("MYSQL", 3306, "superuser", "mysql", "mysql"),
            DatabaseType::Mongodb => ("MONGODB", 27017, "admin", "admin", "mongodb"),
            DatabaseType::Redis => ("REDIS", 6379, "default", "0", "redis"),
        };
        Some(Self {
            prefix: format!("CAPSTAN_{kind}_Z{short}_"),
            host: format!("z{}-{}", short.to_lowercase(), kind.to_lowercase()),
            port,
            login,
            database_name,
            scheme,
        })
    }

    /// The key of the variable holding its password (its own, and each link's).
    pub fn password_key(&self) -> String {
        format!("{}PASSWORD", self.prefix)
    }

    /// (key suffix, value, secret) for each variable of a link.
    pub fn members(&self, password: &str) -> [(&'static str, String, bool); 6] {
        let url = format!(
            "{}://{}:{password}@{}:{}/{}",
            self.scheme, self.login, self.host, self.port, self.database_name
        );
        [
            ("HOST", self.host.clone(), false),
            ("PORT", self.port.to_string(), false),
            ("LOGIN", self.login.to_string(), false),
            (
                "DEFAULT_DATABASE_NAME",
                self.database_name.to_string(),
                false,
            ),
            ("PASSWORD", password.to_string(), true),
            ("DATABASE_URL", url, true),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::*;
    use crate::model::{ServiceDraft, ServiceKind};

    fn database(db_type: &str) -> Service {
        let body = serde_json::json!({"name": "db", "type": db_type, "version": "16", "mode": "CONTAINER"});
        let draft = ServiceDraft::parse(ServiceKind::Database, &body, None).unwrap();
        let now = time::OffsetDateTime::UNIX_EPOCH;
        Service {
            id: ServiceId::generate(),
            organization_id: OrganizationId::generate(),
            project_id: ProjectId::generate(),
            environment_id: EnvironmentId::generate(),
            name: draft.name,
            description: None,
            spec: draft.spec,
            deployment_status: crate::model::DeploymentStatus::NeverDeployed,
            advanced_settings: Default::default(),
            groups: Vec::new(),
            created_at: now,
            updated_at: now,
        }
    }

    #[test]
    fn connection_variables_name_the_database_and_hold_its_address() {
        let db = database("POSTGRESQL");
        let c = DatabaseConnection::of(&db).unwrap();
        let short = db.id.0.simple().to_string()[..8].to_uppercase();
        assert_eq!(c.prefix, format!("CAPSTAN_POSTGRESQL_Z{short}_"));
        let members = c.members("pw");
        let keys: Vec<_> = members.iter().map(|m| m.0).collect();
        assert_eq!(
            keys,
            [
                "HOST",
                "PORT",
                "LOGIN",
                "DEFAULT_DATABASE_NAME",
                "PASSWORD",
                "DATABASE_URL"
            ]
        );
        assert_eq!(members[1].1, "5432");
        assert_eq!(
            members[5].1,
            format!("postgresql://superuser:pw@{}:5432/postgres", c.host)
        );
        let secret: Vec<_> = members.iter().filter(|m| m.2).map(|m| m.0).collect();
        assert_eq!(secret, ["PASSWORD", "DATABASE_URL"]);
        assert_eq!(
            DatabaseConnection::of(&database("REDIS")).unwrap().port,
            6379
        );
    }
}
