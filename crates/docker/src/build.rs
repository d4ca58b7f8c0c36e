//! Images built from git: the repository fetched at the commit asked for, its context sent to
//! the daemon, the build's output in the step's log. An image is tagged by its commit and kept
//! per service (the newest few), so deploying a commit built before reuses its image; and it is
//! known by its recipe (repository, commit, Dockerfile, arguments), so another service of the
//! organization building the same (a pull request's preview, the blueprint after a merge)
//! takes the image under a tag of its own rather than building it again.

use crate::engine::DockerEngine;
use crate::errors::said;
use crate::images::{ImageAccess, BUILT_REPOSITORY};
use crate::plan::LABEL_SERVICE;
use bollard::query_parameters::{BuildImageOptions, ListImagesOptions, RemoveImageOptions};
use bollard::Docker;
use domain::dockerfile;
use domain::engine::EngineError;
use domain::engine::{Cancel, StepLog, StepWork};
use domain::ids::{DeploymentRequestId, ServiceId};
use domain::model::{BuildSource, GitAccess, GitRepository};
use futures_util::StreamExt;
use std::collections::{BTreeMap, HashMap};
use std::path::{Component, Path, PathBuf};

/// The label an image carries with the commit it was built from.
const LABEL_COMMIT: &str = "capstan.commit";
/// The label an image carries with the digest of its recipe ([`recipe`]).
const LABEL_RECIPE: &str = "capstan.recipe";
/// The build output lines a failure quotes.
const FAILURE_LINES: usize = 15;

/// The image a service's build of `commit` is tagged as.
pub fn built_image(service: ServiceId, commit: &str) -> String {
    format!("{BUILT_REPOSITORY}{}:{commit}", service.0.simple())
}

/// What makes two builds the same build: the repository and commit, where the context and the
/// Dockerfile are in it, the stage and the arguments given; a digest, so that argument values
/// (secrets among them) are not written in a label.
fn recipe(
    repository: &GitRepository,
    commit: &str,
    dockerfile: &str,
    target: &str,
    arguments: &HashMap<String, String>,
) -> String {
    use sha2::Digest;
    let mut digest = sha2::Sha256::new();
    let sorted: BTreeMap<&String, &String> = arguments.iter().collect();
    for part in [
        repository.url.as_str(),
        commit,
        repository.root_path.as_str(),
        dockerfile,
        target,
    ] {
        digest.update(part.as_bytes());
        digest.update([0]);
    }
    for (name, value) in sorted {
        digest.update(name.as_bytes());
        digest.update([1]);
        digest.update(value.as_bytes());
        digest.update([0]);
    }
    domain::hex::encode(&digest.finalize())
}

fn is_full_commit(revision: &str) -> bool {
    revision.len() == 40 && revision.chars().all(|c| c.is_ascii_hexdigit())
}

/// `relative` inside `base`, or `None` when it would leave it (`..`) or names nothing there.
pub(crate) fn inside(base: &Path, relative: &str) -> Option<PathBuf> {
    let mut path = base.to_path_buf();
    for part in Path::new(relative.trim_start_matches('/')).components() {
        match part {
            Component::Normal(p) => path.push(p),
            Component::CurDir => {}
            _ => return None,
        }
    }
    // A symbolic link in the repository may point anywhere: what it resolves to must be in.
    let resolved = path.canonicalize().ok()?;
    resolved
        .starts_with(base.canonicalize().ok()?)
        .then_some(resolved)
}

/// How a deployment fetches `repo`, and the revision it fetches: the commit asked for, else
/// the one deployed, else the branch's newest.
pub(crate) fn fetched_source<'a>(
    work: &'a StepWork<'_>,
    repo: &GitRepository,
) -> Result<(&'a GitAccess, String), EngineError> {
    let git = work
        .inputs
        .git
        .as_ref()
        .ok_or("the service's repository could not be read")?;
    let revision = work
        .request
        .target
        .git_commit_id
        .clone()
        .or_else(|| repo.deployed_commit_id.clone())
        .unwrap_or_else(|| repo.branch.clone());
    Ok((git, revision))
}

/// A directory removed when dropped (the checkout, whatever way the build ends).
pub(crate) struct Scratch(pub PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The context as Docker takes it: a tar of the directory, symbolic links kept as links.
fn context_archive(dir: &Path) -> Result<Vec<u8>, EngineError> {
    let mut tar = tar::Builder::new(Vec::new());
    tar.follow_symlinks(false);
    tar.append_dir_all(".", dir)
        .and_then(|()| tar.into_inner())
        .map_err(|e| format!("could not pack the build context: {e}").into())
}

impl DockerEngine {
    /// The image a deployment of a service built from git runs: the one its build step made
    /// (or found), else the deployed commit's.
    pub(crate) fn image_built_for(&self, work: &StepWork<'_>) -> Result<String, EngineError> {
        if let Some(image) = self.built_images().get(&work.request.id).cloned() {
            return Ok(image);
        }
        let deployed = work
            .service
            .spec
            .build_source()
            .and_then(|s| s.repository.deployed_commit_id.clone());
        match work.request.target.git_commit_id.clone().or(deployed) {
            Some(commit) if is_full_commit(&commit) => Ok(built_image(work.service.id, &commit)),
            _ => Err("no image was built for this deployment: its build step did not run".into()),
        }
    }

    /// Forgets what a deployment built, once it ended.
    pub(crate) fn forget_build(&self, request: DeploymentRequestId) {
        self.built_images().remove(&request);
    }

    /// The build step: the image of the commit asked for, built unless the host has it.
    pub(crate) async fn build(
        &self,
        work: &StepWork<'_>,
        source: BuildSource<'_>,
    ) -> Result<(), EngineError> {
        let (log, cancel) = (work.log, work.cancel);
        let (git, revision) = fetched_source(work, source.repository)?;
        if is_full_commit(&revision) && self.reuse(work, &revision, log).await {
            return Ok(());
        }
        let (scratch, commit) = self
            .fetch_into_scratch(work.request.id, git, &revision, log, cancel)
            .await?;
        if self.reuse(work, &commit, log).await {
            return Ok(());
        }
        let _ = std::fs::remove_dir_all(scratch.0.join(".git"));
        let context = inside(&scratch.0, &source.repository.root_path).ok_or_else(|| {
            format!(
                "the root_path {} is not a directory of the repository",
                source.repository.root_path
            )
        })?;
        let dockerfile_at = inside(&context, source.dockerfile_path).ok_or_else(|| {
            format!(
                "no Dockerfile at {} (dockerfile_path, from the root_path {})",
                source.dockerfile_path, source.repository.root_path
            )
        })?;
        let text = std::fs::read_to_string(&dockerfile_at)
            .map_err(|e| format!("could not read the Dockerfile: {e}"))?;
        let declared = dockerfile::declared_args(&text);
        let arguments: HashMap<String, String> = work
            .inputs
            .environment
            .iter()
            .filter(|e| declared.contains(&e.key))
            .map(|e| (e.key.clone(), e.value.expose().to_string()))
            .collect();
        if !arguments.is_empty() {
            let mut names: Vec<&String> = arguments.keys().collect();
            names.sort();
            let names: Vec<&str> = names.into_iter().map(String::as_str).collect();
            log.info(&format!("build arguments: {}", names.join(", ")));
        }
        // Every image the daemon would pull during the build is pulled first, where the
        // outbound policy sees it: the build then finds each on the host.
        let passed: BTreeMap<String, String> = arguments.clone().into_iter().collect();
        let pulled = dockerfile::pulled_images(&text, &passed)
            .map_err(|reason| format!("the Dockerfile cannot be built: {reason}"))?;
        if let Some(frontend) = dockerfile::frontend_image(&text) {
            self.pull_permitted(&frontend).await.map_err(|why| {
                format!("the Dockerfile cannot be built: its # syntax frontend: {why}")
            })?;
        }
        let fetched = dockerfile::fetched_urls(&text)
            .map_err(|reason| format!("the Dockerfile cannot be built: {reason}"))?;
        for url in &fetched {
            self.fetch_permitted(url)
                .await
                .map_err(|why| why.context("the Dockerfile cannot be built"))?;
        }
        for image in pulled {
            self.ensure_image(&image, ImageAccess::Named(None), log, cancel)
                .await?;
        }
        let relative = dockerfile_at
            .strip_prefix(&context)
            .map_err(|_| "the Dockerfile is outside the build context".to_string())?
            .to_string_lossy()
            .to_string();
        let image = built_image(work.service.id, &commit);
        let target = source.target_stage.unwrap_or_default().to_string();
        let recipe = recipe(source.repository, &commit, &relative, &target, &arguments);
        if self.take_built(work, &recipe, &image, log).await {
            return Ok(());
        }
        let archive = context_archive(&context)?;
        let options = BuildImageOptions {
            dockerfile: relative,
            t: Some(image.clone()),
            buildargs: Some(arguments),
            target,
            labels: Some(self.marked(HashMap::from([
                (LABEL_SERVICE.to_string(), work.service.id.0.to_string()),
                (
                    crate::plan::LABEL_ORGANIZATION.to_string(),
                    work.service.organization_id.0.to_string(),
                ),
                (LABEL_COMMIT.to_string(), commit.clone()),
                (LABEL_RECIPE.to_string(), recipe),
            ]))),
            rm: true,
            forcerm: true,
            // On the environment's network, behind its firewall rules (not Docker's default
            // bridge, which every container of the host may share).
            networkmode: Some(crate::plan::network_name(work.service.environment_id)),
            ..Default::default()
        };
        self.ensure_network(work.service).await?;
        log.info(&format!("building image {image}"));
        self.run_build(options, archive, log, cancel).await?;
        log.info(&format!("built image {image}"));
        self.built_images().insert(work.request.id, image.clone());
        self.prune(work.service.id, &image, log).await;
        Ok(())
    }

    /// Whether an image of the same recipe was built for another service of the organization:
    /// then it is tagged as `image` too (recorded for the deploy step), and not built again.
    async fn take_built(
        &self,
        work: &StepWork<'_>,
        recipe: &str,
        image: &str,
        log: &StepLog,
    ) -> bool {
        let options = ListImagesOptions {
            filters: Some(HashMap::from([(
                "label".to_string(),
                self.scoped(vec![
                    format!(
                        "{}={}",
                        crate::plan::LABEL_ORGANIZATION,
                        work.service.organization_id.0
                    ),
                    format!("{LABEL_RECIPE}={recipe}"),
                ]),
            )])),
            ..Default::default()
        };
        let Ok(found) = self.docker.list_images(Some(options)).await else {
            return false;
        };
        let Some(built) = found.first() else {
            return false;
        };
        let (repo, tag) = image.rsplit_once(':').unwrap_or((image, "latest"));
        let tagged = self
            .docker
            .tag_image(
                &built.id,
                Some(bollard::query_parameters::TagImageOptions {
                    repo: Some(repo.to_string()),
                    tag: Some(tag.to_string()),
                }),
            )
            .await;
        if let Err(e) = tagged {
            tracing::debug!(error = %e, "a build of the same recipe could not be tagged");
            return false;
        }
        log.info(&format!(
            "the same build (repository, commit, Dockerfile, arguments) was made before in the \
             organization: image {image} reuses it, no build"
        ));
        self.built_images()
            .insert(work.request.id, image.to_string());
        true
    }

    /// Whether the host has the image of `commit` already (recorded for the deploy step).
    async fn reuse(&self, work: &StepWork<'_>, commit: &str, log: &StepLog) -> bool {
        let image = built_image(work.service.id, commit);
        if self.docker.inspect_image(&image).await.is_err() {
            return false;
        }
        log.info(&format!(
            "image {image} of commit {commit} is on the Docker host: no build"
        ));
        self.built_images().insert(work.request.id, image);
        true
    }

    /// `revision` fetched into a directory of the request's own; the commit.
    pub(crate) async fn fetch_into_scratch(
        &self,
        request: DeploymentRequestId,
        git: &GitAccess,
        revision: &str,
        log: &StepLog,
        cancel: &Cancel,
    ) -> Result<(Scratch, String), EngineError> {
        let scratch =
            Scratch(std::env::temp_dir().join(format!("capstan-build-{}", request.0.simple())));
        let _ = std::fs::remove_dir_all(&scratch.0);
        std::fs::create_dir_all(&scratch.0)
            .map_err(|e| format!("could not make a directory for the checkout: {e}"))?;
        let commit = self.fetch(git, revision, &scratch.0, log, cancel).await?;
        Ok((scratch, commit))
    }

    async fn fetch(
        &self,
        git: &GitAccess,
        revision: &str,
        into: &Path,
        log: &StepLog,
        cancel: &Cancel,
    ) -> Result<String, EngineError> {
        let checkouts = self
            .settings
            .checkouts
            .as_ref()
            .ok_or("this Capstan fetches no git repository")?;
        log.info(&format!("fetching {} at {revision}", git.url));
        let fetched = tokio::select! {
            fetched = checkouts.checkout(git, revision, into) => fetched,
            () = cancel.canceled() => return Err("canceled while fetching the repository".into()),
        };
        let commit = fetched.map_err(|e| format!("could not fetch the repository: {e}"))?;
        log.info(&format!("fetched commit {commit}"));
        Ok(commit)
    }

    /// Sends the context and follows the build; a cancel drops the connection, which stops
    /// the daemon's build.
    async fn run_build(
        &self,
        options: BuildImageOptions,
        archive: Vec<u8>,
        log: &StepLog,
        cancel: &Cancel,
    ) -> Result<(), EngineError> {
        let mut building =
            self.docker
                .build_image(options, None, Some(bollard::body_full(archive.into())));
        let mut step = String::new();
        let mut since_step: Vec<String> = Vec::new();
        loop {
            let next = tokio::select! {
                next = building.next() => next,
                () = cancel.canceled() => return Err("canceled while the image was built".into()),
            };
            let failure = match next {
                None => return Ok(()),
                Some(Ok(info)) => {
                    for line in info.stream.iter().flat_map(|s| s.lines()) {
                        let line = without_escapes(line);
                        let line = line.trim_end();
                        if line.is_empty() {
                            continue;
                        }
                        if line.starts_with("Step ") {
                            step = line.to_string();
                            since_step.clear();
                        } else {
                            since_step.push(line.to_string());
                        }
                        log.info(line);
                    }
                    match info.error_detail.and_then(|e| e.message) {
                        Some(message) => message,
                        None => continue,
                    }
                }
                Some(Err(bollard::errors::Error::DockerStreamError { error })) => error,
                Some(Err(e)) => return Err(said("the build stopped", e)),
            };
            let tail = &since_step[since_step.len().saturating_sub(FAILURE_LINES)..];
            let at = if step.is_empty() {
                String::new()
            } else {
                format!(" at {step}")
            };
            return Err(format!(
                "the build failed{at}: {failure}; its output:\n{}",
                tail.join("\n")
            )
            .into());
        }
    }

    /// The images this installation built for `service`.
    /// By the service's own repository of tags, not by label: an image built for another
    /// service with the same recipe is the service's too under its tag; only its own tags are
    /// answered.
    async fn built_images_of(
        &self,
        service: ServiceId,
    ) -> Result<Vec<bollard::models::ImageSummary>, EngineError> {
        built_images_on(&self.docker, service).await
    }

    /// Removes every image built for `service` (gone): its tags, and with the last the image;
    /// on a Swarm, on every node it was loaded onto too.
    pub(crate) async fn remove_built_images(&self, service: ServiceId) -> Result<(), EngineError> {
        remove_built_images_on(&self.docker, service).await?;
        for node in &self.nodes {
            remove_built_images_on(&node.docker, service)
                .await
                .map_err(|e| e.context(&format!("the Swarm node at {}", node.address)))?;
        }
        Ok(())
    }

    /// Removes the service's built images past the newest `images_kept` (never `current`).
    /// An image a container still runs stays; a failure to prune fails nothing.
    async fn prune(&self, service: ServiceId, current: &str, log: &StepLog) {
        let Ok(mut images) = self.built_images_of(service).await else {
            return;
        };
        images.sort_by_key(|i| std::cmp::Reverse(i.created));
        for old in images.iter().skip(self.settings.images_kept) {
            for tag in &old.repo_tags {
                if tag == current {
                    continue;
                }
                match self
                    .docker
                    .remove_image(tag, None::<RemoveImageOptions>, None)
                    .await
                {
                    Ok(_) => log.info(&format!("removed old image {tag}")),
                    Err(e) => tracing::debug!(image = %tag, error = %e, "old image kept"),
                }
            }
        }
    }
}

/// A line of the daemon's build output without its terminal escapes (the colour it gives a
/// step's standard error): the log and a failure's reason are read as text.
fn without_escapes(line: &str) -> String {
    let mut plain = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            plain.push(c);
            continue;
        }
        if chars.next_if_eq(&'[').is_some() {
            // A control sequence ends at its first letter (or `@`..`~`).
            for end in chars.by_ref() {
                if ('@'..='~').contains(&end) {
                    break;
                }
            }
        }
    }
    plain
}

/// The images built for `service` that `docker` holds, each with its own tags only.
async fn built_images_on(
    docker: &Docker,
    service: ServiceId,
) -> Result<Vec<bollard::models::ImageSummary>, EngineError> {
    let own = format!("{BUILT_REPOSITORY}{}", service.0.simple());
    let options = ListImagesOptions {
        filters: Some(HashMap::from([(
            "reference".to_string(),
            vec![own.clone()],
        )])),
        ..Default::default()
    };
    let mut images = docker
        .list_images(Some(options))
        .await
        .map_err(|e| said("could not list the images built", e))?;
    let prefix = format!("{own}:");
    for image in &mut images {
        image.repo_tags.retain(|t| t.starts_with(&prefix));
    }
    Ok(images)
}

async fn remove_built_images_on(docker: &Docker, service: ServiceId) -> Result<(), EngineError> {
    for image in built_images_on(docker, service).await? {
        for tag in &image.repo_tags {
            match docker
                .remove_image(tag, None::<RemoveImageOptions>, None)
                .await
            {
                Ok(_)
                | Err(bollard::errors::Error::DockerResponseServerError {
                    status_code: 404, ..
                }) => {}
                Err(e) => return Err(said(&format!("could not remove the image {tag}"), e)),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_output_loses_its_terminal_escapes() {
        assert_eq!(
            without_escapes("\u{1b}[91mdd: error writing '/big'\u{1b}[0m"),
            "dd: error writing '/big'"
        );
        assert_eq!(without_escapes("Step 2/7 : RUN x"), "Step 2/7 : RUN x");
    }

    #[test]
    fn paths_stay_inside_the_checkout() {
        let base = std::env::temp_dir().join(format!("capstan-inside-{}", std::process::id()));
        let _ = std::fs::create_dir_all(base.join("app"));
        let _ = std::fs::write(base.join("app/Dockerfile"), "FROM x");
        assert!(inside(&base, "/").is_some());
        assert!(inside(&base, "/app").is_some());
        assert!(inside(&base, "app/Dockerfile").is_some());
        assert!(inside(&base, "/../etc").is_none());
        assert!(inside(&base, "app/missing").is_none());
        #[cfg(unix)]
        {
            let _ = std::os::unix::fs::symlink("/etc", base.join("out"));
            assert!(inside(&base, "out").is_none(), "a link out of the checkout");
        }
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn images_are_tagged_by_full_commit() {
        let id = ServiceId::generate();
        let commit = "548b854f487c1e4204e2620b0d5e50e916a04c8b";
        assert!(is_full_commit(commit));
        assert!(!is_full_commit("548b854"));
        assert!(!is_full_commit("main"));
        assert_eq!(
            built_image(id, commit),
            format!("capstan-build/{}:{commit}", id.0.simple())
        );
    }
}
