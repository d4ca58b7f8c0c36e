//! Deployment rules: a project's rules for the environments created in it
//! (`/project/{id}/deploymentRule`), the rule each environment runs by
//! (`/environment/{id}/deploymentRule`), and the scheduler that starts and stops environments
//! at their rule's hours.

use super::{Capstan, Selection};
use crate::auth::{Action, Principal, Role, Subject};
use crate::error::{DomainError, DomainResult};
use crate::ids::{ClusterId, DeploymentRuleId, EnvironmentId, ProjectId};
use crate::model::EventType;
use crate::model::{
    DeploymentAction, Environment, EnvironmentDeploymentRule, EnvironmentMode,
    EnvironmentRuleInput, Origin, Project, ProjectDeploymentRule, ProjectRuleInput, Record,
    RuleOrderInput, Schedule, Turn,
};
use crate::ports::{Repo, Scope, Unit};

/// How many environments one pass of the scheduler takes on; the rest wait for the next pass.
pub(super) const SCHEDULER_BATCH: i64 = 100;

/// What one pass of the scheduler did: how many due hours it took, and the environments it
/// could not act on, with why.
#[derive(Debug, Default)]
pub struct RulePass {
    pub taken: usize,
    pub failed: Vec<(EnvironmentId, DomainError)>,
    /// The earliest hour a rule has next, once the pass is over.
    pub next_turn: Option<time::OffsetDateTime>,
}

/// What a new environment takes from the project rule its name matches.
#[derive(Debug, Clone)]
pub(super) struct AppliedRule {
    pub cluster_id: ClusterId,
    pub mode: EnvironmentMode,
    pub schedule: Schedule,
}

impl Capstan {
    /// Every rule of a project, by priority.
    async fn project_rules(
        &self,
        tx: &mut Unit,
        project: ProjectId,
    ) -> DomainResult<Vec<ProjectDeploymentRule>> {
        let mut rules = self.every::<ProjectDeploymentRule>(tx, project).await?;
        rules.sort_by_key(|r| (r.priority_index, r.created_at, r.id));
        Ok(rules)
    }

    /// The project's first rule by priority whose wildcard matches `name`.
    pub(super) async fn rule_for(
        &self,
        tx: &mut Unit,
        project: ProjectId,
        name: &str,
    ) -> DomainResult<Option<AppliedRule>> {
        Ok(self
            .project_rules(tx, project)
            .await?
            .into_iter()
            .find(|r| r.matches(name))
            .map(|r| AppliedRule {
                cluster_id: r.cluster_id,
                mode: r.mode,
                schedule: r.schedule,
            }))
    }

    /// Gives `env` the hours of `schedule` (replacing the rule it has), in the caller's unit.
    pub(super) async fn give_schedule(
        &self,
        tx: &mut Unit,
        env: &Environment,
        schedule: Schedule,
    ) -> DomainResult<()> {
        let rule =
            EnvironmentDeploymentRule::new(env.id, env.organization_id, schedule, self.now());
        self.store_environment_rule(tx, rule).await?;
        Ok(())
    }

    /// Writes an environment's rule, over the one it has (whose creation time stays).
    async fn store_environment_rule(
        &self,
        tx: &mut Unit,
        mut rule: EnvironmentDeploymentRule,
    ) -> DomainResult<EnvironmentDeploymentRule> {
        match Repo::<EnvironmentDeploymentRule>::get(tx, rule.environment_id).await? {
            Some(old) => {
                rule.created_at = old.created_at;
                Repo::<EnvironmentDeploymentRule>::update(tx, &rule).await?;
            }
            None => Repo::<EnvironmentDeploymentRule>::insert(tx, &rule).await?,
        }
        Ok(rule)
    }

    /// Copies the rule of `source` (when it has one of its own) onto `copy`.
    pub(super) async fn copy_environment_rule(
        &self,
        tx: &mut Unit,
        source: EnvironmentId,
        copy: &Environment,
    ) -> DomainResult<()> {
        let Some(rule) = Repo::<EnvironmentDeploymentRule>::get(tx, source).await? else {
            return Ok(());
        };
        let mut copied = EnvironmentDeploymentRule::new(
            copy.id,
            copy.organization_id,
            rule.schedule.clone(),
            self.now(),
        );
        copied.on_demand_preview = rule.on_demand_preview;
        copied.auto_preview = rule.auto_preview;
        Repo::<EnvironmentDeploymentRule>::insert(tx, &copied).await?;
        Ok(())
    }

    /// A rule of `project`, checked to be there, with the project.
    async fn project_rule(
        &self,
        tx: &mut Unit,
        p: &Principal,
        project: ProjectId,
        id: DeploymentRuleId,
        action: Action,
    ) -> DomainResult<(Project, ProjectDeploymentRule)> {
        let owner: Project = self.load(tx, p, project, action).await?;
        let rule: ProjectDeploymentRule = self.load(tx, p, id, action).await?;
        if rule.project_id != project {
            return Err(DomainError::NotFound(ProjectDeploymentRule::KIND));
        }
        Ok((owner, rule))
    }

    pub async fn list_project_rules(
        &self,
        p: &Principal,
        project: ProjectId,
    ) -> DomainResult<Vec<ProjectDeploymentRule>> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        self.load::<Project>(tx, p, project, Action::Read).await?;
        self.project_rules(tx, project).await
    }

    pub async fn get_project_rule(
        &self,
        p: &Principal,
        project: ProjectId,
        id: DeploymentRuleId,
    ) -> DomainResult<ProjectDeploymentRule> {
        let mut unit = self.reading().await?;
        let (_, rule) = self
            .project_rule(&mut *unit, p, project, id, Action::Read)
            .await?;
        Ok(rule)
    }

    /// A new rule, last in priority.
    pub async fn create_project_rule(
        &self,
        p: &Principal,
        project_id: ProjectId,
        input: ProjectRuleInput,
    ) -> DomainResult<ProjectDeploymentRule> {
        let draft = input.validate()?;
        self.in_unit(&[Scope::Project(project_id)], async |tx| {
            let project: Project = self.load(tx, p, project_id, Action::Write).await?;
            self.cluster_for(tx, p, &project, Some(draft.cluster_id))
                .await?;
            let existing = self.project_rules(tx, project_id).await?;
            let now = self.now();
            let rule = ProjectDeploymentRule {
                id: DeploymentRuleId::generate(),
                organization_id: project.organization_id,
                project_id,
                name: draft.name,
                description: draft.description,
                mode: draft.mode,
                cluster_id: draft.cluster_id,
                wildcard: draft.wildcard,
                priority_index: existing
                    .iter()
                    .map(|r| r.priority_index + 1)
                    .max()
                    .unwrap_or(0),
                schedule: draft.schedule,
                created_at: now,
                updated_at: now,
            };
            self.insert(tx, &rule, "project").await?;
            self.audit(tx, p, EventType::Create, &rule).await?;
            Ok(rule)
        })
        .await
    }

    /// Replaces a rule's members (its priority stays). Environments that took the rule keep
    /// what they took.
    pub async fn edit_project_rule(
        &self,
        p: &Principal,
        project_id: ProjectId,
        id: DeploymentRuleId,
        input: ProjectRuleInput,
    ) -> DomainResult<ProjectDeploymentRule> {
        let draft = input.validate()?;
        self.in_unit(&[Scope::Project(project_id)], async |tx| {
            let (project, mut rule) = self
                .project_rule(tx, p, project_id, id, Action::Write)
                .await?;
            self.cluster_for(tx, p, &project, Some(draft.cluster_id))
                .await?;
            rule.name = draft.name;
            rule.description = draft.description;
            rule.mode = draft.mode;
            rule.cluster_id = draft.cluster_id;
            rule.wildcard = draft.wildcard;
            rule.schedule = draft.schedule;
            rule.updated_at = self.now();
            self.update(tx, &rule, "project").await?;
            self.audit(tx, p, EventType::Update, &rule).await?;
            Ok(rule)
        })
        .await
    }

    /// Deletes a rule; those after it move up one place.
    pub async fn delete_project_rule(
        &self,
        p: &Principal,
        project_id: ProjectId,
        id: DeploymentRuleId,
    ) -> DomainResult<()> {
        self.in_unit(&[Scope::Project(project_id)], async |tx| {
            let (_, rule) = self
                .project_rule(tx, p, project_id, id, Action::Write)
                .await?;
            self.audit(tx, p, EventType::Delete, &rule).await?;
            self.delete::<ProjectDeploymentRule>(tx, id, "environments")
                .await?;
            let rest = self.project_rules(tx, project_id).await?;
            self.renumber(tx, rest).await?;
            Ok(())
        })
        .await
    }

    /// Sets the rules' priorities to their places in `ordered`.
    async fn renumber(
        &self,
        tx: &mut Unit,
        ordered: Vec<ProjectDeploymentRule>,
    ) -> DomainResult<()> {
        for (place, mut rule) in ordered.into_iter().enumerate() {
            let place = i32::try_from(place).unwrap_or(i32::MAX);
            if rule.priority_index != place {
                rule.priority_index = place;
                Repo::<ProjectDeploymentRule>::update(tx, &rule).await?;
            }
        }
        Ok(())
    }

    /// Puts the project's rules in the order given: every rule of the project, each once.
    pub async fn order_project_rules(
        &self,
        p: &Principal,
        project_id: ProjectId,
        input: RuleOrderInput,
    ) -> DomainResult<Vec<ProjectDeploymentRule>> {
        const FIELD: &str = "project_deployment_rule_ids_in_order";
        self.in_unit(&[Scope::Project(project_id)], async |tx| {
            self.load::<Project>(tx, p, project_id, Action::Write)
                .await?;
            let mut rules = self.project_rules(tx, project_id).await?;
            let ids = input.project_deployment_rule_ids_in_order;
            let mut ordered = Vec::with_capacity(rules.len());
            for (i, id) in ids.iter().enumerate() {
                let at = rules.iter().position(|r| r.id == *id).ok_or_else(|| {
                    DomainError::invalid(
                        format!("{FIELD}[{i}]"),
                        "names no deployment rule of the project (or names one twice)",
                    )
                })?;
                ordered.push(rules.swap_remove(at));
            }
            if !rules.is_empty() {
                return Err(DomainError::invalid(
                    FIELD,
                    format!(
                        "must list every deployment rule of the project; {} left out",
                        rules.len()
                    ),
                ));
            }
            self.renumber(tx, ordered).await?;
            let out = self.project_rules(tx, project_id).await?;
            if let Some(first) = out.first() {
                self.audit(tx, p, EventType::Update, first).await?;
            }
            Ok(out)
        })
        .await
    }

    /// The rule an environment runs by: the one it was given or set, else office hours that
    /// start and stop nothing.
    pub async fn get_environment_rule(
        &self,
        p: &Principal,
        environment: EnvironmentId,
    ) -> DomainResult<EnvironmentDeploymentRule> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        let env: Environment = self.load(tx, p, environment, Action::Read).await?;
        Ok(Repo::<EnvironmentDeploymentRule>::get(tx, environment)
            .await?
            .unwrap_or_else(|| EnvironmentDeploymentRule {
                created_at: env.created_at,
                updated_at: env.created_at,
                ..EnvironmentDeploymentRule::new(
                    env.id,
                    env.organization_id,
                    Schedule::office_hours(),
                    env.created_at,
                )
            }))
    }

    /// Sets the environment's rule (`rule_id` is the id its GET answers: the environment's);
    /// its next hour is counted from now.
    pub async fn edit_environment_rule(
        &self,
        p: &Principal,
        environment: EnvironmentId,
        rule_id: EnvironmentId,
        input: EnvironmentRuleInput,
    ) -> DomainResult<EnvironmentDeploymentRule> {
        let (on_demand_preview, auto_preview) = (input.on_demand_preview, input.auto_preview);
        let schedule = input.schedule()?;
        self.in_unit(&[Scope::Environment(environment)], async |tx| {
            let env: Environment = self.load(tx, p, environment, Action::Write).await?;
            if rule_id != environment {
                return Err(DomainError::NotFound(EnvironmentDeploymentRule::KIND));
            }
            let mut rule =
                EnvironmentDeploymentRule::new(env.id, env.organization_id, schedule, self.now());
            rule.on_demand_preview = on_demand_preview;
            rule.auto_preview = auto_preview;
            let rule = self.store_environment_rule(tx, rule).await?;
            self.audit(tx, p, EventType::Update, &rule).await?;
            Ok(rule)
        })
        .await
    }

    /// Starts or stops the environments whose rule has an hour due, each in a unit of its own.
    /// Several instances may run it at once: each environment's hour is taken under the
    /// environment's lock, and only by the unit that finds it still due. One environment's
    /// failure is reported and does not hold up the others.
    pub async fn run_due_rules(&self) -> DomainResult<RulePass> {
        let now = self.now();
        let due = {
            let mut unit = self.reading().await?;
            unit.due_environment_rules(now, SCHEDULER_BATCH).await?
        };
        let mut pass = RulePass::default();
        for environment in due {
            match self.run_rule(environment, now).await {
                Ok(true) => pass.taken += 1,
                Ok(false) => {}
                Err(e) => pass.failed.push((environment, e)),
            }
        }
        pass.next_turn = self.reading().await?.next_rule_turn().await?;
        Ok(pass)
    }

    /// Takes one environment's due hour: plans the next and queues what the hour says, in one
    /// unit; true when it took the hour. When the action cannot be queued (nothing to start or
    /// stop, a deletion under way, or something worse, which is answered) the hour is still
    /// taken, so it is not retried for ever; only a store that cannot be reached leaves it for
    /// the next pass.
    async fn run_rule(
        &self,
        environment: EnvironmentId,
        now: time::OffsetDateTime,
    ) -> DomainResult<bool> {
        // Set when the action is refused: its unit is then rolled back, so nothing of it is
        // kept, and the hour is taken in a unit of its own.
        let mut refused = false;
        let queued = self
            .in_unit(&[], async |tx| {
                let Some((rule, turn)) = self.take_turn(tx, environment, now).await? else {
                    return Ok(false);
                };
                let Some(turn) = turn else {
                    return Ok(true);
                };
                let scheduler = Principal {
                    subject: Subject::User("deployment-rule".into()),
                    memberships: vec![(rule.organization_id, Role::Devops)],
                    origin: Origin::Internal,
                    user_agent: None,
                };
                let (action, selection) = match turn {
                    Turn::Start => (DeploymentAction::Deploy, Selection::Stopped),
                    Turn::Stop => (DeploymentAction::Stop, Selection::All),
                };
                let action = self
                    .environment_action_in(tx, &scheduler, environment, action, selection)
                    .await;
                refused = action.is_err();
                action.map(|_| true)
            })
            .await;
        let failure = match queued {
            Ok(taken) => return Ok(taken),
            Err(e) if !refused => return Err(e),
            Err(e @ (DomainError::Unavailable(_) | DomainError::StoreFull(_))) => return Err(e),
            Err(
                DomainError::Conflict(_) | DomainError::Invalid { .. } | DomainError::NotFound(_),
            ) => None,
            Err(e) => Some(e),
        };
        let taken = self
            .in_unit(&[], async |tx| {
                Ok(self.take_turn(tx, environment, now).await?.is_some())
            })
            .await?;
        match failure {
            Some(e) => Err(e),
            None => Ok(taken),
        }
    }

    /// Locks the environment and, when its rule's hour is still due, moves the rule on to its
    /// next hour; answers the rule and what the hour says to do.
    async fn take_turn(
        &self,
        tx: &mut Unit,
        environment: EnvironmentId,
        now: time::OffsetDateTime,
    ) -> DomainResult<Option<(EnvironmentDeploymentRule, Option<Turn>)>> {
        tx.lock(Scope::Environment(environment)).await?;
        let Some(mut rule) = Repo::<EnvironmentDeploymentRule>::get(tx, environment).await? else {
            return Ok(None);
        };
        if rule.next_turn_at.is_none_or(|t| t > now) {
            return Ok(None);
        }
        let turn = rule.schedule.last_turn(now).map(|(_, turn)| turn);
        rule.plan(now);
        rule.updated_at = now;
        Repo::<EnvironmentDeploymentRule>::update(tx, &rule).await?;
        Ok(Some((rule, turn)))
    }
}
