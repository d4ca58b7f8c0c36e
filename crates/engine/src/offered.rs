//! The capabilities the dispatcher offers for a target whose adapter offers them: each call
//! goes to the target's place once it answers.

use crate::dispatch::Engines;
use async_trait::async_trait;
use domain::engine::{
    DatabaseBackups, EngineError, HostReach, ImageChecks, ReplicaUsage, Replicas, Shell,
    ShellRequest, Target, TerraformStates,
};
use domain::model::{
    ClusterHost, DaemonIdentity, RegistryAccess, Service, SwarmNode, WorkloadInputs,
};

#[async_trait]
impl ImageChecks for Engines {
    async fn image_available(
        &self,
        target: &Target,
        registry: &RegistryAccess,
        name: &str,
        tag: &str,
    ) -> Result<bool, EngineError> {
        let place = self.answering(target).await?;
        let checks = place
            .image_checks()
            .ok_or_else(|| self.lacks(target, "image checks"))?;
        checks.image_available(target, registry, name, tag).await
    }
}

#[async_trait]
impl DatabaseBackups for Engines {
    async fn backup_database(
        &self,
        target: &Target,
        database: &Service,
        inputs: &WorkloadInputs,
        file: &str,
    ) -> Result<i64, EngineError> {
        let place = self.answering(target).await?;
        let backups = place
            .database_backups()
            .ok_or_else(|| self.lacks(target, "database backups"))?;
        backups
            .backup_database(target, database, inputs, file)
            .await
    }

    async fn restore_database(
        &self,
        target: &Target,
        database: &Service,
        inputs: &WorkloadInputs,
        file: &str,
    ) -> Result<(), EngineError> {
        let place = self.answering(target).await?;
        let backups = place
            .database_backups()
            .ok_or_else(|| self.lacks(target, "database backups"))?;
        backups
            .restore_database(target, database, inputs, file)
            .await
    }
}

#[async_trait]
impl Replicas for Engines {
    async fn open_shell(
        &self,
        target: &Target,
        service: &Service,
        request: &ShellRequest,
    ) -> Result<Shell, EngineError> {
        let place = self.answering(target).await?;
        let replicas = place
            .replicas()
            .ok_or_else(|| self.lacks(target, "shells"))?;
        replicas.open_shell(target, service, request).await
    }

    async fn usage(
        &self,
        target: &Target,
        service: &Service,
    ) -> Result<Vec<ReplicaUsage>, EngineError> {
        let place = self.answering(target).await?;
        let replicas = place
            .replicas()
            .ok_or_else(|| self.lacks(target, "replica metrics"))?;
        replicas.usage(target, service).await
    }
}

#[async_trait]
impl TerraformStates for Engines {
    async fn terraform_state(
        &self,
        target: &Target,
        service: &Service,
    ) -> Result<Option<String>, EngineError> {
        let place = self.answering(target).await?;
        let states = place
            .terraform_states()
            .ok_or_else(|| self.lacks(target, "terraform states"))?;
        states.terraform_state(target, service).await
    }
}

#[async_trait]
impl HostReach for Engines {
    async fn reach(&self, target: &Target) -> Result<String, EngineError> {
        Ok(self.answering(target).await?.describe().await)
    }

    async fn identify(&self, target: &Target) -> Option<Result<DaemonIdentity, EngineError>> {
        match self.of(target) {
            Ok(adapter) => adapter.identify(target).await,
            Err(why) => Some(Err(why)),
        }
    }

    fn answered(&self, target: &Target) -> Option<bool> {
        self.places().answered(target)
    }

    async fn nodes(&self, target: &Target) -> Result<Vec<SwarmNode>, EngineError> {
        self.answering(target).await?.nodes().await
    }

    async fn hosts(&self, target: &Target) -> Result<Vec<ClusterHost>, EngineError> {
        self.answering(target).await?.hosts().await
    }
}
