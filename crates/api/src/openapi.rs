//! The OpenAPI document, generated from the route table itself: every route is registered through
//! [`Routes`], which records its method, path and [`Doc`], so the document cannot list a route the
//! server does not have, nor miss one it has.

use actix_web::http::Method;
use actix_web::{web, FromRequest, Handler, Resource, Responder};
use std::borrow::Cow;
use std::collections::BTreeMap;
use utoipa::openapi::path::{
    HttpMethod, OperationBuilder, ParameterBuilder, ParameterIn, PathItem,
};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Schema, Type};
use utoipa::openapi::security::{
    ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme,
};
use utoipa::openapi::{
    ComponentsBuilder, ContentBuilder, HeaderBuilder, InfoBuilder, OpenApi, OpenApiBuilder,
    PathsBuilder, Ref, RefOr, Required, ResponseBuilder, ServerBuilder,
};
use utoipa::ToSchema;

type Schemas = Vec<(String, RefOr<Schema>)>;

const JSON: &str = "application/json";

/// A schema to show and the named schemas it refers to.
#[derive(Clone)]
pub struct Body {
    schema: RefOr<Schema>,
    components: Schemas,
    media: &'static str,
}

impl Body {
    /// A named schema, shown by reference.
    pub fn of<T: ToSchema>() -> Self {
        let mut components = Vec::new();
        T::schemas(&mut components);
        components.push((T::name().into_owned(), T::schema()));
        Self {
            schema: RefOr::Ref(Ref::from_schema_name(T::name())),
            components,
            media: JSON,
        }
    }

    /// `{results: [T], pagination}`.
    pub fn page_of<T: ToSchema>() -> Self {
        let item = Self::of::<T>();
        let pagination = Self::of::<crate::views::Pagination>();
        let schema = ObjectBuilder::new()
            .property("results", ArrayBuilder::new().items(item.schema))
            .property("pagination", pagination.schema)
            .required("results")
            .required("pagination")
            .into();
        Self {
            schema,
            components: [item.components, pagination.components].concat(),
            media: JSON,
        }
    }

    /// `[T]`.
    pub fn array_of<T: ToSchema>() -> Self {
        let item = Self::of::<T>();
        Self {
            schema: ArrayBuilder::new().items(item.schema).into(),
            components: item.components,
            media: JSON,
        }
    }

    /// Every member of each part (OpenAPI `allOf`).
    pub fn all_of(parts: Vec<Body>) -> Self {
        let mut all = utoipa::openapi::schema::AllOfBuilder::new();
        let mut components = Vec::new();
        for part in parts {
            all = all.item(part.schema);
            components.extend(part.components);
        }
        Self {
            schema: all.into(),
            components,
            media: JSON,
        }
    }

    /// This body's schema, keeping the components `other` refers to.
    pub fn with_components(mut self, other: &Body) -> Self {
        self.components.extend(other.components.iter().cloned());
        self.components
            .extend(Body::of::<crate::views::Pagination>().components);
        self
    }

    /// A free-form schema built by hand.
    pub fn inline(schema: RefOr<Schema>) -> Self {
        Self {
            schema,
            components: Vec::new(),
            media: JSON,
        }
    }

    /// Text of another media type (an event stream).
    pub fn text(media: &'static str) -> Self {
        Self {
            schema: ObjectBuilder::new().schema_type(Type::String).into(),
            components: Vec::new(),
            media,
        }
    }
}

/// The schema of a body, to nest in another.
pub fn shown_schema(body: &Body) -> RefOr<Schema> {
    body.schema.clone()
}

/// A query parameter.
#[derive(Clone)]
pub struct Query {
    name: &'static str,
    required: bool,
    schema: RefOr<Schema>,
    components: Schemas,
}

impl Query {
    pub fn of<T: ToSchema>(name: &'static str, required: bool) -> Self {
        let body = Body::of::<T>();
        Self {
            name,
            required,
            schema: body.schema,
            components: body.components,
        }
    }

    pub fn integer(name: &'static str, min: i64, max: Option<i64>) -> Self {
        let mut schema = ObjectBuilder::new()
            .schema_type(Type::Integer)
            .minimum(Some(min as f64));
        if let Some(max) = max {
            schema = schema.maximum(Some(max as f64));
        }
        Self {
            name,
            required: false,
            schema: schema.into(),
            components: Vec::new(),
        }
    }

    pub fn string(name: &'static str) -> Self {
        Self {
            name,
            required: false,
            schema: ObjectBuilder::new().schema_type(Type::String).into(),
            components: Vec::new(),
        }
    }

    pub fn boolean(name: &'static str) -> Self {
        Self {
            name,
            required: false,
            schema: ObjectBuilder::new().schema_type(Type::Boolean).into(),
            components: Vec::new(),
        }
    }

    pub fn uuid(name: &'static str, required: bool) -> Self {
        Self {
            name,
            required,
            schema: ObjectBuilder::new()
                .schema_type(Type::String)
                .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(
                    utoipa::openapi::KnownFormat::Uuid,
                )))
                .into(),
            components: Vec::new(),
        }
    }
}

/// What the document says of one operation.
#[derive(Clone)]
pub struct Doc {
    summary: Cow<'static, str>,
    status: u16,
    response: Option<Body>,
    request: Option<Body>,
    request_required: bool,
    /// A second success answer (a delete the engine carries out: 202).
    accepted: Option<Body>,
    /// Error answers of a public operation (authenticated ones document theirs already).
    public_errors: Vec<(u16, &'static str)>,
    query: Vec<Query>,
    authenticated: bool,
    /// One of the stand-in's controls (their own tag and token).
    control: bool,
}

impl Doc {
    fn new(summary: impl Into<Cow<'static, str>>, status: u16, response: Option<Body>) -> Self {
        Self {
            summary: summary.into(),
            status,
            response,
            request: None,
            request_required: true,
            accepted: None,
            public_errors: Vec::new(),
            query: Vec::new(),
            authenticated: true,
            control: false,
        }
    }
    /// 200 with a `T`.
    pub fn get<T: ToSchema>(summary: impl Into<Cow<'static, str>>) -> Self {
        Self::new(summary, 200, Some(Body::of::<T>()))
    }
    /// 200 with an array of `T`.
    pub fn array<T: ToSchema>(summary: impl Into<Cow<'static, str>>) -> Self {
        Self::new(summary, 200, Some(Body::array_of::<T>()))
    }
    /// 200 with a page of `T`, taking `page` and `page_size`.
    pub fn list<T: ToSchema>(summary: impl Into<Cow<'static, str>>) -> Self {
        Self::new(summary, 200, Some(Body::page_of::<T>())).paged()
    }
    /// 201 with a `T`, from a `I`.
    pub fn create<T: ToSchema, I: ToSchema>(summary: impl Into<Cow<'static, str>>) -> Self {
        Self::new(summary, 201, Some(Body::of::<T>())).body(Body::of::<I>())
    }
    /// 200 with a `T`, from a `I`.
    pub fn edit<T: ToSchema, I: ToSchema>(summary: impl Into<Cow<'static, str>>) -> Self {
        Self::new(summary, 200, Some(Body::of::<T>())).body(Body::of::<I>())
    }
    /// 204.
    pub fn delete(summary: impl Into<Cow<'static, str>>) -> Self {
        Self::new(summary, 204, None)
    }
    /// 204 when done at once, 202 with a `T` when the engine carries it out.
    pub fn delete_or_accept<T: ToSchema>(summary: impl Into<Cow<'static, str>>) -> Self {
        let mut doc = Self::new(summary, 204, None);
        doc.accepted = Some(Body::of::<T>());
        doc
    }
    /// Adds 202 with a `T` beside the main answer.
    pub fn or_accepted<T: ToSchema>(mut self) -> Self {
        self.accepted = Some(Body::of::<T>());
        self
    }
    /// Documents an error answer of a public operation.
    pub fn fails_with(mut self, status: u16, why: &'static str) -> Self {
        self.public_errors.push((status, why));
        self
    }
    /// Any status with any body.
    pub fn answer(
        summary: impl Into<Cow<'static, str>>,
        status: u16,
        response: Option<Body>,
    ) -> Self {
        Self::new(summary, status, response)
    }
    pub fn body(mut self, body: Body) -> Self {
        self.request = Some(body);
        self
    }
    /// A body that may be left out.
    pub fn optional_body(mut self, body: Body) -> Self {
        self.request = Some(body);
        self.request_required = false;
        self
    }
    pub fn query(mut self, q: Query) -> Self {
        self.query.push(q);
        self
    }
    pub fn paged(self) -> Self {
        self.query(Query::integer("page", 1, None))
            .query(Query::integer(
                "page_size",
                1,
                Some(domain::pagination::MAX_PAGE_SIZE.into()),
            ))
    }
    /// One of the stand-in's controls: tagged `controls`, authenticated by the controls'
    /// token, 404 while they are off.
    pub fn control(mut self) -> Self {
        self.control = true;
        self.authenticated = false;
        self.fails_with(400, "invalid input; the message names the member at fault")
            .fails_with(401, "missing or wrong controls token")
            .fails_with(404, "the controls are off, or no such thing")
    }
    /// No credentials needed (probes, the document itself).
    pub fn public(mut self) -> Self {
        self.authenticated = false;
        self
    }
}

/// A recorded route.
#[derive(Clone)]
pub struct Endpoint {
    pub method: Method,
    pub path: String,
    pub doc: Doc,
}

/// Registers routes with actix (when given a config) and records them for the document.
pub struct Routes<'c> {
    cfg: Option<&'c mut web::ServiceConfig>,
    pub endpoints: Vec<Endpoint>,
    /// The resources by their path's first segment, in the order they were added.
    groups: Vec<(String, Vec<Resource>)>,
}

impl<'c> Routes<'c> {
    pub fn new(cfg: Option<&'c mut web::ServiceConfig>) -> Self {
        Self {
            cfg,
            endpoints: Vec::new(),
            groups: Vec::new(),
        }
    }

    /// Hands the resources to actix, one scope per first path segment: a request is matched
    /// against a few dozen static prefixes first, then against the handful of patterns of its
    /// scope, rather than against every pattern of the API in turn.
    pub fn register(self) {
        let Some(cfg) = self.cfg else { return };
        for (segment, resources) in self.groups {
            let mut scope = web::scope(&format!("/{segment}"));
            for resource in resources {
                // Per resource, after routing: the timeout keeps a handle on the request.
                scope = scope
                    .service(resource.wrap(actix_web::middleware::from_fn(crate::limits::timeout)));
            }
            cfg.service(scope);
        }
    }

    /// A path; its first segment must be literal (it names the scope it is matched in).
    pub fn at(&mut self, path: impl Into<String>) -> At<'_, 'c> {
        let path = path.into();
        let rest = path
            .strip_prefix('/')
            .and_then(|p| p.find('/').map(|i| &p[i..]))
            .unwrap_or("");
        At {
            resource: web::resource(rest.to_string()),
            path,
            methods: Vec::new(),
            routes: self,
        }
    }
}

macro_rules! method_shorthands {
    ($($name:ident => $method:ident),*) => {$(
        pub fn $name<F, Args>(self, handler: F, doc: Doc) -> Self
        where
            F: Handler<Args>,
            Args: FromRequest + 'static,
            F::Output: Responder + 'static,
        {
            self.route(Method::$method, handler, doc)
        }
    )*};
}

/// One path: its methods, handlers and docs.
pub struct At<'r, 'c> {
    routes: &'r mut Routes<'c>,
    path: String,
    resource: Resource,
    methods: Vec<(Method, Doc)>,
}

impl At<'_, '_> {
    /// Data the handlers of this path receive (`web::Data<T>`).
    pub fn data<T: 'static>(mut self, data: T) -> Self {
        self.resource = self.resource.app_data(web::Data::new(data));
        self
    }

    pub fn route<F, Args>(mut self, method: Method, handler: F, doc: Doc) -> Self
    where
        F: Handler<Args>,
        Args: FromRequest + 'static,
        F::Output: Responder + 'static,
    {
        let route = if method == Method::GET {
            // HEAD is GET without the body (RFC 9110): the server writes the headers only.
            web::route()
                .guard(actix_web::guard::Any(actix_web::guard::Get()).or(actix_web::guard::Head()))
                .to(handler)
        } else {
            web::method(method.clone()).to(handler)
        };
        self.resource = self.resource.route(route);
        self.methods.push((method, doc));
        self
    }

    // Shorthands for `At::route`.
    method_shorthands!(get => GET, post => POST, put => PUT, delete => DELETE);

    /// Registers the path.
    pub fn add(self) {
        let At {
            routes,
            path,
            resource,
            methods,
        } = self;
        let segment = path
            .trim_start_matches('/')
            .split('/')
            .next()
            .unwrap_or_default()
            .to_string();
        debug_assert!(
            !segment.starts_with('{'),
            "{path}: the first segment is literal"
        );
        match routes.groups.iter_mut().find(|(s, _)| *s == segment) {
            Some((_, group)) => group.push(resource),
            None => routes.groups.push((segment, vec![resource])),
        }
        for (method, doc) in methods {
            routes.endpoints.push(Endpoint {
                method,
                path: path.clone(),
                doc,
            });
        }
    }
}

fn http_method(m: &Method) -> HttpMethod {
    match *m {
        Method::POST => HttpMethod::Post,
        Method::PUT => HttpMethod::Put,
        Method::DELETE => HttpMethod::Delete,
        Method::PATCH => HttpMethod::Patch,
        _ => HttpMethod::Get,
    }
}

fn error_response(description: &str, with_limits: bool) -> utoipa::openapi::Response {
    let mut response = ResponseBuilder::new().description(description).content(
        "application/json",
        ContentBuilder::new()
            .schema(Some(Ref::from_schema_name("ErrorBody")))
            .build(),
    );
    if with_limits {
        response = rate_limit_headers(response);
    }
    response.build()
}

fn rate_limit_headers(mut response: ResponseBuilder) -> ResponseBuilder {
    for (name, description) in [
        ("X-RateLimit-Limit", "requests allowed per hour"),
        ("X-RateLimit-Remaining", "requests still allowed"),
        (
            "X-RateLimit-Reset",
            "Unix time at which Remaining is back at Limit",
        ),
        (
            "X-Request-Id",
            "the id of this request, quoted in error reports",
        ),
    ] {
        response = response.header(
            name,
            HeaderBuilder::new()
                .schema(ObjectBuilder::new().schema_type(if name == "X-Request-Id" {
                    Type::String
                } else {
                    Type::Integer
                }))
                .description(Some(description))
                .build(),
        );
    }
    response
}

/// Path parameters named in a route template: `{projectId}`.
fn path_parameters(path: &str) -> Vec<String> {
    path.split('{')
        .skip(1)
        .filter_map(|part| part.split_once('}').map(|(name, _)| name.to_string()))
        .collect()
}

/// Builds the OpenAPI document of `endpoints`.
pub fn document(endpoints: &[Endpoint]) -> OpenApi {
    let mut components: BTreeMap<String, RefOr<Schema>> = BTreeMap::new();
    let mut keep = |schemas: &Schemas| {
        for (name, schema) in schemas {
            components
                .entry(name.clone())
                .or_insert_with(|| schema.clone());
        }
    };
    keep(&Body::of::<crate::error::ErrorBodySchema>().components);
    let mut items: BTreeMap<String, PathItem> = BTreeMap::new();
    for e in endpoints {
        let d = &e.doc;
        let mut op = OperationBuilder::new()
            .summary(Some(d.summary.to_string()))
            .operation_id(Some(format!(
                "{}{}",
                e.method.as_str().to_lowercase(),
                e.path.replace(['{', '}'], "").replace('/', "_")
            )))
            .tag(if d.control {
                "controls"
            } else {
                e.path
                    .trim_start_matches('/')
                    .split('/')
                    .next()
                    .unwrap_or("api")
            });
        for name in path_parameters(&e.path) {
            // Ids are UUIDs; a snapshot is known by the name it was given.
            let schema = if name == "name" {
                ObjectBuilder::new().schema_type(Type::String).into()
            } else {
                Query::uuid("", true).schema
            };
            op = op.parameter(
                ParameterBuilder::new()
                    .name(name)
                    .parameter_in(ParameterIn::Path)
                    .required(Required::True)
                    .schema(Some(schema)),
            );
        }
        for q in &d.query {
            keep(&q.components);
            op = op.parameter(
                ParameterBuilder::new()
                    .name(q.name)
                    .parameter_in(ParameterIn::Query)
                    .required(if q.required {
                        Required::True
                    } else {
                        Required::False
                    })
                    .schema(Some(q.schema.clone())),
            );
        }
        if let Some(body) = &d.request {
            keep(&body.components);
            op = op.request_body(Some(
                RequestBodyBuilder::new()
                    .required(Some(if d.request_required {
                        Required::True
                    } else {
                        Required::False
                    }))
                    .content(
                        "application/json",
                        ContentBuilder::new()
                            .schema(Some(body.schema.clone()))
                            .build(),
                    )
                    .build(),
            ));
        }
        let mut success = ResponseBuilder::new().description(d.summary.to_string());
        if let Some(body) = &d.response {
            keep(&body.components);
            success = success.content(
                body.media,
                ContentBuilder::new()
                    .schema(Some(body.schema.clone()))
                    .build(),
            );
        }
        let api = d.authenticated;
        op = op.response(d.status.to_string(), rate_limit_headers(success).build());
        if let Some(body) = &d.accepted {
            keep(&body.components);
            let accepted = ResponseBuilder::new()
                .description("requested: the engine carries it out")
                .content(
                    "application/json",
                    ContentBuilder::new()
                        .schema(Some(body.schema.clone()))
                        .build(),
                );
            op = op.response("202", rate_limit_headers(accepted).build());
        }
        if api {
            op = op
                .response(
                    "400",
                    error_response(
                        "invalid input; the message names the field or parameter",
                        true,
                    ),
                )
                .response(
                    "401",
                    error_response("missing or invalid credentials", true),
                )
                .response(
                    "403",
                    error_response(
                        "another organization's resource, or a role that does not allow it",
                        true,
                    ),
                )
                .response("404", error_response("no such resource", true))
                .response(
                    "429",
                    error_response("rate limit exceeded; see Retry-After", true),
                );
            if e.method != Method::GET {
                op = op.response(
                    "409",
                    error_response(
                        "a name already taken, a resource in use, or a state that forbids it",
                        true,
                    ),
                );
            }
            if e.method == Method::POST {
                op = op
                    .parameter(
                        ParameterBuilder::new()
                            .name("Idempotency-Key")
                            .parameter_in(ParameterIn::Header)
                            .required(Required::False)
                            .description(Some(
                                "makes a retry safe: the first answer is replayed for 24 hours",
                            ))
                            .schema(Some(
                                ObjectBuilder::new()
                                    .schema_type(utoipa::openapi::schema::Type::String)
                                    .min_length(Some(1))
                                    .max_length(Some(255))
                                    .pattern(Some("^[!-~]+$")),
                            )),
                    )
                    .response(
                        "422",
                        error_response("the Idempotency-Key was used with another request", true),
                    );
            }
            if d.request.is_some() {
                op = op
                    .response("413", error_response("body too large", true))
                    .response(
                        "415",
                        error_response("Content-Type must be application/json", true),
                    );
            }
        } else {
            op = op.security(if d.control {
                SecurityRequirement::new("ControlsToken", Vec::<String>::new())
            } else {
                SecurityRequirement::default()
            });
            for (status, why) in &d.public_errors {
                op = op.response(status.to_string(), error_response(why, true));
            }
        }
        op = op
            .response(
                "500",
                error_response("internal error; the message quotes the request id", api),
            )
            .response(
                "503",
                error_response(
                    "the database is unavailable, or the request took too long",
                    api,
                ),
            );
        let item = PathItem::new(http_method(&e.method), op.build());
        items
            .entry(e.path.clone())
            .and_modify(|existing| existing.merge_operations(item.clone()))
            .or_insert(item);
    }
    let mut paths = PathsBuilder::new();
    for (path, item) in items {
        paths = paths.path(path, item);
    }
    let security = ComponentsBuilder::new()
        .security_scheme(
            "bearerAuth",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT")
                    .build(),
            ),
        )
        .security_scheme(
            "ApiKeyAuth",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                "Authorization",
                "`Token <api token>`",
            ))),
        )
        .security_scheme(
            "ControlsToken",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                "Authorization",
                "`Token <CAPSTAN_CONTROLS_TOKEN>`: the stand-in's controls only",
            ))),
        );
    let components = components
        .into_iter()
        .fold(security, |c, (name, schema)| c.schema(name, schema))
        .build();
    OpenApiBuilder::new()
        .info(
            InfoBuilder::new()
                .title("Capstan")
                .version(env!("CARGO_PKG_VERSION"))
                .description(Some(
                    "Infrastructure-management API. Every path is also served under /v1; errors are {status, error, message}.",
                ))
                .build(),
        )
        .servers(Some([ServerBuilder::new().url("/").build()]))
        .paths(paths.build())
        .components(Some(components))
        .security(Some([
            SecurityRequirement::new("bearerAuth", Vec::<String>::new()),
            SecurityRequirement::new("ApiKeyAuth", Vec::<String>::new()),
        ]))
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_parameters_are_found() {
        assert_eq!(
            path_parameters("/organization/{organizationId}/cluster/{clusterId}"),
            ["organizationId", "clusterId"]
        );
        assert!(path_parameters("/healthz").is_empty());
    }
}
