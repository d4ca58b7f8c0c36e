//! `capstan`: serves the API, manages tokens from the command line, applies migrations.

mod resolver;
mod secret_key;
mod settings;

use anyhow::Context;
use api::controls::Controls;
use api::limits::RateLimiter;
use api::AppState;
use clap::{ArgGroup, Args, Parser, Subcommand};
use domain::auth::Role;
use domain::clock::{Clock, ManualClock, SystemClock};
use domain::ids::OrganizationId;
use domain::services::{GitIntegration, Outbound};
use domain::Capstan;
use engine::{PoolSettings, SimulatedEngine, WorkerPool};
use settings::{redact_url, RawSettings, Settings};
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Parser)]
#[command(
    name = "capstan",
    version,
    about = "A self-hostable infrastructure-management API"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    settings: RawSettings,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the API (the default); applies pending migrations first.
    Serve(ServeArgs),
    /// Apply pending migrations and exit.
    Migrate,
    /// API tokens.
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// Users (JWT subjects) of organizations.
    Member {
        #[command(subcommand)]
        command: MemberCommand,
    },
    /// Empty the database (as `POST /_capstan/reset`; a server on it keeps tokens it has
    /// seen until it restarts: use the control while one serves).
    Reset {
        /// Keep the API tokens, their organizations and members.
        #[arg(long)]
        keep_tokens: bool,
    },
    /// Named snapshots of the whole state (as `/_capstan/snapshots`).
    Snapshot {
        #[command(subcommand)]
        command: SnapshotCommand,
    },
    /// Load a fixture (JSON or YAML) through the use cases; prints the tokens it made.
    Seed { file: std::path::PathBuf },
    /// Write the state as a fixture (secret values left out) to standard output.
    Export {
        /// json or yaml.
        #[arg(long, default_value = "yaml")]
        format: String,
    },
    /// Write a consistent copy of a SQLite database to a file, while it serves.
    Backup {
        #[arg(long)]
        to: std::path::PathBuf,
    },
    /// Replace a SQLite database's state with a backup's, in one transaction.
    Restore {
        #[arg(long)]
        from: std::path::PathBuf,
    },
    /// The key secrets are encrypted with at rest.
    Secrets {
        #[command(subcommand)]
        command: SecretsCommand,
    },
}

#[derive(Subcommand)]
enum SnapshotCommand {
    /// Save the whole state under a name.
    Save { name: String },
    /// Bring back a snapshot's state.
    Restore { name: String },
    /// The snapshots, oldest first.
    List,
    /// Remove a snapshot.
    Delete { name: String },
}

#[derive(Subcommand)]
enum SecretsCommand {
    /// Re-encrypt every secret under a new key, in one transaction (see docs/operations.md).
    RotateKey(RotateKey),
}

#[derive(Args)]
struct RotateKey {
    /// The new key (base64 of 32 bytes); generated when left out (SQLite's key file).
    #[arg(long, env = "CAPSTAN_NEW_SECRET_KEY", hide_env_values = true)]
    new_key: Option<String>,
}

#[derive(Args, Default)]
struct ServeArgs {
    /// Load this fixture (JSON or YAML) before serving; the tokens it made are printed.
    #[arg(long)]
    seed: Option<std::path::PathBuf>,
}

#[derive(Subcommand)]
enum MemberCommand {
    /// Add a user to an organization with a role (or change its role there).
    Add(MemberAdd),
}

#[derive(Args)]
struct MemberAdd {
    /// The organization.
    #[arg(long)]
    organization_id: String,
    /// The user: the `sub` of its JWTs.
    #[arg(long)]
    user_id: String,
    /// ADMIN, DEVOPS, VIEWER or BILLING_MANAGER.
    #[arg(long, default_value = "VIEWER")]
    role: String,
}

#[derive(Subcommand)]
enum TokenCommand {
    /// Create an API token (in a new organization, or in an existing one); prints only the token.
    Create(TokenCreate),
}

#[derive(Args)]
#[command(group(ArgGroup::new("organization").required(true).args(["organization_name", "organization_id"])))]
struct TokenCreate {
    /// Create a new organization with this name.
    #[arg(long)]
    organization_name: Option<String>,
    /// Add the token to this existing organization.
    #[arg(long)]
    organization_id: Option<String>,
    /// ADMIN, DEVOPS, VIEWER or BILLING_MANAGER.
    #[arg(long, default_value = "ADMIN")]
    role: String,
    /// A label for the token.
    #[arg(long, default_value = "capstan-cli")]
    name: String,
}

// A request allocates many small strings (rows, records, JSON) and frees them on another
// part of the path; mimalloc's per-thread free lists serve that better than glibc's arenas.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Connections per server process.
const POOL_SIZE: usize = 16;
/// Requests of different environments this process runs at once.
const ENGINE_WORKERS: usize = 4;
/// How long a git provider has to answer.
const GIT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
/// How long a webhook status is reused for a service: enough to absorb a burst of polls,
/// short enough that a change on the provider shows at once to a person looking.
const GIT_STATUS_CACHE_SECONDS: i64 = 1;
/// How many webhook deliveries one sender sends at once.
const WEBHOOK_BATCH: i64 = 16;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let settings = match cli.settings.check() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("capstan: {e}");
            return ExitCode::from(2);
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(&settings.log))
        .with_writer(std::io::stderr)
        .init();
    let result = actix_rt::System::new().block_on(async move {
        match cli.command.unwrap_or(Command::Serve(ServeArgs::default())) {
            Command::Serve(args) => serve(settings, args).await,
            Command::Reset { keep_tokens } => {
                open(&settings, Arc::new(SystemClock))
                    .await?
                    .reset(keep_tokens)
                    .await?;
                eprintln!(
                    "the database is empty{}",
                    if keep_tokens {
                        " but for its tokens"
                    } else {
                        ""
                    }
                );
                Ok(())
            }
            Command::Snapshot { command } => snapshot(settings, command).await,
            Command::Seed { file } => {
                let capstan = open(&settings, Arc::new(SystemClock)).await?;
                seed(&capstan, &file).await
            }
            Command::Export { format } => export(settings, &format).await,
            Command::Backup { to } => {
                storage_of(&settings, 2).await?.0.backup(&to).await?;
                eprintln!(
                    "backed up to {} (keep the secret key with it)",
                    to.display()
                );
                Ok(())
            }
            Command::Restore { from } => {
                anyhow::ensure!(from.is_file(), "no backup at {}", from.display());
                storage_of(&settings, 2)
                    .await?
                    .0
                    .restore_backup(&from)
                    .await?;
                eprintln!("restored from {}", from.display());
                Ok(())
            }
            Command::Secrets {
                command: SecretsCommand::RotateKey(args),
            } => rotate_key(settings, args).await,
            Command::Migrate => migrate(settings).await,
            Command::Token {
                command: TokenCommand::Create(args),
            } => create_token(settings, args).await,
            Command::Member {
                command: MemberCommand::Add(args),
            } => add_member(settings, args).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("capstan: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The application's clock: the system's, or one the controls move (`CAPSTAN_CLOCK=manual`).
fn clock(settings: &Settings) -> (Arc<dyn Clock>, Option<Arc<ManualClock>>) {
    if settings.manual_clock {
        let manual = Arc::new(ManualClock::default());
        (manual.clone(), Some(manual))
    } else {
        (Arc::new(SystemClock), None)
    }
}

async fn open(settings: &Settings, clock: Arc<dyn Clock>) -> anyhow::Result<Capstan> {
    let (db, keyring) = storage_of(settings, POOL_SIZE).await?;
    // The webhook signing secrets derive from a secret key, but not with the key itself.
    let signing = {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        h.update(b"capstan webhook signing\0");
        h.update(keyring.oldest());
        let digest: Vec<String> = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
        domain::secret::Secret::new(digest.concat())
    };
    let hosting = git::HttpGitHosting::new(GIT_TIMEOUT).map_err(anyhow::Error::msg)?;
    let git = GitIntegration::new(
        Arc::new(hosting),
        &settings.public_url,
        signing,
        time::Duration::seconds(GIT_STATUS_CACHE_SECONDS),
    );
    let sender =
        delivery::HttpSender::new(settings.webhooks.timeout, settings.webhooks.allow_private)
            .map_err(anyhow::Error::msg)?;
    Ok(Capstan::new(Arc::new(db), clock)
        .with_git(git)
        .with_outbound(Outbound {
            sender: Arc::new(sender),
            retry: settings.webhooks.retry,
            batch: WEBHOOK_BATCH,
            timeout: settings.webhooks.timeout,
        })
        .with_public_url(&settings.public_url)
        .with_domain_check(
            Arc::new(resolver::SystemResolver::new()),
            settings.custom_domain_target.clone(),
        ))
}

async fn serve(settings: Settings, args: ServeArgs) -> anyhow::Result<()> {
    domain::ids::seed_ids(settings.id_seed);
    let (clock, manual) = clock(&settings);
    let capstan = open(&settings, clock.clone()).await?;
    if let Some(file) = &args.seed {
        seed(&capstan, file).await?;
    }
    // The state's use cases report to its metrics: the workers run those.
    let app_state = AppState::new(capstan);
    let capstan = app_state.capstan.clone();
    let step = std::time::Duration::from_millis(settings.engine_step_ms);
    let workers = WorkerPool::start(
        capstan.clone(),
        Arc::new(SimulatedEngine::new(step)),
        PoolSettings {
            workers: ENGINE_WORKERS,
            step,
        },
    );
    // Several instances share a PostgreSQL database, so they share the quota there; an embedded
    // SQLite database has one instance, which keeps it in memory.
    let limiter = match settings.database {
        storage::DatabaseUrl::Postgres(_) => {
            RateLimiter::shared(settings.rate_limit_per_hour, capstan.clone())
        }
        storage::DatabaseUrl::Sqlite(_) => RateLimiter::local(settings.rate_limit_per_hour),
    };
    let mut app_state = app_state
        .with_clock(clock)
        .with_limiter(limiter)
        .with_request_timeout(settings.request_timeout)
        .with_cors_origins(settings.cors_origins.clone());
    if let Some(verifier) = settings.jwt.clone() {
        app_state = app_state.with_jwt(verifier);
    }
    if let Some(token) = &settings.controls_token {
        let mut controls = Controls::new(token.clone());
        if let Some(manual) = manual {
            controls = controls.with_clock(manual);
        }
        app_state = app_state.with_controls(controls);
        tracing::warn!("the stand-in's controls are on under /_capstan/: anyone with their token can empty this server");
    }
    // Open event streams never end on their own: they are told when the server stops.
    let (stop_streams, stopping) = tokio::sync::watch::channel(false);
    let app_state = app_state.with_stopping(stopping);
    tokio::spawn(async move {
        stopped().await;
        let _ = stop_streams.send(true);
    });
    let state = actix_web::web::Data::new(app_state);
    let server = actix_web::HttpServer::new(move || api::app(state.clone()))
        .bind(settings.listen)
        .with_context(|| format!("cannot listen on {}", settings.listen))?
        .shutdown_timeout(20)
        .run();
    tracing::info!(
        listen = %settings.listen,
        database = %redact_url(&settings.database),
        "capstan is serving"
    );
    // actix stops on SIGTERM/SIGINT, letting requests in flight finish.
    let served = server.await.context("server failed");
    // Then the deployment workers: they stop claiming and finish what they hold.
    workers.shutdown().await;
    served?;
    tracing::info!("capstan stopped");
    Ok(())
}

/// SIGTERM or SIGINT (actix hears them too, and stops gracefully).
async fn stopped() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(t) => t,
                Err(_) => return std::future::pending().await,
            };
        tokio::select! {
            _ = interrupt => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
    }
}

/// Loads a fixture file; prints what it made (its tokens' values) on standard output.
async fn seed(capstan: &Capstan, file: &std::path::Path) -> anyhow::Result<()> {
    let text = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    let fixture = api::controls::fixture::parse(&text)
        .map_err(|e| anyhow::anyhow!("{}: {}", file.display(), e.message))?;
    let seeded = capstan
        .seed(&fixture)
        .await
        .with_context(|| format!("cannot seed {}", file.display()))?;
    println!("{}", serde_json::to_string(&seeded)?);
    Ok(())
}

async fn export(settings: Settings, format: &str) -> anyhow::Result<()> {
    let fixture = open(&settings, Arc::new(SystemClock))
        .await?
        .export()
        .await?;
    let text = match format {
        "yaml" => api::controls::fixture::yaml(&fixture).map_err(|e| anyhow::anyhow!(e.message))?,
        "json" => serde_json::to_string_pretty(&fixture)?,
        other => anyhow::bail!("--format must be json or yaml, not '{other}'"),
    };
    println!("{text}");
    Ok(())
}

async fn snapshot(settings: Settings, command: SnapshotCommand) -> anyhow::Result<()> {
    let capstan = open(&settings, Arc::new(SystemClock)).await?;
    match command {
        SnapshotCommand::Save { name } => {
            let saved = capstan.save_snapshot(&name).await?;
            eprintln!("saved {} ({} rows)", saved.name, saved.rows);
        }
        SnapshotCommand::Restore { name } => {
            capstan.restore_snapshot(&name).await?;
            eprintln!("restored {name}");
        }
        SnapshotCommand::List => {
            for s in capstan.snapshots().await? {
                let at = s
                    .created_at
                    .format(&time::format_description::well_known::Rfc3339)?;
                println!("{}\t{at}\t{} rows", s.name, s.rows);
            }
        }
        SnapshotCommand::Delete { name } => {
            capstan.delete_snapshot(&name).await?;
            eprintln!("deleted {name}");
        }
    }
    Ok(())
}

/// The store, its secrets sealed and opened with the configured keyring.
async fn storage_of(
    settings: &Settings,
    connections: usize,
) -> anyhow::Result<(storage::Db, secret_key::Keyring)> {
    let keyring = secret_key::resolve(
        settings.secret_key,
        &settings.secret_key_previous,
        &settings.database,
    )?;
    let db = storage::open(&settings.database, connections, &keyring.primary)
        .await
        .with_context(|| {
            format!(
                "cannot open the database {}",
                redact_url(&settings.database)
            )
        })?
        .with_cipher(keyring.cipher());
    Ok((db, keyring))
}

/// Seals every secret with a new key in one transaction. With a key file (SQLite), the file
/// first gets the new key as its first line, the old ones kept below it for reading, so a
/// server on the database opens values of either key (it reads the file again when it meets
/// the new one). With `CAPSTAN_SECRET_KEY`, the instances must already open the new key
/// (docs/operations.md); a generated key is printed on standard output.
async fn rotate_key(settings: Settings, args: RotateKey) -> anyhow::Result<()> {
    let generated = args.new_key.is_none();
    let new_key = match &args.new_key {
        Some(raw) => settings::parse_key(raw).map_err(|e| anyhow::anyhow!("--new-key {e}"))?,
        None => storage::Cipher::random_key(),
    };
    let (db, keyring) = storage_of(&settings, 2).await?;
    if let Some(file) = &keyring.file {
        let mut keys = vec![new_key, keyring.primary];
        keys.extend(keyring.accepted.iter().filter(|k| **k != new_key));
        keys.dedup();
        secret_key::write_keys(file, &keys, false)?;
    }
    // The values already sealed with the new key open too.
    let db = db.with_cipher({
        let mut accepted = keyring.accepted.clone();
        accepted.push(new_key);
        storage::Cipher::with_keys(&keyring.primary, &accepted)
    });
    let resealed = db.rotate_key(&new_key).await?;
    eprintln!(
        "sealed {resealed} secret values with the key {}",
        storage::key_id(&new_key)
    );
    match &keyring.file {
        Some(file) => eprintln!(
            "{} now seals with it and keeps the older keys for reading",
            file.display()
        ),
        None if generated => {
            use base64::Engine;
            println!(
                "{}",
                base64::engine::general_purpose::STANDARD.encode(new_key)
            );
            eprintln!("set CAPSTAN_SECRET_KEY to the key above (and CAPSTAN_SECRET_KEY_PREVIOUS to the old one until every instance has it)");
        }
        None => eprintln!("set CAPSTAN_SECRET_KEY to the new key on every instance"),
    }
    Ok(())
}

async fn migrate(settings: Settings) -> anyhow::Result<()> {
    let applied = storage::run_migrations(&settings.database)
        .await
        .with_context(|| format!("cannot migrate {}", redact_url(&settings.database)))?;
    tracing::info!(applied, "migrations are up to date");
    Ok(())
}

fn role(name: &str) -> anyhow::Result<Role> {
    Role::from_name(name).ok_or_else(|| {
        anyhow::anyhow!(
            "--role must be one of ADMIN, DEVOPS, VIEWER, BILLING_MANAGER, not '{name}'"
        )
    })
}

fn organization_id(raw: &str) -> anyhow::Result<OrganizationId> {
    raw.trim()
        .parse()
        .map_err(|_| anyhow::anyhow!("--organization-id must be a UUID, not '{raw}'"))
}

async fn add_member(settings: Settings, args: MemberAdd) -> anyhow::Result<()> {
    let role = role(&args.role)?;
    let org = organization_id(&args.organization_id)?;
    let capstan = open(&settings, Arc::new(SystemClock)).await?;
    capstan.add_member(org, &args.user_id, role).await?;
    eprintln!("{} is now {} of {org}", args.user_id.trim(), role.name());
    Ok(())
}

async fn create_token(settings: Settings, args: TokenCreate) -> anyhow::Result<()> {
    let role = role(&args.role)?;
    let capstan = open(&settings, Arc::new(SystemClock)).await?;
    let token = match (args.organization_name, args.organization_id) {
        (Some(name), _) => {
            capstan
                .bootstrap_organization(&name, role, &args.name)
                .await?
                .1
        }
        (None, Some(id)) => {
            capstan
                .issue_token(organization_id(&id)?, role, &args.name)
                .await?
        }
        (None, None) => anyhow::bail!("give --organization-name or --organization-id"),
    };
    println!("{}", token.value);
    Ok(())
}
