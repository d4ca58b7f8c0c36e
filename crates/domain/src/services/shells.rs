//! Shells in running replicas (the live API's `/shell/exec`): who may open one (whoever may
//! deploy the service: DEVOPS and above), where it runs, and the audit log's two records of
//! it, when it opens and when it closes with how long it lasted (never what was typed, nor
//! the command, which may carry a secret).

use super::audit::Target as Audit;
use super::Capstan;
use crate::auth::{Action, Principal};
use crate::engine::{Replicas, Shell, ShellRequest, Target};
use crate::error::{DomainError, DomainResult};
use crate::ids::ServiceId;
use crate::model::{EventType, Service, SubTargetType};
use crate::ports::Repo;
use std::time::{Duration, Instant};

/// A shell opened, with what its closing records.
pub struct OpenedShell {
    pub shell: Shell,
    pub ticket: ShellTicket,
}

/// What the audit log's record of a shell's end needs.
pub struct ShellTicket {
    principal: Principal,
    service: Service,
    replica: String,
    opened: Instant,
}

impl ShellTicket {
    pub fn replica(&self) -> &str {
        &self.replica
    }
}

/// The largest terminal a shell may ask for, either way.
const MAX_TERMINAL: u16 = 1000;

impl Capstan {
    /// Opens a shell in a running replica of `service` (of any kind), as `p` asks, and
    /// records that it did.
    pub async fn open_shell(
        &self,
        p: &Principal,
        service: ServiceId,
        request: ShellRequest,
    ) -> DomainResult<OpenedShell> {
        if !self.shells {
            return Err(DomainError::Forbidden(
                "shells are turned off on this installation (CAPSTAN_SHELLS)".into(),
            ));
        }
        if request.command.is_empty() || request.command.iter().all(|c| c.trim().is_empty()) {
            return Err(DomainError::invalid("command", "must name what to run"));
        }
        for (field, value) in [
            ("tty_width", request.size.width),
            ("tty_height", request.size.height),
        ] {
            if value == 0 || value > MAX_TERMINAL {
                return Err(DomainError::invalid(
                    field,
                    format!("must be from 1 to {MAX_TERMINAL}"),
                ));
            }
        }
        let (service, target, replicas) = self
            .reach_replicas(Some((p, Action::Write)), service, "opens no shells")
            .await?;
        let shell = replicas
            .open_shell(&target, &service, &request)
            .await
            .map_err(|e| DomainError::state(e.to_string()))?;
        let detail = format!("opened in {}", shell.replica);
        self.audit_shell(p, &service, detail).await?;
        let ticket = ShellTicket {
            principal: p.clone(),
            replica: shell.replica.clone(),
            service,
            opened: Instant::now(),
        };
        Ok(OpenedShell { shell, ticket })
    }

    /// Records that the shell `ticket` tells of closed, how long it was open and how its
    /// process ended (none: the socket closed first).
    pub async fn close_shell(&self, ticket: ShellTicket, exit: Option<i64>) -> DomainResult<()> {
        let lasted = Duration::from_secs(ticket.opened.elapsed().as_secs());
        let ended = exit.map_or_else(
            || "its socket closed".to_string(),
            |code| format!("exit code {code}"),
        );
        let detail = format!(
            "closed in {} after {} s ({ended})",
            ticket.replica,
            lasted.as_secs()
        );
        self.audit_shell(&ticket.principal, &ticket.service, detail)
            .await
    }

    /// A service (of any kind), where its environment's cluster runs it, and how its engine
    /// reaches its replicas there; loaded as `who` may act on it, or as it is for a reader
    /// already admitted. `lacking` says what an engine that cannot reach them does not do.
    pub(super) async fn reach_replicas(
        &self,
        who: Option<(&Principal, Action)>,
        id: ServiceId,
        lacking: &str,
    ) -> DomainResult<(Service, Target, &dyn Replicas)> {
        let (service, target) = {
            let mut unit = self.reading().await?;
            let tx = &mut *unit;
            let service = match who {
                Some((p, action)) => self.load::<Service>(tx, p, id, action).await?,
                None => Repo::<Service>::get(tx, id)
                    .await?
                    .ok_or(DomainError::NotFound("service"))?,
            };
            let target = self
                .target_of_environment(tx, service.environment_id)
                .await?;
            (service, target)
        };
        let engine = self
            .engine
            .as_deref()
            .ok_or_else(|| DomainError::state("no engine runs services here"))?;
        let replicas = engine
            .replicas(&target)
            .ok_or_else(|| DomainError::state(format!("{} {lacking}", engine.name(&target))))?;
        Ok((service, target, replicas))
    }

    async fn audit_shell(
        &self,
        p: &Principal,
        service: &Service,
        detail: String,
    ) -> DomainResult<()> {
        let target = Audit {
            sub: Some(SubTargetType::RemoteAccess),
            detail: Some(detail),
            ..super::audit::Audited::audit_target(service)
        };
        self.in_unit(&[], async |tx| {
            self.audit_all(tx, p, vec![(EventType::Shell, target)])
                .await
        })
        .await
    }
}
