//! Links between a database and the applications of its environment. A link is the set of
//! BUILT_IN variables that give an application the database's connection (host, port, login,
//! password, database name and URL; the last two secrets). Every application is linked to every
//! database of its environment when either is created (or copied by an environment clone); a
//! removed link stays removed, and goes with either service.

use super::Capstan;
use crate::auth::{Action, Principal};
use crate::error::{DomainError, DomainResult};
use crate::ids::{ServiceId, VariableId};
use crate::model::EventType;
use crate::model::{
    DatabaseType, Service, ServiceKind, ServiceSpec, Variable, VariableKey, VariableParent,
    VariableScope, VariableType,
};
use crate::ports::{Repo, Scope, Unit};
use crate::secret::Secret;
use rand::distr::{Alphanumeric, SampleString};
use std::collections::HashMap;

/// The connection a database offers, as its linked applications see it.
struct Connection {
    prefix: String,
    host: String,
    port: u16,
    login: &'static str,
    database_name: &'static str,
    scheme: &'static str,
}

impl Connection {
    fn of(database: &Service) -> Option<Self> {
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

    /// (key suffix, value, secret) for each variable of a link.
    fn members(&self, password: &str) -> [(&'static str, String, bool); 6] {
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

/// Points the link variables copied by an environment clone at the copied databases: their
/// names, addresses and (one per database) passwords are the copy's, so that a cloned
/// application never reaches the source environment's database. Aliases keep following them.
pub(super) fn connect_copies(variables: &mut [Variable], copies: &[Service]) -> DomainResult<()> {
    let mut passwords: HashMap<ServiceId, String> = HashMap::new();
    for variable in variables.iter_mut() {
        let Some(database) = variable
            .linked_database_id
            .and_then(|id| copies.iter().find(|s| s.id == id))
        else {
            continue;
        };
        let Some(connection) = Connection::of(database) else {
            continue;
        };
        // The prefix's length depends only on the database type, which the copy keeps.
        let suffix = variable
            .key
            .as_str()
            .get(connection.prefix.len()..)
            .unwrap_or_default();
        let password = passwords
            .entry(database.id)
            .or_insert_with(new_password)
            .clone();
        if let Some((suffix, value, _)) = connection
            .members(&password)
            .into_iter()
            .find(|(s, _, _)| *s == suffix)
        {
            variable.key = VariableKey::parse(&format!("{}{suffix}", connection.prefix))?;
            variable.value = Some(Secret::new(value));
            variable.description = Some(description(database));
        }
    }
    Ok(())
}

fn new_password() -> String {
    Alphanumeric.sample_string(&mut rand::rng(), 32)
}

fn description(database: &Service) -> String {
    format!("Connection to the database {}", database.name)
}

impl Capstan {
    /// Links a service that was just written to the databases (for an application) or the
    /// applications (for a database) of its environment.
    pub(super) async fn link_new_service(
        &self,
        tx: &mut Unit,
        service: &Service,
    ) -> DomainResult<()> {
        let peer = match service.kind() {
            ServiceKind::Application => ServiceKind::Database,
            ServiceKind::Database => ServiceKind::Application,
            _ => return Ok(()),
        };
        let peers: Vec<Service> = self
            .services_of(tx, service.environment_id)
            .await?
            .into_iter()
            .filter(|s| s.kind() == peer)
            .collect();
        for other in &peers {
            let (database, application) = match peer {
                ServiceKind::Database => (other, service),
                _ => (service, other),
            };
            self.link(tx, database, application).await?;
        }
        Ok(())
    }

    /// Writes the variables that give `application` the connection of `database`, with the
    /// password its other links carry (a new one for its first).
    async fn link(
        &self,
        tx: &mut Unit,
        database: &Service,
        application: &Service,
    ) -> DomainResult<()> {
        let Some(connection) = Connection::of(database) else {
            return Ok(());
        };
        let password_key = format!("{}PASSWORD", connection.prefix);
        let password = tx
            .database_link_variables(database.id)
            .await?
            .into_iter()
            .find(|v| v.key.as_str() == password_key)
            .and_then(|v| v.value)
            .map(|s| s.expose().to_string())
            .unwrap_or_else(new_password);
        let now = self.now();
        for (suffix, value, is_secret) in connection.members(&password) {
            let variable = Variable {
                id: VariableId::generate(),
                organization_id: application.organization_id,
                project_id: application.project_id,
                environment_id: Some(application.environment_id),
                service_id: Some(application.id),
                scope: VariableScope::BuiltIn,
                key: VariableKey::parse(&format!("{}{suffix}", connection.prefix))?,
                value: Some(Secret::new(value)),
                is_secret,
                variable_type: VariableType::BuiltIn,
                mount_path: None,
                description: Some(description(database)),
                enable_interpolation_in_file: None,
                aliased_variable_id: None,
                overridden_variable_id: None,
                secret_manager_access_id: None,
                linked_database_id: Some(database.id),
                created_at: now,
                updated_at: now,
            };
            Repo::<Variable>::insert(tx, &variable).await?;
        }
        // A deployed application runs without the new variables until deployed again.
        tx.mark_out_of_date(
            VariableParent::Service(application.id, ServiceKind::Application),
            now,
        )
        .await?;
        Ok(())
    }

    /// Before a database goes: its linked applications lose its connection (the variables
    /// go with the database), so those deployed are OUT_OF_DATE. Nothing for other kinds.
    pub(super) async fn unlink_all(&self, tx: &mut Unit, database: ServiceId) -> DomainResult<()> {
        let mut applications: Vec<ServiceId> = tx
            .database_link_variables(database)
            .await?
            .into_iter()
            .filter_map(|v| v.service_id)
            .collect();
        applications.sort();
        applications.dedup();
        let now = self.now();
        for application in applications {
            tx.mark_out_of_date(
                VariableParent::Service(application, ServiceKind::Application),
                now,
            )
            .await?;
        }
        Ok(())
    }

    /// `GET /database/{id}/application`: the applications linked to the database, oldest
    /// first.
    pub async fn linked_applications(
        &self,
        p: &Principal,
        database: ServiceId,
    ) -> DomainResult<Vec<Service>> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        self.load_service(tx, p, ServiceKind::Database, database, Action::Read)
            .await?;
        let linked = tx.database_link_variables(database).await?;
        let applications = self
            .by_id::<Service>(tx, linked.iter().filter_map(|v| v.service_id))
            .await?;
        let mut applications: Vec<Service> = applications.into_values().collect();
        // Lists are in creation order (API.md).
        applications.sort_by_key(|a| (a.created_at, a.id));
        self.decorate(tx, applications).await
    }

    /// `DELETE /database/{id}/application/{applicationId}`: the application loses the
    /// database's connection variables (and the aliases and overrides made of them), and is out
    /// of date if it was deployed. Not linked: 404.
    pub async fn unlink_application(
        &self,
        p: &Principal,
        database: ServiceId,
        application: ServiceId,
    ) -> DomainResult<()> {
        self.in_unit(&[Scope::EnvironmentOf(database)], async |tx| {
            self.load_service(tx, p, ServiceKind::Database, database, Action::Write)
                .await?;
            let linked: Vec<Variable> = tx
                .database_link_variables(database)
                .await?
                .into_iter()
                .filter(|v| v.service_id == Some(application))
                .collect();
            if linked.is_empty() {
                return Err(DomainError::NotFound("application linked to this database"));
            }
            for variable in &linked {
                self.audit(tx, p, EventType::Delete, variable).await?;
                self.delete::<Variable>(tx, variable.id, "other variables")
                    .await?;
            }
            tx.mark_out_of_date(
                VariableParent::Service(application, ServiceKind::Application),
                self.now(),
            )
            .await?;
            Ok(())
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::*;
    use crate::model::ServiceDraft;

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
        let c = Connection::of(&db).unwrap();
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
        assert_eq!(Connection::of(&database("REDIS")).unwrap().port, 6379);
    }
}
