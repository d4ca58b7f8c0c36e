//! A database's backups: taken by the engine in the background (the request answers at once,
//! the listing follows the backup to DONE or FAILED), listed newest first, removed, and
//! restored into the running database (a Capstan addition: the public API has no restore).

use super::Capstan;
use crate::auth::{Action, Principal};
use crate::engine::{DatabaseBackups, Engine, EngineError, Target};
use crate::error::{DomainError, DomainResult};
use crate::ids::{BackupId, ServiceId};
use crate::model::{
    dump_file, BackupState, DatabaseBackup, DeploymentStatus, Masker, Service, ServiceKind,
    WorkloadInputs,
};
use crate::pagination::{Page, PageRequest};
use crate::ports::{Repo, Scope};
use std::sync::Arc;

impl Capstan {
    fn backup_engine(&self) -> DomainResult<Arc<dyn Engine>> {
        self.engine
            .clone()
            .ok_or_else(|| DomainError::Unavailable("no engine runs databases here".into()))
    }

    /// The backups `engine` keeps at `target`; 409 naming the engine when it keeps none.
    fn backups_at<'e>(
        engine: &'e dyn Engine,
        target: &Target,
    ) -> DomainResult<&'e dyn DatabaseBackups> {
        engine.database_backups(target).ok_or_else(|| {
            DomainError::state(format!("{} keeps no database backups", engine.name(target)))
        })
    }

    /// The database (checked for `action`) and what its container runs with.
    async fn database_and_inputs(
        &self,
        p: &Principal,
        database: ServiceId,
        action: Action,
    ) -> DomainResult<(Service, WorkloadInputs, Target)> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        let service = self
            .load_service(tx, p, ServiceKind::Database, database, action)
            .await?;
        let inputs = self.inputs_of(tx, &service).await?;
        let host = self
            .target_of_environment(tx, service.environment_id)
            .await?;
        Ok((service, inputs, host))
    }

    /// `POST /database/{id}/backup`: a backup RUNNING, taken in the background. A database
    /// never deployed has nothing to back up: 400.
    pub async fn create_backup(
        &self,
        p: &Principal,
        database: ServiceId,
        name: String,
        message: String,
    ) -> DomainResult<DatabaseBackup> {
        if name.trim().is_empty() {
            return Err(DomainError::invalid("name", "must not be empty"));
        }
        let engine = self.backup_engine()?;
        let (service, inputs, host) = self.database_and_inputs(p, database, Action::Write).await?;
        if service.deployment_status == DeploymentStatus::NeverDeployed {
            return Err(DomainError::state(
                "the database was never deployed: there is nothing to back up",
            ));
        }
        Self::backups_at(engine.as_ref(), &host)?;
        let now = self.now();
        let backup = DatabaseBackup {
            id: BackupId::generate(),
            organization_id: service.organization_id,
            database_id: service.id,
            name,
            message,
            state: BackupState::Running,
            size_bytes: 0,
            reason: None,
            created_at: now,
            updated_at: now,
        };
        self.in_unit(&[Scope::EnvironmentOf(database)], async |tx| {
            Repo::<DatabaseBackup>::insert(tx, &backup).await?;
            Ok(())
        })
        .await?;
        let capstan = self.clone();
        let taken = backup.clone();
        tokio::spawn(async move {
            let done = match Self::backups_at(engine.as_ref(), &host) {
                Ok(backups) => {
                    backups
                        .backup_database(&host, &service, &inputs, &taken.file_name())
                        .await
                }
                Err(why) => Err(EngineError::terminal(why.to_string())),
            };
            let masker = Masker::new(inputs.secret_values());
            if let Err(e) = capstan.end_backup(taken, done, &masker).await {
                tracing::warn!(error = %e, "could not record how a backup ended");
            }
        });
        Ok(backup)
    }

    async fn end_backup(
        &self,
        mut backup: DatabaseBackup,
        done: Result<i64, EngineError>,
        masker: &Masker,
    ) -> DomainResult<()> {
        match done {
            Ok(size) => {
                backup.state = BackupState::Done;
                backup.size_bytes = size;
            }
            Err(why) => {
                backup.state = BackupState::Failed;
                backup.reason = Some(masker.mask(&why.to_string()));
            }
        }
        backup.updated_at = self.now();
        self.in_unit(&[], async |tx| {
            // Removed meanwhile: nothing to record.
            if Repo::<DatabaseBackup>::get(tx, backup.id).await?.is_some() {
                Repo::<DatabaseBackup>::update(tx, &backup).await?;
            }
            Ok(())
        })
        .await
    }

    /// `GET /database/{id}/backup`: its backups, newest first, a page of them.
    pub async fn list_backups(
        &self,
        p: &Principal,
        database: ServiceId,
        page: PageRequest,
    ) -> DomainResult<Page<DatabaseBackup>> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        self.load_service(tx, p, ServiceKind::Database, database, Action::Read)
            .await?;
        // A database keeps few backups: all are read, then the page is cut newest first.
        let mut all = Repo::<DatabaseBackup>::list(tx, database, PageRequest::all())
            .await?
            .items;
        all.sort_by_key(|b| std::cmp::Reverse((b.created_at, b.id)));
        let total_count = all.len() as u64;
        let skip = (page.page() as usize)
            .saturating_sub(1)
            .saturating_mul(page.page_size() as usize);
        Ok(Page {
            items: all
                .into_iter()
                .skip(skip)
                .take(page.page_size() as usize)
                .collect(),
            request: page,
            total_count,
        })
    }

    async fn backup_of(
        &self,
        p: &Principal,
        database: ServiceId,
        backup: BackupId,
        action: Action,
    ) -> DomainResult<(Service, WorkloadInputs, Target, DatabaseBackup)> {
        let (service, inputs, host) = self.database_and_inputs(p, database, action).await?;
        let mut unit = self.reading().await?;
        let found = Repo::<DatabaseBackup>::get(&mut *unit, backup)
            .await?
            .filter(|b| b.database_id == database)
            .ok_or(DomainError::NotFound("backup"))?;
        Ok((service, inputs, host, found))
    }

    /// `DELETE /database/{id}/backup/{backupId}`: the dump goes, then the record.
    pub async fn delete_backup(
        &self,
        p: &Principal,
        database: ServiceId,
        backup: BackupId,
    ) -> DomainResult<()> {
        let (_, _, _, found) = self.backup_of(p, database, backup, Action::Write).await?;
        self.backup_engine()?
            .remove_backup(&found.file_name())
            .await
            .map_err(|e| DomainError::Upstream(e.to_string()))?;
        self.in_unit(&[Scope::EnvironmentOf(database)], async |tx| {
            self.delete::<DatabaseBackup>(tx, found.id, "nothing").await
        })
        .await
    }

    /// Removes the dumps whose backups are gone: their database was deleted, by whichever path
    /// (itself, its environment, its project, its organization), and its records with it. The
    /// engine holds none when the settings keep a deleted database's data. How many went.
    pub async fn collect_backups(&self, engine: &dyn Engine) -> DomainResult<usize> {
        let held = engine
            .held_backups()
            .await
            .map_err(|e| DomainError::Internal(e.to_string()))?;
        if held.is_empty() {
            return Ok(0);
        }
        let existing = {
            let mut unit = self.reading().await?;
            self.by_id::<DatabaseBackup>(&mut *unit, held.iter().copied())
                .await?
        };
        let mut removed = 0;
        for gone in held.into_iter().filter(|id| !existing.contains_key(id)) {
            match engine.remove_backup(&dump_file(gone)).await {
                Ok(()) => removed += 1,
                Err(why) => {
                    tracing::warn!(backup = %gone, error = %why, "could not remove the dump of a deleted database's backup")
                }
            }
        }
        Ok(removed)
    }

    /// `POST /database/{id}/backup/{backupId}/restore`: the backup's data loaded back into the
    /// running database (what it holds now is replaced by what the dump holds). Only a DONE
    /// backup restores.
    pub async fn restore_backup(
        &self,
        p: &Principal,
        database: ServiceId,
        backup: BackupId,
    ) -> DomainResult<()> {
        let (service, inputs, host, found) =
            self.backup_of(p, database, backup, Action::Write).await?;
        if found.state != BackupState::Done {
            return Err(DomainError::state(format!(
                "the backup is {}: only a DONE backup restores",
                found.state
            )));
        }
        let masker = Masker::new(inputs.secret_values());
        let engine = self.backup_engine()?;
        Self::backups_at(engine.as_ref(), &host)?
            .restore_database(&host, &service, &inputs, &found.file_name())
            .await
            .map_err(|why| DomainError::state(masker.mask(&format!("the restore failed: {why}"))))
    }
}
