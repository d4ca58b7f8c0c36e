//! Custom domains of applications, containers and helm services
//! (`/{kind}/{id}/customDomain`): unique across the installation, and checked for real
//! through the resolver port.

use super::Capstan;
use crate::auth::{Action, Principal};
use crate::dns::ResolveError;
use crate::error::{DomainError, DomainResult, StoreError};
use crate::ids::{CustomDomainId, ServiceId};
use crate::model::EventType;
use crate::model::{
    host_name, is_within, renamed, CustomDomain, CustomDomainInput, DnsCheck, DnsState, Service,
    ServiceKind, VariableParent,
};
use crate::ports::{Repo, Scope, Unit};
use std::collections::HashMap;
use std::net::IpAddr;

/// The kinds that serve HTTP under a domain of their own.
pub const DOMAIN_KINDS: [ServiceKind; 3] = [
    ServiceKind::Application,
    ServiceKind::Container,
    ServiceKind::Helm,
];

impl Capstan {
    /// Copies the domains of each source service onto its copy (`copies`: source id to copy),
    /// renamed so that they stay unique.
    pub(super) async fn copy_domains(
        &self,
        tx: &mut Unit,
        copies: &HashMap<ServiceId, Service>,
    ) -> DomainResult<()> {
        let now = self.now();
        for (source, copy) in copies {
            if !super::service_children::carries::<CustomDomain>(copy) {
                continue;
            }
            let short = &copy.id.0.simple().to_string()[..8];
            for d in self.children_of::<CustomDomain>(tx, *source).await? {
                let copied = CustomDomain {
                    id: CustomDomainId::generate(),
                    organization_id: copy.organization_id,
                    service_id: copy.id,
                    domain: renamed(&d.domain, short)?,
                    created_at: now,
                    updated_at: now,
                    ..d
                };
                self.write_domain(tx, &copied, true).await?;
            }
        }
        Ok(())
    }

    /// Writes a domain after checking no other holds its name (409 naming the service that
    /// does, when it is of the same organization).
    async fn write_domain(&self, tx: &mut Unit, d: &CustomDomain, new: bool) -> DomainResult<()> {
        if let Some(holder) = tx.custom_domain_named(&d.domain).await? {
            if holder.id != d.id {
                let named = match Repo::<Service>::get(tx, holder.service_id).await? {
                    Some(s) if s.organization_id == d.organization_id => {
                        format!("the {} '{}'", s.kind().noun(), s.name)
                    }
                    _ => "a service of another organization".into(),
                };
                return Err(DomainError::state(format!(
                    "the domain '{}' is already used by {named}",
                    d.domain
                )));
            }
        }
        let written = if new {
            Repo::<CustomDomain>::insert(tx, d).await
        } else {
            Repo::<CustomDomain>::update(tx, d).await
        };
        written.map_err(|e| match e {
            StoreError::Duplicate => {
                DomainError::state(format!("the domain '{}' is already used", d.domain))
            }
            other => other.into(),
        })
    }

    /// A domain's name as a user may give it: a host name, not the router's own domain nor
    /// under it (the names there are the ones Capstan gives every organization's services).
    fn domain_name(&self, given: &str) -> DomainResult<String> {
        let domain = host_name("domain", given)?;
        match &self.router {
            Some(router) if is_within(&domain, &router.domain) => Err(DomainError::invalid(
                "domain",
                format!(
                    "'{domain}' is under the router's domain '{}', whose names Capstan gives \
                     services itself",
                    router.domain
                ),
            )),
            _ => Ok(domain),
        }
    }

    pub async fn list_custom_domains(
        &self,
        p: &Principal,
        kind: ServiceKind,
        service: ServiceId,
    ) -> DomainResult<Vec<CustomDomain>> {
        self.list_children(p, kind, service).await
    }

    /// `GET /{kind}/{id}/checkCustomDomain`: each of the service's domains with the result of
    /// resolving it now (the check the router routes it after).
    pub async fn check_custom_domains(
        &self,
        p: &Principal,
        kind: ServiceKind,
        service: ServiceId,
    ) -> DomainResult<Vec<(CustomDomain, DnsCheck)>> {
        let domains = self.list_custom_domains(p, kind, service).await?;
        let mut out = Vec::with_capacity(domains.len());
        for d in domains {
            let check = self.check_dns(&d).await;
            out.push((d, check));
        }
        Ok(out)
    }

    pub async fn get_custom_domain(
        &self,
        p: &Principal,
        kind: ServiceKind,
        service: ServiceId,
        id: CustomDomainId,
    ) -> DomainResult<CustomDomain> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        self.owner_of::<CustomDomain>(tx, p, kind, service, Action::Read)
            .await?;
        self.child_of::<CustomDomain>(tx, p, service, id, Action::Read)
            .await
    }

    /// Adds a domain; a deployed service is then OUT_OF_DATE (its ingress changes).
    pub async fn create_custom_domain(
        &self,
        p: &Principal,
        kind: ServiceKind,
        service: ServiceId,
        input: CustomDomainInput,
    ) -> DomainResult<CustomDomain> {
        let domain = self.domain_name(&input.domain)?;
        self.in_unit(&[Scope::EnvironmentOf(service)], async |tx| {
            let found = self
                .owner_of::<CustomDomain>(tx, p, kind, service, Action::Write)
                .await?;
            let now = self.now();
            let d = CustomDomain {
                id: CustomDomainId::generate(),
                organization_id: found.organization_id,
                service_id: service,
                domain,
                generate_certificate: input.generate_certificate,
                use_cdn: input.use_cdn.unwrap_or(false),
                created_at: now,
                updated_at: now,
            };
            self.write_domain(tx, &d, true).await?;
            tx.mark_out_of_date(VariableParent::Service(service, kind), now)
                .await?;
            self.audit(tx, p, EventType::Create, &d).await?;
            Ok(d)
        })
        .await
    }

    pub async fn edit_custom_domain(
        &self,
        p: &Principal,
        kind: ServiceKind,
        service: ServiceId,
        id: CustomDomainId,
        input: CustomDomainInput,
    ) -> DomainResult<CustomDomain> {
        let domain = self.domain_name(&input.domain)?;
        self.in_unit(&[Scope::EnvironmentOf(service)], async |tx| {
            self.owner_of::<CustomDomain>(tx, p, kind, service, Action::Write)
                .await?;
            let before = self
                .child_of::<CustomDomain>(tx, p, service, id, Action::Write)
                .await?;
            let now = self.now();
            let d = CustomDomain {
                domain,
                generate_certificate: input.generate_certificate,
                use_cdn: input.use_cdn.unwrap_or(before.use_cdn),
                updated_at: now,
                ..before.clone()
            };
            // Only a change of what is served makes the service out of date.
            if (&d.domain, d.generate_certificate, d.use_cdn)
                != (&before.domain, before.generate_certificate, before.use_cdn)
            {
                self.write_domain(tx, &d, false).await?;
                tx.mark_out_of_date(VariableParent::Service(service, kind), now)
                    .await?;
            }
            self.audit(tx, p, EventType::Update, &d).await?;
            Ok(d)
        })
        .await
    }

    /// Removes a domain; a deployed service is then OUT_OF_DATE.
    pub async fn delete_custom_domain(
        &self,
        p: &Principal,
        kind: ServiceKind,
        service: ServiceId,
        id: CustomDomainId,
    ) -> DomainResult<()> {
        self.delete_child::<CustomDomain>(p, kind, service, id)
            .await
    }

    /// The domain with the result of resolving it now: whether it points at the configured
    /// target (behind a CDN, at any address). A resolver failure is a result, not an error.
    pub async fn custom_domain_status(
        &self,
        p: &Principal,
        kind: ServiceKind,
        service: ServiceId,
        id: CustomDomainId,
    ) -> DomainResult<(CustomDomain, DnsCheck)> {
        let d = self.get_custom_domain(p, kind, service, id).await?;
        let check = self.check_dns(&d).await;
        Ok((d, check))
    }

    // Names are only resolved and addresses compared: nothing connects to what a user's domain
    // resolves to, so the outbound policy has nothing to guard here.
    pub(super) async fn check_dns(&self, d: &CustomDomain) -> DnsCheck {
        // A wildcard answers for any name under it: ask for one.
        let asked = match d.domain.strip_prefix("*.") {
            Some(rest) => format!("wildcard-check.{rest}"),
            None => d.domain.clone(),
        };
        let mut check = DnsCheck {
            state: DnsState::ResolverError,
            message: String::new(),
            checked_at: self.now(),
        };
        let found = match self.resolver.addresses(&asked).await {
            Ok(found) if !found.is_empty() => found,
            Ok(_) | Err(ResolveError::NotFound) => {
                check.state = DnsState::NotFound;
                check.message = format!("{asked} has no address");
                return check;
            }
            Err(ResolveError::Failed(why)) => {
                check.message = format!("resolving {asked} failed: {why}");
                return check;
            }
        };
        if d.use_cdn {
            check.state = DnsState::PointsAtTarget;
            check.message = "behind a CDN: the domain resolves".into();
            return check;
        }
        let Some(target) = self.domain_target() else {
            check.state = DnsState::NoTarget;
            check.message = "no target is configured (CAPSTAN_CUSTOM_DOMAIN_TARGET)".into();
            return check;
        };
        let wanted = match target.parse::<IpAddr>() {
            Ok(ip) => vec![ip],
            Err(_) => match self.resolver.addresses(target).await {
                Ok(list) => list,
                Err(e) => {
                    check.message = match e {
                        ResolveError::NotFound => format!("the target {target} has no address"),
                        ResolveError::Failed(why) => {
                            format!("resolving the target {target} failed: {why}")
                        }
                    };
                    return check;
                }
            },
        };
        if found.iter().any(|ip| wanted.contains(ip)) {
            check.state = DnsState::PointsAtTarget;
            check.message = format!("{asked} points at {target}");
        } else {
            check.state = DnsState::PointsElsewhere;
            check.message = format!("{asked} does not point at {target}");
        }
        check
    }
}
