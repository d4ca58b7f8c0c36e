//! The advanced settings of each service kind (the keys of the public description's
//! `{Kind}AdvancedSettings`), with Capstan's defaults: parts that several kinds share, put
//! together per kind. docs/records.md lists the defaults.

use super::advanced_settings::{
    boolean, int, int_in, nullable_int, nullable_text, one_of, text, text_list, text_map, Setting,
    SettingsTable,
};
use super::ServiceKind;

const CUSTOM_DOMAIN_CHECK: &[Setting] =
    &[boolean("deployment.custom_domain_check_enabled", "true")];

/// How pods stop and where they are placed (every kind that runs pods).
const POD_PLACEMENT: &[Setting] = &[
    int("deployment.termination_grace_period_seconds", Some(1), "60"),
    text_map("deployment.affinity.node.required"),
];

/// How a long-running workload is spread and rolled out (applications and containers).
const ROLLOUT: &[Setting] = &[
    one_of(
        "deployment.antiaffinity.pod",
        &["Preferred", "Requirred"],
        r#""Preferred""#,
    ),
    one_of(
        "deployment.topology_spread.zone",
        &["Disabled", "ScheduleAnyway", "DoNotSchedule"],
        r#""ScheduleAnyway""#,
    ),
    one_of(
        "deployment.update_strategy.type",
        &["RollingUpdate", "Recreate"],
        r#""RollingUpdate""#,
    ),
    int_in(
        "deployment.update_strategy.rolling_update.max_unavailable_percent",
        0,
        100,
        "25",
    ),
    int_in(
        "deployment.update_strategy.rolling_update.max_surge_percent",
        0,
        100,
        "25",
    ),
];

const LIFECYCLE: &[Setting] = &[
    text_list("deployment.lifecycle.post_start_exec_command", "[]"),
    text_list("deployment.lifecycle.pre_stop_exec_command", "[]"),
];

/// The resources and time a build gets (kinds built from source).
const BUILD_LIMITS: &[Setting] = &[
    int("build.timeout_max_sec", Some(1), "1800"),
    int("build.cpu_max_in_milli", Some(1), "4000"),
    int("build.ram_max_in_gib", Some(1), "8"),
    boolean("build.skip_git_submodules", "false"),
];

const BUILDKIT: &[Setting] = &[boolean("build.disable_buildkit_cache", "false")];

const TERRAFORM_BUILD: &[Setting] = &[int("build.ephemeral_storage_in_gib", Some(1), "20")];

/// The public entry point in front of the service (kinds that expose ports).
const INGRESS: &[Setting] = &[
    int("network.ingress.proxy_body_size_mb", Some(1), "100"),
    boolean("network.ingress.force_ssl_redirect", "true"),
    boolean("network.ingress.enable_cors", "false"),
    text("network.ingress.cors_allow_origin", r#""*""#),
    text(
        "network.ingress.cors_allow_methods",
        r#""GET, PUT, POST, DELETE, PATCH, OPTIONS""#,
    ),
    text(
        "network.ingress.cors_allow_headers",
        r#""DNT,Keep-Alive,User-Agent,X-Requested-With,If-Modified-Since,Cache-Control,Content-Type,Range,Authorization""#,
    ),
    int("network.ingress.proxy_buffer_size_kb", Some(1), "4"),
    int("network.ingress.keepalive_time_seconds", Some(0), "3600"),
    int("network.ingress.keepalive_timeout_seconds", Some(0), "60"),
    int("network.ingress.send_timeout_seconds", Some(0), "60"),
    int(
        "network.ingress.proxy_connect_timeout_seconds",
        Some(0),
        "60",
    ),
    int("network.ingress.proxy_send_timeout_seconds", Some(0), "60"),
    int("network.ingress.proxy_read_timeout_seconds", Some(0), "60"),
    one_of("network.ingress.proxy_buffering", &["on", "off"], r#""on""#),
    int("network.ingress.grpc_send_timeout_seconds", Some(0), "60"),
    int("network.ingress.grpc_read_timeout_seconds", Some(0), "60"),
    text("network.ingress.whitelist_source_range", r#""0.0.0.0/0""#),
    text("network.ingress.denylist_source_range", r#""""#),
    text("network.ingress.extra_headers", r#""{}""#),
    text("network.ingress.basic_auth_env_var", r#""""#),
    boolean("network.ingress.enable_sticky_session", "false"),
];

const REQUEST_BUFFERING: &[Setting] = &[one_of(
    "network.ingress.proxy_request_buffering",
    &["on", "off"],
    r#""on""#,
)];

const GATEWAY_API: &[Setting] = &[
    nullable_int("network.gateway_api.http_request_timeout_seconds", 0),
    nullable_int(
        "network.gateway_api.http_connection_idle_timeout_seconds",
        0,
    ),
    nullable_int("network.gateway_api.retry.num_retries", 0),
    nullable_text("network.gateway_api.retry.retry_on"),
    nullable_text("network.gateway_api.retry.http_status_codes"),
    nullable_int("network.gateway_api.retry.per_try_timeout_seconds", 1),
];

const AUTOSCALING: &[Setting] = &[
    int_in("hpa.cpu.average_utilization_percent", 1, 100, "60"),
    super::advanced_settings::Setting {
        key: "hpa.memory.average_utilization_percent",
        kind: super::advanced_settings::SettingKind::Int {
            min: Some(1),
            max: Some(100),
            nullable: true,
        },
        default: "null",
    },
];

const SERVICE_ACCOUNT: &[Setting] = &[
    text("security.service_account_name", r#""""#),
    boolean("security.read_only_root_filesystem", "false"),
];

const SERVICE_ACCOUNT_TOKEN: &[Setting] =
    &[boolean("security.automount_service_account_token", "false")];

const JOB_RUNS: &[Setting] = &[
    nullable_int("job.delete_ttl_seconds_after_finished", 0),
    one_of(
        "cronjob.concurrency_policy",
        &["Forbid", "Allow", "Replace"],
        r#""Forbid""#,
    ),
    int("cronjob.failed_jobs_history_limit", Some(0), "1"),
    int("cronjob.success_jobs_history_limit", Some(0), "1"),
];

pub static APPLICATION_SETTINGS: SettingsTable = SettingsTable(&[
    CUSTOM_DOMAIN_CHECK,
    POD_PLACEMENT,
    ROLLOUT,
    LIFECYCLE,
    BUILD_LIMITS,
    BUILDKIT,
    INGRESS,
    GATEWAY_API,
    AUTOSCALING,
    SERVICE_ACCOUNT,
    SERVICE_ACCOUNT_TOKEN,
]);

pub static CONTAINER_SETTINGS: SettingsTable = SettingsTable(&[
    CUSTOM_DOMAIN_CHECK,
    POD_PLACEMENT,
    ROLLOUT,
    INGRESS,
    REQUEST_BUFFERING,
    GATEWAY_API,
    AUTOSCALING,
    SERVICE_ACCOUNT,
    SERVICE_ACCOUNT_TOKEN,
]);

pub static JOB_SETTINGS: SettingsTable = SettingsTable(&[
    BUILD_LIMITS,
    BUILDKIT,
    POD_PLACEMENT,
    JOB_RUNS,
    SERVICE_ACCOUNT,
    SERVICE_ACCOUNT_TOKEN,
]);

pub static HELM_SETTINGS: SettingsTable =
    SettingsTable(&[CUSTOM_DOMAIN_CHECK, INGRESS, REQUEST_BUFFERING, GATEWAY_API]);

pub static TERRAFORM_SETTINGS: SettingsTable = SettingsTable(&[
    BUILD_LIMITS,
    TERRAFORM_BUILD,
    POD_PLACEMENT,
    SERVICE_ACCOUNT,
]);

/// Every kind with advanced settings, and its table.
pub static ALL: [(ServiceKind, &SettingsTable); 5] = [
    (ServiceKind::Application, &APPLICATION_SETTINGS),
    (ServiceKind::Container, &CONTAINER_SETTINGS),
    (ServiceKind::Job, &JOB_SETTINGS),
    (ServiceKind::Helm, &HELM_SETTINGS),
    (ServiceKind::Terraform, &TERRAFORM_SETTINGS),
];

impl ServiceKind {
    /// The kind's advanced settings (databases have none).
    pub fn advanced_settings(self) -> Option<&'static SettingsTable> {
        ALL.iter().find(|(k, _)| *k == self).map(|(_, t)| *t)
    }
}
