//! Pulls: the images an organization names, fetched with its registry's access from where
//! the outbound policy lets calls made for users go (see [`crate::images`] for what may be
//! named and what the host shares).

use crate::engine::DockerEngine;
use crate::errors::said;
use crate::images::{self, ImageAccess};
use crate::plan;
use bollard::auth::DockerCredentials;
use bollard::query_parameters::CreateImageOptions;
use domain::engine::EngineError;
use domain::engine::{Cancel, StepLog};
use domain::model::RegistryAccess;
use futures_util::StreamExt;

impl DockerEngine {
    /// The image on the host, pulled from its registry when it is not there yet.
    /// Refuses a pull from a registry the outbound policy does not permit: one of its
    /// addresses private, loopback or link-local, and not allowed by the operator.
    pub(crate) async fn pull_permitted(&self, image: &str) -> Result<(), EngineError> {
        let host = plan::registry_host(image);
        self.host_permitted(&host)
            .await
            .map_err(|why| why.context(&format!("could not pull image {image}")))
    }

    /// Refuses a URL a build would make the daemon fetch (`ADD <url>`) where the outbound
    /// policy does not let calls made for users go.
    pub(crate) async fn fetch_permitted(&self, url: &str) -> Result<(), EngineError> {
        let Some(host) = domain::dockerfile::url_host(url) else {
            return Err(format!("could not fetch {url}: it names no host").into());
        };
        self.host_permitted(&host)
            .await
            .map_err(|why| why.context(&format!("could not fetch {url}")))
    }

    /// Whether every address `host` resolves to (now) is one the outbound policy permits.
    pub(crate) async fn host_permitted(&self, host: &str) -> Result<(), EngineError> {
        let addresses: Vec<std::net::IpAddr> = match host.parse::<std::net::IpAddr>() {
            Ok(ip) => vec![ip],
            Err(_) => tokio::net::lookup_host((host, 443))
                .await
                .map_err(|e| format!("{host} does not resolve: {e}"))?
                .map(|a| a.ip())
                .collect(),
        };
        if addresses
            .iter()
            .all(|ip| self.settings.policy.permits(host, *ip))
        {
            Ok(())
        } else {
            Err(EngineError::refused(
                self.settings.policy.refusal(host).to_string(),
            ))
        }
    }

    /// An image an organization names is pulled with its registry access each time, unless
    /// the operator shares its repository (see [`crate::images`]).
    pub(crate) async fn ensure_image(
        &self,
        image: &str,
        access: ImageAccess<'_>,
        log: &StepLog,
        cancel: &Cancel,
    ) -> Result<(), EngineError> {
        let (registry, from_host) = match access {
            ImageAccess::Host => (None, true),
            ImageAccess::Named(registry) => {
                images::nameable(image)?;
                (registry, self.settings.host_images.shares(image))
            }
        };
        if from_host && self.docker.inspect_image(image).await.is_ok() {
            log.info(&format!("image {image} is on the Docker host"));
            return Ok(());
        }
        self.pull_permitted(image).await?;
        log.info(&format!("pulling image {image}"));
        let credentials = Self::credentials(registry);
        let options = CreateImageOptions {
            from_image: Some(image.to_string()),
            ..Default::default()
        };
        let mut pull = self.docker.create_image(Some(options), None, credentials);
        let mut last = String::new();
        loop {
            let next = tokio::select! {
                next = pull.next() => next,
                () = cancel.canceled() => return Err("canceled while pulling the image".into()),
            };
            match next {
                None => break,
                Some(Ok(info)) => {
                    let status = info.status.unwrap_or_default();
                    // Progress lines repeat per layer; each kind of news is logged once.
                    if !status.is_empty() && status != last && info.progress_detail.is_none() {
                        log.info(&status);
                        last = status;
                    }
                }
                Some(Err(e)) => return Err(said(&format!("could not pull image {image}"), e)),
            }
        }
        Ok(())
    }

    /// The credentials a pull from `registry` signs in with, when it has some.
    pub(crate) fn credentials(registry: Option<&RegistryAccess>) -> Option<DockerCredentials> {
        registry
            .filter(|r| r.username.is_some() || r.password.is_some())
            .map(|r| DockerCredentials {
                username: r.username.clone(),
                password: r.password.as_ref().map(|p| p.expose().to_string()),
                serveraddress: Some(r.url.clone()),
                ..Default::default()
            })
    }
}
