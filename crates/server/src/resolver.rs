//! The DNS resolver custom domain checks go through: the system's configuration
//! (`/etc/resolv.conf`, `/etc/hosts`) read by hickory.

use async_trait::async_trait;
use domain::dns::{ResolveError, Resolver};
use hickory_resolver::name_server::TokioConnectionProvider;
use hickory_resolver::TokioResolver;
use std::net::IpAddr;

pub struct SystemResolver(TokioResolver);

impl SystemResolver {
    /// The system's resolver; a machine without a usable configuration gets hickory's default
    /// (public) name servers instead, and says so.
    pub fn new() -> Self {
        let builder = TokioResolver::builder_tokio().unwrap_or_else(|e| {
            tracing::warn!(error = %e, "no usable system DNS configuration; using hickory's default name servers");
            TokioResolver::builder_with_config(
                hickory_resolver::config::ResolverConfig::default(),
                TokioConnectionProvider::default(),
            )
        });
        Self(builder.build())
    }
}

#[async_trait]
impl Resolver for SystemResolver {
    async fn addresses(&self, host: &str) -> Result<Vec<IpAddr>, ResolveError> {
        match self.0.lookup_ip(host).await {
            Ok(found) => Ok(found.iter().collect()),
            Err(e) if e.is_nx_domain() || e.is_no_records_found() => Err(ResolveError::NotFound),
            Err(e) => Err(ResolveError::Failed(e.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn names_in_the_hosts_file_resolve_without_a_network() {
        let found = SystemResolver::new().addresses("localhost").await.unwrap();
        assert!(found.iter().any(IpAddr::is_loopback), "{found:?}");
        let special = SystemResolver::new()
            .addresses("shop.localhost")
            .await
            .unwrap();
        assert!(special.iter().all(IpAddr::is_loopback), "{special:?}");
    }

    #[tokio::test]
    async fn names_under_invalid_do_not_exist() {
        assert_eq!(
            SystemResolver::new().addresses("shop.invalid").await,
            Err(ResolveError::NotFound)
        );
    }
}
