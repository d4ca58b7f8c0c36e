//! `capstan`: serves the API, manages tokens from the command line, applies migrations.

use anyhow::Context;
use capstan_server::settings::{self, redact_url, RawSettings, Settings};
use capstan_server::{open, secret_key, seed, storage_of, Lifetime};
use clap::{ArgGroup, Args, Parser, Subcommand};
use domain::auth::Role;
use domain::clock::SystemClock;
use domain::ids::OrganizationId;
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
    /// The new key (base64 of 32 bytes); required with CAPSTAN_SECRET_KEY, generated when left
    /// out with a key file.
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

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => match settings::refusal(&e) {
            Some(why) => {
                eprintln!("capstan: {why}");
                return ExitCode::from(2);
            }
            None => e.exit(),
        },
    };
    let settings = match cli.settings.check() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("capstan: {e}");
            return ExitCode::from(2);
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(settings.log_filter())
        .with_writer(std::io::stderr)
        .init();
    let result = actix_rt::System::new().block_on(async move {
        match cli.command.unwrap_or(Command::Serve(ServeArgs::default())) {
            Command::Serve(args) => {
                capstan_server::serve(settings, args.seed.as_deref(), None, Lifetime::Signals).await
            }
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

/// Seals every secret with a new key in one transaction. With a key file (SQLite), the file
/// first gets the new key as its first line, the old ones kept below it for reading, so a
/// server on the database opens values of either key (it reads the file again when it meets
/// the new one). With `CAPSTAN_SECRET_KEY`, the instances must already open the new key
/// (docs/operations.md), so it is given, never made here.
async fn rotate_key(settings: Settings, args: RotateKey) -> anyhow::Result<()> {
    let (db, keyring) = storage_of(&settings, 2).await?;
    let new_key = match (&args.new_key, &keyring.file) {
        (Some(raw), _) => settings::parse_key(raw).map_err(|e| anyhow::anyhow!("--new-key {e}"))?,
        (None, Some(_)) => storage::Cipher::random_key(),
        (None, None) => anyhow::bail!(
            "with CAPSTAN_SECRET_KEY, give --new-key: the key the instances were restarted with \
             (docs/operations.md)"
        ),
    };
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
        None => {
            eprintln!("drop CAPSTAN_SECRET_KEY_PREVIOUS once every instance runs with the new key")
        }
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
