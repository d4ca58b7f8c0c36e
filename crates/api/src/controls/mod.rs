//! The stand-in's controls, under `/_capstan/` (never under `/v1`): what a test suite does to
//! Capstan as a whole. Off unless the server is started with them (`CAPSTAN_CONTROLS=on`),
//! then answering only their own token, which no API token replaces.

pub mod faults;
pub mod fixture;
mod routes;

pub use routes::routes;

use crate::error::ApiError;
use crate::AppState;
use actix_web::http::{header, StatusCode};
use actix_web::{dev::Payload, web, FromRequest, HttpRequest};
use domain::clock::ManualClock;
use futures_util::future::LocalBoxFuture;
use serde::de::DeserializeOwned;
use std::sync::Arc;
use subtle::ConstantTimeEq;

/// Largest body a control takes (a fixture).
pub const CONTROL_BODY_LIMIT: usize = 16 * 1024 * 1024;

pub struct Controls {
    /// The token the controls answer (`CAPSTAN_CONTROLS_TOKEN`).
    token: String,
    /// The clock the controls move; none: time is the system's (`CAPSTAN_CLOCK=manual` sets it).
    pub clock: Option<Arc<ManualClock>>,
    pub faults: faults::Faults,
}

impl Controls {
    pub fn new(token: impl Into<String>) -> Self {
        Self {
            token: token.into(),
            clock: None,
            faults: faults::Faults::default(),
        }
    }

    /// Lets `POST /_capstan/clock` move `clock` (the one the application reads).
    pub fn with_clock(mut self, clock: Arc<ManualClock>) -> Self {
        self.clock = Some(clock);
        self
    }

    fn admits(&self, given: &str) -> bool {
        let expected = self.token.as_bytes();
        given.len() == expected.len() && bool::from(given.as_bytes().ct_eq(expected))
    }
}

/// A request the controls' token authenticates; with the controls off, every control is 404.
pub struct Operator(pub web::Data<AppState>);

impl FromRequest for Operator {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let checked = operator(req);
        let state = req.app_data::<web::Data<AppState>>().cloned();
        let caller = req
            .peer_addr()
            .map(|a| a.ip().to_string())
            .unwrap_or_else(|| "unknown".into());
        Box::pin(async move {
            match (checked, state) {
                // A wrong token costs its caller's address a request of its quota, so
                // guessing the token is metered even though the controls are not.
                (Err(e), Some(state)) if e.status == StatusCode::UNAUTHORIZED => {
                    let spent = state.limiter.acquire(&format!("controls:{caller}")).await?;
                    if spent.allowed {
                        Err(e)
                    } else {
                        Err(ApiError::new(
                            StatusCode::TOO_MANY_REQUESTS,
                            "too many attempts with a wrong controls token; try again later",
                        ))
                    }
                }
                (checked, _) => checked,
            }
        })
    }
}

fn operator(req: &HttpRequest) -> Result<Operator, ApiError> {
    let state = req
        .app_data::<web::Data<AppState>>()
        .cloned()
        .ok_or_else(|| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "state missing"))?;
    let Some(controls) = &state.controls else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("no route for {} {}", req.method(), req.path()),
        ));
    };
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().split_once(' '))
        // `Token` as documented; `Bearer` too, as many clients send any token that way.
        .filter(|(scheme, _)| {
            scheme.eq_ignore_ascii_case("token") || scheme.eq_ignore_ascii_case("bearer")
        })
        .map(|(_, token)| token.trim());
    match given {
        Some(token) if controls.admits(token) => Ok(Operator(state)),
        _ => Err(ApiError::unauthorized(
            "the controls take 'Authorization: Token <CAPSTAN_CONTROLS_TOKEN>'",
        )),
    }
}

impl Operator {
    pub fn controls(&self) -> Result<&Controls, ApiError> {
        self.0
            .controls
            .as_ref()
            .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "the controls are off"))
    }
}

/// A control's JSON body (errors name the member at fault); an empty body is `T::default()`.
pub struct ControlJson<T>(pub T);

impl<T: DeserializeOwned + Default + 'static> FromRequest for ControlJson<T> {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let content_type = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let mut payload = payload.take();
        Box::pin(async move {
            let body = crate::extract::read_json::<T>(
                content_type,
                None,
                Ok(CONTROL_BODY_LIMIT),
                &mut payload,
                false,
            )
            .await?;
            Ok(ControlJson(body.unwrap_or_default()))
        })
    }
}
