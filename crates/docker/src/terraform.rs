//! Terraform services on Docker: the repository fetched at the commit deployed, its root path
//! copied into a container of the terraform image (a setting, OpenTofu's by default) that runs
//! the action asked for, the state on a volume of the service (unless the files name a backend
//! of their own), the run's output in the deployment log.

use crate::containers::Ended;
use crate::engine::DockerEngine;
use crate::errors::said;
use crate::plan::{self, ContainerPlan, PlannedFile, PlannedVolume, LABEL_REPLICA};
use domain::engine::EngineError;
use domain::engine::StepWork;
use domain::model::{
    DeploymentAction, DeploymentStatus, ServiceKind, ServiceSubAction, StepName, TerraformSpec,
};
use std::path::Path;
use std::time::Duration;

/// Where the files are in the runner, and where the state is kept.
const WORKSPACE: &str = "/workspace";
const STATE_DIR: &str = "/state";
/// The state as the last run left it, wherever its backend keeps it (`state pull`), which
/// `terraformResources` reads; before the first such run, the local state.
const SNAPSHOT: &str = "/state/capstan-state.json";
const LOCAL_STATE: &str = "/state/terraform.tfstate";
/// How much of a run's output reaches the deployment log.
const OUTPUT_LINES: usize = 5000;

/// The runner's script: the first of `tofu` or `terraform` on the path, a local backend on the
/// state volume when the files name none, then the action; on its way out, however the action
/// ended, a copy of the state on the volume (for `terraformResources`, whatever the backend;
/// the last copy stays when the state cannot be read).
/// `$CAPSTAN_TF_VAR_FILES` are the var files, `$CAPSTAN_TF_ARGS` the action's extra arguments
/// (split into words, never expanded as file patterns).
///
/// Terraform's data directory is on the volume: it records the backend last used, which is what
/// a migration moves the state from; a plain run whose backend changed stops and says so rather
/// than start over on an empty state. A state kept on the volume by a version that had no data
/// directory there is moved as the implicit local state. A lock is found by trying to take it
/// (a plan that refreshes nothing, waiting for no lock): a held one answers with its ID, in its
/// lock info or, for some backends, in the message alone.
const SCRIPT: &str = r#"set -eu
cd /workspace
TF=$(command -v tofu || command -v terraform)
export TF_DATA_DIR=/state/.terraform
named=$(grep -ls 'backend *"' ./*.tf || true)
set -f
snapshot() {
  if ! "$TF" state pull > /state/.capstan-state.tmp 2>/dev/null; then
    rm -f /state/.capstan-state.tmp
  elif [ -s /state/.capstan-state.tmp ]; then
    mv /state/.capstan-state.tmp /state/capstan-state.json
  else
    rm -f /state/.capstan-state.tmp /state/capstan-state.json
  fi
}
if [ "$CAPSTAN_TF_ACTION" != unlock ]; then
  trap 'code=$?; snapshot; exit $code' EXIT
fi
if [ -z "$named" ]; then
  printf 'terraform {\n  backend "local" {\n    path = "/state/terraform.tfstate"\n  }\n}\n' > capstan_backend_override.tf
fi
case "$CAPSTAN_TF_ACTION" in
  migrate)
    if [ -n "$named" ] && [ -f /state/terraform.tfstate ] && [ ! -f "$TF_DATA_DIR/terraform.tfstate" ]; then
      cp /state/terraform.tfstate ./terraform.tfstate
    fi
    "$TF" init -input=false -no-color -migrate-state -force-copy $CAPSTAN_TF_ARGS
    if [ -n "$named" ] && [ -f /state/terraform.tfstate ]; then
      mv /state/terraform.tfstate /state/terraform.tfstate.migrated
      echo "the state moved to the backend the files name; the volume keeps the old one as terraform.tfstate.migrated"
    fi ;;
  *) "$TF" init -input=false -no-color ;;
esac
case "$CAPSTAN_TF_ACTION" in
  plan) "$TF" plan -input=false -no-color $CAPSTAN_TF_VAR_FILES $CAPSTAN_TF_ARGS ;;
  apply) "$TF" apply -input=false -no-color -auto-approve $CAPSTAN_TF_VAR_FILES $CAPSTAN_TF_ARGS ;;
  destroy) "$TF" destroy -input=false -no-color -auto-approve $CAPSTAN_TF_VAR_FILES $CAPSTAN_TF_ARGS ;;
  unlock)
    if tried=$("$TF" plan -input=false -no-color -refresh=false -lock-timeout=0s $CAPSTAN_TF_VAR_FILES 2>&1); then
      echo "the state is not locked: nothing to unlock"
    else
      id=$(printf '%s\n' "$tried" | sed -n -e '/^ *ID: */{s///;s/ *$//;p;q;}' \
        -e '/locked: ID=/{s/.*locked: ID=//;s/[ ,;].*//;p;q;}')
      if [ -z "$id" ]; then
        printf '%s\n' "$tried"
        echo "the state's lock could not be found: the plan above failed for another reason"
        exit 1
      fi
      echo "the state is locked by $id: forcing it open"
      "$TF" force-unlock -force $CAPSTAN_TF_ARGS "$id"
    fi ;;
  migrate) ;;
esac
"#;

/// What a run of a terraform service does, by its request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Run {
    Plan,
    Apply,
    Destroy,
    Unlock,
    Migrate,
}

impl Run {
    /// The run a request's sub-action asks for; none for the actions that run no terraform.
    pub fn of(sub_action: ServiceSubAction) -> Option<Run> {
        match sub_action {
            ServiceSubAction::TerraformPlanAndApply => Some(Run::Apply),
            ServiceSubAction::TerraformPlanOnly => Some(Run::Plan),
            ServiceSubAction::TerraformForceUnlockState => Some(Run::Unlock),
            ServiceSubAction::TerraformMigrateState => Some(Run::Migrate),
            ServiceSubAction::TerraformDestroy => Some(Run::Destroy),
            ServiceSubAction::None => None,
        }
    }

    fn word(self) -> &'static str {
        match self {
            Run::Plan => "plan",
            Run::Apply => "apply",
            Run::Destroy => "destroy",
            Run::Unlock => "unlock",
            Run::Migrate => "migrate",
        }
    }

    /// The key of `action_extra_arguments` its arguments are under.
    fn extra_key(self) -> &'static str {
        match self {
            Run::Plan => "plan",
            Run::Apply => "apply",
            Run::Destroy => "destroy",
            Run::Unlock => "force-unlock",
            Run::Migrate => "init",
        }
    }
}

/// The variables of `terraform_variables_source`: `tf_vars` as `TF_VAR_` environment, and the
/// var files (relative to the root path) as arguments.
fn variables(source: &serde_json::Value) -> (Vec<String>, Vec<String>) {
    let env = source["tf_vars"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| {
            Some(format!(
                "TF_VAR_{}={}",
                v["key"].as_str()?,
                v["value"].as_str()?
            ))
        })
        .collect();
    let files = source["tf_var_file_paths"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p.as_str())
        .map(|p| format!("-var-file={}", p.trim_start_matches('/')))
        .collect();
    (env, files)
}

/// The files under `dir` as files of the runner's workspace.
fn workspace_files(dir: &Path) -> Result<Vec<PlannedFile>, EngineError> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(at) = pending.pop() {
        let entries =
            std::fs::read_dir(&at).map_err(|e| format!("could not read the files: {e}"))?;
        for entry in entries.flatten() {
            let path = entry.path();
            let kind = entry
                .file_type()
                .map_err(|e| format!("could not read the files: {e}"))?;
            if kind.is_dir() && entry.file_name() != ".git" {
                pending.push(path);
            } else if kind.is_file() {
                let relative = path
                    .strip_prefix(dir)
                    .map_err(|_| "a file outside the root path".to_string())?;
                out.push(PlannedFile {
                    path: format!("{WORKSPACE}/{}", relative.to_string_lossy()),
                    content: std::fs::read(&path)
                        .map_err(|e| format!("could not read the files: {e}"))?,
                });
            }
        }
    }
    Ok(out)
}

impl DockerEngine {
    /// A step of a terraform service's request: its run at deployment (the action its request
    /// asks for), its destroy at deletion (its state volume with it, unless kept).
    pub(crate) async fn terraform_step(
        &self,
        work: &StepWork<'_>,
        tf: &TerraformSpec,
    ) -> Result<(), EngineError> {
        use DeploymentAction as A;
        let (service, action) = (work.service, work.request.action);
        match (action, work.step) {
            (A::Deploy | A::Redeploy, StepName::Executing) => {
                let sub_action = ServiceSubAction::of(
                    Some(ServiceKind::Terraform),
                    action,
                    work.request.snapshot.terraform_action,
                );
                let run = Run::of(sub_action).ok_or("no terraform action for this request")?;
                self.run_terraform(work, tf, run).await
            }
            (A::Delete | A::Uninstall, _) => {
                if service.deployment_status != DeploymentStatus::NeverDeployed {
                    self.run_terraform(work, tf, Run::Destroy).await?;
                }
                if action == A::Delete && !self.settings.keep_volumes {
                    self.remove_named_volume(&plan::state_volume_name(service.id))
                        .await?;
                }
                Ok(())
            }
            (A::Deploy | A::Redeploy | A::Stop | A::Restart | A::Diff, _) => Ok(()),
        }
    }

    /// The state a terraform service's last run left (its copy on the volume), read through a
    /// container of its image made (never started) to mount it, by the daemon that keeps the
    /// volume; none when it never ran.
    pub(crate) async fn read_terraform_state(
        &self,
        service: &domain::model::Service,
        spec: &TerraformSpec,
    ) -> Result<Option<String>, EngineError> {
        let volume = plan::state_volume_name(service.id);
        let Some(docker) = self.daemon_keeping(&volume).await? else {
            return Ok(None);
        };
        let image = self
            .settings
            .terraform_image
            .replace("{version}", &spec.provider_version.explicit_version);
        let labels = self.marked(std::collections::HashMap::from([
            (plan::LABEL_SERVICE.to_string(), service.id.0.to_string()),
            (
                plan::LABEL_ORGANIZATION.to_string(),
                service.organization_id.0.to_string(),
            ),
        ]));
        let name = format!(
            "capstan-{}-tfstate-{}",
            service.id.0.simple(),
            uuid::Uuid::new_v4().simple()
        );
        let state = PlannedVolume {
            name: volume,
            target: STATE_DIR.into(),
        };
        let created = crate::volumes::volume_holder(docker, name, &image, &state, labels)
            .await
            .map_err(|e| e.context("could not read the state"))?;
        let mut read = crate::backups::file_of(docker, &created, SNAPSHOT).await;
        if matches!(read, Err(None)) {
            read = crate::backups::file_of(docker, &created, LOCAL_STATE).await;
        }
        crate::volumes::remove_volume_holder(docker, &created).await;
        match read {
            Ok(bytes) => Ok(Some(String::from_utf8_lossy(&bytes).to_string())),
            Err(None) => Ok(None),
            Err(Some(why)) => Err(why),
        }
    }

    /// Runs the terraform action a request asks for, to its end: in a container beside its
    /// state volume, or on a Swarm, as a one-off task on the node that keeps it.
    pub(crate) async fn run_terraform(
        &self,
        work: &StepWork<'_>,
        spec: &TerraformSpec,
        run: Run,
    ) -> Result<(), EngineError> {
        let log = work.log;
        let runner = self.terraform_runner(work, spec, run).await?;
        let limit = Duration::from_secs(u64::try_from(spec.timeout_sec.max(60)).unwrap_or(1800));
        self.ensure_network(work.service).await?;
        log.info(&format!("terraform {} runs", run.word()));
        let ended = if self.settings.swarm {
            self.run_swarm_terraform(work, &runner, limit, OUTPUT_LINES)
                .await?
        } else {
            self.run_terraform_here(work, &runner, run, limit).await?
        };
        let code = match ended {
            Ended::Exited(code) => code,
            Ended::Canceled => {
                return Err(format!("canceled while terraform {} ran", run.word()).into())
            }
            Ended::TimedOut => {
                return Err(format!(
                    "terraform ran past its timeout_sec ({} s) and was stopped",
                    limit.as_secs()
                )
                .into())
            }
        };
        if code == 0 {
            log.info(&format!("terraform {} succeeded", run.word()));
            Ok(())
        } else {
            Err(format!(
                "terraform {} exited with code {code} (its output is in the deployment log)",
                run.word()
            )
            .into())
        }
    }

    /// The container a run is: the repository's root path at the commit deployed as its
    /// workspace, the variables as its environment, the state volume mounted (its image
    /// ensured on the host).
    async fn terraform_runner(
        &self,
        work: &StepWork<'_>,
        spec: &TerraformSpec,
        run: Run,
    ) -> Result<ContainerPlan, EngineError> {
        let log = work.log;
        let image = self
            .settings
            .terraform_image
            .replace("{version}", &spec.provider_version.explicit_version);
        self.ensure_image(&image, crate::images::ImageAccess::Host, log, work.cancel)
            .await?;
        let repo = &spec.terraform_files_source.git.git_repository;
        let (git, revision) = crate::build::fetched_source(work, repo)?;
        let (scratch, _) = self
            .fetch_into_scratch(work.request.id, git, &revision, log, work.cancel)
            .await?;
        let context = crate::build::inside(&scratch.0, &repo.root_path).ok_or_else(|| {
            format!(
                "the root_path {} is not a directory of the repository",
                repo.root_path
            )
        })?;
        let files = workspace_files(&context)?;
        drop(scratch);
        let (mut env, var_files) = variables(&spec.terraform_variables_source);
        let extra = spec
            .action_extra_arguments
            .get(run.extra_key())
            .cloned()
            .unwrap_or_default();
        env.extend(
            work.inputs
                .environment
                .iter()
                .map(|e| format!("{}={}", e.key, e.value.expose())),
        );
        env.push(format!("CAPSTAN_TF_ACTION={}", run.word()));
        env.push(format!("CAPSTAN_TF_VAR_FILES={}", var_files.join(" ")));
        env.push(format!("CAPSTAN_TF_ARGS={}", extra.join(" ")));
        env.push("TF_IN_AUTOMATION=1".into());
        let mut labels = plan::labels(work.request, work.service, "terraform");
        labels.insert(LABEL_REPLICA.into(), "0".into());
        let (nano_cpus, memory_bytes) =
            plan::limits(spec.job_resources.cpu_milli, spec.job_resources.ram_mib);
        Ok(ContainerPlan {
            name: format!(
                "capstan-{}-tf-{}",
                work.service.id.0.simple(),
                work.request.id.0.simple()
            ),
            image,
            entrypoint: Some(vec!["sh".into(), "-c".into()]),
            cmd: Some(vec![SCRIPT.into()]),
            env,
            labels,
            ports: Vec::new(),
            files,
            nano_cpus,
            memory_bytes,
            restarts: false,
            init: false,
            publish_address: String::new(),
            volume: Some(PlannedVolume {
                name: plan::state_volume_name(work.service.id),
                target: STATE_DIR.into(),
            }),
            network: plan::network_name(work.service.environment_id),
            aliases: Vec::new(),
        })
    }

    /// A run as a container of this host, beside the state volume.
    async fn run_terraform_here(
        &self,
        work: &StepWork<'_>,
        runner: &ContainerPlan,
        run: Run,
        limit: Duration,
    ) -> Result<Ended, EngineError> {
        self.ensure_volume(work.service, &plan::state_volume_name(work.service.id))
            .await?;
        if run == Run::Unlock {
            // A run an instance left behind when it died still holds the state's lock (a local
            // state's lock is its process): breaking the lock means stopping it.
            let left: Vec<String> = self
                .owned(work.service.id, Some("terraform"))
                .await?
                .into_iter()
                .filter_map(|c| c.id)
                .collect();
            if !left.is_empty() {
                work.log.info(&format!(
                    "{} terraform run(s) left behind held the state: removed",
                    left.len()
                ));
                self.remove_all(&left).await;
            }
        }
        let id = self.start(runner).await?;
        let ended = self
            .run_to_end(&id, limit, work.cancel, work.log, OUTPUT_LINES)
            .await;
        if !matches!(ended, Ok(Ended::Canceled)) {
            self.remove_all(std::slice::from_ref(&id)).await;
        }
        ended.map_err(|e| said("lost the terraform run", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_runs_the_action_it_asks_for() {
        use domain::model::{DeploymentAction as A, ServiceKind, TerraformDeployAction as T};
        let run = |action, asked| {
            Run::of(ServiceSubAction::of(
                Some(ServiceKind::Terraform),
                action,
                asked,
            ))
        };
        assert_eq!(run(A::Deploy, None), Some(Run::Apply));
        assert_eq!(run(A::Redeploy, Some(T::Plan)), Some(Run::Plan));
        assert_eq!(run(A::Deploy, Some(T::ForceUnlock)), Some(Run::Unlock));
        assert_eq!(run(A::Deploy, Some(T::MigrateState)), Some(Run::Migrate));
        assert_eq!(run(A::Uninstall, None), Some(Run::Destroy));
        assert_eq!(run(A::Delete, None), Some(Run::Destroy));
        assert_eq!(run(A::Stop, None), None);
        assert_eq!(run(A::Restart, None), None);
    }

    #[test]
    fn variables_become_the_environment_and_var_files_arguments() {
        let source = serde_json::json!({"tf_var_file_paths": ["/prod.tfvars"],
            "tf_vars": [{"key": "region", "value": "eu-west-3", "secret": false}]});
        let (env, files) = variables(&source);
        assert_eq!(env, ["TF_VAR_region=eu-west-3"]);
        assert_eq!(files, ["-var-file=prod.tfvars"]);
    }
}
