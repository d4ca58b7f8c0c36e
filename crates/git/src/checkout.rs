//! Checkouts through Debian's `git`: a shallow fetch of one revision over http(s), reaching
//! only the addresses the outbound policy permits (each address checked, then pinned, so a
//! name cannot resolve elsewhere between the check and the fetch), with no redirect followed,
//! no prompt, and no configuration of the host's read.

use async_trait::async_trait;
use base64::Engine as _;
use domain::git::{Checkouts, CommitInfo, GitError, Tree};
use domain::model::{GitAccess, GitProvider};
use domain::outbound_policy::OutboundPolicy;
use std::net::IpAddr;
use std::path::{Component, Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::process::Command;

pub struct GitCheckouts {
    policy: OutboundPolicy,
    /// How long one git command may take (a fetch of a large repository takes long).
    timeout: Duration,
    /// The certificates git trusts for https, instead of the system's.
    ca_file: Option<std::path::PathBuf>,
}

impl GitCheckouts {
    pub fn new(policy: OutboundPolicy, timeout: Duration) -> Self {
        Self {
            policy,
            timeout,
            ca_file: None,
        }
    }

    pub fn with_ca_file(mut self, ca_file: Option<std::path::PathBuf>) -> Self {
        self.ca_file = ca_file;
        self
    }

    /// The addresses `url` reaches, each permitted by the policy; `Err` names the host.
    async fn permitted_addresses(&self, url: &url::Url) -> Result<Vec<IpAddr>, GitError> {
        let refused = |r: domain::outbound_policy::Refused| GitError::Refused(r.to_string());
        let host = url.host_str().unwrap_or_default().to_string();
        let port = url.port_or_known_default().unwrap_or(443);
        let addresses: Vec<IpAddr> = match url.host() {
            Some(url::Host::Ipv4(ip)) => vec![IpAddr::V4(ip)],
            Some(url::Host::Ipv6(ip)) => vec![IpAddr::V6(ip)],
            _ => tokio::net::lookup_host((host.as_str(), port))
                .await
                .map_err(|_| GitError::Unreachable(format!("{host} does not resolve")))?
                .map(|a| a.ip())
                .collect(),
        };
        if addresses.is_empty() || !addresses.iter().all(|ip| self.policy.permits(&host, *ip)) {
            return Err(refused(self.policy.refusal(&host)));
        }
        Ok(addresses)
    }

    /// Runs one git command in `dir` with `config` (as `GIT_CONFIG_*`, never in the command
    /// line another process may read); its standard output.
    async fn git(
        &self,
        dir: &Path,
        config: &[(String, String)],
        args: &[&str],
    ) -> Result<String, GitError> {
        let mut command = Command::new("git");
        command
            .args(args)
            .current_dir(dir)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", dir)
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_ALLOW_PROTOCOL", "http:https")
            .env("GIT_CONFIG_COUNT", config.len().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        for (i, (key, value)) in config.iter().enumerate() {
            command.env(format!("GIT_CONFIG_KEY_{i}"), key);
            command.env(format!("GIT_CONFIG_VALUE_{i}"), value);
        }
        let ran = tokio::time::timeout(self.timeout, command.output())
            .await
            .map_err(|_| {
                GitError::Unreachable(format!("git took over {} s", self.timeout.as_secs()))
            })?
            .map_err(|e| GitError::Unexpected(format!("could not run git: {e}")))?;
        if ran.status.success() {
            return Ok(String::from_utf8_lossy(&ran.stdout).trim().to_string());
        }
        Err(failure(&String::from_utf8_lossy(&ran.stderr)))
    }
}

/// What git's complaint means, in the port's words (its own text kept for the unexpected).
/// An HTTP status is read only where git gives one ("returned error: 403"): the complaint
/// quotes the URL, whose port may hold the same digits.
fn failure(stderr: &str) -> GitError {
    let lower = stderr.to_ascii_lowercase();
    let answered = |status: u16| lower.contains(&format!("returned error: {status}"));
    if lower.contains("authentication failed")
        || answered(401)
        || answered(403)
        || lower.contains("could not read username")
    {
        GitError::Unauthorized
    } else if lower.contains("not found")
        || answered(404)
        || lower.contains("couldn't find remote ref")
        || lower.contains("not our ref")
        || lower.contains("unadvertised object")
    {
        GitError::NotFound
    } else if lower.contains("certificate") {
        GitError::Unreachable(
            "its TLS certificate is not trusted (CAPSTAN_GIT_CA_FILE names the authorities \
             Capstan trusts for git)"
                .into(),
        )
    } else if lower.contains("could not resolve host")
        || lower.contains("failed to connect")
        || lower.contains("connection refused")
        || lower.contains("timed out")
    {
        GitError::Unreachable("connection failed".into())
    } else {
        let said: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        let tail = said[said.len().saturating_sub(3)..].join("; ");
        GitError::Unexpected(format!("git said: {tail}"))
    }
}

/// A revision git reads as a commit or a branch and never as an option.
fn valid_revision(revision: &str) -> bool {
    !revision.is_empty()
        && !revision.starts_with('-')
        && !revision.contains("..")
        && revision
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '_' | '-'))
}

/// The user name each provider takes a token under, over https.
fn token_user(provider: GitProvider) -> &'static str {
    match provider {
        GitProvider::HostA => "x-access-token",
        GitProvider::HostB => "oauth2",
        GitProvider::HostC => "x-token-auth",
    }
}

impl GitCheckouts {
    /// Fetches `revision` with `depth` commits of history into `into` (empty) and checks it
    /// out; the configuration its later git commands take.
    async fn fetch(
        &self,
        source: &GitAccess,
        revision: &str,
        into: &Path,
        depth: usize,
    ) -> Result<Vec<(String, String)>, GitError> {
        let url = self
            .policy
            .check_url(&source.url)
            .map_err(|r| GitError::Refused(r.to_string()))?;
        if !url.username().is_empty() || url.password().is_some() {
            return Err(GitError::Refused(
                "a repository URL may not carry credentials: give the service a git token".into(),
            ));
        }
        if !valid_revision(revision) {
            return Err(GitError::NotFound);
        }
        let addresses = self.permitted_addresses(&url).await?;
        let host = url.host_str().unwrap_or_default();
        let port = url.port_or_known_default().unwrap_or(443);
        let pinned: Vec<String> = addresses
            .iter()
            .map(|ip| match ip {
                IpAddr::V6(v6) => format!("[{v6}]"),
                IpAddr::V4(v4) => v4.to_string(),
            })
            .collect();
        let mut config = vec![
            ("http.followRedirects".to_string(), "false".to_string()),
            (
                "http.curloptResolve".to_string(),
                format!("{host}:{port}:{}", pinned.join(",")),
            ),
            ("protocol.version".to_string(), "2".to_string()),
            ("init.defaultBranch".to_string(), "main".to_string()),
            ("advice.detachedHead".to_string(), "false".to_string()),
        ];
        if let Some(ca) = &self.ca_file {
            config.push((
                "http.sslCAInfo".to_string(),
                ca.to_string_lossy().to_string(),
            ));
        }
        if let Some(token) = &source.token {
            let pair = format!("{}:{}", token_user(source.provider), token.expose());
            let basic = base64::engine::general_purpose::STANDARD.encode(pair);
            config.push((
                "http.extraHeader".to_string(),
                format!("Authorization: Basic {basic}"),
            ));
        }
        self.git(into, &config, &["init", "-q"]).await?;
        self.git(
            into,
            &config,
            &[
                "fetch",
                "-q",
                "--depth",
                &depth.to_string(),
                "--no-tags",
                "--no-recurse-submodules",
                "--",
                url.as_str(),
                revision,
            ],
        )
        .await?;
        self.git(into, &config, &["checkout", "-q", "--detach", "FETCH_HEAD"])
            .await?;
        Ok(config)
    }
}

/// A fetched revision in a directory of its own, removed with it.
struct FetchedTree {
    dir: PathBuf,
}

impl Drop for FetchedTree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl FetchedTree {
    /// `path` inside the checkout (never out of it, through `..` or a link), if it exists.
    fn inside(&self, path: &str) -> Option<PathBuf> {
        let mut at = self.dir.clone();
        for part in Path::new(path.trim_start_matches('/')).components() {
            match part {
                Component::Normal(p) if p != ".git" => at.push(p),
                Component::CurDir => {}
                _ => return None,
            }
        }
        let resolved = at.canonicalize().ok()?;
        resolved
            .starts_with(self.dir.canonicalize().ok()?)
            .then_some(resolved)
    }
}

impl Tree for FetchedTree {
    fn file(&self, path: &str) -> Option<Vec<u8>> {
        let at = self.inside(path)?;
        at.is_file().then(|| std::fs::read(at).ok()).flatten()
    }

    fn directories(&self, path: &str) -> Option<Vec<String>> {
        let at = self.inside(path)?;
        let mut names: Vec<String> = std::fs::read_dir(at)
            .ok()?
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|name| name != ".git")
            .collect();
        names.sort();
        Some(names)
    }
}

/// A new empty directory for a fetch.
fn scratch() -> Result<PathBuf, GitError> {
    let dir = std::env::temp_dir().join(format!("capstan-git-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir)
        .map_err(|e| GitError::Unexpected(format!("could not make a directory: {e}")))?;
    Ok(dir)
}

#[async_trait]
impl Checkouts for GitCheckouts {
    async fn checkout(
        &self,
        source: &GitAccess,
        revision: &str,
        into: &Path,
    ) -> Result<String, GitError> {
        let config = self.fetch(source, revision, into, 1).await?;
        self.git(into, &config, &["rev-parse", "HEAD"]).await
    }

    async fn tree(&self, source: &GitAccess, revision: &str) -> Result<Box<dyn Tree>, GitError> {
        let tree = FetchedTree { dir: scratch()? };
        self.fetch(source, revision, &tree.dir, 1).await?;
        Ok(Box::new(tree))
    }

    async fn commits(
        &self,
        source: &GitAccess,
        branch: &str,
        limit: usize,
    ) -> Result<Vec<CommitInfo>, GitError> {
        let tree = FetchedTree { dir: scratch()? };
        let config = self.fetch(source, branch, &tree.dir, limit.max(1)).await?;
        let format = "--format=%H%x1f%an%x1f%ae%x1f%aI%x1f%s";
        let count = format!("-n{}", limit.max(1));
        let log = self
            .git(&tree.dir, &config, &["log", format, &count, "HEAD"])
            .await?;
        Ok(log.lines().filter_map(commit_of).collect())
    }
}

/// A line of `git log` in the format above.
fn commit_of(line: &str) -> Option<CommitInfo> {
    let mut parts = line.split('\u{1f}');
    let id = parts.next()?.to_string();
    let author_name = parts.next()?.to_string();
    let author_email = parts.next()?.to_string();
    let at = time::OffsetDateTime::parse(
        parts.next()?,
        &time::format_description::well_known::Rfc3339,
    )
    .ok()?;
    let message = parts.next().unwrap_or_default().to_string();
    Some(CommitInfo {
        id,
        author_name,
        author_email,
        at,
        message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_revision_is_never_an_option() {
        assert!(valid_revision("main"));
        assert!(valid_revision("feature/x-1.2"));
        assert!(valid_revision("548b854f487c1e4204e2620b0d5e50e916a04c8b"));
        assert!(!valid_revision("--upload-pack=evil"));
        assert!(!valid_revision("a..b"));
        assert!(!valid_revision("a b"));
        assert!(!valid_revision(""));
    }

    #[test]
    fn git_complaints_become_the_ports_reasons() {
        assert_eq!(
            failure("fatal: Authentication failed for 'https://h/o/r'"),
            GitError::Unauthorized
        );
        assert_eq!(
            failure("fatal: couldn't find remote ref nope"),
            GitError::NotFound
        );
        assert!(matches!(
            failure("fatal: unable to access: Failed to connect to h port 443"),
            GitError::Unreachable(_)
        ));
        match failure(
            "fatal: unable to access 'https://h/r.git/': server certificate verification failed",
        ) {
            GitError::Unreachable(why) => assert!(why.contains("CAPSTAN_GIT_CA_FILE"), "{why}"),
            other => panic!("{other:?}"),
        }
        // A port that holds a status's digits is no status.
        match failure(
            "fatal: unable to access 'https://127.0.0.1:34015/team/r/': server certificate \
             verification failed. CAfile: none CRLfile: none",
        ) {
            GitError::Unreachable(why) => assert!(why.contains("CAPSTAN_GIT_CA_FILE"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            failure("fatal: unable to access 'https://h:40404/r/': Failed to connect to h"),
            GitError::Unreachable("connection failed".into())
        );
        assert_eq!(
            failure(
                "fatal: unable to access 'https://h/r/': The requested URL returned error: 403"
            ),
            GitError::Unauthorized
        );
        assert_eq!(
            failure(
                "fatal: unable to access 'https://h/r/': The requested URL returned error: 404"
            ),
            GitError::NotFound
        );
        assert_eq!(
            failure("weird\nfatal: odd"),
            GitError::Unexpected("git said: weird; fatal: odd".into())
        );
    }

    #[tokio::test]
    async fn a_loopback_repository_is_refused_unless_allowed_and_credentials_in_urls_always() {
        let dir = std::env::temp_dir();
        let source = |url: &str| GitAccess {
            url: url.into(),
            provider: GitProvider::HostA,
            token: None,
        };
        let closed = GitCheckouts::new(OutboundPolicy::default(), Duration::from_secs(5));
        let refused = closed
            .checkout(&source("http://127.0.0.1:9/o/r.git"), "main", &dir)
            .await;
        assert!(
            matches!(&refused, Err(GitError::Refused(why)) if why.contains("CAPSTAN_OUTBOUND_ALLOW")),
            "{refused:?}"
        );
        let file = closed
            .checkout(&source("file:///etc/o/r"), "main", &dir)
            .await;
        assert!(matches!(file, Err(GitError::Refused(_))), "{file:?}");
        let open = GitCheckouts::new(
            OutboundPolicy::parse("127.0.0.1").unwrap_or_default(),
            Duration::from_secs(5),
        );
        let with_user = open
            .checkout(&source("http://u:p@127.0.0.1:9/o/r.git"), "main", &dir)
            .await;
        assert!(
            matches!(&with_user, Err(GitError::Refused(why)) if why.starts_with("a repository URL may not carry")),
            "{with_user:?}"
        );
    }
}
