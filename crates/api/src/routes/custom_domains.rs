//! Custom domains of applications, containers and helm services (`/{kind}/{id}/customDomain`),
//! and the check of where each points.

use super::{created, no_content, ok};
use crate::error::ApiResult;
use crate::extract::{path_id, service_id, Auth, JsonBody, Paging};
use crate::openapi::{Doc, Routes};
use crate::views::{base, Base, Paged};
use crate::AppState;
use actix_web::{web, HttpRequest, HttpResponse};
use domain::model::{CustomDomain, CustomDomainInput, DnsCheck, DnsState, ServiceKind};
use domain::services::DOMAIN_KINDS;
use serde::Serialize;

type St = web::Data<AppState>;
type Kind = web::Data<ServiceKind>;
const ID: &str = "customDomainId";

/// The description's only status: the DNS check's result is in `dns_check` (the status
/// operation).
#[derive(Serialize, utoipa::ToSchema)]
pub enum CustomDomainStatus {
    #[serde(rename = "VALIDATION_PENDING")]
    ValidationPending,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct CustomDomainView {
    #[serde(flatten)]
    pub base: Base,
    pub domain: String,
    pub generate_certificate: bool,
    pub use_cdn: bool,
    /// The host name to point the domain at (a CNAME), when the operator configured one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub validation_domain: Option<String>,
    pub status: CustomDomainStatus,
}

/// A domain with the result of resolving it.
#[derive(Serialize, utoipa::ToSchema)]
pub struct CustomDomainCheckView {
    #[serde(flatten)]
    pub domain: CustomDomainView,
    pub dns_check: DnsCheck,
}

/// A DNS check in the public description's words.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CheckedCustomDomainStatus {
    /// Behind a CDN, the domain resolves.
    ResolvesToIp,
    /// The domain points at the target (CAPSTAN_CUSTOM_DOMAIN_TARGET).
    MatchesLoadBalancerHost,
    DomainNotConfigured,
    DomainLinkedToWrongHost,
    GenericFailure,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct CheckedCustomDomain {
    pub domain_name: String,
    pub status: CheckedCustomDomainStatus,
    /// Why a check did not pass.
    pub error_details: Option<String>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct CheckedCustomDomains {
    pub results: Vec<CheckedCustomDomain>,
}

impl CheckedCustomDomain {
    fn of(d: CustomDomain, check: DnsCheck) -> Self {
        use CheckedCustomDomainStatus as S;
        let status = match check.state {
            DnsState::PointsAtTarget if d.use_cdn => S::ResolvesToIp,
            DnsState::PointsAtTarget => S::MatchesLoadBalancerHost,
            DnsState::PointsElsewhere => S::DomainLinkedToWrongHost,
            DnsState::NotFound => S::DomainNotConfigured,
            DnsState::ResolverError | DnsState::NoTarget => S::GenericFailure,
        };
        let passed = check.state == DnsState::PointsAtTarget;
        CheckedCustomDomain {
            domain_name: d.domain,
            status,
            error_details: (!passed).then_some(check.message),
        }
    }
}

fn view(st: &AppState, d: CustomDomain) -> CustomDomainView {
    CustomDomainView {
        base: base(d.id.0, d.created_at, d.updated_at),
        domain: d.domain,
        generate_certificate: d.generate_certificate,
        use_cdn: d.use_cdn,
        validation_domain: st.capstan.domain_target().map(str::to_string),
        status: CustomDomainStatus::ValidationPending,
    }
}

pub fn routes(r: &mut Routes) {
    for kind in DOMAIN_KINDS {
        let segment = kind.path_segment();
        let base = format!("/{segment}/{{{segment}Id}}/customDomain");
        r.at(base.clone())
            .data(kind)
            .get(
                list,
                Doc::list::<CustomDomainView>(format!("The custom domains of a {segment}")),
            )
            .post(
                create,
                Doc::create::<CustomDomainView, CustomDomainInput>(
                    "Add a custom domain (unique across the installation: 409 naming its holder); \
                     a deployed service becomes OUT_OF_DATE",
                ),
            )
            .add();
        r.at(format!("{base}/{{customDomainId}}"))
            .data(kind)
            .get(get, Doc::get::<CustomDomainView>("A custom domain"))
            .put(
                edit,
                Doc::edit::<CustomDomainView, CustomDomainInput>("Edit a custom domain"),
            )
            .delete(remove, Doc::delete("Remove a custom domain"))
            .add();
        r.at(format!("/{segment}/{{{segment}Id}}/checkCustomDomain"))
            .data(kind)
            .get(
                check,
                Doc::get::<CheckedCustomDomains>(format!(
                    "Where each custom domain of a {segment} points now: the router serves one \
                     once it points at the target"
                )),
            )
            .add();
        r.at(format!("{base}/{{customDomainId}}/status"))
            .data(kind)
            .get(
                status,
                Doc::get::<CustomDomainCheckView>(
                    "A custom domain with where it points now (resolved through DNS)",
                ),
            )
            .add();
    }
}

async fn list(
    st: St,
    kind: Kind,
    Auth(p): Auth,
    req: HttpRequest,
    Paging(page): Paging,
) -> ApiResult<HttpResponse> {
    let all = st
        .capstan
        .list_custom_domains(&p, **kind, service_id(&req, **kind)?)
        .await?;
    Ok(ok(Paged::from_vec(all, page, |d| view(&st, d))))
}

async fn create(
    st: St,
    kind: Kind,
    Auth(p): Auth,
    req: HttpRequest,
    JsonBody(input): JsonBody<CustomDomainInput>,
) -> ApiResult<HttpResponse> {
    let d = st
        .capstan
        .create_custom_domain(&p, **kind, service_id(&req, **kind)?, input)
        .await?;
    Ok(created(view(&st, d)))
}

async fn get(st: St, kind: Kind, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    let d = st
        .capstan
        .get_custom_domain(&p, **kind, service_id(&req, **kind)?, path_id(&req, ID)?)
        .await?;
    Ok(ok(view(&st, d)))
}

async fn edit(
    st: St,
    kind: Kind,
    Auth(p): Auth,
    req: HttpRequest,
    JsonBody(input): JsonBody<CustomDomainInput>,
) -> ApiResult<HttpResponse> {
    let d = st
        .capstan
        .edit_custom_domain(
            &p,
            **kind,
            service_id(&req, **kind)?,
            path_id(&req, ID)?,
            input,
        )
        .await?;
    Ok(ok(view(&st, d)))
}

async fn remove(st: St, kind: Kind, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    st.capstan
        .delete_custom_domain(&p, **kind, service_id(&req, **kind)?, path_id(&req, ID)?)
        .await?;
    Ok(no_content())
}

async fn status(st: St, kind: Kind, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    let (d, dns_check) = st
        .capstan
        .custom_domain_status(&p, **kind, service_id(&req, **kind)?, path_id(&req, ID)?)
        .await?;
    Ok(ok(CustomDomainCheckView {
        domain: view(&st, d),
        dns_check,
    }))
}

async fn check(st: St, kind: Kind, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    let checked = st
        .capstan
        .check_custom_domains(&p, **kind, service_id(&req, **kind)?)
        .await?;
    Ok(ok(CheckedCustomDomains {
        results: checked
            .into_iter()
            .map(|(d, check)| CheckedCustomDomain::of(d, check))
            .collect(),
    }))
}
