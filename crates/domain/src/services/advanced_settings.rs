//! The advanced settings of services (`/{kind}/{id}/advancedSettings`): one mechanism for the
//! five kinds that have them, each with its table of keys and defaults.

use super::Capstan;
use crate::auth::{Action, Principal};
use crate::error::{DomainError, DomainResult};
use crate::ids::ServiceId;
use crate::model::EventType;
use crate::model::{ServiceKind, SettingsTable, VariableParent, STICKY_SESSION};
use crate::ports::Scope;
use serde_json::{Map, Value};

fn table(kind: ServiceKind) -> DomainResult<&'static SettingsTable> {
    kind.advanced_settings()
        .ok_or(DomainError::NotFound("advanced settings of this kind"))
}

impl Capstan {
    /// `GET /default{Kind}AdvancedSettings`: every key of the kind with its default.
    pub fn default_advanced_settings(
        &self,
        _p: &Principal,
        kind: ServiceKind,
    ) -> DomainResult<Map<String, Value>> {
        Ok(table(kind)?.defaults())
    }

    /// Every advanced setting of the service, with its value.
    pub async fn service_advanced_settings(
        &self,
        p: &Principal,
        kind: ServiceKind,
        id: ServiceId,
    ) -> DomainResult<Map<String, Value>> {
        let table = table(kind)?;
        let mut unit = self.reading().await?;
        let service = self
            .load_service(&mut *unit, p, kind, id, Action::Read)
            .await?;
        Ok(table.shown(&service.advanced_settings))
    }

    /// Sets the settings sent (each checked, naming the key at fault; those not sent keep
    /// their value). A change makes a deployed service OUT_OF_DATE.
    pub async fn edit_service_advanced_settings(
        &self,
        p: &Principal,
        kind: ServiceKind,
        id: ServiceId,
        sent: &Value,
    ) -> DomainResult<Map<String, Value>> {
        let table = table(kind)?;
        self.in_unit(&[Scope::EnvironmentOf(id)], async |tx| {
            let mut service = self.load_service(tx, p, kind, id, Action::Write).await?;
            let edited = table.edit(&service.advanced_settings, sent)?;
            if edited != service.advanced_settings {
                let now = self.now();
                service.advanced_settings = edited;
                service.updated_at = now;
                self.update(tx, &service, "environment").await?;
                tx.mark_out_of_date(VariableParent::Service(id, kind), now)
                    .await?;
            }
            self.audit(
                tx,
                p,
                EventType::Update,
                &super::audit::SettingsOf(&service),
            )
            .await?;
            Ok(table.shown(&service.advanced_settings))
        })
        .await
    }

    /// `GET /{kind}/{id}/network`: whether the router keeps a client on one replica (the
    /// advanced setting it is kept in).
    pub async fn service_network(
        &self,
        p: &Principal,
        kind: ServiceKind,
        id: ServiceId,
    ) -> DomainResult<bool> {
        let all = self.service_advanced_settings(p, kind, id).await?;
        Ok(all.get(STICKY_SESSION) == Some(&Value::Bool(true)))
    }

    /// `PUT /{kind}/{id}/network`: sets it (unsent: unchanged), as an edit of the setting.
    pub async fn edit_service_network(
        &self,
        p: &Principal,
        kind: ServiceKind,
        id: ServiceId,
        sticky_session: Option<bool>,
    ) -> DomainResult<bool> {
        let mut sent = Map::new();
        if let Some(sticky) = sticky_session {
            sent.insert(STICKY_SESSION.to_string(), Value::Bool(sticky));
        }
        let all = self
            .edit_service_advanced_settings(p, kind, id, &Value::Object(sent))
            .await?;
        Ok(all.get(STICKY_SESSION) == Some(&Value::Bool(true)))
    }
}
