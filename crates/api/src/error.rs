//! The HTTP layer's one error type and its one mapping from domain errors.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use domain::DomainError;
use serde::Serialize;
use std::fmt;

/// An error answer: `{"status", "error", "message"}`.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    /// What really happened, for the log only (never sent).
    pub cause: Option<String>,
}

/// Marks a response whose body is already the error JSON.
#[derive(Debug, Clone, Copy)]
pub struct ErrorBodyWritten;

/// The internal cause of a 500, handed to the logging middleware.
#[derive(Debug, Clone)]
pub struct InternalCause(pub String);

/// The error body as the OpenAPI document shows it.
#[derive(utoipa::ToSchema)]
#[schema(as = ErrorBody)]
#[allow(dead_code)]
pub struct ErrorBodySchema {
    /// The HTTP status code.
    pub status: u16,
    /// The status text.
    pub error: String,
    /// What is wrong, naming the field or parameter at fault.
    pub message: String,
}

#[derive(Serialize)]
pub struct ErrorBody<'a> {
    pub status: u16,
    pub error: &'a str,
    pub message: &'a str,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            cause: None,
        }
    }
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, message)
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.status.as_u16(), self.message)
    }
}

impl From<DomainError> for ApiError {
    fn from(e: DomainError) -> Self {
        let status = match &e {
            DomainError::Invalid { .. } => StatusCode::BAD_REQUEST,
            DomainError::Unauthenticated(_) => StatusCode::UNAUTHORIZED,
            DomainError::Forbidden(_) => StatusCode::FORBIDDEN,
            DomainError::NotFound(_) => StatusCode::NOT_FOUND,
            DomainError::Conflict(_) => StatusCode::CONFLICT,
            DomainError::Unavailable(_) | DomainError::StoreFull(_) | DomainError::Upstream(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            DomainError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        let cause = match &e {
            DomainError::Internal(c) | DomainError::Unavailable(c) | DomainError::StoreFull(c) => {
                Some(c.clone())
            }
            _ => None,
        };
        Self {
            status,
            message: e.to_string(),
            cause,
        }
    }
}

/// Builds the JSON error response for any status.
pub fn error_response(status: StatusCode, message: &str) -> HttpResponse {
    let body = ErrorBody {
        status: status.as_u16(),
        error: status.canonical_reason().unwrap_or("Error"),
        message,
    };
    let mut res = HttpResponse::build(status).json(body);
    res.extensions_mut().insert(ErrorBodyWritten);
    res
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        self.status
    }

    fn error_response(&self) -> HttpResponse {
        let mut res = error_response(self.status, &self.message);
        if let Some(cause) = &self.cause {
            res.extensions_mut().insert(InternalCause(cause.clone()));
        }
        res
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
