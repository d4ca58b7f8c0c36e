//! Links between a database and the applications of its environment. A link is the set of
//! BUILT_IN variables that give an application the database's connection (host, port, login,
//! password, database name and URL; the last two secrets). Every application is linked to every
//! database of its environment when either is created (or copied by an environment clone); a
//! removed link stays removed, and goes with either service.

use super::Capstan;
use crate::auth::{Action, Principal};
use crate::error::{DomainError, DomainResult};
use crate::ids::{EnvironmentId, ServiceId, VariableId};
use crate::model::EventType;
use crate::model::{
    container_versions, DatabaseConnection, DatabaseType, Environment, Service, ServiceKind,
    ServiceSpec, Variable, VariableKey, VariableParent, VariableScope, VariableType,
};
use crate::ports::{Repo, Scope, Unit};
use crate::secret::Secret;

/// How a database is reached and signed in to.
#[derive(Debug, Clone)]
pub struct DatabaseCredentials {
    pub host: String,
    pub port: u16,
    pub login: String,
    pub password: Secret,
}
use rand::distr::{Alphanumeric, SampleString};
use std::collections::HashMap;

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
        let Some(connection) = DatabaseConnection::of(database) else {
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

/// A BUILT_IN variable of `holder` carrying part of `database`'s connection: (value, secret).
fn link_variable(
    database: &Service,
    holder: &Service,
    key: VariableKey,
    (value, is_secret): (String, bool),
    description: String,
    now: time::OffsetDateTime,
) -> Variable {
    Variable {
        id: VariableId::generate(),
        organization_id: holder.organization_id,
        project_id: holder.project_id,
        environment_id: Some(holder.environment_id),
        service_id: Some(holder.id),
        scope: VariableScope::BuiltIn,
        key,
        value: Some(Secret::new(value)),
        is_secret,
        variable_type: VariableType::BuiltIn,
        mount_path: None,
        description: Some(description),
        enable_interpolation_in_file: None,
        aliased_variable_id: None,
        overridden_variable_id: None,
        secret_manager_access_id: None,
        linked_database_id: Some(database.id),
        created_at: now,
        updated_at: now,
    }
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
            ServiceKind::Database => {
                self.give_credentials(tx, service).await?;
                ServiceKind::Application
            }
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

    /// Gives a database its password, when it has none of its own: a secret variable of its
    /// own (sealed like every secret), which its container is made to accept and each of its
    /// links carries. A database made before Capstan kept one takes its links' password.
    async fn give_credentials(&self, tx: &mut Unit, database: &Service) -> DomainResult<()> {
        let Some(connection) = DatabaseConnection::of(database) else {
            return Ok(());
        };
        let key = connection.password_key();
        let linked = tx.database_link_variables(database.id).await?;
        if linked
            .iter()
            .any(|v| v.service_id == Some(database.id) && v.key.as_str() == key)
        {
            return Ok(());
        }
        let password = linked
            .into_iter()
            .find(|v| v.key.as_str() == key)
            .and_then(|v| v.value)
            .map(|s| s.expose().to_string())
            .unwrap_or_else(new_password);
        let variable = link_variable(
            database,
            database,
            VariableKey::parse(&key)?,
            (password, true),
            format!("The password of the database {}", database.name),
            self.now(),
        );
        Repo::<Variable>::insert(tx, &variable).await?;
        Ok(())
    }

    /// Gives a database its password before it is deployed, when it has none (one made before
    /// Capstan kept them).
    pub(super) async fn ensure_credentials(&self, database: &Service) -> DomainResult<()> {
        self.in_unit(&[Scope::EnvironmentOf(database.id)], async |tx| {
            self.give_credentials(tx, database).await
        })
        .await
    }

    /// The variables linking `database` to applications (not its own password).
    async fn application_links(
        &self,
        tx: &mut Unit,
        database: ServiceId,
    ) -> DomainResult<Vec<Variable>> {
        Ok(tx
            .database_link_variables(database)
            .await?
            .into_iter()
            .filter(|v| v.service_id != Some(database))
            .collect())
    }

    /// `GET /database/{id}/masterCredentials`: where its linked applications reach it and
    /// how they sign in.
    pub async fn database_credentials(
        &self,
        p: &Principal,
        database: ServiceId,
    ) -> DomainResult<DatabaseCredentials> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        let service = self
            .load_service(tx, p, ServiceKind::Database, database, Action::Read)
            .await?;
        let connection =
            DatabaseConnection::of(&service).ok_or(DomainError::NotFound("database"))?;
        let key = connection.password_key();
        let password = tx
            .database_link_variables(database)
            .await?
            .into_iter()
            .filter(|v| v.service_id == Some(database) && v.key.as_str() == key)
            .find_map(|v| v.value)
            .ok_or_else(|| {
                DomainError::state(
                    "the database has no credentials yet: it was created before Capstan kept \
                     them, and gets them when it is next deployed",
                )
            })?;
        Ok(DatabaseCredentials {
            host: connection.host,
            port: connection.port,
            login: connection.login.to_string(),
            password,
        })
    }

    /// `GET /database/{id}/version`: the versions its type runs in.
    pub async fn database_versions(
        &self,
        p: &Principal,
        database: ServiceId,
    ) -> DomainResult<&'static [&'static str]> {
        let mut unit = self.reading().await?;
        let service = self
            .load_service(&mut *unit, p, ServiceKind::Database, database, Action::Read)
            .await?;
        match &service.spec {
            ServiceSpec::Database(spec) => Ok(container_versions(spec.db_type)),
            _ => Err(DomainError::NotFound("database")),
        }
    }

    /// `GET /environment/{id}/databaseConfiguration`: each type with its versions (all in
    /// CONTAINER mode: the engines run databases as containers).
    pub async fn database_configuration(
        &self,
        p: &Principal,
        environment: EnvironmentId,
    ) -> DomainResult<Vec<(DatabaseType, &'static [&'static str])>> {
        let mut unit = self.reading().await?;
        self.load::<Environment>(&mut *unit, p, environment, Action::Read)
            .await?;
        Ok(DatabaseType::ALL
            .iter()
            .map(|t| (*t, container_versions(*t)))
            .collect())
    }

    /// Writes the variables that give `application` the connection of `database`, with the
    /// password its other links carry (a new one for its first).
    async fn link(
        &self,
        tx: &mut Unit,
        database: &Service,
        application: &Service,
    ) -> DomainResult<()> {
        let Some(connection) = DatabaseConnection::of(database) else {
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
            let variable = link_variable(
                database,
                application,
                VariableKey::parse(&format!("{}{suffix}", connection.prefix))?,
                (value, is_secret),
                description(database),
                now,
            );
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
        let mut applications: Vec<ServiceId> = self
            .application_links(tx, database)
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
        let linked = self.application_links(tx, database).await?;
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
            let linked: Vec<Variable> = self
                .application_links(tx, database)
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
