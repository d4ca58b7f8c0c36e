//! Cloud provider credentials: one set of handlers under each provider's path, told the
//! provider by the route, and the organization's list of all of them.

use super::{created, no_content, ok};
use crate::error::ApiResult;
use crate::extract::{path_id, Auth, JsonBody, Paging};
use crate::openapi::{Body, Doc, Routes};
use crate::views::{CredentialClusterView, CredentialsView, OrganizationCredentialsView, Paged};
use crate::AppState;
use actix_web::{web, HttpRequest, HttpResponse};
use domain::model::{
    AltCloudCredentialsInput, CloudACredentialsInput, CloudCCredentialsInput, CloudProvider,
    OnPremiseCredentialsInput,
};

type St = web::Data<AppState>;
type Provider = web::Data<CloudProvider>;
const ORG: &str = "organizationId";
const ID: &str = "credentialsId";

pub fn routes(r: &mut Routes) {
    for (segment, provider, body) in [
        (
            "cloudA",
            CloudProvider::CloudA,
            Body::of::<CloudACredentialsInput>(),
        ),
        (
            "altcloud",
            CloudProvider::AltCloud,
            Body::of::<AltCloudCredentialsInput>(),
        ),
        (
            "cloudC",
            CloudProvider::CloudC,
            Body::of::<CloudCCredentialsInput>(),
        ),
        (
            "onPremise",
            CloudProvider::OnPremise,
            Body::of::<OnPremiseCredentialsInput>(),
        ),
    ] {
        let shown = || Some(Body::of::<CredentialsView>());
        r.at(format!(
            "/organization/{{organizationId}}/{segment}/credentials"
        ))
        .data(provider)
        .get(
            list,
            Doc::list::<CredentialsView>(format!("List the {provider} credentials")),
        )
        .post(
            create,
            Doc::answer(format!("Add {provider} credentials"), 201, shown()).body(body.clone()),
        )
        .add();
        r.at(format!(
            "/organization/{{organizationId}}/{segment}/credentials/{{credentialsId}}"
        ))
        .data(provider)
        .get(
            get,
            Doc::get::<CredentialsView>(format!("Get {provider} credentials")),
        )
        .put(
            update,
            Doc::answer(
                format!("Edit {provider} credentials (the secret is kept when not sent)"),
                200,
                shown(),
            )
            .body(body),
        )
        .delete(
            delete,
            Doc::delete(format!("Delete {provider} credentials")),
        )
        .add();
    }
    r.at("/organization/{organizationId}/credentials")
        .get(
            list_all,
            Doc::list::<OrganizationCredentialsView>(
                "List the credentials of every provider, with the clusters using them",
            ),
        )
        .add();
}

async fn list(
    st: St,
    provider: Provider,
    Auth(p): Auth,
    req: HttpRequest,
    Paging(page): Paging,
) -> ApiResult<HttpResponse> {
    let items = st
        .capstan
        .list_credentials(&p, path_id(&req, ORG)?, Some(**provider), page)
        .await?;
    Ok(ok(Paged::from_page(items, CredentialsView::from)))
}

async fn list_all(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    Paging(page): Paging,
) -> ApiResult<HttpResponse> {
    let items = st
        .capstan
        .credentials_with_clusters(&p, path_id(&req, ORG)?, page)
        .await?;
    Ok(ok(Paged::from_page(items, |(c, clusters)| {
        OrganizationCredentialsView {
            credential: CredentialsView::from(c),
            clusters: clusters
                .into_iter()
                .map(|c| CredentialClusterView {
                    id: c.id.0,
                    name: c.name.into(),
                    cloud_provider: c.cloud_provider,
                })
                .collect(),
        }
    })))
}

async fn create(
    st: St,
    provider: Provider,
    Auth(p): Auth,
    req: HttpRequest,
    JsonBody(body): JsonBody<serde_json::Value>,
) -> ApiResult<HttpResponse> {
    let c = st
        .capstan
        .create_credentials(&p, path_id(&req, ORG)?, **provider, &body)
        .await?;
    Ok(created(CredentialsView::from(c)))
}

async fn get(
    st: St,
    provider: Provider,
    Auth(p): Auth,
    req: HttpRequest,
) -> ApiResult<HttpResponse> {
    let c = st
        .capstan
        .get_credentials(&p, path_id(&req, ORG)?, **provider, path_id(&req, ID)?)
        .await?;
    Ok(ok(CredentialsView::from(c)))
}

async fn update(
    st: St,
    provider: Provider,
    Auth(p): Auth,
    req: HttpRequest,
    JsonBody(body): JsonBody<serde_json::Value>,
) -> ApiResult<HttpResponse> {
    let c = st
        .capstan
        .update_credentials(
            &p,
            path_id(&req, ORG)?,
            **provider,
            path_id(&req, ID)?,
            &body,
        )
        .await?;
    Ok(ok(CredentialsView::from(c)))
}

async fn delete(
    st: St,
    provider: Provider,
    Auth(p): Auth,
    req: HttpRequest,
) -> ApiResult<HttpResponse> {
    st.capstan
        .delete_credentials(&p, path_id(&req, ORG)?, **provider, path_id(&req, ID)?)
        .await?;
    Ok(no_content())
}
