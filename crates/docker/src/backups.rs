//! Database backups on Docker: the type's own dump tool run inside the database's container,
//! its output kept as a file of Capstan's backup directory (readable by Capstan's user only),
//! and loaded back by the type's restore steps.

use crate::db_recipe::{self, Recipe};
use crate::engine::DockerEngine;
use crate::errors::said;
use crate::exec;
use bollard::query_parameters::DownloadFromContainerOptions;
use domain::engine::EngineError;
use domain::ids::BackupId;
use domain::model::{dump_of, Service, WorkloadInputs};
use futures_util::StreamExt;
use std::io::Read;
use std::path::PathBuf;
use std::time::Duration;

/// The content of the file at `path` in a container (running or not); `Err(None)` when there
/// is none.
pub(crate) async fn file_of(
    docker: &bollard::Docker,
    id: &str,
    path: &str,
) -> Result<Vec<u8>, Option<EngineError>> {
    let options = DownloadFromContainerOptions {
        path: path.to_string(),
    };
    let mut archive = Vec::new();
    let mut chunks = docker.download_from_container(id, Some(options));
    while let Some(chunk) = chunks.next().await {
        match chunk {
            Ok(bytes) => archive.extend_from_slice(&bytes),
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => return Err(None),
            Err(e) => return Err(Some(said(&format!("could not read {path}"), e))),
        }
    }
    let unreadable = |e: std::io::Error| Some(format!("could not read {path}: {e}").into());
    let mut entries = tar::Archive::new(archive.as_slice());
    let mut first = entries
        .entries()
        .map_err(unreadable)?
        .next()
        .ok_or(None)?
        .map_err(unreadable)?;
    let mut bytes = Vec::new();
    first.read_to_end(&mut bytes).map_err(unreadable)?;
    Ok(bytes)
}

/// How long a dump or a restore may take.
const BACKUP_TIMEOUT: Duration = Duration::from_secs(3600);

impl DockerEngine {
    /// The file a backup is kept in: a plain name, never a path.
    fn backup_path(&self, file: &str) -> Result<PathBuf, EngineError> {
        if file.is_empty() || file.contains(['/', '\\']) || file.starts_with('.') {
            return Err(format!("'{file}' is not a backup's name").into());
        }
        Ok(self.settings.backup_dir.join(file))
    }

    /// The database's running container, the daemon that reaches it (on a Swarm, its node's)
    /// and its recipe.
    async fn running_database(
        &self,
        database: &Service,
        inputs: &WorkloadInputs,
    ) -> Result<(&bollard::Docker, String, Recipe), EngineError> {
        let (spec, connection, password) = db_recipe::database_of(database, inputs)?;
        let recipe = db_recipe::recipe(spec.db_type, &connection, &password);
        if self.settings.swarm {
            let (docker, id) = self
                .running_task_container(database.id)
                .await
                .map_err(|why| format!("the database cannot be reached: {why}"))?;
            return Ok((docker, id, recipe));
        }
        let running = self
            .owned(database.id, Some("service"))
            .await?
            .into_iter()
            .find(|c| {
                c.state == Some(bollard::models::ContainerSummaryStateEnum::RUNNING)
                    || c.state.is_none()
            })
            .and_then(|c| c.id)
            .ok_or("the database does not run: deploy it first")?;
        Ok((&self.docker, running, recipe))
    }

    async fn dump(
        docker: &bollard::Docker,
        id: &str,
        recipe: &Recipe,
    ) -> Result<Vec<u8>, EngineError> {
        let ran = exec::run(
            docker,
            id,
            &recipe.dump,
            &recipe.exec_env,
            None,
            BACKUP_TIMEOUT,
        )
        .await?;
        let tool = recipe.dump.first().map_or("the dump", String::as_str);
        if !ran.succeeded() {
            return Err(
                format!("{tool} exited with code {}: {}", ran.code, ran.complaint()).into(),
            );
        }
        let Some(inside) = recipe.dump_file else {
            return Ok(ran.stdout);
        };
        file_of(docker, id, inside)
            .await
            .map_err(|why| why.unwrap_or_else(|| format!("the dump wrote no {inside}").into()))
    }

    pub(crate) async fn take_backup(
        &self,
        database: &Service,
        inputs: &WorkloadInputs,
        file: &str,
    ) -> Result<i64, EngineError> {
        let path = self.backup_path(file)?;
        let (docker, id, recipe) = self.running_database(database, inputs).await?;
        let bytes = Self::dump(docker, &id, &recipe).await?;
        std::fs::create_dir_all(&self.settings.backup_dir)
            .map_err(|e| format!("could not make the backup directory: {e}"))?;
        let partial = path.with_extension("partial");
        {
            use std::io::Write;
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create(true).truncate(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            let mut out = options
                .open(&partial)
                .map_err(|e| format!("could not write the backup: {e}"))?;
            out.write_all(&bytes)
                .and_then(|()| out.sync_all())
                .map_err(|e| format!("could not write the backup: {e}"))?;
        }
        std::fs::rename(&partial, &path).map_err(|e| format!("could not keep the backup: {e}"))?;
        Ok(i64::try_from(bytes.len()).unwrap_or(i64::MAX))
    }

    pub(crate) async fn load_backup(
        &self,
        database: &Service,
        inputs: &WorkloadInputs,
        file: &str,
    ) -> Result<(), EngineError> {
        let path = self.backup_path(file)?;
        let (docker, id, recipe) = self.running_database(database, inputs).await?;
        let bytes = std::fs::read(&path).map_err(|e| format!("could not read the backup: {e}"))?;
        for step in &recipe.restore {
            let ran = exec::run(
                docker,
                &id,
                &step.cmd,
                &recipe.exec_env,
                step.takes_dump.then(|| bytes.clone()),
                BACKUP_TIMEOUT,
            )
            .await?;
            if !ran.succeeded() {
                return Err(format!(
                    "{} exited with code {}: {}",
                    step.cmd.first().map_or("the restore", String::as_str),
                    ran.code,
                    ran.complaint()
                )
                .into());
            }
        }
        Ok(())
    }

    /// The dumps in the backup directory.
    pub(crate) fn dumps(&self) -> Result<Vec<BackupId>, EngineError> {
        let entries = match std::fs::read_dir(&self.settings.backup_dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(format!("could not read the backup directory: {e}").into()),
        };
        Ok(entries
            .filter_map(Result::ok)
            .filter_map(|e| dump_of(&e.file_name().to_string_lossy()))
            .collect())
    }

    pub(crate) fn drop_backup(&self, file: &str) -> Result<(), EngineError> {
        match std::fs::remove_file(self.backup_path(file)?) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(format!("could not remove the backup: {e}").into()),
        }
    }
}
