//! The soak: every action on every kind that runs on Docker (a container behind the router, an
//! application built from git, a job, a database, a terraform configuration), cycle after
//! cycle, each kind in an environment of its own made and deleted in every cycle. Once every
//! service and environment is deleted, nothing labelled with the organization is left on the
//! daemon; Capstan's resident memory (of its own: the pages of the SQLite file it maps are
//! counted apart) and open descriptors are sampled after each cycle and must settle
//! (docs/performance.md gives the figures and the bounds).
//!
//! `CAPSTAN_SOAK_CYCLES` sets the number of cycles: CI runs the short form (the default, 8:
//! five warm-up cycles and three measured), a longer run is asked for by hand.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod git_http;
mod harness;

use git_http::{GitServer, Repository};
use harness::*;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Cycles before memory is measured: caches and pools fill first (docs/performance.md).
const WARM_UP: usize = 5;
/// How much resident memory may grow over the measured cycles.
const MEMORY_GROWTH: f64 = 0.05;
/// How many more descriptors than after the warm-up may be open at the end.
const DESCRIPTORS_MORE: usize = 16;

/// The actions of one cycle, each with the state it ends in, before the service is deleted.
const ACTIONS: [(&str, &str); 5] = [
    ("deploy", "DEPLOYED"),
    ("redeploy", "DEPLOYED"),
    ("restart-service", "RESTARTED"),
    ("stop", "STOPPED"),
    ("deploy", "DEPLOYED"),
];

/// One kind of the soak: its path segment and what creates it.
struct Kind {
    segment: &'static str,
    body: Value,
    /// What a deployment is asked with (the commit, for what is built from git).
    deploy: Value,
}

fn kinds(registry: &str, git: &GitServer, commit: &str, redis_version: &str) -> Vec<Kind> {
    let pinned = json!({"git_commit_id": commit});
    vec![
        Kind {
            segment: "container",
            body: json!({"name": "web", "registry_id": registry, "image_name": IMAGE, "tag": TAG,
                "entrypoint": "sh",
                "arguments": ["-c", "mkdir -p /www && echo soak > /www/index.html && exec httpd -f -p 8080 -h /www"],
                "ports": [{"internal_port": 8080, "publicly_accessible": true, "protocol": "HTTP"}]}),
            deploy: json!({}),
        },
        Kind {
            segment: "application",
            body: json!({"name": "app", "build_mode": "DOCKER", "dockerfile_path": "Dockerfile",
                "git_repository": {"url": git.url("team/soak"), "branch": "main", "root_path": "/"}}),
            deploy: pinned.clone(),
        },
        Kind {
            segment: "job",
            body: json!({"name": "task", "source": {"image": {"registry_id": registry,
                    "image_name": IMAGE, "tag": TAG}},
                "schedule": {"on_start": {"entrypoint": "sh", "arguments": ["-c", "echo ran"]}}}),
            deploy: json!({}),
        },
        Kind {
            segment: "database",
            body: json!({"name": "cache", "type": "REDIS", "version": redis_version,
                "mode": "CONTAINER"}),
            deploy: json!({}),
        },
        Kind {
            segment: "terraform",
            body: json!({"name": "infra",
                "auto_deploy_config": {"auto_deploy": false, "terraform_action": "DEFAULT"},
                "terraform_files_source": {"git_repository": {"url": git.url("team/soak"),
                    "branch": "main", "root_path": "/infra", "git_token_id": null}},
                "terraform_variables_source": {"tf_var_file_paths": [], "tf_vars": []},
                "backend": {"kubernetes": {}}, "engine": "TERRAFORM",
                "provider_version": {"read_from_terraform_block": false, "explicit_version": "1.0.3"},
                "timeout_sec": 600,
                "job_resources": {"cpu_milli": 500, "ram_mib": 256, "gpu": 0, "storage_gib": 1},
                "use_cluster_credentials": false, "action_extra_arguments": {}}),
            deploy: pinned,
        },
    ]
}

/// One cycle of one kind: an environment, the service in it, every action, then both deleted.
async fn cycle(client: &Client, project: &str, n: usize, kind: &Kind) {
    let env = client
        .create(
            &format!("/project/{project}/environment"),
            json!({"name": format!("{}-{n}", kind.segment)}),
        )
        .await;
    let seg = kind.segment;
    let id = client
        .create(&format!("/environment/{env}/{seg}"), kind.body.clone())
        .await;
    for (action, state) in ACTIONS {
        let body = if action == "deploy" {
            kind.deploy.clone()
        } else {
            json!({})
        };
        post(client, &format!("/{seg}/{id}/{action}"), body).await;
        settled_in(client, seg, &id, state).await;
    }
    deleted(client, &format!("/{seg}/{id}")).await;
    deleted(client, &format!("/environment/{env}")).await;
}

/// What the process `pid` holds after a cycle.
#[derive(Debug, Clone, Copy)]
struct Footprint {
    /// Resident memory of its own (kB): its heap and stacks.
    anonymous: u64,
    /// Resident pages of files it maps (kB): SQLite maps its database, so these grow with the
    /// database as the file does, and are the kernel's page cache to drop.
    mapped: u64,
    descriptors: usize,
}

fn footprint(pid: u32) -> Footprint {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb = |field: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap()
    };
    Footprint {
        anonymous: kb("RssAnon:"),
        mapped: kb("RssFile:"),
        descriptors: std::fs::read_dir(format!("/proc/{pid}/fd"))
            .unwrap()
            .count(),
    }
}

/// What the daemon holds labelled with `org`: containers, volumes, networks, images.
fn labelled(org: &str) -> Vec<String> {
    let label = format!("label=capstan.organization={org}");
    let mut left = Vec::new();
    for what in [
        &["ps", "-a", "-q", "--filter", &label][..],
        &["volume", "ls", "-q", "--filter", &label],
        &["network", "ls", "-q", "--filter", &label],
        &["images", "-q", "--filter", &label],
    ] {
        let found = docker(what).unwrap();
        left.extend(found.lines().map(|l| format!("{} {l}", what[0])));
    }
    left
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_action_on_every_kind_leaves_nothing_and_memory_settles() {
    if !docker_ready() {
        return;
    }
    let cycles: usize = std::env::var("CAPSTAN_SOAK_CYCLES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(WARM_UP + 3)
        .max(WARM_UP + 1);
    terraform_image();
    let (_, redis_version) = redis_image();
    let root = TempDir::new();
    let git = GitServer::start(&root.0, None);
    let repo = Repository::create(&git, "team/soak");
    let commit = repo.commit(
        "soak",
        &[
            (
                "Dockerfile",
                &format!(
                    "FROM {IMAGE}:{TAG}\nRUN mkdir -p /www && echo built > /www/index.html\n\
                     CMD [\"httpd\", \"-f\", \"-p\", \"8080\", \"-h\", \"/www\"]\n"
                ),
            ),
            (
                "infra/main.tf",
                "output \"greeting\" {\n  value = \"soaked\"\n}\n",
            ),
        ],
    );
    let case = Case::start(
        None,
        &[
            ("CAPSTAN_OUTBOUND_ALLOW", "127.0.0.1"),
            // A cycle asks about 80 requests; a long soak is past an hour's default 1000.
            ("CAPSTAN_RATE_LIMIT_PER_HOUR", "1000000"),
            // As an operator runs it: with backtraces asked for, a dependency resolves them
            // (gimli's symbol tables, about 8 MB: docs/performance.md).
            ("RUST_BACKTRACE", "0"),
            (
                "CAPSTAN_DOCKER_TERRAFORM_IMAGE",
                "capstan-test/terraform:{version}",
            ),
            (
                "CAPSTAN_DOCKER_DATABASE_IMAGES",
                "REDIS=capstan-test/redis:{version}",
            ),
        ],
    )
    .await;
    let client = &case.client;
    let (_, project) = case.cluster_and_project().await;
    let kinds = kinds(&case.registry, &git, &commit, &redis_version);

    let mut samples = Vec::new();
    for n in 1..=cycles {
        let started = Instant::now();
        futures_util::future::join_all(kinds.iter().map(|k| cycle(client, &project, n, k))).await;
        let now = footprint(case.pid());
        println!(
            "cycle {n}: {:.1} s, resident {} kB of its own and {} kB of mapped files, {} descriptors",
            started.elapsed().as_secs_f64(),
            now.anonymous,
            now.mapped,
            now.descriptors
        );
        samples.push(now);
    }
    deleted(client, &format!("/environment/{}", case.env)).await;

    eventually(
        Duration::from_secs(60),
        || format!("left on the daemon: {:?}", labelled(&case.org)),
        async || labelled(&case.org).is_empty().then_some(()),
    )
    .await;
    let (warm, last) = (samples[WARM_UP - 1], samples[cycles - 1]);
    let growth = last.anonymous as f64 / warm.anonymous as f64 - 1.0;
    println!(
        "after {WARM_UP} warm-up cycles: {warm:?}; after {cycles}: {last:?}; resident memory of \
         its own {:+.1} %",
        growth * 100.0
    );
    assert!(
        growth < MEMORY_GROWTH,
        "resident memory of its own grew {:.1} % over the measured cycles: {samples:?}",
        growth * 100.0
    );
    assert!(
        last.descriptors <= warm.descriptors + DESCRIPTORS_MORE,
        "descriptors: {samples:?}"
    );
}
