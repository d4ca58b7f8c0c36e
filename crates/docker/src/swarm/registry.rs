//! Images built from git reaching a Swarm's nodes through a registry the cluster names: the
//! manager's daemon tags and pushes them there, and each node pulls them as it would any
//! image, with no daemon of its own named.

use crate::engine::DockerEngine;
use crate::errors::said;
use bollard::query_parameters::{PushImageOptions, TagImageOptions};
use domain::engine::{Cancel, EngineError, StepLog};
use futures_util::StreamExt;

/// The name `image` (built on the manager) has in `registry`.
pub(crate) fn in_registry(registry: &str, image: &str) -> String {
    format!("{}/{image}", registry.trim_end_matches('/'))
}

impl DockerEngine {
    /// Pushes `image` to `registry` through the manager's daemon: its name there.
    pub(crate) async fn push_to_registry(
        &self,
        image: &str,
        registry: &str,
        log: &StepLog,
        cancel: &Cancel,
    ) -> Result<String, EngineError> {
        let pushed = in_registry(registry, image);
        let (repo, tag) = pushed.rsplit_once(':').unwrap_or((&pushed, "latest"));
        self.docker
            .tag_image(
                image,
                Some(TagImageOptions {
                    repo: Some(repo.to_string()),
                    tag: Some(tag.to_string()),
                }),
            )
            .await
            .map_err(|e| said(&format!("could not tag image {image} for {registry}"), e))?;
        let options = PushImageOptions {
            tag: Some(tag.to_string()),
            ..Default::default()
        };
        let mut pushing = self.docker.push_image(repo, Some(options), None);
        loop {
            let next = tokio::select! {
                next = pushing.next() => next,
                () = cancel.canceled() => return Err("canceled while pushing the image".into()),
            };
            match next {
                None => break,
                Some(Ok(_)) => {}
                Some(Err(e)) => {
                    return Err(said(
                        &format!("could not push image {image} to the registry {registry}"),
                        e,
                    ))
                }
            }
        }
        log.info(&format!(
            "pushed image {pushed} to the registry {registry}: each node pulls it from there"
        ));
        Ok(pushed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_built_image_is_named_under_the_registry() {
        assert_eq!(
            in_registry("10.0.0.2:5000/team/", "capstan-build/abc:0123"),
            "10.0.0.2:5000/team/capstan-build/abc:0123"
        );
    }
}
