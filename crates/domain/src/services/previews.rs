//! Preview environments per pull request (docs/previews.md). A pull request opened against the
//! branch a git service deploys copies the service's environment (the blueprint) into a PREVIEW
//! environment that runs the pull request's head; new commits redeploy it, closing or merging
//! deletes it. The pull request is told where its preview is (a comment, a commit status).

use super::deployments::Selection;
use super::environments::Copied;
use super::Capstan;
use crate::auth::{Action, Principal, Role, Subject};
use crate::error::{DomainError, DomainResult};
use crate::git::{CommitState, CommitStatus, RepositoryAccess};
use crate::ids::{EnvironmentId, ServiceId, VariableId};
use crate::model::{
    DeployTarget, DeploymentAction, Environment, EnvironmentDeploymentRule, EnvironmentMode,
    EventType, GitProvider, GitRepository, Name, Origin, PreviewOf, Project, Service, Variable,
    VariableKey, VariableScope, VariableType,
};
use crate::ports::{Repo, Scope, Unit};
use crate::pull_requests::{PullRequest, PullRequestAction};
use crate::secret::Secret;
use crate::validate;
use std::collections::HashMap;
use time::Duration;

/// The operator's limits on previews (settings, documented in docs/previews.md).
#[derive(Debug, Clone)]
pub struct PreviewSettings {
    /// Whether a pull request from a fork (its head in another repository) is previewed: its
    /// code would run with the blueprint's secrets.
    pub forks: bool,
    /// How many previews one blueprint environment may have open at once.
    pub most_per_environment: usize,
    /// A preview whose pull request saw no activity for this long is deleted.
    pub idle_after: Duration,
}

impl Default for PreviewSettings {
    fn default() -> Self {
        Self {
            forks: false,
            most_per_environment: 10,
            idle_after: Duration::days(7),
        }
    }
}

/// The comment that asks for a preview on a pull request (its first line, alone).
pub const PREVIEW_COMMAND: &str = "/capstan preview";

/// The BUILT_IN variables a preview holds, naming what it previews.
pub const PULL_REQUEST_NUMBER: &str = "CAPSTAN_PULL_REQUEST_NUMBER";
pub const PULL_REQUEST_BRANCH: &str = "CAPSTAN_PULL_REQUEST_BRANCH";
pub const PULL_REQUEST_COMMIT_ID: &str = "CAPSTAN_PULL_REQUEST_COMMIT_ID";

/// How a preview came to be asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Asked {
    /// The pull request was opened or reopened: `auto_preview` decides.
    Opened,
    /// A comment or an API call asked: `on_demand_preview` (or `auto_preview`) decides.
    OnDemand,
}

/// What opening a preview came to: done, or refused for the limit (the pull request is told
/// why).
enum Opening {
    Done(Previewed),
    Full(String),
}

/// What previews of a pull request did with an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Previewed {
    Created(EnvironmentId),
    Updated(EnvironmentId),
    Deleted(EnvironmentId),
    /// Nothing was done, and why.
    Ignored(String),
}

/// The repository a service's pull requests are in, as previews name it: `owner/name`.
fn full_name(repo: &GitRepository) -> String {
    format!("{}/{}", repo.owner, repo.name)
}

fn same_repository(repo: &GitRepository, provider: GitProvider, name: &str) -> bool {
    repo.provider == provider && full_name(repo).eq_ignore_ascii_case(name)
}

/// Whether `preview` follows pull request `number` of `repository` for `blueprint`.
fn follows(
    preview: &Environment,
    blueprint: EnvironmentId,
    repo: &GitRepository,
    number: i64,
) -> bool {
    preview.pull_request.as_ref().is_some_and(|pr| {
        pr.blueprint_environment_id == blueprint
            && pr.number == number
            && pr.provider == repo.provider
            && pr.repository.eq_ignore_ascii_case(&full_name(repo))
    })
}

/// `{environment} (preview #{number})`, with the repository's name when `with_repository`
/// (another repository's pull request of that number has the plain name), cut to fit.
fn preview_name(
    blueprint: &Name,
    repo: &GitRepository,
    number: i64,
    with_repository: bool,
) -> DomainResult<Name> {
    let suffix = if with_repository {
        format!(" (preview {}#{number})", repo.name)
    } else {
        format!(" (preview #{number})")
    };
    let room = validate::MAX_NAME_CHARS.saturating_sub(suffix.chars().count());
    let base: String = blueprint.as_str().chars().take(room).collect();
    validate::name("name", &format!("{base}{suffix}"))
}

/// Who acts for a provider's deliveries: a DEVOPS member of the service's organization.
pub(super) fn git_principal(provider: GitProvider, service: &Service) -> Principal {
    Principal {
        subject: Subject::User(format!("git-webhook:{provider}")),
        memberships: vec![(service.organization_id, Role::Devops)],
        origin: Origin::Git,
        user_agent: None,
    }
}

impl Capstan {
    /// What a pull-request event does to its previews, for the git service `service` whose
    /// hook delivered it.
    pub(super) async fn pull_request_changed(
        &self,
        service: &Service,
        repo: &GitRepository,
        action: PullRequestAction,
        pr: PullRequest,
    ) -> DomainResult<Previewed> {
        match action {
            PullRequestAction::Opened | PullRequestAction::Reopened => {
                self.open_preview(
                    &git_principal(repo.provider, service),
                    service,
                    repo,
                    pr,
                    Asked::Opened,
                )
                .await
            }
            PullRequestAction::Updated => self.update_preview(service, repo, &pr).await,
            PullRequestAction::Closed | PullRequestAction::Merged => {
                self.close_preview(service, repo, pr.number).await
            }
        }
    }

    /// Opens the preview of `pr` for the environment of `service` (or, when it is open,
    /// deploys its head), when the environment's deployment rule and the settings allow it.
    pub(super) async fn open_preview(
        &self,
        p: &Principal,
        service: &Service,
        repo: &GitRepository,
        pr: PullRequest,
        asked: Asked,
    ) -> DomainResult<Previewed> {
        if pr.base_branch != repo.branch {
            return Ok(Previewed::Ignored(format!(
                "a pull request into {}, not into the service's branch",
                pr.base_branch
            )));
        }
        if pr.from_fork && !self.previews.forks {
            return Ok(Previewed::Ignored(
                "a pull request from a fork is not previewed (CAPSTAN_PREVIEW_FORKS)".into(),
            ));
        }
        if asked == Asked::Opened && !service.previewed() {
            return Ok(Previewed::Ignored(
                "the service's auto_preview is off".into(),
            ));
        }
        let opening = self
            .in_unit(&[Scope::Project(service.project_id)], async |tx| {
                self.open_preview_in(tx, p, service, repo, &pr, asked).await
            })
            .await?;
        match opening {
            Opening::Done(done) => {
                if let Previewed::Created(env) | Previewed::Updated(env) = &done {
                    self.tell_pull_request(*env, None).await;
                }
                Ok(done)
            }
            Opening::Full(why) => {
                self.comment_once(repo, pr.number, &why).await;
                Ok(Previewed::Ignored(why))
            }
        }
    }

    async fn open_preview_in(
        &self,
        tx: &mut Unit,
        p: &Principal,
        service: &Service,
        repo: &GitRepository,
        pr: &PullRequest,
        asked: Asked,
    ) -> DomainResult<Opening> {
        let blueprint: Environment = self
            .load(tx, p, service.environment_id, Action::Write)
            .await?;
        if blueprint.mode == EnvironmentMode::Preview {
            return Ok(Opening::Done(Previewed::Ignored(
                "the service is in a preview itself".into(),
            )));
        }
        let rule = Repo::<EnvironmentDeploymentRule>::get(tx, blueprint.id).await?;
        let allowed = rule.as_ref().is_some_and(|r| match asked {
            Asked::Opened => r.auto_preview,
            Asked::OnDemand => r.on_demand_preview || r.auto_preview,
        });
        if !allowed {
            return Ok(Opening::Done(Previewed::Ignored(match asked {
                Asked::Opened => "the environment's deployment rule has auto_preview off".into(),
                Asked::OnDemand => {
                    "the environment's deployment rule has on_demand_preview and auto_preview off"
                        .into()
                }
            })));
        }
        let project: Project = self
            .load(tx, p, blueprint.project_id, Action::Write)
            .await?;
        let environments = self.every::<Environment>(tx, project.id).await?;
        if let Some(open) = environments
            .iter()
            .find(|e| follows(e, blueprint.id, repo, pr.number))
        {
            let done = self.deploy_head(tx, p, open.clone(), repo, pr).await?;
            return Ok(Opening::Done(done));
        }
        let open = environments
            .iter()
            .filter(|e| {
                e.pull_request
                    .as_ref()
                    .is_some_and(|pr| pr.blueprint_environment_id == blueprint.id)
            })
            .count();
        if open >= self.previews.most_per_environment {
            return Ok(Opening::Full(format!(
                "no preview: the environment {} has {open} open previews, the most \
                 CAPSTAN_PREVIEW_LIMIT allows",
                blueprint.name
            )));
        }
        let mut name = preview_name(&blueprint.name, repo, pr.number, false)?;
        if environments.iter().any(|e| e.name.key() == name.key()) {
            name = preview_name(&blueprint.name, repo, pr.number, true)?;
        }
        let cluster = self
            .cluster_for(tx, p, &project, Some(blueprint.cluster_id))
            .await?;
        let mut preview =
            self.new_environment(p, &project, &cluster, name, EnvironmentMode::Preview);
        preview.pull_request = Some(PreviewOf {
            provider: repo.provider,
            repository: full_name(repo),
            number: pr.number,
            url: pr.url.clone(),
            head_branch: pr.head_branch.clone(),
            head_commit: pr.head_commit.clone(),
            blueprint_environment_id: blueprint.id,
            comment_id: None,
            last_activity_at: self.now(),
        });
        let (preview, copies) = self
            .copy_environment(tx, &blueprint, preview, Copied::Preview)
            .await?;
        self.audit(tx, p, EventType::Clone, &preview).await?;
        let mut commits = HashMap::new();
        for copy in copies.values() {
            let mut copy = copy.clone();
            let mut moved = false;
            for source in copy.spec.git_repositories_mut() {
                if same_repository(source, repo.provider, &full_name(repo)) {
                    source.branch.clone_from(&pr.head_branch);
                    moved = true;
                }
            }
            if moved {
                self.update(tx, &copy, "environment").await?;
                commits.insert(copy.id, pr.head_commit.clone());
            }
        }
        for variable in built_ins(&preview, pr, self.now()) {
            Repo::<Variable>::insert(tx, &variable).await?;
        }
        self.environment_action_in(
            tx,
            p,
            preview.id,
            DeploymentAction::Deploy,
            Selection::AllAt(commits),
        )
        .await?;
        Ok(Opening::Done(Previewed::Created(preview.id)))
    }

    /// Deploys the services of `repo` in `preview` at the pull request's head commit, and
    /// keeps the head in the preview's record and variables.
    async fn deploy_head(
        &self,
        tx: &mut Unit,
        p: &Principal,
        mut preview: Environment,
        repo: &GitRepository,
        pr: &PullRequest,
    ) -> DomainResult<Previewed> {
        tx.lock(Scope::Environment(preview.id)).await?;
        let Some(mut of) = preview.pull_request.clone() else {
            return Ok(Previewed::Ignored("not a preview".into()));
        };
        let moved = of.head_commit != pr.head_commit;
        of.head_commit.clone_from(&pr.head_commit);
        of.head_branch.clone_from(&pr.head_branch);
        of.last_activity_at = self.now();
        preview.pull_request = Some(of);
        Repo::<Environment>::update(tx, &preview).await?;
        if !moved {
            return Ok(Previewed::Updated(preview.id));
        }
        let mut variables = self.all_variables(tx, &[preview.id.0]).await?;
        for v in variables
            .iter_mut()
            .filter(|v| v.scope == VariableScope::BuiltIn)
        {
            if v.key.as_str() == PULL_REQUEST_COMMIT_ID {
                v.value = Some(Secret::new(pr.head_commit.clone()));
                v.updated_at = self.now();
                Repo::<Variable>::update(tx, v).await?;
            }
        }
        let target = DeployTarget {
            git_commit_id: Some(pr.head_commit.clone()),
            ..Default::default()
        };
        for service in self.services_of(tx, preview.id).await? {
            let of_repo = service
                .spec
                .git_repositories()
                .first()
                .is_some_and(|r| same_repository(r, repo.provider, &full_name(repo)));
            if of_repo {
                match self
                    .request(tx, p, service, DeploymentAction::Deploy, target.clone())
                    .await
                {
                    Ok(_) | Err(DomainError::Conflict(_)) => {}
                    Err(other) => return Err(other),
                }
            }
        }
        Ok(Previewed::Updated(preview.id))
    }

    /// A new head commit: the open preview of the pull request deploys it.
    async fn update_preview(
        &self,
        service: &Service,
        repo: &GitRepository,
        pr: &PullRequest,
    ) -> DomainResult<Previewed> {
        let p = git_principal(repo.provider, service);
        let done = self
            .in_unit(&[Scope::Project(service.project_id)], async |tx| {
                let preview = self
                    .every::<Environment>(tx, service.project_id)
                    .await?
                    .into_iter()
                    .find(|e| follows(e, service.environment_id, repo, pr.number));
                match preview {
                    Some(preview) => self.deploy_head(tx, &p, preview, repo, pr).await,
                    None => Ok(Previewed::Ignored("the pull request has no preview".into())),
                }
            })
            .await?;
        if let Previewed::Updated(env) = &done {
            self.tell_pull_request(*env, None).await;
        }
        Ok(done)
    }

    /// Closed or merged: the pull request's preview is deleted with everything it runs.
    async fn close_preview(
        &self,
        service: &Service,
        repo: &GitRepository,
        number: i64,
    ) -> DomainResult<Previewed> {
        let preview = self
            .every::<Environment>(&mut *self.reading().await?, service.project_id)
            .await?
            .into_iter()
            .find(|e| follows(e, service.environment_id, repo, number));
        let Some(preview) = preview else {
            return Ok(Previewed::Ignored("the pull request has no preview".into()));
        };
        let p = git_principal(repo.provider, service);
        match self.delete_environment(&p, preview.id).await {
            // Already on its way out.
            Ok(_) | Err(DomainError::Conflict(_)) => Ok(Previewed::Deleted(preview.id)),
            Err(DomainError::NotFound(_)) => {
                Ok(Previewed::Ignored("the preview is already gone".into()))
            }
            Err(e) => Err(e),
        }
    }

    /// `POST /service/{id}/pullRequest/{number}/preview`: opens the preview of pull request
    /// `number` of the repository `service` deploys, as the comment command does.
    pub async fn preview_pull_request(
        &self,
        p: &Principal,
        service: ServiceId,
        number: i64,
    ) -> DomainResult<Previewed> {
        let (service, repo, access) = {
            let mut tx = self.reading().await?;
            let service: Service = self.load(&mut *tx, p, service, Action::Write).await?;
            let repo = super::webhooks::git_source(&service)?;
            let access = self.repository_access(&mut *tx, &repo).await?;
            (service, repo, access)
        };
        let git = self.git()?;
        let pr = git
            .hosting
            .pull_request(&access, number)
            .await
            .map_err(super::webhooks::unavailable)?;
        match self
            .open_preview(p, &service, &repo, pr, Asked::OnDemand)
            .await?
        {
            Previewed::Ignored(why) => Err(DomainError::state(why)),
            done => Ok(done),
        }
    }

    /// A comment on pull request `number`: the preview command, from a user the provider says
    /// may write to the repository, opens its preview.
    pub(super) async fn pull_request_commented(
        &self,
        service: &Service,
        repo: &GitRepository,
        number: i64,
        author: &str,
        body: &str,
    ) -> DomainResult<Previewed> {
        if body.lines().next().map(str::trim) != Some(PREVIEW_COMMAND) {
            return Ok(Previewed::Ignored("not a preview command".into()));
        }
        let git = self.git()?;
        let access = self
            .repository_access(&mut *self.reading().await?, repo)
            .await?;
        match git.hosting.may_write(&access, author).await {
            Ok(true) => {}
            Ok(false) => {
                return Ok(Previewed::Ignored(format!(
                    "{author} may not write to the repository: no preview on their word"
                )))
            }
            Err(e) => return Err(super::webhooks::unavailable(e)),
        }
        let pr = git
            .hosting
            .pull_request(&access, number)
            .await
            .map_err(super::webhooks::unavailable)?;
        self.open_preview(
            &git_principal(repo.provider, service),
            service,
            repo,
            pr,
            Asked::OnDemand,
        )
        .await
    }

    /// Deletes the previews whose pull request saw no activity for the settings' while;
    /// answers how many were asked to go. One that cannot go now is tried again at the next
    /// pass, and holds up no other.
    pub async fn delete_idle_previews(&self) -> DomainResult<usize> {
        let cutoff = self.now() - self.previews.idle_after;
        let idle: Vec<Environment> = self
            .reading()
            .await?
            .pull_request_previews()
            .await?
            .into_iter()
            .filter(|e| {
                e.pull_request
                    .as_ref()
                    .is_some_and(|pr| pr.last_activity_at < cutoff)
            })
            .collect();
        let mut deleted = 0;
        for preview in idle {
            let p = Principal {
                subject: Subject::User("preview-expiry".into()),
                memberships: vec![(preview.organization_id, Role::Devops)],
                origin: Origin::Api,
                user_agent: None,
            };
            match self.delete_environment(&p, preview.id).await {
                Ok(_) => deleted += 1,
                Err(DomainError::Conflict(_) | DomainError::NotFound(_)) => {}
                Err(e) => {
                    tracing::warn!(environment = %preview.id, error = %e, "could not delete an idle preview; the next pass will try again");
                }
            }
        }
        Ok(deleted)
    }
}

/// The BUILT_IN variables naming what `preview` previews, at the environment's scope.
fn built_ins(preview: &Environment, pr: &PullRequest, now: time::OffsetDateTime) -> Vec<Variable> {
    [
        (
            PULL_REQUEST_NUMBER,
            pr.number.to_string(),
            "The pull request this preview runs",
        ),
        (
            PULL_REQUEST_BRANCH,
            pr.head_branch.clone(),
            "The pull request's branch",
        ),
        (
            PULL_REQUEST_COMMIT_ID,
            pr.head_commit.clone(),
            "The pull request's head commit",
        ),
    ]
    .into_iter()
    .filter_map(|(key, value, description)| {
        Some(Variable {
            id: VariableId::generate(),
            organization_id: preview.organization_id,
            project_id: preview.project_id,
            environment_id: Some(preview.id),
            service_id: None,
            scope: VariableScope::BuiltIn,
            key: VariableKey::parse(key).ok()?,
            value: Some(Secret::new(value)),
            is_secret: false,
            variable_type: VariableType::BuiltIn,
            mount_path: None,
            description: Some(description.into()),
            enable_interpolation_in_file: None,
            aliased_variable_id: None,
            overridden_variable_id: None,
            secret_manager_access_id: None,
            linked_database_id: None,
            created_at: now,
            updated_at: now,
        })
    })
    .collect()
}

/// The state a preview's pull request is shown, from its environment's latest deployment;
/// none once it stops or goes (nothing to say then).
fn commit_state(state: crate::model::ServiceState) -> Option<CommitState> {
    use crate::model::ServiceState as S;
    match state {
        S::Deployed | S::Restarted => Some(CommitState::Success),
        S::Ready | S::Stopped | S::Deleted | S::Recap | S::Unavailable => None,
        s if s.is_settled() => Some(CommitState::Failure),
        _ => Some(CommitState::Pending),
    }
}

impl Capstan {
    /// Tells the preview's pull request where the preview stands: its comment (written once,
    /// then edited) with the preview's links, and the head commit's status. A failure to tell
    /// shows in the log of `ended` (the deployment that just ended), else of the preview's
    /// newest deployment (the one starting).
    pub(super) async fn tell_pull_request(
        &self,
        preview: EnvironmentId,
        ended: Option<&crate::model::DeploymentRequest>,
    ) {
        if let Err(e) = self.try_tell_pull_request(preview, ended).await {
            tracing::warn!(environment = %preview, error = %e, "could not tell a pull request about its preview");
        }
    }

    async fn try_tell_pull_request(
        &self,
        preview: EnvironmentId,
        ended: Option<&crate::model::DeploymentRequest>,
    ) -> DomainResult<()> {
        let Some(git) = self.git.clone() else {
            return Ok(());
        };
        let (env, access, status, newest) = {
            let mut tx = self.reading().await?;
            let Some(env) = Repo::<Environment>::get(&mut *tx, preview).await? else {
                return Ok(());
            };
            let Some(of) = env.pull_request.clone() else {
                return Ok(());
            };
            let services = self.services_of(&mut *tx, preview).await?;
            let Some(repo) = services
                .iter()
                .filter_map(|s| s.spec.git_repositories().first().map(|r| (*r).clone()))
                .find(|r| same_repository(r, of.provider, &of.repository))
            else {
                return Ok(());
            };
            let access = self.repository_access(&mut *tx, &repo).await?;
            let status = self
                .environment_statuses_of(&mut *tx, preview)
                .await?
                .environment;
            let ids: Vec<ServiceId> = services.iter().map(|s| s.id).collect();
            let (_, requests) = tx.activity_of(preview, &ids).await?;
            let newest = requests.into_iter().max_by_key(|r| r.created_at);
            (env, access, status, newest)
        };
        let Some(of) = env.pull_request.clone() else {
            return Ok(());
        };
        let Some(state) = commit_state(status.last_deployment_state) else {
            return Ok(());
        };
        let links = self
            .environment_links(&self.preview_principal(&env), preview)
            .await
            .unwrap_or_default();
        let first = links.first().map(|l| l.url.clone());
        let shown = match state {
            CommitState::Pending => "deploying",
            CommitState::Success => "deployed",
            CommitState::Failure => "failed to deploy",
        };
        let mut body = format!(
            "Capstan preview environment **{}** ({}): {shown} at {}.\n",
            env.name,
            of.head_branch,
            of.head_commit.chars().take(12).collect::<String>()
        );
        for link in &links {
            body.push_str(&format!("\n- {}", link.url));
        }
        let mut failures = Vec::new();
        match git
            .hosting
            .put_comment(&access, of.number, of.comment_id.as_deref(), &body)
            .await
        {
            Ok(id) if of.comment_id.as_deref() != Some(id.as_str()) => {
                self.keep_comment(preview, id).await?;
            }
            Ok(_) => {}
            Err(e) => failures.push(format!("could not comment on the pull request: {e}")),
        }
        let status = CommitStatus {
            state,
            target_url: first,
            description: format!("Preview {}: {shown}", env.name),
        };
        if let Err(e) = git
            .hosting
            .set_commit_status(&access, &of.head_commit, &status)
            .await
        {
            failures.push(format!("could not set the commit's status: {e}"));
        }
        if let (Some(request), false) = (ended.or(newest.as_ref()), failures.is_empty()) {
            self.log_after(request, &failures).await?;
        }
        for failure in &failures {
            tracing::warn!(environment = %preview, "{failure}");
        }
        Ok(())
    }

    fn preview_principal(&self, env: &Environment) -> Principal {
        Principal {
            subject: Subject::User("preview".into()),
            memberships: vec![(env.organization_id, Role::Viewer)],
            origin: Origin::Api,
            user_agent: None,
        }
    }

    /// Keeps the id of the comment a preview's pull request shows it in.
    async fn keep_comment(&self, preview: EnvironmentId, id: String) -> DomainResult<()> {
        self.in_unit(&[Scope::Environment(preview)], async |tx| {
            if let Some(mut env) = Repo::<Environment>::get(tx, preview).await? {
                if let Some(of) = env.pull_request.as_mut() {
                    of.comment_id = Some(id.clone());
                    Repo::<Environment>::update(tx, &env).await?;
                }
            }
            Ok(())
        })
        .await
    }

    /// Adds lines to the log of a request that ended.
    async fn log_after(
        &self,
        request: &crate::model::DeploymentRequest,
        lines: &[String],
    ) -> DomainResult<()> {
        let log = crate::engine::StepLog::new(request, crate::model::Masker::default());
        for line in lines {
            log.warn(line);
        }
        let lines = log.take();
        self.in_unit(&[], async |tx| Ok(tx.append_logs(&lines).await?))
            .await
    }

    /// A comment on pull request `number` saying why it has no preview; a failure is logged.
    async fn comment_once(&self, repo: &GitRepository, number: i64, why: &str) {
        let Some(git) = self.git.clone() else { return };
        let access: DomainResult<RepositoryAccess> = async {
            self.repository_access(&mut *self.reading().await?, repo)
                .await
        }
        .await;
        let result = match access {
            Ok(access) => git
                .hosting
                .put_comment(&access, number, None, &format!("Capstan: {why}."))
                .await
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        if let Err(e) = result {
            tracing::warn!(error = %e, "could not tell a pull request why it has no preview");
        }
    }

    /// A deployment ended: once its environment is a preview whose deployment has ended, the
    /// pull request is told.
    pub async fn preview_deployment_ended(&self, request: &crate::model::DeploymentRequest) {
        if self.git.is_none() || !request.deploys() {
            return;
        }
        let preview = request.environment_id;
        let settled = async {
            let mut tx = self.reading().await?;
            let is_preview = Repo::<Environment>::get(&mut *tx, preview)
                .await?
                .is_some_and(|e| e.pull_request.is_some());
            if !is_preview {
                return DomainResult::Ok(false);
            }
            let status = self.environment_statuses_of(&mut *tx, preview).await?;
            Ok(commit_state(status.environment.last_deployment_state)
                .is_some_and(|s| s != CommitState::Pending))
        };
        if settled.await.unwrap_or(false) {
            self.tell_pull_request(preview, Some(request)).await;
        }
    }
}
