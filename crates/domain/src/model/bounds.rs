//! What one service may ask of the hosts every organization shares: how many replicas, ports
//! and restarts, how large a variable. Each bound is an operator's setting; a request past
//! one is refused naming the member and the setting, before anything is kept or run.

use super::{ServiceSpec, Variable, VariableType};
use crate::error::DomainError;
use crate::ids::VariableId;

/// The kernel refuses a single environment string (`KEY=value`) longer than this
/// (MAX_ARG_STRLEN): a variable past it could be kept but never deployed.
pub const KERNEL_ENV_STRING_LIMIT: usize = 128 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bounds {
    /// `max_running_instances` (and so `min_running_instances`): CAPSTAN_MAX_REPLICAS.
    pub replicas: i64,
    /// The ports of one service: CAPSTAN_MAX_PORTS.
    pub ports: usize,
    /// A job's `max_nb_restart`: CAPSTAN_MAX_JOB_RESTARTS.
    pub job_restarts: i64,
    /// The bytes of one variable's key and value together: CAPSTAN_MAX_VARIABLE_BYTES.
    pub variable_bytes: usize,
    /// The bytes of all the environment variables one service sees, from every scope:
    /// CAPSTAN_MAX_SERVICE_VARIABLES_BYTES.
    pub service_variables_bytes: usize,
}

/// The most bytes the kernel takes for a program's arguments and environment together, on a
/// host with the usual 8 MiB stack (a quarter of it): a workload given more cannot start.
pub const KERNEL_ARGUMENTS_LIMIT: usize = 2 * 1024 * 1024;

impl Default for Bounds {
    fn default() -> Self {
        Self {
            replicas: 20,
            ports: 20,
            job_restarts: 20,
            variable_bytes: 64 * 1024,
            service_variables_bytes: 1024 * 1024,
        }
    }
}

fn past(field: &str, bound: impl std::fmt::Display, setting: &str) -> DomainError {
    DomainError::invalid(
        field,
        format!("must be at most {bound} on this installation ({setting})"),
    )
}

impl Bounds {
    /// Refuses a service's configuration that asks more than the bounds allow.
    pub fn check_service(&self, spec: &ServiceSpec) -> Result<(), DomainError> {
        if spec.ports().len() > self.ports {
            return Err(past("ports", self.ports, "CAPSTAN_MAX_PORTS"));
        }
        let runtime = match spec {
            ServiceSpec::Application(a) => Some(&a.runtime),
            ServiceSpec::Container(c) => Some(&c.runtime),
            _ => None,
        };
        if let Some(r) = runtime {
            if r.min_running_instances > self.replicas {
                return Err(past(
                    "min_running_instances",
                    self.replicas,
                    "CAPSTAN_MAX_REPLICAS",
                ));
            }
            if r.max_running_instances > self.replicas {
                return Err(past(
                    "max_running_instances",
                    self.replicas,
                    "CAPSTAN_MAX_REPLICAS",
                ));
            }
        }
        if let ServiceSpec::Job(j) = spec {
            if j.max_nb_restart > self.job_restarts {
                return Err(past(
                    "max_nb_restart",
                    self.job_restarts,
                    "CAPSTAN_MAX_JOB_RESTARTS",
                ));
            }
        }
        Ok(())
    }

    /// Refuses a variable whose key and value together are longer than the bound (a file's
    /// content too: interpolated, it may become an environment's string).
    pub fn check_variable(&self, v: &Variable) -> Result<(), DomainError> {
        if v.variable_type == VariableType::Alias {
            return Ok(());
        }
        let size = v.key.to_string().len() + v.value.as_ref().map_or(0, |s| s.expose().len());
        if size > self.variable_bytes {
            return Err(DomainError::invalid(
                "value",
                format!(
                    "is {size} bytes with its key; at most {} on this installation \
                     (CAPSTAN_MAX_VARIABLE_BYTES)",
                    self.variable_bytes
                ),
            ));
        }
        Ok(())
    }
}

/// The bytes one variable adds to the environment of the services that see it: its key, its
/// value (an alias: the value it names, looked up in `values`), `=` and the string's end. A
/// file is not in the environment.
pub fn environment_bytes(v: &Variable, aliased: impl Fn(VariableId) -> usize) -> usize {
    let value = match v.variable_type {
        VariableType::File => return 0,
        VariableType::Alias => v.aliased_variable_id.map_or(0, aliased),
        _ => v.value.as_ref().map_or(0, |s| s.expose().len()),
    };
    v.key.to_string().len() + value + 2
}

impl Bounds {
    /// Refuses a service whose environment variables would come to `total` bytes.
    pub fn check_service_variables(&self, total: usize) -> Result<(), DomainError> {
        if total > self.service_variables_bytes {
            return Err(DomainError::invalid(
                "value",
                format!(
                    "would give a service {total} bytes of environment variables; at most {} \
                     on this installation (CAPSTAN_MAX_SERVICE_VARIABLES_BYTES)",
                    self.service_variables_bytes
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ServiceDraft, ServiceKind};
    use serde_json::json;

    fn spec(kind: ServiceKind, body: serde_json::Value) -> ServiceSpec {
        ServiceDraft::parse(kind, &body, None).unwrap().spec
    }

    fn container(extra: serde_json::Value) -> ServiceSpec {
        let mut body = json!({"name": "web", "registry_id": uuid::Uuid::new_v4(),
                              "image_name": "web", "tag": "1"});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        spec(ServiceKind::Container, body)
    }

    #[test]
    fn a_service_past_a_bound_is_refused_naming_the_member_and_the_setting() {
        let bounds = Bounds::default();
        assert!(bounds
            .check_service(&container(json!({"max_running_instances": 20})))
            .is_ok());
        let err = bounds
            .check_service(&container(json!({"max_running_instances": 10_000})))
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "max_running_instances: must be at most 20 on this installation (CAPSTAN_MAX_REPLICAS)"
        );
        let huge =
            json!({"min_running_instances": 1_i64 << 62, "max_running_instances": 1_i64 << 62});
        let err = bounds.check_service(&container(huge)).unwrap_err();
        assert!(err.to_string().starts_with("min_running_instances: "));
        let ports: Vec<_> = (1..=21)
            .map(|p| json!({"internal_port": 1000 + p, "publicly_accessible": false}))
            .collect();
        let err = bounds
            .check_service(&container(json!({ "ports": ports })))
            .unwrap_err();
        assert!(err.to_string().contains("(CAPSTAN_MAX_PORTS)"), "{err}");
        let job = |restarts: i64| {
            spec(
                ServiceKind::Job,
                json!({"name": "j", "max_nb_restart": restarts,
                       "schedule": {"cronjob": {"scheduled_at": "0 * * * *"}},
                       "source": {"image": {"registry_id": uuid::Uuid::new_v4(),
                                            "image_name": "j", "tag": "1"}}}),
            )
        };
        assert!(bounds.check_service(&job(20)).is_ok());
        let err = bounds.check_service(&job(1_000_000_000)).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("max_nb_restart: must be at most 20"),
            "{err}"
        );
    }
}
