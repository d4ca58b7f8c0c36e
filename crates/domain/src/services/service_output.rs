//! What services' workloads print: engines' reads of it kept masked, and readers' views.

use super::Capstan;
use crate::auth::{Action, Principal};
use crate::error::DomainResult;
use crate::ids::*;
use crate::model::*;
use crate::pagination::{PageRequest, MAX_PAGE_SIZE};
use crate::ports::{Repo, Unit};
use std::collections::BTreeMap;

impl Capstan {
    /// What a service's workload runs with: the variables it sees, resolved as its listing
    /// shows them, and its registry's access. Its secret values are what logs mask.
    pub(super) async fn inputs_of(
        &self,
        tx: &mut Unit,
        service: &Service,
    ) -> DomainResult<WorkloadInputs> {
        let chain = [service.project_id.0, service.environment_id.0, service.id.0];
        let mut visible = Vec::new();
        for number in 1.. {
            let page = PageRequest::new(number, MAX_PAGE_SIZE)?;
            let found = tx.list_variables(&chain, None, page).await?.items;
            let last = found.len() < MAX_PAGE_SIZE as usize;
            visible.extend(found);
            if last {
                break;
            }
        }
        let mut inputs = WorkloadInputs::resolve(&visible);
        if let Some(registry) = service.spec.registry_id() {
            if let Some(found) = Repo::<ContainerRegistry>::get(tx, registry).await? {
                inputs.registry = Some(found.access());
            }
        }
        if let Some(repo) = service.spec.git_repositories().first() {
            let token = match repo.git_token_id {
                Some(id) => Repo::<GitToken>::get(tx, id).await?.map(|t| t.token),
                None => None,
            };
            inputs.git = Some(GitAccess {
                url: repo.url.clone(),
                provider: repo.provider,
                token,
            });
        }
        Ok(inputs)
    }

    /// Keeps what an engine read of its workloads' output, masked with each service's secret
    /// values and cut at [`OUTPUT_LINE_BYTES`], each service's newest [`OUTPUT_KEPT_LINES`]
    /// only. Lines of services deleted
    /// meanwhile are dropped.
    pub async fn record_output(&self, lines: &[OutputLine]) -> DomainResult<()> {
        let mut by_service: BTreeMap<ServiceId, Vec<&OutputLine>> = BTreeMap::new();
        for line in lines {
            by_service.entry(line.service_id).or_default().push(line);
        }
        self.in_unit(&[], async |tx| {
            for (id, lines) in &by_service {
                let Some(service) = Repo::<Service>::get(tx, *id).await? else {
                    continue;
                };
                let inputs = self.inputs_of(tx, &service).await?;
                let masker = Masker::new(inputs.secret_values());
                let masked: Vec<OutputLine> = lines
                    .iter()
                    .map(|l| OutputLine {
                        message: OutputLine::cut(masker.mask(&l.message)),
                        ..(*l).clone()
                    })
                    .collect();
                tx.append_output(&masked).await?;
                tx.trim_output(*id, OUTPUT_KEPT_LINES).await?;
            }
            Ok(())
        })
        .await
    }

    /// `GET /{application,container,job}/{id}/log`: the newest lines, oldest first.
    pub async fn service_output(
        &self,
        p: &Principal,
        kind: ServiceKind,
        id: ServiceId,
    ) -> DomainResult<Vec<OutputLine>> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        self.load_service(tx, p, kind, id, Action::Read).await?;
        Ok(tx
            .service_output(id, &OutputQuery::default(), OUTPUT_LISTED_LINES)
            .await?)
    }

    /// The lines of any kind of service that `query` admits, newest `limit` of them, oldest
    /// first (the live API's service logs). `containing` keeps only lines holding that text.
    pub async fn follow_output(
        &self,
        p: &Principal,
        id: ServiceId,
        query: &OutputQuery,
        containing: Option<&str>,
        limit: i64,
    ) -> DomainResult<Vec<OutputLine>> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        self.load::<Service>(tx, p, id, Action::Read).await?;
        let Some(text) = containing.filter(|t| !t.is_empty()) else {
            return Ok(tx.service_output(id, query, limit).await?);
        };
        let mut found: Vec<OutputLine> = tx
            .service_output(id, query, OUTPUT_KEPT_LINES)
            .await?
            .into_iter()
            .filter(|l| l.message.contains(text))
            .collect();
        let cut = found
            .len()
            .saturating_sub(usize::try_from(limit).unwrap_or(0));
        found.drain(..cut);
        Ok(found)
    }
}
