//! What runs: engines' reports of their workloads kept for every instance to read, and the
//! links where a service's public ports answer.

use super::Capstan;
use crate::auth::{Action, Principal};
use crate::error::DomainResult;
use crate::ids::*;
use crate::model::*;
use crate::pagination::{PageRequest, MAX_PAGE_SIZE};
use crate::ports::Repo;
use std::collections::HashSet;

/// Where one public port of a service answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicLink {
    pub service_id: ServiceId,
    pub kind: ServiceKind,
    pub url: String,
    pub internal_port: i64,
    pub external_port: i64,
    pub is_default: bool,
    /// A name Capstan gives (under the router's domain), not a custom domain of the user's.
    pub generated: bool,
}

/// The links of a service's publicly accessible ports: the router's names for them when a
/// router serves them, else the ports its engine published.
fn links_of(
    service: &Service,
    seen: Option<&RunningState>,
    router: Option<&RouterAddress>,
) -> Vec<PublicLink> {
    let Some(seen) = seen else {
        return Vec::new();
    };
    service
        .spec
        .ports()
        .iter()
        .filter(|p| p.publicly_accessible)
        .filter_map(|p| {
            let e = seen
                .endpoints
                .iter()
                .find(|e| i64::from(e.internal_port) == p.internal_port)?;
            let (url, external_port) = match router {
                Some(router) => (
                    router.url_of(&router.host_of(service.id, p.internal_port)),
                    i64::from(router.port),
                ),
                None => (format!("http://{}:{}", e.host, e.port), i64::from(e.port)),
            };
            Some(PublicLink {
                service_id: service.id,
                kind: service.kind(),
                url,
                internal_port: p.internal_port,
                external_port,
                is_default: p.is_default,
                generated: true,
            })
        })
        .collect()
}

impl Capstan {
    /// Keeps what an engine saw run of a service (its observer's report); a report of a
    /// service deleted meanwhile is dropped.
    /// A report from a host other than its service's cluster's (any host may carry labels
    /// naming any service: a daemon an organization points a cluster at is its own) is
    /// dropped, and said so.
    pub async fn record_running(&self, state: &RunningState) -> DomainResult<()> {
        self.in_unit(&[], async |tx| {
            let Some(service) = Repo::<Service>::get(tx, state.service_id).await? else {
                return Ok(());
            };
            let Some(env) = Repo::<Environment>::get(tx, service.environment_id).await? else {
                return Ok(());
            };
            let cluster = Repo::<Cluster>::get(tx, env.cluster_id).await?;
            let runs_on = cluster.filter(|c| c.spec.docker.is_some()).map(|c| c.id);
            if runs_on != state.reported_by || env.id != state.environment_id {
                tracing::warn!(
                    service = %state.service_id,
                    reported_by = ?state.reported_by,
                    "dropped a report of a service from a Docker host not its cluster's"
                );
                return Ok(());
            }
            let before = tx.running_states(&[state.service_id]).await?.pop();
            let mut state = state.clone();
            state.carry_history(before.as_ref());
            Ok(tx.put_running_state(&state).await?)
        })
        .await
    }

    /// What its engine last saw run of a service; none before it was seen.
    pub async fn running_state(
        &self,
        p: &Principal,
        kind: ServiceKind,
        id: ServiceId,
    ) -> DomainResult<Option<RunningState>> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        self.load_service(tx, p, kind, id, Action::Read).await?;
        Ok(tx.running_states(&[id]).await?.pop())
    }

    /// `GET /{application,container,helm}/{id}/link`.
    pub async fn service_links(
        &self,
        p: &Principal,
        kind: ServiceKind,
        id: ServiceId,
    ) -> DomainResult<Vec<PublicLink>> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        let service = self.load_service(tx, p, kind, id, Action::Read).await?;
        let seen = tx.running_states(&[id]).await?;
        let domains = tx.custom_domains_of(&[id]).await?;
        drop(unit);
        let links = links_of(&service, seen.first(), self.router.as_ref());
        Ok(self.with_custom_domains(links, &domains).await)
    }

    /// `links` and, after them, a link for each custom domain whose DNS check passes, of a
    /// service whose generated link it has: the router answers the domain at the service's
    /// default public port (a wildcard names no one address, and gets none).
    async fn with_custom_domains(
        &self,
        mut links: Vec<PublicLink>,
        domains: &[CustomDomain],
    ) -> Vec<PublicLink> {
        let Some(router) = &self.router else {
            return links;
        };
        let candidates: Vec<(&CustomDomain, PublicLink)> = domains
            .iter()
            .filter(|d| !d.domain.starts_with("*.") && !is_within(&d.domain, &router.domain))
            .filter_map(|d| {
                let own: Vec<&PublicLink> = links
                    .iter()
                    .filter(|l| l.service_id == d.service_id)
                    .collect();
                let port = own.iter().find(|l| l.is_default).or(own.first())?;
                Some((d, (*port).clone()))
            })
            .collect();
        // At once, as the route table's: one slow resolver answer holds up no other.
        let verdicts = futures_util::future::join_all(
            candidates.iter().map(|(d, _)| self.domain_points_here(d)),
        )
        .await;
        links.extend(
            candidates
                .into_iter()
                .zip(verdicts)
                .filter(|(_, passed)| *passed)
                .map(|((d, port), _)| PublicLink {
                    url: router.url_of(&d.domain),
                    generated: false,
                    ..port
                }),
        );
        links
    }

    /// `GET /environment/{id}/link`: every service's links.
    pub async fn environment_links(
        &self,
        p: &Principal,
        environment: EnvironmentId,
    ) -> DomainResult<Vec<PublicLink>> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        self.load::<Environment>(tx, p, environment, Action::Read)
            .await?;
        let mut services = Vec::new();
        for number in 1.. {
            let page = PageRequest::new(number, MAX_PAGE_SIZE)?;
            let found = Repo::<Service>::list(tx, environment, page).await?.items;
            let last = found.len() < MAX_PAGE_SIZE as usize;
            services.extend(found);
            if last {
                break;
            }
        }
        let ids: Vec<ServiceId> = services.iter().map(|s| s.id).collect();
        let seen = tx.running_states(&ids).await?;
        let domains = tx.custom_domains_of(&ids).await?;
        drop(unit);
        let links = services
            .iter()
            .flat_map(|s| {
                let seen = seen.iter().find(|r| r.service_id == s.id);
                links_of(s, seen, self.router.as_ref())
            })
            .collect();
        Ok(self.with_custom_domains(links, &domains).await)
    }

    /// What the router serves: the public ports of every service an engine has seen, at their
    /// names, with the replicas answering them (none for a service stopped), and the custom
    /// domains of those services whose DNS check passes. Empty without a router.
    pub async fn route_table(&self) -> DomainResult<RouteTable> {
        let Some(router) = &self.router else {
            return Ok(RouteTable::default());
        };
        let (pairs, domains, claimed) = {
            let mut unit = self.reading().await?;
            let tx = &mut *unit;
            let seen = tx.all_running_states().await?;
            let ids: Vec<ServiceId> = seen.iter().map(|s| s.service_id).collect();
            let services = self.by_id::<Service>(tx, ids.iter().copied()).await?;
            let domains = tx.custom_domains_of(&ids).await?;
            let claimed = tx.custom_domain_names().await?;
            let pairs: Vec<(Service, Option<RunningState>)> = seen
                .into_iter()
                .filter_map(|s| Some((services.get(&s.service_id)?.clone(), Some(s))))
                .collect();
            (pairs, domains, claimed)
        };
        // At once: one slow resolver answer must not hold up every route's refresh.
        let verdicts =
            futures_util::future::join_all(domains.iter().map(|d| self.domain_points_here(d)))
                .await;
        let routed: Vec<CustomDomain> = domains
            .into_iter()
            .zip(verdicts)
            .filter_map(|(d, passed)| passed.then_some(d))
            .collect();
        self.observer.routes_read();
        Ok(RouteTable::of(router, &pairs, &routed, &claimed))
    }

    /// Whether a custom domain's DNS check passes, from the last check while it is fresh: a
    /// passing one is trusted for [`CHECK_KEPT_PASSING`], a failing one asked again after
    /// [`CHECK_KEPT_FAILING`] (the router asks every second).
    async fn domain_points_here(&self, d: &CustomDomain) -> bool {
        let now = self.now();
        let key = (d.domain.clone(), d.use_cdn);
        let last = self
            .domain_checks
            .lock()
            .ok()
            .and_then(|held| held.get(&key).copied());
        if let Some((passed, at)) = last {
            let kept = if passed {
                CHECK_KEPT_PASSING
            } else {
                CHECK_KEPT_FAILING
            };
            if now - at < kept {
                return passed;
            }
        }
        let passed = self.check_dns(d).await.state == DnsState::PointsAtTarget;
        if let Ok(mut held) = self.domain_checks.lock() {
            held.insert(key, (passed, now));
        }
        passed
    }
}

/// How long a custom domain's passing DNS check routes it before it is checked again.
const CHECK_KEPT_PASSING: time::Duration = time::Duration::minutes(5);
/// How long a failing one waits before it is checked again.
const CHECK_KEPT_FAILING: time::Duration = time::Duration::seconds(10);

impl Capstan {
    /// Tells the engine which hosts the clusters name, then compares what the engine runs
    /// with what exists: workloads (containers, volumes, built images) of services that are
    /// gone (deleted while Capstan was down, or left by a deletion cut short) are removed, then
    /// the networks of environments that are gone, then the dumps of backups that are gone.
    /// Only workloads of this installation's organizations are considered: another Capstan may
    /// use the same Docker host. Returns how many services' workloads went.
    pub async fn reconcile(&self, engine: &dyn crate::engine::Engine) -> DomainResult<usize> {
        engine.watch_targets(self.named_targets().await?).await;
        let found = engine
            .workloads()
            .await
            .map_err(|e| crate::error::DomainError::Internal(e.to_string()))?;
        let gone = self.gone::<Service>(found).await?;
        for service in &gone {
            engine
                .remove_workloads(*service)
                .await
                .map_err(|e| crate::error::DomainError::Internal(e.to_string()))?;
        }
        self.retire_stale_sets(engine).await?;
        // Networks: Docker's address pools hold a few dozen.
        let found = engine
            .environments()
            .await
            .map_err(|e| crate::error::DomainError::Internal(e.to_string()))?;
        for environment in self.gone::<Environment>(found).await? {
            engine
                .remove_environment(environment)
                .await
                .map_err(|e| crate::error::DomainError::Internal(e.to_string()))?;
        }
        let dumps = self.collect_backups(engine).await?;
        if dumps > 0 {
            tracing::info!(
                count = dumps,
                "removed the backups of databases that no longer exist"
            );
        }
        Ok(gone.len())
    }

    /// Removes each existing service's replicas that a request other than its live one started
    /// (the live one: its newest deployment that succeeded), unless a deployment of it is
    /// under way: what an instance that died left and could not settle. Only services with
    /// replicas of more than one request are read (an idle installation's are one set each,
    /// and cost no transaction a minute); one none of whose recent deployments succeeded is
    /// left as it is.
    async fn retire_stale_sets(&self, engine: &dyn crate::engine::Engine) -> DomainResult<()> {
        /// How many of a service's newest deployments are read to find its live one.
        const HISTORY: i64 = 50;
        let sets = engine
            .replica_sets()
            .await
            .map_err(|e| crate::error::DomainError::Internal(e.to_string()))?;
        let mut by_service: std::collections::BTreeMap<ServiceId, Vec<DeploymentRequestId>> =
            std::collections::BTreeMap::new();
        for set in sets {
            by_service.entry(set.service).or_default().push(set.request);
        }
        for (id, requests) in by_service.into_iter().filter(|(_, r)| r.len() > 1) {
            let read = async {
                let mut unit = self.reading().await?;
                let tx = &mut *unit;
                let Some(service) = Repo::<Service>::get(tx, id).await? else {
                    return Ok(None);
                };
                let host = self
                    .target_of_environment(tx, service.environment_id)
                    .await?;
                let deploys = [DeploymentAction::Deploy, DeploymentAction::Redeploy];
                let history = tx
                    .service_requests(id, Some(&deploys), None, HISTORY)
                    .await?;
                DomainResult::Ok(Some((service, host, history)))
            };
            let Some((service, host, history)) = read.await? else {
                continue;
            };
            if history.iter().any(|r| !r.status.is_finished()) {
                continue;
            }
            let Some(live) = history
                .iter()
                .find(|r| r.status == RequestStatus::Success)
                .map(|r| r.id)
            else {
                continue;
            };
            for stale in requests.into_iter().filter(|r| *r != live) {
                let settled = engine
                    .settle_cut(&host, &service, stale, crate::engine::Cut::BeforeSwitch)
                    .await;
                match settled {
                    Ok(_) => {
                        tracing::info!(service = %id, request = %stale, "removed replicas no live deployment started")
                    }
                    Err(why) => {
                        tracing::warn!(service = %id, request = %stale, error = %why, "could not remove replicas no live deployment started")
                    }
                }
            }
        }
        Ok(())
    }

    /// Of the records an engine found things of (by the organization and id its marks name),
    /// those of this installation's organizations that no longer exist.
    async fn gone<T: Record>(&self, found: Vec<(OrganizationId, T::Id)>) -> DomainResult<Vec<T::Id>>
    where
        dyn crate::ports::Tx: Repo<T>,
    {
        if found.is_empty() {
            return Ok(Vec::new());
        }
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        let ours: HashSet<OrganizationId> = self
            .by_id::<Organization>(tx, found.iter().map(|(o, _)| *o))
            .await?
            .into_keys()
            .collect();
        let candidates: Vec<T::Id> = found
            .into_iter()
            .filter(|(o, _)| ours.contains(o))
            .map(|(_, id)| id)
            .collect();
        let existing: HashSet<T::Id> = self
            .by_id::<T>(tx, candidates.iter().copied())
            .await?
            .into_keys()
            .collect();
        Ok(candidates
            .into_iter()
            .filter(|id| !existing.contains(id))
            .collect())
    }
}
