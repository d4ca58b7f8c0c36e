//! The stored form of each kind's spec (the `spec` column of `services`): serde types of the
//! store's own, member for member beside the domain's `*Spec`, whose serde form is the API's.
//! Renaming a member for clients therefore changes neither what is stored nor how records
//! already stored read back; renaming a domain member fails to compile here instead.

#[macro_use]
mod form;
mod database;
mod helm;
mod job;
mod long_running;
mod shared;
mod terraform;
#[cfg(test)]
mod tests;

use domain::error::{StoreError, StoreResult};
use domain::model::{default_icon, ServiceKind, ServiceSpec};
use form::Form;
use serde::de::DeserializeOwned;

/// The JSON text stored for `spec`.
pub fn write(spec: &ServiceSpec) -> StoreResult<String> {
    let text = match spec {
        ServiceSpec::Application(s) => {
            serde_json::to_string(&long_running::StoredApplication::write(s))
        }
        ServiceSpec::Container(s) => {
            serde_json::to_string(&long_running::StoredContainer::write(s))
        }
        ServiceSpec::Database(s) => serde_json::to_string(&database::StoredDatabase::write(s)),
        ServiceSpec::Job(s) => serde_json::to_string(&job::StoredJob::write(s)),
        ServiceSpec::Helm(s) => serde_json::to_string(&helm::StoredHelm::write(s)),
        ServiceSpec::Terraform(s) => serde_json::to_string(&terraform::StoredTerraform::write(s)),
    };
    text.map_err(|e| StoreError::Other(format!("unwritable spec: {e}")))
}

/// The spec of a service of `kind` stored as `text`.
pub fn read(kind: ServiceKind, text: &str) -> StoreResult<ServiceSpec> {
    fn parse<S: Form + DeserializeOwned>(text: &str) -> StoreResult<S::Domain> {
        serde_json::from_str::<S>(text)
            .map(S::read)
            .map_err(|e| StoreError::Other(format!("unreadable spec in store: {e}")))
    }
    let mut spec = match kind {
        ServiceKind::Application => {
            ServiceSpec::Application(parse::<long_running::StoredApplication>(text)?)
        }
        ServiceKind::Container => {
            ServiceSpec::Container(parse::<long_running::StoredContainer>(text)?)
        }
        ServiceKind::Database => ServiceSpec::Database(parse::<database::StoredDatabase>(text)?),
        ServiceKind::Job => ServiceSpec::Job(parse::<job::StoredJob>(text)?),
        ServiceKind::Helm => ServiceSpec::Helm(parse::<helm::StoredHelm>(text)?),
        ServiceKind::Terraform => {
            ServiceSpec::Terraform(parse::<terraform::StoredTerraform>(text)?)
        }
    };
    fill_icon(&mut spec);
    Ok(spec)
}

/// Records stored before icons were kept read back with their kind's.
fn fill_icon(spec: &mut ServiceSpec) {
    if !spec.icon_uri().is_empty() {
        return;
    }
    let icon = default_icon(spec.kind());
    match spec {
        ServiceSpec::Application(a) => a.runtime.workload.icon_uri = icon,
        ServiceSpec::Container(c) => c.runtime.workload.icon_uri = icon,
        ServiceSpec::Database(d) => d.icon_uri = icon,
        ServiceSpec::Job(j) => j.workload.icon_uri = icon,
        ServiceSpec::Helm(h) => h.icon_uri = icon,
        ServiceSpec::Terraform(t) => t.icon_uri = icon,
    }
}
