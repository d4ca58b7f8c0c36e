//! Variables and secrets: lists and creation under every parent (one set of handlers, told the
//! parent kind and secrecy by the route), and the operations on one variable.

use super::{created, no_content, ok};
use crate::error::{ApiError, ApiResult};
use crate::extract::{path_id, query_parsed, Auth, JsonBody, Paging};
use crate::openapi::{Body, Doc, Query, Routes};
use crate::views::{ImportView, Paged, SecretView, VariableView};
use crate::AppState;
use actix_web::{web, HttpRequest, HttpResponse};
use domain::model::{from_json, ServiceKind, VariableParent, VariableScope};
use domain::services::{
    AliasInput, ImportInput, NamedAt, OverrideInput, ScopedVariableInput, VariableDetails,
    VariableEdit, VariableInput,
};

type St = web::Data<AppState>;

/// What the route's `{...Id}` names.
#[derive(Clone, Copy)]
enum ParentKind {
    Project,
    Environment,
    Service(ServiceKind),
}

/// Variables (`false`) or secrets (`true`).
#[derive(Clone, Copy)]
struct Secrets(bool);

/// How a route under a parent names one variable or secret: the parent's kind, which of the
/// two, and the path parameter holding its id. `/variable/{variableId}` has none.
#[derive(Clone, Copy)]
struct Named {
    kind: ParentKind,
    secrets: Secrets,
    id: &'static str,
}

type Route = Option<web::Data<Named>>;

/// The variable the route names, and under which parent when it names one.
fn target(
    req: &HttpRequest,
    route: &Route,
) -> Result<(domain::ids::VariableId, Option<NamedAt>), ApiError> {
    match route {
        None => Ok((path_id(req, "variableId")?, None)),
        Some(named) => {
            let at = NamedAt {
                parent: parent(req, named.kind)?,
                secret: named.secrets.0,
            };
            Ok((path_id(req, named.id)?, Some(at)))
        }
    }
}

/// The answer: at `/variable/{id}`, the edit form; under a parent, the public
/// `EnvironmentVariable` or `Secret`, as the route is.
fn answer(route: &Route, v: VariableDetails) -> serde_json::Value {
    match route {
        None => serde_json::to_value(VariableView::edit(v)),
        Some(named) if named.secrets.0 => serde_json::to_value(SecretView::from(v)),
        Some(_) => serde_json::to_value(VariableView::creation(v)),
    }
    .unwrap_or_default()
}

fn parent(req: &HttpRequest, kind: ParentKind) -> Result<VariableParent, ApiError> {
    Ok(match kind {
        ParentKind::Project => VariableParent::Project(path_id(req, "projectId")?),
        ParentKind::Environment => VariableParent::Environment(path_id(req, "environmentId")?),
        ParentKind::Service(k) => {
            VariableParent::Service(path_id(req, &format!("{}Id", k.path_segment()))?, k)
        }
    })
}

pub fn routes(r: &mut Routes) {
    let mut parents = vec![
        ("/project/{projectId}".to_string(), ParentKind::Project),
        (
            "/environment/{environmentId}".to_string(),
            ParentKind::Environment,
        ),
    ];
    for kind in ServiceKind::ALL {
        let segment = kind.path_segment();
        parents.push((
            format!("/{segment}/{{{segment}Id}}"),
            ParentKind::Service(*kind),
        ));
    }
    for (prefix, kind) in parents {
        if let ParentKind::Service(_) = kind {
            // Before `/environmentVariable/{id}`, which would take "import" for an id.
            r.at(format!("{prefix}/environmentVariable/import"))
                .data(kind)
                .post(
                    import,
                    Doc::answer(
                        "Import variables and secrets into the service, its environment and \
                         its project at once (all or nothing)",
                        201,
                        Some(Body::of::<ImportView>()),
                    )
                    .body(Body::of::<ImportInput>()),
                )
                .add();
        }
        for (segment, id, secrets, noun) in [
            (
                "environmentVariable",
                "environmentVariableId",
                Secrets(false),
                "variable",
            ),
            ("secret", "secretId", Secrets(true), "secret"),
        ] {
            let one = format!("{prefix}/{segment}/{{{id}}}");
            let shape = || {
                if secrets.0 {
                    Body::of::<SecretView>()
                } else {
                    Body::of::<VariableView>()
                }
            };
            let named = Named { kind, secrets, id };
            r.at(one.clone())
                .data(named)
                .put(
                    edit,
                    Doc::answer(format!("Edit a {noun} of this parent"), 200, Some(shape()))
                        .body(Body::of::<VariableEdit>()),
                )
                .delete(
                    delete,
                    Doc::delete(format!(
                        "Delete a {noun} of this parent with its aliases and overrides"
                    )),
                )
                .add();
            r.at(format!("{one}/alias"))
                .data(named)
                .post(
                    alias,
                    Doc::answer(
                        format!("Create here an alias of a {noun} visible here"),
                        201,
                        Some(shape()),
                    )
                    .body(Body::of::<AliasInput>()),
                )
                .add();
            r.at(format!("{one}/override"))
                .data(named)
                .post(
                    override_variable,
                    Doc::answer(
                        format!("Override here a {noun} of a higher scope"),
                        201,
                        Some(shape()),
                    )
                    .body(Body::of::<OverrideInput>()),
                )
                .add();
        }
        r.at(format!("{prefix}/environmentVariable"))
            .data(kind)
            .data(Secrets(false))
            .get(
                list,
                Doc::list::<VariableView>(
                    "List the variables visible here (its own and inherited)",
                ),
            )
            .post(
                create,
                Doc::create::<VariableView, VariableInput>("Add a variable"),
            )
            .add();
        r.at(format!("{prefix}/secret"))
            .data(kind)
            .data(Secrets(true))
            .get(
                list,
                Doc::list::<SecretView>("List the secrets visible here (never their values)"),
            )
            .post(
                create,
                Doc::create::<SecretView, VariableInput>("Add a secret"),
            )
            .add();
    }
    r.at("/variable")
        .get(
            list_scoped,
            Doc::list::<VariableView>("List the variables and secrets visible at a parent")
                .query(Query::uuid("parent_id", true))
                .query(Query::of::<VariableScope>("scope", true)),
        )
        .post(
            create_scoped,
            Doc::answer(
                "Add a variable or secret to the parent named in the body",
                201,
                Some(Body::of::<VariableView>()),
            )
            .body(Body::all_of(vec![
                Body::of::<VariableInput>(),
                Body::of::<ScopedVariableInput>(),
            ])),
        )
        .add();
    r.at("/variable/import")
        .post(
            import_scoped,
            Doc::answer(
                "Import variables and secrets into a service, its environment and its project \
                 at once (all or nothing)",
                201,
                Some(Body::of::<ImportView>()),
            )
            .body(Body::of::<ImportInput>())
            .query(Query::uuid("service_id", true))
            .query(Query::of::<ServiceKind>("service_type", false)),
        )
        .add();
    r.at("/variable/{variableId}")
        .get(
            get,
            Doc::get::<VariableView>("Get a variable (a secret without its value)"),
        )
        .put(
            edit,
            Doc::edit::<VariableView, VariableEdit>("Edit a variable or secret"),
        )
        .delete(
            delete,
            Doc::delete("Delete a variable with its aliases and overrides"),
        )
        .add();
    r.at("/variable/{variableId}/alias")
        .post(
            alias,
            Doc::create::<VariableView, AliasInput>("Create an alias of a variable"),
        )
        .add();
    r.at("/variable/{variableId}/override")
        .post(
            override_variable,
            Doc::create::<VariableView, OverrideInput>("Override a variable at a lower scope"),
        )
        .add();
}

async fn list(
    st: St,
    kind: web::Data<ParentKind>,
    secrets: web::Data<Secrets>,
    Auth(p): Auth,
    req: HttpRequest,
    Paging(page): Paging,
) -> ApiResult<HttpResponse> {
    let vars = st
        .capstan
        .list_variables(&p, parent(&req, **kind)?, Some(secrets.0), page)
        .await?;
    Ok(if secrets.0 {
        ok(Paged::from_page(vars, SecretView::from))
    } else {
        ok(Paged::from_page(vars, VariableView::creation))
    })
}

async fn create(
    st: St,
    kind: web::Data<ParentKind>,
    secrets: web::Data<Secrets>,
    Auth(p): Auth,
    req: HttpRequest,
    JsonBody(input): JsonBody<VariableInput>,
) -> ApiResult<HttpResponse> {
    let v = st
        .capstan
        .create_variable(&p, parent(&req, **kind)?, input, secrets.0)
        .await?;
    Ok(if secrets.0 {
        created(SecretView::from(v))
    } else {
        created(VariableView::creation(v))
    })
}

async fn list_scoped(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    Paging(page): Paging,
) -> ApiResult<HttpResponse> {
    let query: Vec<(String, String)> = serde_urlencoded::from_str(req.query_string())
        .map_err(|_| ApiError::bad_request("query: malformed query string"))?;
    let get = |name: &str| {
        query
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .ok_or_else(|| ApiError::bad_request(format!("{name}: is required")))
    };
    let parent_id = get("parent_id")?
        .parse()
        .map_err(|_| ApiError::bad_request("parent_id: is not a valid UUID"))?;
    let scope: VariableScope = get("scope")?
        .parse()
        .map_err(|e: String| ApiError::bad_request(format!("scope: {e}")))?;
    let vars = st
        .capstan
        .list_scoped_variables(&p, scope, parent_id, page)
        .await?;
    Ok(ok(Paged::from_page(vars, VariableView::edit)))
}

async fn create_scoped(
    st: St,
    Auth(p): Auth,
    JsonBody(body): JsonBody<serde_json::Value>,
) -> ApiResult<HttpResponse> {
    let scope: ScopedVariableInput = from_json(&body)?;
    let input: VariableInput = from_json(&body)?;
    let v = st.capstan.create_scoped_variable(&p, scope, input).await?;
    Ok(created(VariableView::edit(v)))
}

async fn get(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    let v = st
        .capstan
        .get_variable(&p, path_id(&req, "variableId")?)
        .await?;
    Ok(ok(VariableView::edit(v)))
}

async fn edit(
    st: St,
    route: Route,
    Auth(p): Auth,
    req: HttpRequest,
    JsonBody(input): JsonBody<VariableEdit>,
) -> ApiResult<HttpResponse> {
    let (id, at) = target(&req, &route)?;
    let v = st.capstan.edit_variable(&p, id, input, at).await?;
    Ok(ok(answer(&route, v)))
}

async fn delete(st: St, route: Route, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    let (id, at) = target(&req, &route)?;
    st.capstan.delete_variable(&p, id, at).await?;
    Ok(no_content())
}

async fn alias(
    st: St,
    route: Route,
    Auth(p): Auth,
    req: HttpRequest,
    JsonBody(input): JsonBody<AliasInput>,
) -> ApiResult<HttpResponse> {
    let (id, at) = target(&req, &route)?;
    let v = st.capstan.create_alias(&p, id, input, at).await?;
    Ok(created(answer(&route, v)))
}

async fn override_variable(
    st: St,
    route: Route,
    Auth(p): Auth,
    req: HttpRequest,
    JsonBody(input): JsonBody<OverrideInput>,
) -> ApiResult<HttpResponse> {
    let (id, at) = target(&req, &route)?;
    let v = st.capstan.create_override(&p, id, input, at).await?;
    Ok(created(answer(&route, v)))
}

async fn import(
    st: St,
    kind: web::Data<ParentKind>,
    Auth(p): Auth,
    req: HttpRequest,
    JsonBody(input): JsonBody<ImportInput>,
) -> ApiResult<HttpResponse> {
    let VariableParent::Service(service, kind) = parent(&req, **kind)? else {
        return Err(ApiError::bad_request("imports go to a service"));
    };
    let report = st
        .capstan
        .import_variables(&p, service, Some(kind), input)
        .await?;
    Ok(created(ImportView::from(report)))
}

async fn import_scoped(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    JsonBody(input): JsonBody<ImportInput>,
) -> ApiResult<HttpResponse> {
    let service = query_parsed(&req, "service_id", "a UUID")?
        .ok_or_else(|| ApiError::bad_request("service_id: is required"))?;
    let allowed = format!("one of {}", ServiceKind::allowed());
    let kind = query_parsed::<ServiceKind>(&req, "service_type", &allowed)?;
    let report = st
        .capstan
        .import_variables(&p, service, kind, input)
        .await?;
    Ok(created(ImportView::from(report)))
}
