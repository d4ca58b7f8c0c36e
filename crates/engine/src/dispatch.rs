//! The engines' dispatcher: the one engine the worker drives, over the adapters the server
//! registers by target kind. What names a target goes to the adapter of its kind; what is
//! asked of every place at once (listings for reconciliation, removals, the streams of what
//! runs) goes to every adapter, and their answers are put together here.

use async_trait::async_trait;
use domain::engine::{
    Cut, DatabaseBackups, Engine, EngineError, HostReach, ImageChecks, Kept, ReplicaSet, StepWork,
    Target, TargetKind, TerraformStates,
};
use domain::ids::{BackupId, DeploymentRequestId, EnvironmentId, OrganizationId, ServiceId};
use domain::model::{Cluster, ClusterAction, OutputLine, RunningState, Service};
use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

#[derive(Default)]
pub struct Engines {
    /// Each kind's adapter; one adapter may serve several kinds.
    by_kind: Vec<(TargetKind, Arc<dyn Engine>)>,
}

impl Engines {
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs the targets of `kind` on `adapter` (a kind registered again takes the new one).
    pub fn register(mut self, kind: TargetKind, adapter: Arc<dyn Engine>) -> Self {
        self.by_kind.retain(|(k, _)| *k != kind);
        self.by_kind.push((kind, adapter));
        self
    }

    /// Runs every kind of target on `adapter` (the simulated engine).
    pub fn every_kind(adapter: Arc<dyn Engine>) -> Self {
        TargetKind::ALL.iter().fold(Self::new(), |engines, kind| {
            engines.register(*kind, adapter.clone())
        })
    }

    fn of(&self, target: &Target) -> Result<&dyn Engine, EngineError> {
        let kind = target.kind();
        self.by_kind
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, adapter)| adapter.as_ref())
            .ok_or_else(|| {
                EngineError::terminal(format!(
                    "no engine of this installation runs {} clusters",
                    kind.as_str()
                ))
            })
    }

    /// Every adapter once, in the order registered.
    fn adapters(&self) -> Vec<&dyn Engine> {
        let mut seen: Vec<&Arc<dyn Engine>> = Vec::new();
        for (_, adapter) in &self.by_kind {
            if !seen.iter().any(|s| Arc::ptr_eq(s, adapter)) {
                seen.push(adapter);
            }
        }
        seen.into_iter().map(Arc::as_ref).collect()
    }

    /// `call` of every adapter at once, their answers in the order registered.
    async fn each<'a, T, F>(&'a self, call: impl Fn(&'a dyn Engine) -> F) -> Vec<T>
    where
        F: Future<Output = T> + 'a,
    {
        futures_util::future::join_all(self.adapters().into_iter().map(call)).await
    }

    /// What every adapter lists, sorted, once each; the first failure fails it all.
    async fn listed<'a, T: Ord, F>(
        &'a self,
        list: impl Fn(&'a dyn Engine) -> F,
    ) -> Result<Vec<T>, EngineError>
    where
        F: Future<Output = Result<Vec<T>, EngineError>> + 'a,
    {
        let mut all = Vec::new();
        for found in self.each(list).await {
            all.extend(found?);
        }
        all.sort();
        all.dedup();
        Ok(all)
    }

    /// Every adapter's stream as one, ending when any ends (the caller asks again).
    fn merged<T: Send + 'static>(
        &self,
        of: impl Fn(&dyn Engine) -> Option<BoxStream<'static, T>>,
    ) -> Option<BoxStream<'static, T>> {
        let mut streams: Vec<BoxStream<'static, T>> =
            self.adapters().into_iter().filter_map(of).collect();
        if streams.len() <= 1 {
            return streams.pop();
        }
        let ending: Vec<BoxStream<'static, Option<T>>> = streams
            .into_iter()
            .map(|s| {
                s.map(Some)
                    .chain(futures_util::stream::once(async { None }))
                    .boxed()
            })
            .collect();
        Some(
            futures_util::stream::select_all(ending)
                .take_while(|item| futures_util::future::ready(item.is_some()))
                .filter_map(futures_util::future::ready)
                .boxed(),
        )
    }
}

#[async_trait]
impl Engine for Engines {
    fn name(&self, target: &Target) -> &'static str {
        self.of(target)
            .map_or("no engine of this installation", |adapter| {
                adapter.name(target)
            })
    }

    fn image_checks(&self, target: &Target) -> Option<&dyn ImageChecks> {
        self.of(target).ok()?.image_checks(target)
    }

    fn database_backups(&self, target: &Target) -> Option<&dyn DatabaseBackups> {
        self.of(target).ok()?.database_backups(target)
    }

    fn terraform_states(&self, target: &Target) -> Option<&dyn TerraformStates> {
        self.of(target).ok()?.terraform_states(target)
    }

    fn host_reach(&self, target: &Target) -> Option<&dyn HostReach> {
        self.of(target).ok()?.host_reach(target)
    }

    async fn run_step(&self, work: StepWork<'_>) -> Result<(), EngineError> {
        self.of(work.target)?.run_step(work).await
    }

    async fn run_cluster(
        &self,
        action: ClusterAction,
        cluster: &Cluster,
        target: &Target,
        environments: &[EnvironmentId],
    ) -> Result<(), EngineError> {
        self.of(target)?
            .run_cluster(action, cluster, target, environments)
            .await
    }

    /// Each adapter is told the targets of its kinds.
    async fn watch_targets(&self, targets: Vec<Target>) {
        let told = self.adapters().into_iter().map(|adapter| {
            let theirs: Vec<Target> = targets
                .iter()
                .filter(|t| self.of(t).is_ok_and(|a| std::ptr::addr_eq(a, adapter)))
                .cloned()
                .collect();
            adapter.watch_targets(theirs)
        });
        futures_util::future::join_all(told).await;
    }

    async fn pause(&self, wait: Duration) {
        match self.adapters().first() {
            Some(adapter) => adapter.pause(wait).await,
            None => tokio::time::sleep(wait).await,
        }
    }

    fn observe(&self) -> Option<BoxStream<'static, RunningState>> {
        self.merged(|adapter| adapter.observe())
    }

    fn output(&self) -> Option<BoxStream<'static, OutputLine>> {
        self.merged(|adapter| adapter.output())
    }

    async fn workloads(&self) -> Result<Vec<(OrganizationId, ServiceId)>, EngineError> {
        self.listed(|adapter| adapter.workloads()).await
    }

    async fn replica_sets(&self) -> Result<Vec<ReplicaSet>, EngineError> {
        self.listed(|adapter| adapter.replica_sets()).await
    }

    async fn clean_failed_jobs(&self, job: ServiceId) -> Result<Vec<String>, EngineError> {
        let mut removed = Vec::new();
        for found in self.each(|adapter| adapter.clean_failed_jobs(job)).await {
            removed.extend(found?);
        }
        Ok(removed)
    }

    async fn remove_backup(&self, file: &str) -> Result<(), EngineError> {
        self.each(|adapter| adapter.remove_backup(file))
            .await
            .into_iter()
            .collect()
    }

    async fn held_backups(&self) -> Result<Vec<BackupId>, EngineError> {
        self.listed(|adapter| adapter.held_backups()).await
    }

    async fn remove_workloads(&self, service: ServiceId) -> Result<(), EngineError> {
        self.each(|adapter| adapter.remove_workloads(service))
            .await
            .into_iter()
            .collect()
    }

    async fn settle_cut(
        &self,
        target: &Target,
        service: &Service,
        request: DeploymentRequestId,
        cut: Cut,
    ) -> Result<Kept, EngineError> {
        self.of(target)?
            .settle_cut(target, service, request, cut)
            .await
    }

    async fn report(&self, target: &Target, service: &Service) -> Option<RunningState> {
        self.of(target).ok()?.report(target, service).await
    }

    async fn environments(&self) -> Result<Vec<(OrganizationId, EnvironmentId)>, EngineError> {
        self.listed(|adapter| adapter.environments()).await
    }

    async fn remove_environment(&self, environment: EnvironmentId) -> Result<(), EngineError> {
        self.each(|adapter| adapter.remove_environment(environment))
            .await
            .into_iter()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use domain::ids::ClusterId;
    use domain::model::DockerHost;

    /// An adapter by its name, which lists one workload.
    struct Named(&'static str, OrganizationId, ServiceId);

    #[async_trait]
    impl Engine for Named {
        fn name(&self, _: &Target) -> &'static str {
            self.0
        }
        async fn run_step(&self, _: StepWork<'_>) -> Result<(), EngineError> {
            Ok(())
        }
        async fn run_cluster(
            &self,
            _: ClusterAction,
            _: &Cluster,
            _: &Target,
            _: &[EnvironmentId],
        ) -> Result<(), EngineError> {
            Ok(())
        }
        async fn pause(&self, _: Duration) {}
        async fn workloads(&self) -> Result<Vec<(OrganizationId, ServiceId)>, EngineError> {
            Ok(vec![(self.1, self.2)])
        }
    }

    fn docker_target() -> Target {
        Target::Docker(DockerHost::local(ClusterId::generate()))
    }

    fn named(name: &'static str) -> Arc<dyn Engine> {
        Arc::new(Named(
            name,
            OrganizationId::generate(),
            ServiceId::generate(),
        ))
    }

    #[tokio::test]
    async fn a_target_goes_to_the_adapter_of_its_kind() {
        let engines = Engines::new()
            .register(TargetKind::Docker, named("first"))
            .register(TargetKind::Docker, named("docker"));
        let named = engines.name(&docker_target());
        assert_eq!(
            named, "docker",
            "the kind registered again takes the new adapter"
        );
    }

    #[tokio::test]
    async fn a_target_no_adapter_runs_is_refused_naming_its_kind() {
        let none = Engines::new();
        let target = docker_target();
        let Err(why) = none.of(&target) else {
            panic!("an adapter for no kind registered")
        };
        assert!(!why.is_retriable());
        assert_eq!(
            why.reason(),
            "no engine of this installation runs Docker clusters"
        );
        assert_eq!(none.name(&target), "no engine of this installation");
        assert!(none.database_backups(&target).is_none());
        assert_eq!(none.workloads().await.unwrap(), []);
        assert!(none.observe().is_none());
    }

    #[tokio::test]
    async fn an_adapter_of_every_kind_is_asked_once() {
        let engines = Engines::every_kind(named("simulated"));
        assert_eq!(engines.workloads().await.unwrap().len(), 1);
        assert_eq!(engines.name(&docker_target()), "simulated");
    }
}
