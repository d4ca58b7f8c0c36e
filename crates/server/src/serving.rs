//! Serving: the application composed from the settings (store, use cases, engine, HTTP), for
//! the `capstan` command and for processes that run a server inside them (`capstan-testing`).

use crate::resolver;
use crate::secret_key;
use crate::settings::EngineChoice;
use crate::settings::{redact_url, Settings};
use anyhow::Context;
use api::controls::Controls;
use api::limits::RateLimiter;
use api::AppState;
use docker::DockerEngine;
use domain::clock::{Clock, ManualClock, SystemClock};
use domain::engine::TargetKind;
use domain::services::{GitIntegration, Outbound};
use domain::Capstan;
use engine::{Engines, PoolSettings, SimulatedEngine, WorkerPool};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// Below this length the controls' token works but start-up warns that it is easy to guess.
const SHORT_CONTROLS_TOKEN: usize = 16;

/// What stops a server: the signals a command hears, or its owner (a server in a test
/// process), whose future ends when it should stop.
pub enum Lifetime {
    Signals,
    Until(Pin<Box<dyn Future<Output = ()> + Send>>),
}

/// Connections per server process.
pub const POOL_SIZE: usize = 16;
/// Requests of different environments this process runs at once.
const ENGINE_WORKERS: usize = 4;
/// How long a git provider has to answer.
const GIT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
/// How long one git command of the API's reads (a Dockerfile, commits) may take.
const GIT_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);
/// How long one git command of a build may take (a large repository fetches slowly).
const GIT_FETCH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);
/// How long a webhook status is reused for a service: enough to absorb a burst of polls,
/// short enough that a change on the provider shows at once to a person looking.
const GIT_STATUS_CACHE_SECONDS: i64 = 1;
/// How many webhook deliveries one sender sends at once.
const WEBHOOK_BATCH: i64 = 16;
/// How long an idle client connection is kept open. A server that closes first races a client
/// reusing the connection at that instant, and the client's request (a POST is not retried) fails
/// half sent: so longer than the idle timeouts of load balancers (60 s) and of the Go and
/// reqwest clients (90 s), which close theirs first.
const KEEP_ALIVE: std::time::Duration = std::time::Duration::from_secs(120);

/// The application's clock: the system's, or one the controls move (`CAPSTAN_CLOCK=manual`).
pub fn clock(settings: &Settings) -> (Arc<dyn Clock>, Option<Arc<ManualClock>>) {
    if settings.manual_clock {
        let manual = Arc::new(ManualClock::default());
        (manual.clone(), Some(manual))
    } else {
        (Arc::new(SystemClock), None)
    }
}

pub async fn open(settings: &Settings, clock: Arc<dyn Clock>) -> anyhow::Result<Capstan> {
    let (db, keyring) = storage_of(settings, POOL_SIZE).await?;
    // The webhook signing secrets derive from a secret key, but not with the key itself.
    let signing = {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        h.update(b"capstan webhook signing\0");
        h.update(keyring.oldest());
        domain::secret::Secret::new(domain::hex::encode(&h.finalize()))
    };
    let hosting = git::HttpGitHosting::new(GIT_TIMEOUT, settings.outbound.clone())
        .map_err(anyhow::Error::msg)?;
    let git = GitIntegration::new(
        Arc::new(hosting),
        &settings.public_url,
        signing,
        time::Duration::seconds(GIT_STATUS_CACHE_SECONDS),
    );
    // CAPSTAN_WEBHOOK_ALLOW_PRIVATE opens every address to webhooks only: its name says so,
    // and an installation that set it for a local receiver must not open git calls with it.
    let webhook_policy = settings.outbound.clone().allowing_every_address(
        "CAPSTAN_WEBHOOK_ALLOW_PRIVATE",
        settings.webhooks.allow_private,
    );
    let sender = delivery::HttpSender::new(settings.webhooks.timeout, webhook_policy)
        .map_err(anyhow::Error::msg)?;
    Ok(Capstan::new(Arc::new(db), clock)
        .with_bounds(settings.bounds.clone())
        .with_docker_hosts(domain::model::DockerHostsPolicy {
            sockets_dir: settings
                .docker_sockets_dir
                .as_ref()
                .map(|d| d.to_string_lossy().into_owned()),
            outbound: settings.outbound.clone(),
        })
        .with_git(git)
        .with_terraform_versions(settings.terraform_versions.clone())
        .with_checkouts(Arc::new(
            git::GitCheckouts::new(settings.outbound.clone(), GIT_READ_TIMEOUT)
                .with_ca_file(settings.git_ca_file.clone()),
        ))
        .with_outbound(Outbound {
            sender: Arc::new(sender),
            retry: settings.webhooks.retry,
            batch: WEBHOOK_BATCH,
            timeout: settings.webhooks.timeout,
        })
        .with_public_url(&settings.public_url)
        .with_max_api_tokens(settings.max_api_tokens)
        .with_previews(settings.previews.clone())
        .with_shells(settings.shells)
        .with_domain_check(
            Arc::new(resolver::SystemResolver::new()),
            settings.custom_domain_target.clone(),
        ))
}

/// The Docker engine as the settings have it: pulls and clones through the outbound policy;
/// with a router, redeploys switch it to the new replicas before the old ones stop.
fn docker_with_settings(
    docker: DockerEngine,
    settings: &Settings,
    installation: &str,
) -> DockerEngine {
    let checkouts = git::GitCheckouts::new(settings.outbound.clone(), GIT_FETCH_TIMEOUT)
        .with_ca_file(settings.git_ca_file.clone());
    let docker = match settings.router_listen {
        Some(_) => docker.with_router(SWITCH_SETTLE),
        None => docker,
    };
    docker
        .with_policy(settings.outbound.clone())
        .with_builds(Arc::new(checkouts), settings.docker_images_kept)
        .with_databases(
            settings.docker_database_images.clone(),
            settings.docker_keep_database_volumes,
            settings.backup_dir.clone(),
        )
        .with_terraform(settings.docker_terraform_image.clone())
        .with_host_images(settings.host_images.clone())
        .with_installation(installation)
}

/// The engines of a Docker installation: every Docker target runs on the hosts' adapter.
fn docker_engines(docker: DockerEngine) -> Arc<dyn domain::engine::Engine> {
    Arc::new(Engines::new().register(TargetKind::Docker, docker::Hosts::new(docker)))
}

/// The firewall rules around the workloads of the installation's own Docker host, unless the
/// settings leave the firewall alone. Where they cannot be kept (no iptables, no right to
/// change it: a user's laptop), the start-up goes on and says so.
async fn firewall(settings: &Settings) {
    if !settings.docker_firewall {
        tracing::info!("the host's firewall is left alone (CAPSTAN_DOCKER_FIREWALL=false)");
        return;
    }
    match docker::firewall::guard().await {
        Ok(()) => tracing::info!(
            interfaces = docker::firewall::INTERFACES,
            "workloads reach neither link-local addresses nor this host's own services"
        ),
        Err(why) => tracing::warn!(
            reason = %why,
            "the firewall rules around workloads could not be kept: they may reach link-local \
             addresses (the metadata service) and this host's services (CAPSTAN_DOCKER_FIREWALL)"
        ),
    }
}

/// The engine the settings ask for, and whether it runs workloads (Docker) that a router can
/// send requests to; the start-up log says which and why. An engine asked for by name that
/// cannot start stops the start-up.
/// What the Docker engine makes carries `installation` (this installation's identity), and it
/// acts only on what does.
async fn engine(
    settings: &Settings,
    installation: &str,
) -> anyhow::Result<(Arc<dyn domain::engine::Engine>, bool)> {
    let step = std::time::Duration::from_millis(settings.engine_step_ms);
    let simulated = || {
        let engine = Engines::every_kind(Arc::new(SimulatedEngine::new(step)));
        (Arc::new(engine) as Arc<dyn domain::engine::Engine>, false)
    };
    let address = settings.docker_publish_address.to_string();
    match settings.engine {
        EngineChoice::Simulated => {
            tracing::info!(
                engine = "simulated",
                "deployments run on the simulated engine (CAPSTAN_ENGINE=simulated)"
            );
            Ok(simulated())
        }
        EngineChoice::Docker => {
            let docker = DockerEngine::connect(address)
                .await
                .map_err(|e| anyhow::anyhow!("CAPSTAN_ENGINE=docker, but {e}"))?;
            let docker = docker_with_settings(docker, settings, installation);
            tracing::info!(engine = "docker", daemon = %docker.describe().await, "deployments run on Docker (CAPSTAN_ENGINE=docker)");
            firewall(settings).await;
            Ok((docker_engines(docker), true))
        }
        EngineChoice::Auto => match DockerEngine::connect(address).await {
            Ok(docker) => {
                let docker = docker_with_settings(docker, settings, installation);
                tracing::info!(engine = "docker", daemon = %docker.describe().await, "deployments run on Docker: a daemon answered (CAPSTAN_ENGINE=auto)");
                firewall(settings).await;
                Ok((docker_engines(docker), true))
            }
            Err(why) => {
                tracing::info!(engine = "simulated", reason = %why, "deployments run on the simulated engine: no Docker daemon answered (CAPSTAN_ENGINE=auto)");
                Ok(simulated())
            }
        },
    }
}

/// Serves until `lifetime` ends, on `listener` when given (else on the settings' address),
/// after loading the fixture `seed_file` if any.
pub async fn serve(
    settings: Settings,
    seed_file: Option<&std::path::Path>,
    listener: Option<std::net::TcpListener>,
    lifetime: Lifetime,
) -> anyhow::Result<()> {
    domain::ids::seed_ids(settings.id_seed);
    let (clock, manual) = clock(&settings);
    let capstan = open(&settings, clock.clone()).await?;
    let installation = capstan
        .installation_id()
        .await
        .map_err(|e| anyhow::anyhow!("could not read the installation's identity: {e}"))?;
    let (engine, runs_workloads) = engine(&settings, &installation).await?;
    let router = match settings.router_listen {
        Some(at) if runs_workloads => Some(router_listeners(at, &settings).await?),
        _ => None,
    };
    let mut capstan = capstan.with_engine(engine.clone());
    if let Some(listeners) = &router {
        capstan = capstan.with_router(listeners.address.clone());
    }
    if let Some(file) = seed_file {
        seed(&capstan, file).await?;
    }
    // The state's use cases report to its metrics: the workers run those.
    let app_state = AppState::new(capstan);
    let capstan = app_state.capstan.clone();
    let step = std::time::Duration::from_millis(settings.engine_step_ms);
    let workers = WorkerPool::start(
        capstan.clone(),
        engine,
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
        .with_live_sockets_per_token(settings.live_sockets_per_token)
        .with_replica_metrics(settings.metrics_replicas)
        .with_cors_origins(settings.cors_origins.clone());
    if let Some(verifier) = settings.jwt.clone() {
        app_state = app_state.with_jwt(verifier);
    }
    if let Some(base) = &settings.links_base {
        app_state = app_state.with_links_base(base);
    }
    if let Some(token) = &settings.controls_token {
        let mut controls = Controls::new(token.clone());
        if let Some(manual) = manual {
            controls = controls.with_clock(manual);
        }
        app_state = app_state.with_controls(controls);
        tracing::warn!("the stand-in's controls are on under /_capstan/: anyone with their token can empty this server");
        // A test suite's token may be short; it still works, but is worth a word.
        if token.len() < SHORT_CONTROLS_TOKEN {
            tracing::warn!(
                "the controls' token is shorter than {SHORT_CONTROLS_TOKEN} characters: easy to guess"
            );
        }
    }
    // Open event streams never end on their own: they are told when the server stops.
    let (stop_streams, stopping) = tokio::sync::watch::channel(false);
    if let Some(listeners) = router {
        serve_router(capstan.clone(), listeners, stopping.clone());
    }
    let app_state = app_state.with_stopping(stopping);
    let state = actix_web::web::Data::new(app_state);
    let server = actix_web::HttpServer::new(move || api::app(state.clone()))
        .keep_alive(KEEP_ALIVE)
        .shutdown_timeout(20);
    let (server, listen) = match listener {
        Some(l) => {
            let at = l.local_addr()?;
            (server.listen(l)?, at)
        }
        None => (
            server
                .bind(settings.listen)
                .with_context(|| format!("cannot listen on {}", settings.listen))?,
            settings.listen,
        ),
    };
    let server = match lifetime {
        Lifetime::Signals => {
            let server = server.run();
            tokio::spawn(async move {
                stopped().await;
                let _ = stop_streams.send(true);
            });
            server
        }
        Lifetime::Until(end) => {
            let server = server.disable_signals().run();
            let handle = server.handle();
            tokio::spawn(async move {
                end.await;
                let _ = stop_streams.send(true);
                handle.stop(true).await;
            });
            server
        }
    };
    tracing::info!(
        listen = %listen,
        database = %redact_url(&settings.database),
        "capstan is serving"
    );
    // actix stops on SIGTERM/SIGINT (or when told), letting requests in flight finish.
    let served = server.await.context("server failed");
    // Then the deployment workers: they stop claiming and finish what they hold.
    workers.shutdown().await;
    served?;
    tracing::info!("capstan stopped");
    Ok(())
}

/// The router's listeners (HTTPS when it has certificates), the address its links name, and
/// the proxies whose forwarded headers they pass on.
struct RouterListeners {
    http: tokio::net::TcpListener,
    tls: Option<RouterTlsListener>,
    address: domain::model::RouterAddress,
    trusted: router::TrustedProxies,
}

/// The router's HTTPS listener, and the certificates it serves from `dir` (and ACME).
struct RouterTlsListener {
    listener: tokio::net::TcpListener,
    dir: std::path::PathBuf,
    certificates: std::sync::Arc<router::Certificates>,
}

/// Binds the router's listeners (its port, when asked for 0, is the one bound).
async fn router_listeners(
    at: std::net::SocketAddr,
    settings: &Settings,
) -> anyhow::Result<RouterListeners> {
    let domain = &settings.router_domain;
    let http = tokio::net::TcpListener::bind(at)
        .await
        .with_context(|| format!("the router cannot listen on {at} (CAPSTAN_ROUTER_LISTEN)"))?;
    tracing::info!(listen = %http.local_addr()?, domain, "the router is serving");
    let tls = match &settings.router_tls {
        None => None,
        Some(tls) => {
            let at = tls.listen;
            let listener = tokio::net::TcpListener::bind(at).await.with_context(|| {
                format!("the router cannot listen on {at} (CAPSTAN_ROUTER_TLS_LISTEN)")
            })?;
            let certificates = match &tls.acme {
                None => router::Certificates::default(),
                Some(acme) => {
                    tracing::info!(directory = %acme.directory, "the router orders certificates over ACME");
                    let acme = router::Acme::new(acme.clone())
                        .map_err(|e| anyhow::anyhow!("CAPSTAN_ROUTER_ACME: {e}"))?;
                    router::Certificates::with_acme(std::sync::Arc::new(acme))
                }
            };
            tracing::info!(listen = %listener.local_addr()?, certificates = %tls.certificates.display(), "the router serves HTTPS");
            Some(RouterTlsListener {
                listener,
                dir: tls.certificates.clone(),
                certificates: std::sync::Arc::new(certificates),
            })
        }
    };
    let address = domain::model::RouterAddress {
        domain: domain.to_string(),
        port: http.local_addr()?.port(),
    };
    Ok(RouterListeners {
        http,
        tls,
        address,
        trusted: settings.router_trusted_proxies.clone(),
    })
}

/// How often the router reads its routes (and its certificates' directory) again: a service
/// started on any instance is routed within this.
const ROUTES_REFRESH: std::time::Duration = std::time::Duration::from_secs(1);

/// How long each turn of a switch to new replicas waits for every instance's router: a read
/// of its routes, a check of the new replicas, and time to spare.
const SWITCH_SETTLE: std::time::Duration = std::time::Duration::from_secs(3);

/// Runs the router until `stopping` turns true, its routes read from the store (which every
/// instance shares: each instance's router serves every route), its replicas checked.
fn serve_router(
    capstan: Capstan,
    listeners: RouterListeners,
    stopping: tokio::sync::watch::Receiver<bool>,
) {
    let routes = router::Routes::default();
    let certificates = listeners
        .tls
        .as_ref()
        .map(|tls| (tls.dir.clone(), tls.certificates.clone()));
    let kept = routes.clone();
    let stop = |mut until: tokio::sync::watch::Receiver<bool>| async move {
        let _ = until.wait_for(|stop| *stop).await;
    };
    let mut until = stopping.clone();
    tokio::spawn(async move {
        loop {
            if let Some((dir, held)) = &certificates {
                match held.refresh(dir) {
                    Ok(Some(count)) => tracing::info!(count, "the router read its certificates"),
                    Ok(None) => {}
                    Err(e) => {
                        tracing::warn!(error = %e, "the router could not read every certificate")
                    }
                }
            }
            match capstan.route_table().await {
                Ok(table) => {
                    if let Some((_, held)) = &certificates {
                        held.order_for(&table);
                    }
                    kept.replace(table);
                }
                Err(e) => tracing::warn!(error = %e, "the router could not read its routes"),
            }
            tokio::select! {
                () = tokio::time::sleep(ROUTES_REFRESH) => {}
                _ = until.wait_for(|stop| *stop) => return,
            }
        }
    });
    tokio::spawn(router::check_replicas(
        routes.clone(),
        stop(stopping.clone()),
    ));
    let trusted = listeners.trusted;
    if let Some(tls) = listeners.tls {
        let (routes, trusted, stopped) = (routes.clone(), trusted.clone(), stop(stopping.clone()));
        tokio::spawn(async move {
            let served =
                router::serve_tls(tls.listener, routes, tls.certificates, trusted, stopped).await;
            if let Err(e) = served {
                tracing::error!(error = %e, "the router cannot serve HTTPS");
            }
        });
    }
    tokio::spawn(router::serve(
        listeners.http,
        routes,
        trusted,
        stop(stopping),
    ));
}

/// SIGTERM or SIGINT (actix hears them too, and stops gracefully).
pub async fn stopped() {
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
pub async fn seed(capstan: &Capstan, file: &std::path::Path) -> anyhow::Result<()> {
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

/// The store, its secrets sealed and opened with the configured keyring.
pub async fn storage_of(
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
