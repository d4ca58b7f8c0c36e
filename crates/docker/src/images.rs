//! Whose an image on a Docker host is. Organizations share the host's image store, so an
//! image being there proves nothing about who may run it: it may be another organization's
//! private pull or build. An image an organization names is therefore pulled with that
//! organization's registry access every time (as Kubernetes' always-pull admission does), and
//! the host's copy serves without asking a registry only for what Capstan built for the
//! service itself, what the operator chose (database and terraform images), and repositories
//! the operator shares with every organization (`CAPSTAN_HOST_IMAGES`).

use crate::errors::BadSetting;
use domain::engine::EngineError;
use domain::model::RegistryAccess;

/// The repository the images Capstan builds are tagged in (`capstan-build/<service>:<commit>`).
pub const BUILT_REPOSITORY: &str = "capstan-build/";

/// How an image may be had.
#[derive(Clone, Copy)]
pub(crate) enum ImageAccess<'a> {
    /// Capstan's own choice (an image it built for this service, or an operator's image): the
    /// host's copy serves, and is pulled only when missing.
    Host,
    /// Named by an organization (a container's or job's image, a Dockerfile's `FROM`):
    /// pulled with the organization's access to its registry, unless shared by the operator.
    Named(Option<&'a RegistryAccess>),
}

/// Repositories the operator lets every organization run from the host without a pull: exact
/// names, or prefixes ending in `/` (`capstan-test/`).
#[derive(Clone, Debug, Default)]
pub struct HostImages(Vec<String>);

impl HostImages {
    /// From the setting's comma-separated entries; refuses one that names no repository.
    pub fn parse(text: &str) -> Result<Self, BadSetting> {
        let mut shared = Vec::new();
        for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let name = entry.trim_end_matches('/');
            let valid = !name.is_empty()
                && name.split('/').all(|part| {
                    !part.is_empty()
                        && part.chars().all(|c| {
                            c.is_ascii_lowercase() || c.is_ascii_digit() || "._-:".contains(c)
                        })
                });
            if !valid || name.contains('@') {
                return Err(format!(
                    "'{entry}' is not an image repository (nor a prefix ending in /)"
                )
                .into());
            }
            let name = without_hub(name);
            if name == "capstan-build" || name.starts_with(BUILT_REPOSITORY) {
                return Err(format!(
                    "'{entry}' would share the images Capstan builds for each organization"
                )
                .into());
            }
            let prefix = if entry.ends_with('/') { "/" } else { "" };
            shared.push(format!("{name}{prefix}"));
        }
        Ok(Self(shared))
    }

    /// Whether the operator shares the repository of `image`.
    pub fn shares(&self, image: &str) -> bool {
        let repository = repository(image);
        self.0.iter().any(|entry| match entry.strip_suffix('/') {
            Some(prefix) => repository
                .strip_prefix(prefix)
                .is_some_and(|rest| rest.starts_with('/')),
            None => repository == entry,
        })
    }
}

/// The repository of a reference, as the host's image store names it: its tag or digest cut
/// and Docker Hub's own host names dropped.
pub fn repository(image: &str) -> &str {
    let name = image.split('@').next().unwrap_or_default();
    let last_slash = name.rfind('/').map_or(0, |i| i + 1);
    let name = match name[last_slash..].find(':') {
        Some(colon) => &name[..last_slash + colon],
        None => name,
    };
    without_hub(name)
}

fn without_hub(name: &str) -> &str {
    ["docker.io/", "index.docker.io/"]
        .iter()
        .find_map(|hub| name.strip_prefix(hub))
        .unwrap_or(name)
}

/// Refuses a reference an organization may not name: one into the repository of Capstan's
/// builds (another service's image, or a pull that would replace one), or an image id (it
/// names whatever one host holds, which no registry vouches for).
pub fn nameable(image: &str) -> Result<(), EngineError> {
    let repository = repository(image);
    if repository.starts_with(BUILT_REPOSITORY) || repository == "capstan-build" {
        return Err(format!(
            "image {image}: {BUILT_REPOSITORY} holds the images Capstan builds for their own \
             services; no other service may name one"
        )
        .into());
    }
    let is_hex = |s: &str| s.len() == 64 && s.chars().all(|c| c.is_ascii_hexdigit());
    if repository == "sha256" || image.starts_with("sha256:") || is_hex(repository) {
        return Err(format!(
            "image {image}: an image id names what one Docker host holds, not an image of a \
             registry; name a repository with a tag or a digest"
        )
        .into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repository_is_the_reference_without_tag_digest_or_hub_host() {
        assert_eq!(repository("capstan-test/busybox:1"), "capstan-test/busybox");
        assert_eq!(repository("docker.io/library/redis:7"), "library/redis");
        assert_eq!(repository("index.docker.io/x/y@sha256:ab"), "x/y");
        assert_eq!(
            repository("127.0.0.1:5000/team/app:2"),
            "127.0.0.1:5000/team/app"
        );
        assert_eq!(repository("127.0.0.1:5000/app"), "127.0.0.1:5000/app");
        assert_eq!(repository("nginx"), "nginx");
    }

    #[test]
    fn the_builds_repository_and_image_ids_are_not_nameable() {
        let id = "a".repeat(64);
        for refused in [
            "capstan-build/0b5e:abc".to_string(),
            "docker.io/capstan-build/0b5e:abc".to_string(),
            "index.docker.io/capstan-build/x".to_string(),
            "capstan-build:latest".to_string(),
            format!("sha256:{id}"),
            id.clone(),
        ] {
            assert!(nameable(&refused).is_err(), "{refused}");
        }
        for named in [
            "nginx:1",
            "registry.example.com/capstan-build/x:1",
            "team/capstan-build:1",
            "redis@sha256:0123",
        ] {
            assert!(nameable(named).is_ok(), "{named}");
        }
    }

    #[test]
    fn the_operator_shares_repositories_by_name_or_prefix() {
        let shared =
            HostImages::parse("docker.io/capstan-test/, 127.0.0.1:5000/base, localhost:5000/")
                .unwrap();
        assert!(shared.shares("localhost:5000/x:1"));
        assert!(shared.shares("capstan-test/busybox:1"));
        assert!(shared.shares("docker.io/capstan-test/busybox"));
        assert!(shared.shares("127.0.0.1:5000/base:3"));
        assert!(!shared.shares("127.0.0.1:5000/base/other:3"));
        assert!(!shared.shares("capstan-testing/busybox:1"));
        assert!(!shared.shares("nginx:1"));
        assert!(!HostImages::default().shares("capstan-test/busybox:1"));
    }

    #[test]
    fn a_shared_entry_must_name_a_repository_other_than_the_builds() {
        for refused in [
            "capstan-build/",
            "capstan-build",
            "Upper/x",
            "a//b",
            "x@sha256:1",
            "/",
        ] {
            assert!(HostImages::parse(refused).is_err(), "{refused}");
        }
        assert!(HostImages::parse("").unwrap().0.is_empty());
    }
}
