//! What a terraform service's state holds, as the API lists it: each resource (managed, or a
//! data source) of each module, read from the state file (format version 4).

use crate::ids::ServiceId;
use serde_json::{Map, Value};
use uuid::Uuid;

/// One resource instance of a state.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TerraformResource {
    /// Stable for the service and address: the same resource keeps its id across runs.
    pub id: Uuid,
    pub resource_type: String,
    pub name: String,
    pub address: String,
    pub provider: String,
    /// `managed` or `data`.
    pub mode: String,
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub attributes: Map<String, Value>,
}

/// The provider's short name: `provider["registry.terraform.io/hashicorp/aws"]` is `aws`.
fn provider_name(full: &str) -> String {
    let inner = full
        .trim_start_matches("provider[\"")
        .trim_end_matches("\"]");
    inner.rsplit('/').next().unwrap_or(inner).to_string()
}

/// The resources of a state file; `Err` when it is not one.
pub fn state_resources(service: ServiceId, state: &str) -> Result<Vec<TerraformResource>, String> {
    let state: Value =
        serde_json::from_str(state).map_err(|e| format!("the state is not JSON: {e}"))?;
    let mut out = Vec::new();
    for resource in state["resources"].as_array().into_iter().flatten() {
        let text = |key: &str| resource[key].as_str().unwrap_or_default().to_string();
        let (mode, kind, name) = (text("mode"), text("type"), text("name"));
        let mut base = if mode == "data" {
            format!("data.{kind}.{name}")
        } else {
            format!("{kind}.{name}")
        };
        if let Some(module) = resource["module"].as_str() {
            base = format!("{module}.{base}");
        }
        for instance in resource["instances"].as_array().into_iter().flatten() {
            let address = match &instance["index_key"] {
                Value::Null => base.clone(),
                Value::String(key) => format!("{base}[\"{key}\"]"),
                other => format!("{base}[{other}]"),
            };
            out.push(TerraformResource {
                id: Uuid::new_v5(&service.0, address.as_bytes()),
                resource_type: kind.clone(),
                name: name.clone(),
                provider: provider_name(&text("provider")),
                mode: mode.clone(),
                attributes: instance["attributes"]
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
                address,
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_instance_is_a_resource_at_its_address() {
        let service = ServiceId::generate();
        let state = serde_json::json!({"version": 4, "resources": [
            {"mode": "managed", "type": "aws_instance", "name": "web",
             "provider": "provider[\"registry.terraform.io/hashicorp/aws\"]",
             "instances": [{"index_key": 0, "attributes": {"id": "i-1"}},
                           {"index_key": 1, "attributes": {"id": "i-2"}}]},
            {"module": "module.net", "mode": "data", "type": "terraform_remote_state",
             "name": "other", "provider": "provider[\"terraform.io/builtin/terraform\"]",
             "instances": [{"attributes": {"backend": "local"}}]}
        ]});
        let found = state_resources(service, &state.to_string()).unwrap();
        let addresses: Vec<&str> = found.iter().map(|r| r.address.as_str()).collect();
        assert_eq!(
            addresses,
            [
                "aws_instance.web[0]",
                "aws_instance.web[1]",
                "module.net.data.terraform_remote_state.other"
            ]
        );
        assert_eq!(found[0].provider, "aws");
        assert_eq!(found[2].provider, "terraform");
        assert_eq!(found[2].mode, "data");
        assert_eq!(found[1].attributes["id"], "i-2");
        let again = state_resources(service, &state.to_string()).unwrap();
        assert_eq!(found[0].id, again[0].id, "stable across reads");
        assert!(state_resources(service, "not json").is_err());
    }
}
