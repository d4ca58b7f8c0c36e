//! The engines' dispatcher: the one engine the worker drives, over the adapters the server
//! registers by target kind. A call naming a target goes to the place it names (attached
//! through its kind's adapter when first needed, and pinged first where a call must be
//! answered); what is asked of every place at once (listings for reconciliation, removals,
//! the streams of what runs) is asked of every adapter's own place and every attached place
//! that answers, each within [`EACH_PLACE`], and their answers are put together here.

use crate::places::{answer_of, Asked, Places, Reached};
use async_trait::async_trait;
use domain::engine::{
    Adapter, Cut, DatabaseBackups, Engine, EngineError, HostReach, ImageChecks, Kept, Offers,
    ReplicaSet, Replicas, StepWork, Target, TargetKind, TerraformStates,
};
use domain::ids::{BackupId, DeploymentRequestId, EnvironmentId, OrganizationId, ServiceId};
use domain::model::{Cluster, ClusterAction, OutputLine, RunningState, Service};
use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// How long one place may take over its part of a call asked of every place (a listing, a
/// removal): one that stopped answering since it was last pinged holds up no other.
const EACH_PLACE: Duration = Duration::from_secs(30);

pub struct Engines {
    /// Each kind's adapter; one adapter may serve several kinds.
    by_kind: Vec<(TargetKind, Arc<dyn Adapter>)>,
    places: Arc<Places>,
    /// [`EACH_PLACE`], shorter in tests.
    each_place: Duration,
}

impl Default for Engines {
    fn default() -> Self {
        Self {
            by_kind: Vec::new(),
            places: Arc::default(),
            each_place: EACH_PLACE,
        }
    }
}

impl Engines {
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs the targets of `kind` on `adapter` (a kind registered again takes the new one).
    pub fn register(mut self, kind: TargetKind, adapter: Arc<dyn Adapter>) -> Self {
        self.by_kind.retain(|(k, _)| *k != kind);
        self.by_kind.push((kind, adapter));
        self
    }

    /// Runs every kind of target on `adapter` (the simulated engine).
    pub fn every_kind(adapter: Arc<dyn Adapter>) -> Self {
        TargetKind::ALL.iter().fold(Self::new(), |engines, kind| {
            engines.register(*kind, adapter.clone())
        })
    }

    pub(crate) fn places(&self) -> &Places {
        &self.places
    }

    pub(crate) fn of(&self, target: &Target) -> Result<&dyn Adapter, EngineError> {
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

    fn offers(&self, target: &Target) -> Offers {
        self.of(target).map(|a| a.offers()).unwrap_or_default()
    }

    /// Every adapter once, in the order registered.
    fn adapters(&self) -> Vec<&dyn Adapter> {
        let mut seen: Vec<&Arc<dyn Adapter>> = Vec::new();
        for (_, adapter) in &self.by_kind {
            if !seen.iter().any(|s| Arc::ptr_eq(s, adapter)) {
                seen.push(adapter);
            }
        }
        seen.into_iter().map(Arc::as_ref).collect()
    }

    /// The place `target` names: its adapter's own, or the one attached for it (attached now
    /// when it was not, or what reached it ended).
    async fn place_for(&self, target: &Target) -> Result<Reached<'_>, EngineError> {
        let adapter = self.of(target)?;
        if adapter.is_own(target) {
            return adapter
                .own()
                .map(|(_, place)| Reached::Own(place))
                .ok_or_else(|| {
                    EngineError::terminal(format!("{} has no place of its own", adapter.name()))
                });
        }
        if let Some(place) = self.places.kept(target) {
            return Ok(Reached::Named(place));
        }
        let place = adapter.attach(target).await?;
        Ok(Reached::Named(self.places.keep(target, place)))
    }

    /// The place of `target` if it answers now; why not, naming it, otherwise.
    pub(crate) async fn answering(&self, target: &Target) -> Result<Reached<'_>, EngineError> {
        let place = self.place_for(target).await?;
        answer_of(target, place.ping()).await?;
        Ok(place)
    }

    /// What is refused when the place of `target` lacks `what` its adapter offers.
    pub(crate) fn lacks(&self, target: &Target, what: &str) -> EngineError {
        EngineError::terminal(format!(
            "{} offers no {what} at {}",
            self.name(target),
            target.describe()
        ))
    }

    /// Every adapter's own place, then every attached place that answered when last pinged.
    fn every_place(&self) -> Vec<Asked<'_>> {
        let own = self.adapters().into_iter().filter_map(|adapter| {
            adapter.own().map(|(name, place)| Asked {
                name: name.to_string(),
                cluster: None,
                place: Reached::Own(place),
            })
        });
        own.chain(self.places.answering()).collect()
    }

    /// `call` of every place at once, each given [`EACH_PLACE`].
    async fn on_each<'a, T, F>(
        &'a self,
        call: impl Fn(Reached<'a>) -> F,
    ) -> Vec<Result<T, EngineError>>
    where
        F: Future<Output = Result<T, EngineError>> + 'a,
    {
        let limit = self.each_place;
        let calls = self.every_place().into_iter().map(|asked| {
            let Asked { name, place, .. } = asked;
            let work = call(place);
            async move {
                tokio::time::timeout(limit, work).await.unwrap_or_else(|_| {
                    Err(EngineError::transient(format!(
                        "{name} did not answer within {}s",
                        limit.as_secs_f32()
                    )))
                })
            }
        });
        futures_util::future::join_all(calls).await
    }

    /// What `list` finds at every place, sorted, once each; a place that cannot answer is
    /// logged (naming `what` it was asked for) and left out: what it holds is compared the
    /// next time.
    async fn gathered<'a, T: Ord, F>(
        &'a self,
        what: &str,
        list: impl Fn(Reached<'a>) -> F,
    ) -> Vec<T>
    where
        F: Future<Output = Result<Vec<T>, EngineError>> + 'a,
    {
        let mut all = Vec::new();
        for found in self.on_each(list).await {
            match found {
                Ok(found) => all.extend(found),
                Err(why) => tracing::warn!(error = %why, "could not list a place's {what}"),
            }
        }
        all.sort();
        all.dedup();
        all
    }

    /// Every place's stream (from `of`, told the cluster that names the place) as one, until
    /// the places that answer change or one stream ends (its place stopped answering): the
    /// caller then asks again.
    fn merged<T: Send + 'static>(
        &self,
        of: impl Fn(Option<domain::ids::ClusterId>, &Reached<'_>) -> Option<BoxStream<'static, T>>,
    ) -> Option<BoxStream<'static, T>> {
        let until_changed = self.places.next_change();
        let streams: Vec<BoxStream<'static, Option<T>>> = self
            .every_place()
            .iter()
            .filter_map(|asked| of(asked.cluster, &asked.place))
            .map(|s| {
                s.map(Some)
                    .chain(futures_util::stream::once(async { None }))
                    .boxed()
            })
            .collect();
        if streams.is_empty() {
            return None;
        }
        let merged = futures_util::stream::select_all(streams)
            .take_while(|item| futures_util::future::ready(item.is_some()))
            .filter_map(futures_util::future::ready)
            .take_until(until_changed);
        Some(merged.boxed())
    }
}

#[async_trait]
impl Engine for Engines {
    fn name(&self, target: &Target) -> &'static str {
        self.of(target)
            .map_or("no engine of this installation", |adapter| adapter.name())
    }

    fn image_checks(&self, target: &Target) -> Option<&dyn ImageChecks> {
        self.offers(target).image_checks.then_some(self)
    }

    fn database_backups(&self, target: &Target) -> Option<&dyn DatabaseBackups> {
        self.offers(target).database_backups.then_some(self)
    }

    fn terraform_states(&self, target: &Target) -> Option<&dyn TerraformStates> {
        self.offers(target).terraform_states.then_some(self)
    }

    fn host_reach(&self, target: &Target) -> Option<&dyn HostReach> {
        self.offers(target).host_reach.then_some(self)
    }

    fn replicas(&self, target: &Target) -> Option<&dyn Replicas> {
        self.offers(target).replicas.then_some(self)
    }

    async fn run_step(&self, work: StepWork<'_>) -> Result<(), EngineError> {
        let place = self.answering(work.target).await?;
        place.run_step(work).await
    }

    /// Deploying reaches the place, checks who answers there and readies it for the
    /// cluster's environments.
    async fn run_cluster(
        &self,
        action: ClusterAction,
        cluster: &Cluster,
        target: &Target,
        environments: &[EnvironmentId],
    ) -> Result<(), EngineError> {
        let place = self.answering(target).await?;
        place
            .run_cluster(action, cluster, target, environments)
            .await
    }

    /// Places no cluster names any more are forgotten; those named are attached (one whose
    /// reach ended, attached again), and the streams told.
    async fn watch_targets(&self, targets: Vec<Target>) {
        let forgot = self.places.forget_all_but(&targets);
        let named = targets
            .iter()
            .filter(|t| self.of(t).is_ok_and(|adapter| !adapter.is_own(t)));
        for target in named {
            if let Err(why) = self.place_for(target).await {
                tracing::warn!(cluster = %target.cluster_id(), error = %why, "a cluster's place does not answer");
            }
        }
        if forgot {
            self.places.tell_changed();
        }
    }

    async fn pause(&self, wait: Duration) {
        tokio::time::sleep(wait).await;
    }

    /// Each report names the cluster whose place made it (none: an adapter's own), for the
    /// domain to keep only those of that cluster's own services.
    fn observe(&self) -> Option<BoxStream<'static, RunningState>> {
        self.merged(|cluster, place| {
            let reports = place.observe()?;
            Some(
                reports
                    .map(move |mut report| {
                        report.reported_by = cluster;
                        report
                    })
                    .boxed(),
            )
        })
    }

    fn output(&self) -> Option<BoxStream<'static, OutputLine>> {
        self.merged(|_, place| place.output())
    }

    async fn workloads(&self) -> Result<Vec<(OrganizationId, ServiceId)>, EngineError> {
        Ok(self
            .gathered("workloads", |p| async move { p.workloads().await })
            .await)
    }

    async fn replica_sets(&self) -> Result<Vec<ReplicaSet>, EngineError> {
        Ok(self
            .gathered("replicas", |p| async move { p.replica_sets().await })
            .await)
    }

    async fn environments(&self) -> Result<Vec<(OrganizationId, EnvironmentId)>, EngineError> {
        Ok(self
            .gathered("environments", |p| async move { p.environments().await })
            .await)
    }

    async fn clean_failed_jobs(&self, job: ServiceId) -> Result<Vec<String>, EngineError> {
        let mut removed = Vec::new();
        for found in self
            .on_each(|p| async move { p.clean_failed_jobs(job).await })
            .await
        {
            removed.extend(found?);
        }
        Ok(removed)
    }

    async fn remove_workloads(&self, service: ServiceId) -> Result<(), EngineError> {
        self.on_each(|p| async move { p.remove_workloads(service).await })
            .await
            .into_iter()
            .collect()
    }

    async fn remove_environment(&self, environment: EnvironmentId) -> Result<(), EngineError> {
        self.on_each(|p| async move { p.remove_environment(environment).await })
            .await
            .into_iter()
            .collect()
    }

    async fn remove_backup(&self, file: &str) -> Result<(), EngineError> {
        let removals = self.adapters().into_iter().map(|a| a.remove_backup(file));
        futures_util::future::join_all(removals)
            .await
            .into_iter()
            .collect()
    }

    async fn held_backups(&self) -> Result<Vec<BackupId>, EngineError> {
        let mut all = Vec::new();
        for adapter in self.adapters() {
            all.extend(adapter.held_backups().await?);
        }
        all.sort();
        all.dedup();
        Ok(all)
    }

    async fn settle_cut(
        &self,
        target: &Target,
        service: &Service,
        request: DeploymentRequestId,
        cut: Cut,
    ) -> Result<Kept, EngineError> {
        self.place_for(target)
            .await?
            .settle_cut(target, service, request, cut)
            .await
    }

    async fn report(&self, target: &Target, service: &Service) -> Option<RunningState> {
        let own = self.of(target).ok()?.is_own(target);
        let place = self.place_for(target).await.ok()?;
        let mut report = place.report(service).await?;
        report.reported_by = (!own).then_some(target.cluster_id());
        Some(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use domain::engine::Place;
    use domain::ids::ClusterId;
    use domain::model::{DockerEndpoint, DockerHost, RunState};
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Mutex;

    /// A place that lists one workload and reports one state (a listing it never answers when
    /// `stuck`), and answers pings while `answers`.
    struct Spot {
        workload: (OrganizationId, ServiceId),
        answers: AtomicBool,
        stuck: bool,
    }

    impl Spot {
        fn new(stuck: bool) -> Arc<Self> {
            Arc::new(Self {
                workload: (OrganizationId::generate(), ServiceId::generate()),
                answers: AtomicBool::new(true),
                stuck,
            })
        }
    }

    #[async_trait]
    impl Place for Spot {
        async fn ping(&self) -> Result<(), EngineError> {
            match self.answers.load(Ordering::SeqCst) {
                true => Ok(()),
                false => Err(EngineError::transient("connection refused")),
            }
        }
        async fn describe(&self) -> String {
            "a test's place".to_string()
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
        fn observe(&self) -> Option<BoxStream<'static, RunningState>> {
            let state = RunningState {
                service_id: self.workload.1,
                environment_id: EnvironmentId::generate(),
                state: RunState::Running,
                replicas: Vec::new(),
                endpoints: Vec::new(),
                observed_at: time::OffsetDateTime::now_utc(),
                reported_by: None,
            };
            let endless =
                futures_util::stream::once(async { state }).chain(futures_util::stream::pending());
            Some(endless.boxed())
        }
        async fn workloads(&self) -> Result<Vec<(OrganizationId, ServiceId)>, EngineError> {
            if self.stuck {
                futures_util::future::pending::<()>().await;
            }
            Ok(vec![self.workload])
        }
        async fn remove_workloads(&self, _: ServiceId) -> Result<(), EngineError> {
            if self.stuck {
                futures_util::future::pending::<()>().await;
            }
            Ok(())
        }
    }

    /// An adapter by its name: a place of its own, and one more for each target it attaches.
    struct Fake {
        name: &'static str,
        own: Arc<Spot>,
        attached: Mutex<Vec<Arc<Spot>>>,
        attaches: AtomicUsize,
    }

    fn fake(name: &'static str, stuck: bool) -> Arc<Fake> {
        Arc::new(Fake {
            name,
            own: Spot::new(stuck),
            attached: Mutex::default(),
            attaches: AtomicUsize::new(0),
        })
    }

    #[async_trait]
    impl Adapter for Fake {
        fn name(&self) -> &'static str {
            self.name
        }
        fn offers(&self) -> Offers {
            Offers::default()
        }
        fn own(&self) -> Option<(&'static str, &dyn Place)> {
            Some(("the fake's own place", self.own.as_ref()))
        }
        fn is_own(&self, target: &Target) -> bool {
            let Target::Docker(host) = target;
            host.endpoint == DockerEndpoint::Local
        }
        async fn attach(&self, _: &Target) -> Result<Arc<dyn Place>, EngineError> {
            self.attaches.fetch_add(1, Ordering::SeqCst);
            let spot = Spot::new(false);
            self.attached.lock().unwrap().push(spot.clone());
            Ok(spot)
        }
    }

    fn docker_target() -> Target {
        Target::Docker(DockerHost::local(ClusterId::generate()))
    }

    fn remote_target() -> Target {
        Target::Docker(DockerHost {
            endpoint: DockerEndpoint::Tcp {
                address: "10.0.0.5:2376".to_string(),
            },
            ..DockerHost::local(ClusterId::generate())
        })
    }

    #[tokio::test]
    async fn a_target_goes_to_the_adapter_of_its_kind() {
        let engines = Engines::new()
            .register(TargetKind::Docker, fake("first", false))
            .register(TargetKind::Docker, fake("docker", false));
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
        let engines = Engines::every_kind(fake("simulated", false));
        assert_eq!(engines.workloads().await.unwrap().len(), 1);
        assert_eq!(engines.name(&docker_target()), "simulated");
    }

    /// A place a cluster names is attached once, asked with the adapter's own in what is asked
    /// of every place (its reports naming its cluster), and forgotten once no cluster names it.
    #[tokio::test]
    async fn a_named_place_is_attached_once_asked_with_the_rest_and_forgotten() {
        let adapter = fake("docker", false);
        let engines = Engines::new().register(TargetKind::Docker, adapter.clone());
        let target = remote_target();
        engines.watch_targets(vec![target.clone()]).await;
        engines.watch_targets(vec![target.clone()]).await;
        assert_eq!(adapter.attaches.load(Ordering::SeqCst), 1, "attached once");
        assert_eq!(engines.places().answered(&target), Some(true));
        assert_eq!(engines.workloads().await.unwrap().len(), 2);

        let mut reported: Vec<Option<ClusterId>> = engines
            .observe()
            .unwrap()
            .take(2)
            .map(|report| report.reported_by)
            .collect()
            .await;
        reported.sort();
        assert_eq!(reported, [None, Some(target.cluster_id())]);

        engines.watch_targets(Vec::new()).await;
        assert_eq!(engines.places().answered(&target), None, "forgotten");
        assert_eq!(engines.workloads().await.unwrap().len(), 1);
    }

    #[tokio::test]
    async fn a_place_that_does_not_answer_is_refused_naming_its_target() {
        let adapter = fake("docker", false);
        let engines = Engines::new().register(TargetKind::Docker, adapter.clone());
        let target = remote_target();
        engines.watch_targets(vec![target.clone()]).await;
        let attached = adapter.attached.lock().unwrap()[0].clone();
        attached.answers.store(false, Ordering::SeqCst);
        let Err(why) = engines.reach(&target).await else {
            panic!("a place that does not answer was reached")
        };
        assert!(why.is_retriable(), "{why:?}");
        assert_eq!(
            why.reason(),
            "the Docker host tcp://10.0.0.5:2376 does not answer: connection refused"
        );
        attached.answers.store(true, Ordering::SeqCst);
        assert_eq!(engines.reach(&target).await.unwrap(), "a test's place");
    }

    #[tokio::test]
    async fn a_place_that_stops_answering_mid_call_holds_up_nothing() {
        let mut engines = Engines::new().register(TargetKind::Docker, fake("docker", true));
        engines.each_place = Duration::from_millis(200);
        let removal = engines.remove_workloads(ServiceId::generate()).await;
        assert_eq!(
            removal,
            Err(EngineError::transient(
                "the fake's own place did not answer within 0.2s"
            ))
        );
        assert_eq!(
            engines.workloads().await,
            Ok(Vec::new()),
            "a place that cannot be listed now is left out of the listing"
        );
    }
}
