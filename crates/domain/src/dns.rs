//! Resolving host names: the port custom domain checks go through, so that tests answer for
//! the DNS and the binary asks the system's resolver.

use async_trait::async_trait;
use std::net::IpAddr;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResolveError {
    /// The name has no address (NXDOMAIN or no A/AAAA record).
    NotFound,
    /// The resolver could not answer (unreachable, timed out, refused, misconfigured).
    Failed(String),
}

#[async_trait]
pub trait Resolver: Send + Sync {
    /// The addresses `host` resolves to.
    async fn addresses(&self, host: &str) -> Result<Vec<IpAddr>, ResolveError>;
}

/// The resolver of a Capstan built without one: every lookup fails, saying so.
pub struct NoResolver;

#[async_trait]
impl Resolver for NoResolver {
    async fn addresses(&self, _host: &str) -> Result<Vec<IpAddr>, ResolveError> {
        Err(ResolveError::Failed("no resolver is configured".into()))
    }
}
