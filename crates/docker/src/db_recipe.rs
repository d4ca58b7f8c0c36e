//! What each database type is on Docker, decided without a daemon: its image (a setting, the
//! official images by default), how its image is told the credentials, where it keeps its
//! data, and the commands run inside it to tell it accepts connections, to dump it and to load
//! a dump back. The conventions are the official images' (environment variables, data
//! directories, client tools on the path).

use crate::errors::BadSetting;
use crate::plan::{self, ContainerPlan, PlannedFile, PlannedPort, PlannedVolume, LABEL_REPLICA};
use domain::engine::EngineError;
use domain::model::{
    DatabaseAccessibility, DatabaseConnection, DatabaseMode, DatabaseSpec, DatabaseType,
    DeploymentRequest, Service, ServiceSpec, WorkloadInputs,
};
use std::collections::HashMap;

/// A database's spec, connection and password, or why this engine cannot run it.
pub fn database_of<'a>(
    service: &'a Service,
    inputs: &WorkloadInputs,
) -> Result<(&'a DatabaseSpec, DatabaseConnection, String), EngineError> {
    let (ServiceSpec::Database(spec), Some(connection)) =
        (&service.spec, DatabaseConnection::of(service))
    else {
        return Err("not a database".into());
    };
    if spec.mode == DatabaseMode::Managed {
        return Err(
            "the Docker engine runs databases in CONTAINER mode only: a MANAGED database is a \
             cloud provider's service, which it does not reach"
                .into(),
        );
    }
    let key = connection.password_key();
    let password = inputs
        .environment
        .iter()
        .find(|e| e.key == key)
        .map(|e| e.value.expose().to_string())
        .ok_or_else(|| format!("the database has no password ({key}) among its variables"))?;
    Ok((spec, connection, password))
}

/// The container of a database: its type's image at its version, its recipe, its volume,
/// reached in its environment's network at its connection's host name, and published on the
/// host (at the port it had before, or one Docker chooses) only when PUBLIC.
pub fn database_plan(
    r: &DeploymentRequest,
    service: &Service,
    inputs: &WorkloadInputs,
    images: &DatabaseImages,
    publish_address: &str,
    previous: &HashMap<(usize, u16), u16>,
) -> Result<ContainerPlan, EngineError> {
    let (spec, connection, password) = database_of(service, inputs)?;
    let host_port = previous.get(&(0, connection.port)).copied();
    let recipe = recipe(spec.db_type, &connection, &password);
    let mut labels = plan::labels(r, service, "service");
    labels.insert(LABEL_REPLICA.into(), "0".into());
    let (nano_cpus, memory_bytes) = plan::limits(spec.cpu, spec.memory);
    let ports = match spec.accessibility {
        DatabaseAccessibility::Public => vec![PlannedPort {
            internal: connection.port,
            host: host_port,
            public: true,
        }],
        DatabaseAccessibility::Private => Vec::new(),
    };
    Ok(ContainerPlan {
        name: plan::replica_name(service, 0),
        image: images.image(spec.db_type, &spec.version),
        entrypoint: None,
        cmd: recipe.cmd,
        env: recipe.env,
        labels,
        ports,
        files: recipe.files,
        nano_cpus,
        memory_bytes,
        restarts: true,
        init: false,
        publish_address: publish_address.to_string(),
        volume: Some(PlannedVolume {
            name: plan::volume_name(service.id),
            target: recipe.data_dir.to_string(),
        }),
        network: plan::network_name(service.environment_id),
        aliases: vec![connection.host],
    })
}

/// The image of each type, `{version}` standing for the database's version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatabaseImages(HashMap<DatabaseType, String>);

impl Default for DatabaseImages {
    fn default() -> Self {
        Self(HashMap::from([
            (DatabaseType::Postgresql, "postgres:{version}".to_string()),
            (DatabaseType::Mysql, "mysql:{version}".to_string()),
            (DatabaseType::Mongodb, "mongo:{version}".to_string()),
            (DatabaseType::Redis, "redis:{version}".to_string()),
        ]))
    }
}

impl DatabaseImages {
    /// Reads `TYPE=image` entries separated by commas (`POSTGRESQL=registry.local/pg:{version}`);
    /// a type not named keeps its official image. The error names the entry at fault.
    pub fn parse(list: &str) -> Result<Self, BadSetting> {
        let mut images = Self::default();
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (kind, image) = entry
                .split_once('=')
                .ok_or_else(|| format!("'{entry}' is not TYPE=image"))?;
            let kind = DatabaseType::ALL
                .iter()
                .find(|t| t.as_str().eq_ignore_ascii_case(kind.trim()))
                .ok_or_else(|| {
                    format!("'{kind}' is not a database type (POSTGRESQL, MYSQL, MONGODB, REDIS)")
                })?;
            if image.trim().is_empty() {
                return Err(format!("'{entry}' names no image").into());
            }
            images.0.insert(*kind, image.trim().to_string());
        }
        Ok(images)
    }

    pub fn image(&self, kind: DatabaseType, version: &str) -> String {
        self.0
            .get(&kind)
            .map(|template| template.replace("{version}", version))
            .unwrap_or_default()
    }
}

/// How one database runs: what its container is given, and the commands run inside it.
#[derive(Debug, Clone, PartialEq)]
pub struct Recipe {
    pub env: Vec<String>,
    pub cmd: Option<Vec<String>>,
    pub files: Vec<PlannedFile>,
    /// Where its volume is mounted.
    pub data_dir: &'static str,
    /// The environment of the commands below (the password, never in a command line).
    pub exec_env: Vec<String>,
    /// Succeeds once it accepts connections on its port (not during its first start's
    /// initialisation, which the official images run without a network listener).
    pub health: Vec<String>,
    /// Writes a dump of all its data to standard output, or to `dump_file`.
    pub dump: Vec<String>,
    /// The file in the container `dump` writes, when not standard output.
    pub dump_file: Option<&'static str>,
    /// Loads a dump: each step in turn, the dump on the standard input of those that take it.
    pub restore: Vec<RestoreStep>,
}

/// One command of a restore.
#[derive(Debug, Clone, PartialEq)]
pub struct RestoreStep {
    pub cmd: Vec<String>,
    /// Whether the dump is its standard input.
    pub takes_dump: bool,
}

impl RestoreStep {
    fn loading(cmd: Vec<String>) -> Self {
        RestoreStep {
            cmd,
            takes_dump: true,
        }
    }

    fn then(cmd: Vec<String>) -> Self {
        RestoreStep {
            cmd,
            takes_dump: false,
        }
    }
}

const REDIS_CONF: &str = "/usr/local/etc/redis/capstan.conf";

fn words(list: &[&str]) -> Vec<String> {
    list.iter().map(|w| (*w).to_string()).collect()
}

/// The recipe of `kind`, signed in to as `connection` says with `password`.
pub fn recipe(kind: DatabaseType, connection: &DatabaseConnection, password: &str) -> Recipe {
    let login = connection.login;
    let port = connection.port.to_string();
    match kind {
        DatabaseType::Postgresql => {
            // A client signed in over TCP (not the socket: a first start's initialisation
            // server listens on the socket only).
            let client = |tool: &str, rest: &[&str]| {
                let mut cmd = words(&[tool, "-h", "127.0.0.1", "-p", &port, "-U", login]);
                cmd.extend(words(rest));
                cmd
            };
            let database = connection.database_name;
            Recipe {
                env: vec![
                    format!("POSTGRES_USER={login}"),
                    format!("POSTGRES_PASSWORD={password}"),
                    format!("POSTGRES_DB={database}"),
                ],
                cmd: None,
                files: Vec::new(),
                data_dir: "/var/lib/postgresql/data",
                exec_env: vec![format!("PGPASSWORD={password}")],
                health: client("pg_isready", &[]),
                dump: client("pg_dump", &["--clean", "--if-exists", database]),
                dump_file: None,
                restore: vec![RestoreStep::loading(client(
                    "psql",
                    &["-v", "ON_ERROR_STOP=1", "-q", "-d", database],
                ))],
            }
        }
        DatabaseType::Mysql => {
            let client = |tool: &str, rest: &[&str]| {
                let mut cmd = words(&[tool]);
                cmd.extend(words(rest));
                cmd.extend(words(&["-h", "127.0.0.1", "-P", &port, "-u", login]));
                cmd
            };
            Recipe {
                env: vec![format!("MYSQL_ROOT_PASSWORD={password}")],
                cmd: None,
                // The official image runs these once, on its first start: the login every
                // link names, with every privilege.
                files: vec![PlannedFile {
                    path: "/docker-entrypoint-initdb.d/capstan.sql".into(),
                    content: format!(
                        "CREATE USER '{login}'@'%' IDENTIFIED BY '{password}';\n\
                         GRANT ALL PRIVILEGES ON *.* TO '{login}'@'%' WITH GRANT OPTION;\n"
                    )
                    .into_bytes(),
                }],
                data_dir: "/var/lib/mysql",
                exec_env: vec![format!("MYSQL_PWD={password}")],
                health: client("mysqladmin", &["ping"]),
                dump: client("mysqldump", &["--all-databases", "--single-transaction"]),
                dump_file: None,
                restore: vec![RestoreStep::loading(client("mysql", &[]))],
            }
        }
        DatabaseType::Mongodb => {
            let auth = |tool: &str| {
                words(&[
                    tool,
                    "--host",
                    "127.0.0.1",
                    "--port",
                    &port,
                    "--username",
                    login,
                    "--password",
                    password,
                    "--authenticationDatabase",
                    "admin",
                ])
            };
            let mut dump = auth("mongodump");
            dump.push("--archive".into());
            let mut restore = auth("mongorestore");
            restore.extend(words(&["--archive", "--drop"]));
            Recipe {
                env: vec![
                    format!("MONGO_INITDB_ROOT_USERNAME={login}"),
                    format!("MONGO_INITDB_ROOT_PASSWORD={password}"),
                ],
                cmd: None,
                files: Vec::new(),
                data_dir: "/data/db",
                exec_env: Vec::new(),
                health: words(&[
                    "mongosh",
                    "--quiet",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    &port,
                    "--eval",
                    "db.adminCommand('ping').ok",
                ]),
                dump,
                dump_file: None,
                restore: vec![RestoreStep::loading(restore)],
            }
        }
        DatabaseType::Redis => {
            let cli = |rest: &[&str]| {
                let mut cmd = words(&["redis-cli", "-h", "127.0.0.1", "-p", &port]);
                cmd.extend(words(rest));
                cmd
            };
            Recipe {
                env: Vec::new(),
                // The password is in a file, not on the command line Docker shows to whoever
                // inspects the container. DEBUG, from inside the container only, is what
                // loads a dump into the running server.
                cmd: Some(words(&["redis-server", REDIS_CONF])),
                files: vec![PlannedFile {
                    path: REDIS_CONF.into(),
                    content: format!(
                        "requirepass {password}\nappendonly yes\nport {port}\ndir /data\n\
                         enable-debug-command local\n"
                    )
                    .into_bytes(),
                }],
                data_dir: "/data",
                exec_env: vec![format!("REDISCLI_AUTH={password}")],
                health: cli(&["ping"]),
                dump: cli(&["--rdb", "/tmp/capstan-backup.rdb"]),
                dump_file: Some("/tmp/capstan-backup.rdb"),
                // The dump becomes the server's RDB file, the server reloads its data from it
                // (without saving first, which would overwrite it), then rewrites its
                // append-only file from what it now holds: that file, not the RDB, is what
                // the next start reads.
                restore: vec![
                    RestoreStep::loading(words(&[
                        "sh",
                        "-c",
                        "cat > /data/capstan-restore.rdb && mv /data/capstan-restore.rdb /data/dump.rdb",
                    ])),
                    RestoreStep::then(cli(&["DEBUG", "RELOAD", "NOSAVE"])),
                    RestoreStep::then(cli(&["BGREWRITEAOF"])),
                ],
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_default_to_the_official_ones_and_a_setting_replaces_some() {
        let images = DatabaseImages::default();
        assert_eq!(images.image(DatabaseType::Postgresql, "16"), "postgres:16");
        assert_eq!(images.image(DatabaseType::Mongodb, "7.0"), "mongo:7.0");
        let set = DatabaseImages::parse("postgresql=local/pg:{version}-test, REDIS=r:7").unwrap();
        assert_eq!(
            set.image(DatabaseType::Postgresql, "15"),
            "local/pg:15-test"
        );
        assert_eq!(set.image(DatabaseType::Redis, "6"), "r:7");
        assert_eq!(set.image(DatabaseType::Mysql, "8.4"), "mysql:8.4");
        assert!(DatabaseImages::parse("ORACLE=x")
            .unwrap_err()
            .0
            .contains("ORACLE"));
        assert!(DatabaseImages::parse("POSTGRESQL").is_err());
        assert!(DatabaseImages::parse("").is_ok());
    }

    #[test]
    fn the_password_travels_in_the_environment_of_commands_never_their_lines() {
        let connection = DatabaseConnection {
            prefix: "P_".into(),
            host: "zabc-postgresql".into(),
            port: 5432,
            login: "superuser",
            database_name: "postgres",
            scheme: "postgresql",
        };
        let pg = recipe(DatabaseType::Postgresql, &connection, "pw123");
        assert!(pg.env.contains(&"POSTGRES_PASSWORD=pw123".to_string()));
        assert!(pg.env.contains(&"POSTGRES_USER=superuser".to_string()));
        assert_eq!(pg.data_dir, "/var/lib/postgresql/data");
        for cmd in [&pg.health, &pg.dump, &pg.restore[0].cmd] {
            assert!(!cmd.iter().any(|w| w.contains("pw123")), "{cmd:?}");
        }
        assert_eq!(pg.exec_env, ["PGPASSWORD=pw123"]);
        let redis = recipe(DatabaseType::Redis, &connection, "pw123");
        for step in &redis.restore {
            assert!(!step.cmd.iter().any(|w| w.contains("pw123")), "{step:?}");
        }
        assert!(!redis.health.iter().any(|w| w.contains("pw123")));
        let command = redis.cmd.unwrap().join(" ");
        assert!(!command.contains("pw123"), "{command}");
        let conf = String::from_utf8(redis.files[0].content.clone()).unwrap();
        assert!(conf.contains("requirepass pw123"), "{conf}");
    }
}
