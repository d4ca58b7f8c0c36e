//! Settings: every `CAPSTAN_*` variable is also a flag (the flag wins). A value is checked by
//! its flag's value parser (`values`) or, where settings depend on each other, here; either
//! way a bad one stops start-up with one line naming it.

mod values;

use api::jwt::JwtVerifier;
use base64::Engine;
use clap::Args;
use domain::outbound_policy::OutboundPolicy;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;
use storage::DatabaseUrl;

/// The most a variable's value may hold: what the kernel takes for one.
const MOST_VARIABLE_BYTES: u64 = domain::model::KERNEL_ENV_STRING_LIMIT as u64 - 1;
/// The most a service's variables may hold together: what the kernel takes for them all.
const MOST_SERVICE_VARIABLES_BYTES: u64 = domain::model::KERNEL_ARGUMENTS_LIMIT as u64;

#[derive(Debug, Clone, Args)]
pub struct RawSettings {
    /// Address to serve on.
    #[arg(
        value_parser = values::listen_address,
        long,
        env = "CAPSTAN_LISTEN",
        default_value = "127.0.0.1:8080",
        global = true
    )]
    pub listen: SocketAddr,
    /// Where the router listens, with the Docker engine (`off`: no router; links then name the
    /// ports workloads publish). A laptop keeps the default; a server listens on 0.0.0.0:80.
    #[arg(
        value_parser = values::address_or_off,
        long,
        env = "CAPSTAN_ROUTER_LISTEN",
        default_value = "127.0.0.1:8000",
        global = true
    )]
    pub router_listen: values::MaybeAddress,
    /// The domain the router's generated host names are under (`localhost`: they resolve to the
    /// machine itself); a server names a wildcard domain pointed at it.
    #[arg(
        long,
        env = "CAPSTAN_ROUTER_DOMAIN",
        default_value = "localhost",
        global = true
    )]
    pub router_domain: String,
    /// Where the router serves HTTPS, once it has certificates (CAPSTAN_ROUTER_CERTIFICATES);
    /// a server listens on 0.0.0.0:443.
    #[arg(
        long,
        env = "CAPSTAN_ROUTER_TLS_LISTEN",
        default_value = "127.0.0.1:8443",
        global = true
    )]
    pub router_tls_listen: String,
    /// A directory of `<host name>.crt` and `<host name>.key` PEM pairs (a wildcard's named
    /// `_wildcard.<domain>`) the router serves HTTPS with, each name's chosen by SNI, read
    /// again when its files change. Unset: no HTTPS.
    #[arg(long, env = "CAPSTAN_ROUTER_CERTIFICATES", global = true)]
    pub router_certificates: Option<PathBuf>,
    /// An ACME directory the router orders a certificate from for each name it routes that
    /// CAPSTAN_ROUTER_CERTIFICATES has none for, proven by the TLS-ALPN-01 challenge on its
    /// HTTPS listener (which must be each name's port 443): `letsencrypt`,
    /// `letsencrypt-staging`, or a directory's URL. The orders are kept in that directory's
    /// `acme/` folder. Unset: no ACME.
    #[arg(long, env = "CAPSTAN_ROUTER_ACME", global = true)]
    pub router_acme: Option<String>,
    /// Whom the ACME authority may write to about the certificates (an email address).
    #[arg(long, env = "CAPSTAN_ROUTER_ACME_CONTACT", global = true)]
    pub router_acme_contact: Option<String>,
    /// A PEM file of the authorities to trust for the ACME directory's own HTTPS (a private
    /// ACME server's); unset: the public web's.
    #[arg(long, env = "CAPSTAN_ROUTER_ACME_ROOTS", global = true)]
    pub router_acme_roots: Option<PathBuf>,
    /// The proxies in front of the router (addresses and networks, comma-separated, e.g.
    /// `10.0.0.0/8,127.0.0.1`) whose X-Forwarded-For and Forwarded headers it passes on, the
    /// peer's address appended. Unset: nobody's; a client's are replaced by its own address.
    #[arg(long, env = "CAPSTAN_ROUTER_TRUSTED_PROXIES", global = true)]
    pub router_trusted_proxies: Option<String>,
    /// sqlite://PATH (embedded default), sqlite::memory:, or postgres://...
    #[arg(
        long,
        env = "CAPSTAN_DATABASE_URL",
        default_value = "sqlite://capstan.db",
        global = true,
        hide_env_values = true
    )]
    pub database_url: String,
    /// Requests per hour per principal.
    #[arg(
        value_parser = values::per_hour,
        long,
        env = "CAPSTAN_RATE_LIMIT_PER_HOUR",
        default_value = "1000",
        global = true
    )]
    pub rate_limit_per_hour: u32,
    /// 32-byte key (base64) encrypting secret values at rest.
    #[arg(
        long,
        env = "CAPSTAN_SECRET_KEY",
        global = true,
        hide_env_values = true
    )]
    pub secret_key: Option<String>,
    /// Older keys (base64, comma-separated) that still open what they sealed: set during a
    /// key rotation (docs/operations.md).
    #[arg(
        long,
        env = "CAPSTAN_SECRET_KEY_PREVIOUS",
        global = true,
        hide_env_values = true
    )]
    pub secret_key_previous: Option<String>,
    /// Shared secret verifying HS256 Bearer JWTs.
    #[arg(
        long = "jwt-hs256-secret",
        env = "CAPSTAN_JWT_HS256_SECRET",
        global = true,
        hide_env_values = true
    )]
    pub jwt_hs256_secret: Option<String>,
    /// PEM public key verifying RS256/ES256 Bearer JWTs.
    #[arg(long, env = "CAPSTAN_JWT_PUBLIC_KEY_FILE", global = true)]
    pub jwt_public_key_file: Option<PathBuf>,
    /// Deployment engine: docker, simulated, or auto (docker when a daemon answers at
    /// start-up, simulated otherwise).
    #[arg(
        value_parser = values::engine,
        long,
        env = "CAPSTAN_ENGINE",
        default_value = "auto",
        global = true
    )]
    pub engine: EngineChoice,
    /// The host address the Docker engine publishes workloads' ports on.
    #[arg(
        value_parser = values::ip_address,
        long,
        env = "CAPSTAN_DOCKER_PUBLISH_ADDRESS",
        default_value = "127.0.0.1",
        global = true
    )]
    pub docker_publish_address: IpAddr,
    /// How many images built from git the Docker engine keeps per service (the newest; a
    /// deploy of a kept commit reuses its image without building).
    #[arg(
        value_parser = values::images_at_least_one,
        long,
        env = "CAPSTAN_DOCKER_IMAGES_KEPT",
        default_value = "5",
        global = true
    )]
    pub docker_images_kept: usize,
    /// The image of each database type, replacing the official ones:
    /// `POSTGRESQL=registry.local/postgres:{version},REDIS=...` (`{version}` is the database's).
    #[arg(long, env = "CAPSTAN_DOCKER_DATABASE_IMAGES", global = true)]
    pub docker_database_images: Option<String>,
    /// Image repositories every organization may run from the Docker host without a pull:
    /// names, or prefixes ending in `/`, comma-separated. Every other image an organization
    /// names is pulled with its own registry access at each deployment.
    #[arg(long, env = "CAPSTAN_HOST_IMAGES", global = true)]
    pub host_images: Option<String>,
    /// Whether a deleted database's volume (its data) and its backups' dumps are kept.
    #[arg(
        value_parser = values::on_off,
        action = clap::ArgAction::Set,
        long,
        env = "CAPSTAN_DOCKER_KEEP_DATABASE_VOLUMES",
        default_value = "false",
        global = true
    )]
    pub docker_keep_database_volumes: bool,
    /// Whether Capstan keeps firewall rules on its own Docker host (iptables): its workloads
    /// and builds reach neither link-local addresses (the cloud's metadata service) nor the
    /// host's own services. `false` leaves the host's firewall alone.
    #[arg(
        value_parser = values::on_off,
        action = clap::ArgAction::Set,
        long,
        env = "CAPSTAN_DOCKER_FIREWALL",
        default_value = "true",
        global = true
    )]
    pub docker_firewall: bool,
    /// The directory whose Docker sockets ON_PREMISE clusters may name (`unix://`); unset:
    /// none (a cluster that names no endpoint runs on the installation's own daemon).
    #[arg(long, env = "CAPSTAN_DOCKER_SOCKETS_DIR", global = true)]
    pub docker_sockets_dir: Option<PathBuf>,
    /// The image terraform services run in, `{version}` standing for their version.
    #[arg(
        long,
        env = "CAPSTAN_DOCKER_TERRAFORM_IMAGE",
        default_value = docker::DEFAULT_TERRAFORM_IMAGE,
        global = true
    )]
    pub docker_terraform_image: String,
    /// The terraform engines and versions offered (`GET /terraform/availableVersion`):
    /// `ENGINE=version` entries, comma-separated (`OPEN_TOFU=1.9.0,TERRAFORM=1.5.7`).
    #[arg(long, env = "CAPSTAN_TERRAFORM_VERSIONS", global = true)]
    pub terraform_versions: Option<String>,
    /// Where databases' backups are kept (a directory Capstan makes, readable by its user):
    /// one installation's, shared by its instances, by no other installation.
    #[arg(
        long,
        env = "CAPSTAN_BACKUP_DIR",
        default_value = "backups",
        global = true
    )]
    pub backup_dir: PathBuf,
    /// The certificates (PEM) git trusts for https repositories, instead of the system's: a
    /// self-hosted git server's private authority (add the system's bundle to reach public
    /// hosts too).
    #[arg(long, env = "CAPSTAN_GIT_CA_FILE", global = true)]
    pub git_ca_file: Option<PathBuf>,
    /// Duration of each step of the simulated engine, in milliseconds.
    #[arg(
        value_parser = values::milliseconds,
        long,
        env = "CAPSTAN_ENGINE_STEP_MS",
        default_value = "1000",
        global = true
    )]
    pub engine_step_ms: u64,
    /// Expected `iss` of Bearer JWTs (not checked when unset).
    #[arg(long = "jwt-issuer", env = "CAPSTAN_JWT_ISSUER", global = true)]
    pub jwt_issuer: Option<String>,
    /// Expected `aud` of Bearer JWTs (not checked when unset).
    #[arg(long = "jwt-audience", env = "CAPSTAN_JWT_AUDIENCE", global = true)]
    pub jwt_audience: Option<String>,
    /// Longest a request may take, in seconds (then 503).
    #[arg(
        value_parser = values::seconds_at_least_one,
        long,
        env = "CAPSTAN_REQUEST_TIMEOUT_SECS",
        default_value = "30",
        global = true
    )]
    pub request_timeout_secs: Duration,
    /// How many API tokens an organization may hold (each is a rate-limit quota of its own).
    #[arg(
        value_parser = values::at_least_one,
        long,
        env = "CAPSTAN_MAX_API_TOKENS",
        default_value = "100",
        global = true
    )]
    pub max_api_tokens: u64,
    /// Whether a pull request from a fork gets a preview: its code would run with the
    /// blueprint environment's secrets (docs/previews.md).
    #[arg(
        value_parser = values::on_off,
        action = clap::ArgAction::Set,
        long,
        env = "CAPSTAN_PREVIEW_FORKS",
        default_value = "false",
        global = true
    )]
    pub preview_forks: bool,
    /// How many pull-request previews one environment may have open at once.
    #[arg(
        value_parser = |raw: &str| values::within(raw, 10_000),
        long,
        env = "CAPSTAN_PREVIEW_LIMIT",
        default_value = "10",
        global = true
    )]
    pub preview_limit: u64,
    /// After how many days without activity on its pull request a preview is deleted.
    #[arg(
        value_parser = |raw: &str| values::within(raw, 3_650),
        long,
        env = "CAPSTAN_PREVIEW_IDLE_DAYS",
        default_value = "7",
        global = true
    )]
    pub preview_idle_days: u64,
    /// The most live-API sockets one token (or JWT) may hold open on one instance.
    #[arg(
        value_parser = |raw: &str| values::within(raw, 100_000),
        long,
        env = "CAPSTAN_LIVE_SOCKETS_PER_TOKEN",
        default_value = "32",
        global = true
    )]
    pub live_sockets_per_token: u64,
    /// Lets whoever may deploy a service open a shell in its running replicas (the live API's
    /// /shell/exec); off, every shell is refused.
    #[arg(
        value_parser = values::on_off,
        action = clap::ArgAction::Set,
        long,
        env = "CAPSTAN_SHELLS",
        default_value = "on",
        global = true
    )]
    pub shells: bool,
    /// Adds what every running replica consumes (CPU, memory and their limits, a series per
    /// replica) to each scrape of /metrics, read from the engine when scraped.
    #[arg(
        value_parser = values::on_off,
        action = clap::ArgAction::Set,
        long,
        env = "CAPSTAN_METRICS_REPLICAS",
        default_value = "off",
        global = true
    )]
    pub metrics_replicas: bool,
    /// The most replicas one application or container may ask for (min and max_running_instances).
    #[arg(
        value_parser = |raw: &str| values::within(raw, 10_000),
        long,
        env = "CAPSTAN_MAX_REPLICAS",
        default_value = "20",
        global = true
    )]
    pub max_replicas: u64,
    /// The most ports one service may declare.
    #[arg(
        value_parser = |raw: &str| values::within(raw, 1_000),
        long,
        env = "CAPSTAN_MAX_PORTS",
        default_value = "20",
        global = true
    )]
    pub max_ports: u64,
    /// The most restarts one job may ask for after a failed execution (max_nb_restart).
    #[arg(
        value_parser = |raw: &str| values::within(raw, 10_000),
        long,
        env = "CAPSTAN_MAX_JOB_RESTARTS",
        default_value = "20",
        global = true
    )]
    pub max_job_restarts: u64,
    /// The most bytes of one variable's key and value (at most 131071: the kernel refuses a
    /// longer environment string).
    #[arg(
        value_parser = |raw: &str| values::within(raw, MOST_VARIABLE_BYTES),
        long,
        env = "CAPSTAN_MAX_VARIABLE_BYTES",
        default_value = "65536",
        global = true
    )]
    pub max_variable_bytes: u64,
    /// The most bytes of all the environment variables one service sees (every scope), keys,
    /// values and separators (at most 2 MiB: the kernel's bound for a program's environment).
    #[arg(
        value_parser = |raw: &str| values::within(raw, MOST_SERVICE_VARIABLES_BYTES),
        long,
        env = "CAPSTAN_MAX_SERVICE_VARIABLES_BYTES",
        default_value = "1048576",
        global = true
    )]
    pub max_service_variables_bytes: u64,
    /// The address clients and git providers reach this server at (default: http://LISTEN).
    #[arg(long, env = "CAPSTAN_PUBLIC_URL", global = true)]
    pub public_url: Option<String>,
    /// The host name or address custom domains must point at (their `validation_domain`);
    /// unset: the host of the public URL (none when that is an unspecified address such as
    /// 0.0.0.0: the status of a domain then says there is nothing to compare with).
    #[arg(long, env = "CAPSTAN_CUSTOM_DOMAIN_TARGET", global = true)]
    pub custom_domain_target: Option<String>,
    /// Origins allowed to call from a browser, comma-separated (unset: CORS off).
    #[arg(long, env = "CAPSTAN_CORS_ORIGINS", global = true)]
    pub cors_origins: Option<String>,
    /// Addresses, networks and host names (comma-separated) that calls Capstan makes on a
    /// user's behalf (git provider APIs, webhooks) may reach beyond public addresses: e.g. a
    /// self-hosted git server on a private network (docs/operations.md, the outbound policy).
    #[arg(long, env = "CAPSTAN_OUTBOUND_ALLOW", global = true)]
    pub outbound_allow: Option<String>,
    /// Lets webhooks (only them) reach every address: private, loopback and link-local
    /// (tests, receivers on the same network); off, such targets are refused unless
    /// CAPSTAN_OUTBOUND_ALLOW names them.
    #[arg(
        value_parser = values::on_off,
        action = clap::ArgAction::Set,
        long,
        env = "CAPSTAN_WEBHOOK_ALLOW_PRIVATE",
        default_value = "false",
        global = true
    )]
    pub webhook_allow_private: bool,
    /// How long one webhook attempt may take, in milliseconds.
    #[arg(
        value_parser = values::milliseconds_at_least_one,
        long,
        env = "CAPSTAN_WEBHOOK_TIMEOUT_MS",
        default_value = "5000",
        global = true
    )]
    pub webhook_timeout_ms: Duration,
    /// The wait before a webhook's first retry, in milliseconds; it doubles after each
    /// failure (at most 15 minutes), less up to half at random.
    #[arg(
        value_parser = values::milliseconds_at_least_one,
        long,
        env = "CAPSTAN_WEBHOOK_RETRY_BASE_MS",
        default_value = "5000",
        global = true
    )]
    pub webhook_retry_base_ms: Duration,
    /// How long a failing webhook delivery is retried, in seconds, before it is marked failed.
    #[arg(
        value_parser = values::seconds_at_least_one,
        long,
        env = "CAPSTAN_WEBHOOK_RETRY_FOR_SECS",
        default_value = "86400",
        global = true
    )]
    pub webhook_retry_for_secs: Duration,
    /// Serves the stand-in's controls under /_capstan/ (reset, snapshots, seed, faults,
    /// engine, clock); off, they answer 404.
    #[arg(
        value_parser = values::on_off,
        action = clap::ArgAction::Set,
        long,
        env = "CAPSTAN_CONTROLS",
        default_value = "off",
        global = true
    )]
    pub controls: bool,
    /// The token the controls answer (`Authorization: Token <it>`); required with them on.
    #[arg(
        long,
        env = "CAPSTAN_CONTROLS_TOKEN",
        global = true,
        hide_env_values = true
    )]
    pub controls_token: Option<String>,
    /// system, or manual: the application's time moves only with the system's pace and the
    /// controls' `POST /_capstan/clock`.
    #[arg(
        value_parser = values::manual_clock,
        action = clap::ArgAction::Set,
        long,
        env = "CAPSTAN_CLOCK",
        default_value = "system",
        global = true
    )]
    pub clock: bool,
    /// Makes the ids of records created through the API the same run after run (a whole
    /// number); unset: random ids.
    #[arg(long, env = "CAPSTAN_ID_SEED", global = true)]
    pub id_seed: Option<String>,
    /// Log filter (e.g. info, debug, capstan_api=debug).
    #[arg(
        value_parser = values::log_filter,
        long,
        env = "CAPSTAN_LOG",
        default_value = "info",
        global = true
    )]
    pub log: String,
}

/// How webhooks are sent.
#[derive(Debug, Clone, Copy)]
pub struct WebhookSettings {
    pub allow_private: bool,
    pub timeout: std::time::Duration,
    pub retry: domain::outbound::RetryPolicy,
}

/// Settings from command-line style arguments (`["--database-url", "sqlite::memory:"]`), the
/// environment's `CAPSTAN_*` filling what they leave out, as the command reads them.
pub fn from_args<I, T>(args: I) -> Result<Settings, String>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    #[derive(clap::Parser)]
    struct Command {
        #[command(flatten)]
        settings: RawSettings,
    }
    let args = std::iter::once(std::ffi::OsString::from("capstan"))
        .chain(args.into_iter().map(Into::into));
    let parsed = <Command as clap::Parser>::try_parse_from(args)
        .map_err(|e| refusal(&e).map_or_else(|| e.to_string(), |why| why.to_string()))?;
    parsed.settings.check().map_err(|e| e.to_string())
}

/// A key of 32 bytes, in base64.
pub fn parse_key(raw: &str) -> Result<[u8; 32], &'static str> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(raw.trim())
        .map_err(|_| "is not valid base64")?;
    bytes
        .try_into()
        .map_err(|_| "must decode to exactly 32 bytes")
}

/// Checked settings.
/// Which engine runs deployments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineChoice {
    /// Docker when a daemon answers at start-up, the simulated engine otherwise.
    Auto,
    Docker,
    Simulated,
}

/// The router's HTTPS.
#[derive(Debug, Clone)]
pub struct RouterTls {
    pub listen: SocketAddr,
    /// The directory of its certificates.
    pub certificates: PathBuf,
    /// Where it orders certificates the directory lacks; none: it does not.
    pub acme: Option<router::AcmeSettings>,
}

#[derive(Clone)]
pub struct Settings {
    pub listen: SocketAddr,
    /// Where the router listens; none: no router.
    pub router_listen: Option<SocketAddr>,
    pub router_domain: String,
    /// Where the router serves HTTPS, with what certificates; none: no HTTPS.
    pub router_tls: Option<RouterTls>,
    /// The proxies whose forwarded headers the router passes on.
    pub router_trusted_proxies: router::TrustedProxies,
    pub database: DatabaseUrl,
    pub rate_limit_per_hour: u32,
    pub max_api_tokens: u64,
    /// The limits on pull requests' previews.
    pub previews: domain::services::PreviewSettings,
    /// What one service may ask of the shared hosts.
    pub bounds: domain::model::Bounds,
    pub live_sockets_per_token: usize,
    pub shells: bool,
    pub metrics_replicas: bool,
    pub secret_key: Option<[u8; 32]>,
    pub secret_key_previous: Vec<[u8; 32]>,
    pub jwt_hs256_secret: Option<String>,
    pub jwt_public_key_file: Option<PathBuf>,
    pub engine_step_ms: u64,
    pub engine: EngineChoice,
    pub docker_publish_address: std::net::IpAddr,
    pub docker_images_kept: usize,
    pub docker_database_images: docker::DatabaseImages,
    pub host_images: docker::HostImages,
    pub docker_keep_database_volumes: bool,
    pub docker_firewall: bool,
    pub docker_sockets_dir: Option<PathBuf>,
    pub backup_dir: PathBuf,
    pub git_ca_file: Option<PathBuf>,
    pub docker_terraform_image: String,
    pub terraform_versions: Vec<(domain::model::TerraformEngine, String)>,
    pub jwt_issuer: Option<String>,
    pub jwt_audience: Option<String>,
    /// How Bearer JWTs are verified, from the settings above; none: refused.
    pub jwt: Option<JwtVerifier>,
    pub request_timeout: std::time::Duration,
    pub public_url: String,
    /// `CAPSTAN_PUBLIC_URL` as given: the base of the links answers carry (relative without).
    pub links_base: Option<String>,
    pub custom_domain_target: Option<String>,
    pub cors_origins: Vec<String>,
    /// What calls on a user's behalf may reach.
    pub outbound: OutboundPolicy,
    pub webhooks: WebhookSettings,
    /// The controls' token, when they are on.
    pub controls_token: Option<String>,
    pub manual_clock: bool,
    pub id_seed: Option<u64>,
    pub log: String,
}

/// Crates whose debug output holds what Capstan keeps secret (bollard writes every Docker
/// request and answer: a container's environment, with its secret values), held at `info`
/// whatever `CAPSTAN_LOG` asks.
const QUIET: &[&str] = &["bollard=info"];

impl Settings {
    /// The log filter: `CAPSTAN_LOG`, with [`QUIET`]'s crates held back.
    pub fn log_filter(&self) -> tracing_subscriber::EnvFilter {
        QUIET.iter().fold(
            tracing_subscriber::EnvFilter::new(&self.log),
            |filter, directive| match directive.parse() {
                Ok(d) => filter.add_directive(d),
                Err(_) => filter,
            },
        )
    }
}

impl fmt::Debug for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Settings")
            .field("listen", &self.listen)
            .field("database", &redact_url(&self.database))
            .field("rate_limit_per_hour", &self.rate_limit_per_hour)
            .field("max_api_tokens", &self.max_api_tokens)
            .field("previews", &self.previews)
            .field("bounds", &self.bounds)
            .field("live_sockets_per_token", &self.live_sockets_per_token)
            .field("shells", &self.shells)
            .field("metrics_replicas", &self.metrics_replicas)
            .field("secret_key", &self.secret_key.map(|_| "***"))
            .field("secret_key_previous", &self.secret_key_previous.len())
            .field(
                "jwt_hs256_secret",
                &self.jwt_hs256_secret.as_ref().map(|_| "***"),
            )
            .field("jwt_public_key_file", &self.jwt_public_key_file)
            .field("engine_step_ms", &self.engine_step_ms)
            .field("engine", &self.engine)
            .field("docker_publish_address", &self.docker_publish_address)
            .field("docker_images_kept", &self.docker_images_kept)
            .field("docker_database_images", &self.docker_database_images)
            .field("host_images", &self.host_images)
            .field("docker_firewall", &self.docker_firewall)
            .field(
                "docker_keep_database_volumes",
                &self.docker_keep_database_volumes,
            )
            .field("docker_sockets_dir", &self.docker_sockets_dir)
            .field("router_listen", &self.router_listen)
            .field("router_domain", &self.router_domain)
            .field("router_tls", &self.router_tls)
            .field("router_trusted_proxies", &self.router_trusted_proxies)
            .field("backup_dir", &self.backup_dir)
            .field("git_ca_file", &self.git_ca_file)
            .field("docker_terraform_image", &self.docker_terraform_image)
            .field("terraform_versions", &self.terraform_versions)
            .field("jwt_issuer", &self.jwt_issuer)
            .field("jwt_audience", &self.jwt_audience)
            .field("request_timeout", &self.request_timeout)
            .field("public_url", &self.public_url)
            .field("custom_domain_target", &self.custom_domain_target)
            .field("cors_origins", &self.cors_origins)
            .field("outbound", &self.outbound)
            .field("webhooks", &self.webhooks)
            .field("controls", &self.controls_token.as_ref().map(|_| "***"))
            .field("manual_clock", &self.manual_clock)
            .field("id_seed", &self.id_seed)
            .finish()
    }
}

/// The database URL without a password, for logs.
pub fn redact_url(url: &DatabaseUrl) -> String {
    match url {
        DatabaseUrl::Sqlite(p) => format!("sqlite://{p}"),
        DatabaseUrl::Postgres(u) => match (u.find("://"), u.rfind('@')) {
            (Some(s), Some(at)) if at > s => format!("{}***{}", &u[..s + 3], &u[at..]),
            _ => u.clone(),
        },
    }
}

/// A setting that cannot be used: which one, and why.
#[derive(Debug)]
pub struct SettingError {
    pub variable: String,
    pub flag: String,
    pub reason: String,
}

impl fmt::Display for SettingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid setting {} (--{}): {}",
            self.variable, self.flag, self.reason
        )
    }
}

impl std::error::Error for SettingError {}

/// An ACME directory's URL, from itself or a known authority's name.
fn acme_directory(given: &str) -> Result<String, SettingError> {
    match given {
        "letsencrypt" => Ok(router::LETS_ENCRYPT_PRODUCTION_DIRECTORY.to_string()),
        "letsencrypt-staging" => Ok(router::LETS_ENCRYPT_STAGING_DIRECTORY.to_string()),
        url if url.starts_with("https://") && url.len() > "https://".len() => Ok(url.to_string()),
        other => Err(bad(
            "router-acme",
            format!("'{other}' is neither letsencrypt, letsencrypt-staging nor an https:// URL"),
        )),
    }
}

/// A value clap's parser of its flag refused, as the one line that names the setting; `None`
/// for what is not a setting's value (an unknown flag, `--help`): clap tells that itself.
pub fn refusal(e: &clap::Error) -> Option<SettingError> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() != ErrorKind::ValueValidation {
        return None;
    }
    let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) else {
        return None;
    };
    // "--listen <LISTEN>"
    let flag = arg.strip_prefix("--")?.split([' ', '=']).next()?;
    let reason = std::error::Error::source(e)?.to_string();
    Some(bad(flag, reason))
}

/// The setting whose flag is `--{flag}` cannot be used, for `reason`; its variable is the one
/// clap reads it from.
fn bad(flag: &str, reason: impl Into<String>) -> SettingError {
    static DECLARED: std::sync::OnceLock<clap::Command> = std::sync::OnceLock::new();
    let declared =
        DECLARED.get_or_init(|| RawSettings::augment_args(clap::Command::new("capstan")));
    let variable = declared
        .get_arguments()
        .find(|a| a.get_long() == Some(flag))
        .and_then(|a| a.get_env())
        .map(|env| env.to_string_lossy().into_owned());
    SettingError {
        variable: variable.unwrap_or_else(|| format!("(no variable for --{flag})")),
        flag: flag.to_string(),
        reason: reason.into(),
    }
}

impl RawSettings {
    fn docker_sockets_dir(&self) -> Result<Option<PathBuf>, SettingError> {
        let Some(dir) = &self.docker_sockets_dir else {
            return Ok(None);
        };
        if !dir.is_absolute() || !dir.is_dir() {
            return Err(bad(
                "docker-sockets-dir",
                format!("'{}' is not an absolute path to a directory", dir.display()),
            ));
        }
        Ok(Some(dir.clone()))
    }

    fn bounds(&self) -> domain::model::Bounds {
        let size = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        domain::model::Bounds {
            replicas: count(self.max_replicas),
            ports: size(self.max_ports),
            job_restarts: count(self.max_job_restarts),
            variable_bytes: size(self.max_variable_bytes),
            service_variables_bytes: size(self.max_service_variables_bytes),
        }
    }

    fn router_tls(&self) -> Result<Option<RouterTls>, SettingError> {
        let Some(dir) = &self.router_certificates else {
            if self.router_acme.is_some() {
                return Err(bad(
                    "router-acme",
                    "ACME needs CAPSTAN_ROUTER_CERTIFICATES: its orders are kept there",
                ));
            }
            return Ok(None);
        };
        if !dir.is_dir() {
            return Err(bad(
                "router-certificates",
                format!("{} is not a directory", dir.display()),
            ));
        }
        let at = self.router_tls_listen.trim();
        let listen = at.parse().map_err(|_| {
            bad(
                "router-tls-listen",
                format!("'{at}' is not an address like 0.0.0.0:443"),
            )
        })?;
        let acme = match self.router_acme.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(directory) => Some(router::AcmeSettings {
                directory: acme_directory(directory)?,
                contact: self.acme_contact()?,
                roots: match &self.router_acme_roots {
                    None => None,
                    Some(path) => {
                        Some(router::read_roots(path).map_err(|e| bad("router-acme-roots", e))?)
                    }
                },
                cache: router::ordered_folder(dir),
            }),
        };
        Ok(Some(RouterTls {
            listen,
            certificates: dir.clone(),
            acme,
        }))
    }

    fn acme_contact(&self) -> Result<Option<String>, SettingError> {
        let Some(contact) = self.router_acme_contact.as_deref().map(str::trim) else {
            return Ok(None);
        };
        let address = contact.strip_prefix("mailto:").unwrap_or(contact);
        match address.split_once('@') {
            Some((user, host))
                if !user.is_empty()
                    && host.contains('.')
                    && !address.contains(char::is_whitespace) =>
            {
                Ok(Some(format!("mailto:{address}")))
            }
            _ => Err(bad(
                "router-acme-contact",
                format!("'{contact}' is not an email address"),
            )),
        }
    }

    pub fn check(&self) -> Result<Settings, SettingError> {
        let listen = self.listen;
        let database =
            DatabaseUrl::parse(&self.database_url).map_err(|e| bad("database-url", e))?;
        let (rate_limit_per_hour, router_listen) = (self.rate_limit_per_hour, self.router_listen.0);
        let router_domain = self
            .router_domain
            .trim()
            .trim_end_matches('.')
            .to_ascii_lowercase();
        let labels_ok = router_domain.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        });
        if !labels_ok {
            return Err(bad(
                "router-domain",
                format!("'{}' is not a domain name", self.router_domain),
            ));
        }
        let router_tls = self.router_tls()?;
        let router_trusted_proxies =
            router::TrustedProxies::parse(self.router_trusted_proxies.as_deref().unwrap_or(""))
                .map_err(|why| bad("router-trusted-proxies", why))?;
        let secret_key = match &self.secret_key {
            None => None,
            Some(k) => Some(parse_key(k).map_err(|e| bad("secret-key", e))?),
        };
        let mut secret_key_previous = Vec::new();
        for k in self.secret_key_previous.iter().flat_map(|k| k.split(',')) {
            if k.trim().is_empty() {
                continue;
            }
            secret_key_previous.push(parse_key(k).map_err(|e| bad("secret-key-previous", e))?);
        }
        if self
            .jwt_hs256_secret
            .as_deref()
            .is_some_and(|s| s.len() < 32)
        {
            return Err(bad(
                "jwt-hs256-secret",
                "must be at least 32 characters long",
            ));
        }
        let jwt =
            match (&self.jwt_hs256_secret, &self.jwt_public_key_file) {
                (Some(_), Some(_)) => {
                    return Err(bad(
                        "jwt-public-key-file",
                        "give either CAPSTAN_JWT_HS256_SECRET or a public key file, not both",
                    ))
                }
                (Some(secret), None) => Some(JwtVerifier::hs256(secret.as_bytes())),
                (None, Some(path)) => {
                    let pem = std::fs::read(path).map_err(|_| {
                        bad(
                            "jwt-public-key-file",
                            format!("{} is not a readable file", path.display()),
                        )
                    })?;
                    Some(JwtVerifier::from_public_key_pem(&pem).map_err(|e| {
                        bad("jwt-public-key-file", format!("{}: {e}", path.display()))
                    })?)
                }
                (None, None) => None,
            }
            .map(|v| {
                v.with_issuer(self.jwt_issuer.as_deref())
                    .with_audience(self.jwt_audience.as_deref())
            });
        let (engine, docker_publish_address) = (self.engine, self.docker_publish_address);
        let docker_images_kept = self.docker_images_kept;
        let docker_database_images =
            docker::DatabaseImages::parse(self.docker_database_images.as_deref().unwrap_or(""))
                .map_err(|why| bad("docker-database-images", why.to_string()))?;
        let host_images = docker::HostImages::parse(self.host_images.as_deref().unwrap_or(""))
            .map_err(|why| bad("host-images", why.to_string()))?;
        let (docker_keep_database_volumes, docker_firewall) =
            (self.docker_keep_database_volumes, self.docker_firewall);
        let terraform_versions = match self.terraform_versions.as_deref() {
            None => domain::services::DEFAULT_TERRAFORM_VERSIONS
                .iter()
                .map(|(e, v)| (*e, (*v).to_string()))
                .collect(),
            Some(list) => terraform_versions(list).map_err(|why| bad("terraform-versions", why))?,
        };
        let (max_api_tokens, engine_step_ms) = (self.max_api_tokens, self.engine_step_ms);
        let request_timeout = self.request_timeout_secs;
        let custom_domain_target = match self.custom_domain_target.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(raw) if raw.parse::<std::net::IpAddr>().is_ok() => Some(raw.to_string()),
            Some(raw) => Some(domain::model::host_name("target", raw).map_err(|_| {
                bad(
                    "custom-domain-target",
                    format!("'{raw}' is neither a host name nor an IP address"),
                )
            })?),
        };
        let public_url = match &self.public_url {
            None => format!("http://{listen}"),
            Some(raw) => {
                let ok = url::Url::parse(raw.trim()).is_ok_and(|u| {
                    matches!(u.scheme(), "http" | "https")
                        && u.host_str().is_some()
                        && u.query().is_none()
                        && u.username().is_empty()
                        && u.password().is_none()
                });
                if !ok {
                    return Err(bad(
                        "public-url",
                        format!("'{raw}' is not an address like https://capstan.example.com"),
                    ));
                }
                raw.trim().trim_end_matches('/').to_string()
            }
        };
        // Unset, custom domains point where this installation is reached.
        let custom_domain_target = custom_domain_target.or_else(|| public_host(&public_url));
        let mut cors_origins = Vec::new();
        for origin in self.cors_origins.iter().flat_map(|o| o.split(',')) {
            let origin = origin.trim();
            if origin.is_empty() {
                continue;
            }
            let ok = url::Url::parse(origin).is_ok_and(|u| {
                matches!(u.scheme(), "http" | "https")
                    && u.host_str().is_some()
                    && u.path() == "/"
                    && !origin.ends_with('/')
            });
            if !ok {
                return Err(bad(
                    "cors-origins",
                    format!("'{origin}' is not an origin like https://console.example.com"),
                ));
            }
            cors_origins.push(origin.to_string());
        }
        let outbound = OutboundPolicy::parse(self.outbound_allow.as_deref().unwrap_or(""))
            .map_err(|why| bad("outbound-allow", why))?;
        let allow_private = self.webhook_allow_private;
        let controls_token = if self.controls {
            match self.controls_token.as_deref().map(str::trim) {
                Some(token) if !token.is_empty() && !token.contains(char::is_whitespace) => {
                    Some(token.to_string())
                }
                _ => {
                    return Err(bad(
                        "controls-token",
                        "the controls are on: give them a token (no spaces)",
                    ))
                }
            }
        } else {
            None
        };
        let git_ca_file = match &self.git_ca_file {
            None => None,
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    bad(
                        "git-ca-file",
                        format!("{} cannot be read: {e}", path.display()),
                    )
                })?;
                if !text.contains("-----BEGIN CERTIFICATE-----") {
                    return Err(bad(
                        "git-ca-file",
                        format!("{} holds no PEM certificate", path.display()),
                    ));
                }
                Some(std::path::absolute(path).unwrap_or_else(|_| path.clone()))
            }
        };
        let manual_clock = self.clock;
        let id_seed = match self.id_seed.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(raw) => Some(
                raw.parse::<u64>()
                    .map_err(|_| bad("id-seed", format!("'{raw}' is not a whole number")))?,
            ),
        };
        let webhooks = WebhookSettings {
            allow_private,
            timeout: self.webhook_timeout_ms,
            retry: domain::outbound::RetryPolicy {
                base: self.webhook_retry_base_ms,
                give_up_after: self.webhook_retry_for_secs,
                ..domain::outbound::RetryPolicy::default()
            },
        };
        Ok(Settings {
            listen,
            router_listen,
            router_domain,
            router_tls,
            router_trusted_proxies,
            database,
            rate_limit_per_hour,
            max_api_tokens,
            previews: domain::services::PreviewSettings {
                forks: self.preview_forks,
                most_per_environment: usize::try_from(self.preview_limit).unwrap_or(usize::MAX),
                idle_after: time::Duration::days(
                    i64::try_from(self.preview_idle_days).unwrap_or(i64::MAX),
                ),
            },
            bounds: self.bounds(),
            live_sockets_per_token: usize::try_from(self.live_sockets_per_token)
                .unwrap_or(usize::MAX),
            shells: self.shells,
            metrics_replicas: self.metrics_replicas,
            secret_key,
            secret_key_previous,
            jwt_hs256_secret: self.jwt_hs256_secret.clone(),
            jwt_public_key_file: self.jwt_public_key_file.clone(),
            engine_step_ms,
            engine,
            docker_publish_address,
            docker_images_kept,
            docker_database_images,
            host_images,
            docker_keep_database_volumes,
            docker_firewall,
            docker_sockets_dir: self.docker_sockets_dir()?,
            backup_dir: self.backup_dir.clone(),
            git_ca_file,
            docker_terraform_image: self.docker_terraform_image.trim().to_string(),
            terraform_versions,
            jwt_issuer: self.jwt_issuer.clone(),
            jwt_audience: self.jwt_audience.clone(),
            jwt,
            request_timeout,
            links_base: self.public_url.is_some().then(|| public_url.clone()),
            public_url,
            custom_domain_target,
            cors_origins,
            outbound,
            webhooks,
            controls_token,
            manual_clock,
            id_seed,
            log: self.log.clone(),
        })
    }
}

/// The host a public address names, when it names one a client can point a domain at (not
/// an unspecified address such as 0.0.0.0, which a default listen address may give).
fn public_host(public_url: &str) -> Option<String> {
    match url::Url::parse(public_url).ok()?.host()? {
        url::Host::Domain(name) => Some(name.to_ascii_lowercase()),
        url::Host::Ipv4(ip) if !ip.is_unspecified() => Some(ip.to_string()),
        url::Host::Ipv6(ip) if !ip.is_unspecified() => Some(ip.to_string()),
        _ => None,
    }
}

/// `ENGINE=version` entries, comma-separated; the error names the entry at fault.
fn terraform_versions(list: &str) -> Result<Vec<(domain::model::TerraformEngine, String)>, String> {
    list.split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(|entry| {
            let (engine, version) = entry
                .split_once('=')
                .ok_or_else(|| format!("'{entry}' is not ENGINE=version"))?;
            let engine = domain::model::TerraformEngine::ALL
                .iter()
                .find(|e| e.as_str().eq_ignore_ascii_case(engine.trim()))
                .ok_or_else(|| format!("'{engine}' is not TERRAFORM or OPEN_TOFU"))?;
            Ok((*engine, version.trim().to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn the_docker_clients_requests_stay_out_of_the_log_whatever_is_asked() {
        for asked in ["debug", "trace", "info,bollard=trace"] {
            let filter = parse(&["--log", asked]).unwrap().log_filter().to_string();
            assert!(filter.contains("bollard=info"), "{asked}: {filter}");
            assert!(!filter.contains("bollard=trace"), "{asked}: {filter}");
        }
    }

    #[test]
    fn custom_domains_point_at_the_public_address_unless_told_otherwise() {
        let target = |args: &[&str]| parse(args).unwrap().custom_domain_target;
        assert_eq!(target(&[]).as_deref(), Some("127.0.0.1"));
        assert_eq!(
            target(&["--public-url", "https://Capstan.Example.com:8443/"]).as_deref(),
            Some("capstan.example.com")
        );
        assert_eq!(
            target(&[
                "--public-url",
                "https://capstan.example.com",
                "--custom-domain-target",
                "ingress.example.com"
            ])
            .as_deref(),
            Some("ingress.example.com")
        );
        assert_eq!(target(&["--listen", "[::1]:8080"]).as_deref(), Some("::1"));
        assert_eq!(
            target(&["--listen", "0.0.0.0:8080"]),
            None,
            "no address to name"
        );
    }

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        s: RawSettings,
    }

    fn parse(args: &[&str]) -> Result<Settings, SettingError> {
        let mut all = vec!["capstan"];
        all.extend_from_slice(args);
        match T::try_parse_from(all) {
            Ok(t) => t.s.check(),
            Err(e) => Err(refusal(&e).unwrap_or_else(|| panic!("not a setting's value: {e}"))),
        }
    }

    #[test]
    fn defaults_are_valid() {
        let s = parse(&[]).unwrap();
        assert_eq!(s.listen.to_string(), "127.0.0.1:8080");
        assert_eq!(s.database, DatabaseUrl::Sqlite("capstan.db".into()));
        assert_eq!(s.rate_limit_per_hour, 1000);
        assert_eq!(s.max_api_tokens, 100);
        assert_eq!(s.bounds, domain::model::Bounds::default());
        assert_eq!(
            s.links_base, None,
            "links are relative unless a public URL is given"
        );
        let given = parse(&["--public-url", "https://api.example.com/"]).unwrap();
        assert_eq!(given.links_base.as_deref(), Some("https://api.example.com"));
    }

    #[test]
    fn every_flag_has_its_variable_and_a_refusal_names_both() {
        let declared = RawSettings::augment_args(clap::Command::new("capstan"));
        for arg in declared.get_arguments() {
            let Some(flag) = arg.get_long() else { continue };
            let expected = format!("CAPSTAN_{}", flag.to_ascii_uppercase().replace('-', "_"));
            let env = arg.get_env().map(|e| e.to_string_lossy().into_owned());
            assert_eq!(env.as_deref(), Some(expected.as_str()), "--{flag}");
            let refusal = bad(flag, "no").to_string();
            assert_eq!(
                refusal,
                format!("invalid setting {expected} (--{flag}): no")
            );
        }
    }

    #[test]
    fn only_a_refused_value_is_a_settings_refusal() {
        let unknown = T::try_parse_from(["capstan", "--bogus"]).err().unwrap();
        assert!(
            refusal(&unknown).is_none(),
            "clap tells an unknown flag itself"
        );
        let bad = T::try_parse_from(["capstan", "--webhook-retry-for-secs", "0"])
            .err()
            .unwrap();
        assert_eq!(
            refusal(&bad).unwrap().to_string(),
            "invalid setting CAPSTAN_WEBHOOK_RETRY_FOR_SECS (--webhook-retry-for-secs): \
             '0' is not a whole number of seconds of at least 1"
        );
    }

    #[test]
    fn bad_values_name_the_setting() {
        for (args, var) in [
            (vec!["--listen", "nope"], "CAPSTAN_LISTEN"),
            (vec!["--database-url", "mysql://x"], "CAPSTAN_DATABASE_URL"),
            (
                vec!["--rate-limit-per-hour", "0"],
                "CAPSTAN_RATE_LIMIT_PER_HOUR",
            ),
            (vec!["--secret-key", "c2hvcnQ="], "CAPSTAN_SECRET_KEY"),
            (vec!["--engine", "kubernetes"], "CAPSTAN_ENGINE"),
            (vec!["--engine-step-ms=-5"], "CAPSTAN_ENGINE_STEP_MS"),
            (vec!["--max-api-tokens", "0"], "CAPSTAN_MAX_API_TOKENS"),
            (vec!["--max-replicas", "0"], "CAPSTAN_MAX_REPLICAS"),
            (
                vec!["--docker-sockets-dir", "relative/dir"],
                "CAPSTAN_DOCKER_SOCKETS_DIR",
            ),
            (
                vec!["--live-sockets-per-token", "none"],
                "CAPSTAN_LIVE_SOCKETS_PER_TOKEN",
            ),
            (vec!["--max-ports", "x"], "CAPSTAN_MAX_PORTS"),
            (
                vec!["--host-images", "capstan-build/"],
                "CAPSTAN_HOST_IMAGES",
            ),
            (
                vec!["--docker-firewall", "maybe"],
                "CAPSTAN_DOCKER_FIREWALL",
            ),
            (vec!["--max-job-restarts=-1"], "CAPSTAN_MAX_JOB_RESTARTS"),
            (
                vec!["--max-service-variables-bytes", "3000000"],
                "CAPSTAN_MAX_SERVICE_VARIABLES_BYTES",
            ),
            (
                vec!["--max-variable-bytes", "131072"],
                "CAPSTAN_MAX_VARIABLE_BYTES",
            ),
            (
                vec!["--webhook-allow-private", "maybe"],
                "CAPSTAN_WEBHOOK_ALLOW_PRIVATE",
            ),
            (
                vec!["--webhook-timeout-ms", "0"],
                "CAPSTAN_WEBHOOK_TIMEOUT_MS",
            ),
            (
                vec!["--webhook-retry-base-ms", "x"],
                "CAPSTAN_WEBHOOK_RETRY_BASE_MS",
            ),
            (
                vec!["--webhook-retry-for-secs=-1"],
                "CAPSTAN_WEBHOOK_RETRY_FOR_SECS",
            ),
            (
                vec!["--git-ca-file", "/nonexistent.pem"],
                "CAPSTAN_GIT_CA_FILE",
            ),
            (vec!["--router-listen", "nope"], "CAPSTAN_ROUTER_LISTEN"),
            (vec!["--router-domain", "a..b"], "CAPSTAN_ROUTER_DOMAIN"),
            (vec!["--router-domain=-a.b"], "CAPSTAN_ROUTER_DOMAIN"),
            (
                vec!["--router-trusted-proxies", "10.0.0.0/8,proxy.internal"],
                "CAPSTAN_ROUTER_TRUSTED_PROXIES",
            ),
            (
                vec!["--router-trusted-proxies", "10.0.0.0/33"],
                "CAPSTAN_ROUTER_TRUSTED_PROXIES",
            ),
            (
                vec!["--router-certificates", "/nonexistent"],
                "CAPSTAN_ROUTER_CERTIFICATES",
            ),
            (
                vec![
                    "--router-certificates",
                    "/tmp",
                    "--router-tls-listen",
                    "nope",
                ],
                "CAPSTAN_ROUTER_TLS_LISTEN",
            ),
            (
                vec!["--git-ca-file", "/etc/hostname"],
                "CAPSTAN_GIT_CA_FILE",
            ),
            (vec!["--router-acme", "letsencrypt"], "CAPSTAN_ROUTER_ACME"),
            (
                vec!["--router-certificates", "/tmp", "--router-acme", "ftp://x"],
                "CAPSTAN_ROUTER_ACME",
            ),
            (
                vec![
                    "--router-certificates",
                    "/tmp",
                    "--router-acme",
                    "letsencrypt",
                    "--router-acme-contact",
                    "nobody",
                ],
                "CAPSTAN_ROUTER_ACME_CONTACT",
            ),
            (
                vec![
                    "--router-certificates",
                    "/tmp",
                    "--router-acme",
                    "letsencrypt",
                    "--router-acme-roots",
                    "/etc/hostname",
                ],
                "CAPSTAN_ROUTER_ACME_ROOTS",
            ),
            (
                vec!["--jwt-public-key-file", "/nonexistent.pem"],
                "CAPSTAN_JWT_PUBLIC_KEY_FILE",
            ),
            (vec!["--controls", "on"], "CAPSTAN_CONTROLS_TOKEN"),
            (
                vec!["--controls", "on", "--controls-token", "two words"],
                "CAPSTAN_CONTROLS_TOKEN",
            ),
            (vec!["--controls", "sometimes"], "CAPSTAN_CONTROLS"),
            (vec!["--shells", "sometimes"], "CAPSTAN_SHELLS"),
            (
                vec!["--metrics-replicas", "maybe"],
                "CAPSTAN_METRICS_REPLICAS",
            ),
            (
                vec!["--outbound-allow", "10.0.0.0/8,10.1.0.0/40"],
                "CAPSTAN_OUTBOUND_ALLOW",
            ),
            (
                vec!["--outbound-allow", "git.corp.example, http://x"],
                "CAPSTAN_OUTBOUND_ALLOW",
            ),
            (vec!["--clock", "sundial"], "CAPSTAN_CLOCK"),
            (vec!["--id-seed", "x"], "CAPSTAN_ID_SEED"),
            (
                vec!["--secret-key-previous", "c2hvcnQ="],
                "CAPSTAN_SECRET_KEY_PREVIOUS",
            ),
        ] {
            let err = parse(&args).unwrap_err();
            assert_eq!(err.variable, var);
            assert!(!err.to_string().contains('\n'));
        }
    }

    #[test]
    fn the_router_trusts_no_proxy_unless_told() {
        let s = parse(&[]).unwrap();
        assert!(s.router_trusted_proxies.is_empty());
        let s = parse(&["--router-trusted-proxies", "10.0.0.0/8, 127.0.0.1"]).unwrap();
        assert!(s.router_trusted_proxies.trusts("10.1.2.3".parse().unwrap()));
        assert!(!s
            .router_trusted_proxies
            .trusts("192.0.2.1".parse().unwrap()));
    }

    #[test]
    fn the_outbound_allow_list_widens_the_policy() {
        let public = "8.8.8.8".parse().unwrap();
        let private = "10.1.2.3".parse().unwrap();
        let s = parse(&[]).unwrap();
        assert!(s.outbound.permits("x", public) && !s.outbound.permits("x", private));
        let s = parse(&["--outbound-allow", "10.0.0.0/8, git.corp.example"]).unwrap();
        assert!(s.outbound.permits("x", private));
        assert!(s
            .outbound
            .permits("git.corp.example", "192.168.0.1".parse().unwrap()));
    }

    #[test]
    fn acme_names_its_directory_and_keeps_its_orders_beside_the_certificates() {
        let s = parse(&[
            "--router-certificates",
            "/tmp",
            "--router-acme",
            "letsencrypt",
            "--router-acme-contact",
            "ops@example.com",
        ])
        .unwrap();
        let acme = s.router_tls.unwrap().acme.unwrap();
        assert_eq!(acme.directory, router::LETS_ENCRYPT_PRODUCTION_DIRECTORY);
        assert_eq!(acme.contact.as_deref(), Some("mailto:ops@example.com"));
        assert_eq!(acme.cache, std::path::Path::new("/tmp/acme"));
        assert!(acme.roots.is_none(), "the public web's authorities");
        let s = parse(&[
            "--router-certificates",
            "/tmp",
            "--router-acme",
            "https://acme.internal/directory",
        ])
        .unwrap();
        let acme = s.router_tls.unwrap().acme.unwrap();
        assert_eq!(acme.directory, "https://acme.internal/directory");
        assert_eq!(acme.contact, None);
        let s = parse(&["--router-certificates", "/tmp"]).unwrap();
        assert!(
            s.router_tls.unwrap().acme.is_none(),
            "ACME is off by default"
        );
    }

    #[test]
    fn a_short_controls_token_is_taken_as_given() {
        // A test suite's own short token must not keep the stand-in from starting.
        let s = parse(&["--controls", "on", "--controls-token", " ctl "]).unwrap();
        assert_eq!(s.controls_token.as_deref(), Some("ctl"));
        let s = parse(&["--controls-token", "ctl"]).unwrap();
        assert_eq!(
            s.controls_token, None,
            "the controls are off unless switched on"
        );
    }

    #[test]
    fn secrets_are_redacted_in_debug() {
        let key = base64::engine::general_purpose::STANDARD.encode([7u8; 32]);
        let s = parse(&[
            "--secret-key",
            &key,
            "--database-url",
            "postgres://user:pw123@db/capstan",
        ])
        .unwrap();
        let shown = format!("{s:?}");
        assert!(!shown.contains(&key) && !shown.contains("pw123"), "{shown}");
        let s = parse(&[
            "--controls",
            "on",
            "--controls-token",
            "ctl-secret-0123456789",
        ])
        .unwrap();
        assert_eq!(s.controls_token.as_deref(), Some("ctl-secret-0123456789"));
        assert!(!format!("{s:?}").contains("ctl-secret-0123456789"));
    }

    #[test]
    fn terraform_versions_are_read_engine_by_engine() {
        let read = terraform_versions("open_tofu=1.9.0, TERRAFORM=1.5.7").unwrap();
        assert_eq!(
            read,
            [
                (
                    domain::model::TerraformEngine::OpenTofu,
                    "1.9.0".to_string()
                ),
                (
                    domain::model::TerraformEngine::Terraform,
                    "1.5.7".to_string()
                )
            ]
        );
        assert!(terraform_versions("PULUMI=3")
            .unwrap_err()
            .contains("PULUMI"));
        assert!(terraform_versions("1.9.0").is_err());
    }
}
