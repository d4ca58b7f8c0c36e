//! Git repositories served on 127.0.0.1 over git's smart HTTP protocol: Debian's
//! `git http-backend` behind a small CGI bridge (no public git host is reachable here), and
//! repositories the tests commit to.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A server of the bare repositories under its root, at `http://127.0.0.1:{port}/{name}.git`.
pub struct GitServer {
    pub port: u16,
    pub root: PathBuf,
}

impl GitServer {
    /// Serves `root`; with `token`, a request must carry it as HTTP Basic's password (as a
    /// provider takes a token), else it is answered 401.
    pub fn start(root: &Path, token: Option<&str>) -> GitServer {
        let users = token
            .map(|t| vec![(None, t.to_string())])
            .unwrap_or_default();
        Self::serve(root, users)
    }

    /// Serves `root` to requests carrying one of these HTTP Basic (user, password) pairs.
    pub fn start_for(root: &Path, users: &[(&str, &str)]) -> GitServer {
        let users = users
            .iter()
            .map(|(u, p)| (Some(u.to_string()), p.to_string()))
            .collect();
        Self::serve(root, users)
    }

    /// `users`: the (user, when one is required; password) pairs let in; none: all are.
    fn serve(root: &Path, users: Vec<(Option<String>, String)>) -> GitServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let root = root.to_path_buf();
        let served = root.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (root, users) = (served.clone(), users.clone());
                std::thread::spawn(move || {
                    let _ = answer(stream, &root, &users);
                });
            }
        });
        GitServer { port, root }
    }

    pub fn url(&self, name: &str) -> String {
        format!("http://127.0.0.1:{}/{name}.git", self.port)
    }
}

/// A git server behind TLS: socat terminating https on 127.0.0.1 with a certificate of its own
/// (made by openssl for 127.0.0.1), in front of a plain `GitServer`. Dropped, it stops.
pub struct TlsFront {
    pub port: u16,
    /// The certificate (PEM) a client must trust.
    pub certificate: PathBuf,
    socat: std::process::Child,
}

impl TlsFront {
    pub fn start(behind: &GitServer, dir: &Path) -> TlsFront {
        let (key, certificate) = (dir.join("key.pem"), dir.join("cert.pem"));
        let made = Command::new("openssl")
            .args([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            ])
            .args([
                "-subj",
                "/CN=127.0.0.1",
                "-addext",
                "subjectAltName=IP:127.0.0.1",
            ])
            .arg("-keyout")
            .arg(&key)
            .arg("-out")
            .arg(&certificate)
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(made.success(), "openssl made no certificate");
        // A port found free may be taken before socat binds it (a container's published port,
        // by docker-proxy): socat then ends at once, and something else would answer there.
        // Another port is tried until socat itself listens.
        let (port, socat) = (0..10)
            .find_map(|_| {
                let port = {
                    let probe = TcpListener::bind("127.0.0.1:0").unwrap();
                    probe.local_addr().unwrap().port()
                };
                let mut socat = Command::new("socat")
                    .arg(format!(
                        "OPENSSL-LISTEN:{port},bind=127.0.0.1,reuseaddr,fork,verify=0,cert={},key={}",
                        certificate.display(),
                        key.display()
                    ))
                    .arg(format!("TCP:127.0.0.1:{}", behind.port))
                    .stderr(Stdio::null())
                    .spawn()
                    .expect("socat is installed");
                let started = std::time::Instant::now();
                let mut listens = false;
                while started.elapsed() < std::time::Duration::from_secs(10) {
                    if socat.try_wait().unwrap().is_some() {
                        break;
                    }
                    if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                        std::thread::sleep(std::time::Duration::from_millis(200));
                        listens = socat.try_wait().unwrap().is_none();
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                if listens {
                    return Some((port, socat));
                }
                let _ = socat.kill();
                let _ = socat.wait();
                None
            })
            .expect("socat listens on a port of its own");
        TlsFront {
            port,
            certificate,
            socat,
        }
    }

    pub fn url(&self, name: &str) -> String {
        format!("https://127.0.0.1:{}/{name}.git", self.port)
    }
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        let _ = self.socat.kill();
        let _ = self.socat.wait();
    }
}

/// The (user, password) an `Authorization: Basic` header carries.
fn basic_credentials(header: &str) -> Option<(String, String)> {
    use base64::Engine as _;
    let encoded = header.strip_prefix("Basic ")?.trim();
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .ok()?;
    let pair = String::from_utf8(decoded).ok()?;
    pair.split_once(':')
        .map(|(u, p)| (u.to_string(), p.to_string()))
}

fn answer(
    stream: TcpStream,
    root: &Path,
    users: &[(Option<String>, String)],
) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut parts = request_line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_string();
    let target = parts.next().unwrap_or_default().to_string();
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line)?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let mut out = stream;
    if !users.is_empty() {
        let given = header("authorization").and_then(|h| basic_credentials(&h));
        let let_in = given.is_some_and(|(user, password)| {
            users
                .iter()
                .any(|(u, p)| *p == password && u.as_ref().is_none_or(|u| *u == user))
        });
        if !let_in {
            out.write_all(
                b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"git\"\r\n\
                  Content-Length: 0\r\nConnection: close\r\n\r\n",
            )?;
            return Ok(());
        }
    }
    let body = if header("transfer-encoding").is_some_and(|t| t.contains("chunked")) {
        let mut body = Vec::new();
        loop {
            let mut size = String::new();
            reader.read_line(&mut size)?;
            let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk)?;
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
        body
    } else {
        let length: usize = header("content-length")
            .and_then(|l| l.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0; length];
        reader.read_exact(&mut body)?;
        body
    };
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let mut cgi = Command::new("git")
        .arg("http-backend")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("GIT_PROJECT_ROOT", root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("REQUEST_METHOD", &method)
        .env("PATH_INFO", path)
        .env("QUERY_STRING", query)
        .env("CONTENT_TYPE", header("content-type").unwrap_or_default())
        .env("CONTENT_LENGTH", body.len().to_string())
        .env(
            "HTTP_CONTENT_ENCODING",
            header("content-encoding").unwrap_or_default(),
        )
        .env("GIT_PROTOCOL", header("git-protocol").unwrap_or_default())
        .env("REMOTE_ADDR", "127.0.0.1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut stdin = cgi.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(&body));
    let produced = cgi.wait_with_output()?;
    let _ = writer.join();
    let output = produced.stdout;
    let split = output
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, 4))
        .or_else(|| output.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2)));
    let Some((end, gap)) = split else {
        out.write_all(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n")?;
        return Ok(());
    };
    let head = String::from_utf8_lossy(&output[..end]).to_string();
    let content = &output[end + gap..];
    let mut status = "200 OK".to_string();
    let mut response = String::new();
    for line in head.lines() {
        match line.split_once(':') {
            Some((k, v)) if k.eq_ignore_ascii_case("status") => status = v.trim().to_string(),
            Some(_) => {
                response.push_str(line.trim_end());
                response.push_str("\r\n");
            }
            None => {}
        }
    }
    out.write_all(
        format!(
            "HTTP/1.1 {status}\r\n{response}Content-Length: {}\r\nConnection: close\r\n\r\n",
            content.len()
        )
        .as_bytes(),
    )?;
    out.write_all(content)?;
    out.flush()
}

/// A repository the tests commit to, pushed to its bare copy under a server's root after each
/// commit (the bare copy is what is served).
pub struct Repository {
    work: PathBuf,
    bare: PathBuf,
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "Ada Tester")
        .env("GIT_AUTHOR_EMAIL", "ada@example.com")
        .env("GIT_COMMITTER_NAME", "Ada Tester")
        .env("GIT_COMMITTER_EMAIL", "ada@example.com")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

impl Repository {
    /// A new repository `name` served by `server`, with its work tree beside.
    pub fn create(server: &GitServer, name: &str) -> Repository {
        let work = server.root.join("work").join(name);
        let bare = server.root.join(format!("{name}.git"));
        std::fs::create_dir_all(&work).unwrap();
        std::fs::create_dir_all(&bare).unwrap();
        git(&work, &["init", "-q", "-b", "main"]);
        git(&bare, &["init", "-q", "--bare", "-b", "main"]);
        Repository { work, bare }
    }

    /// Writes `files` (path, content) into the work tree, commits them and pushes; the commit.
    pub fn commit(&self, message: &str, files: &[(&str, &str)]) -> String {
        for (path, content) in files {
            let at = self.work.join(path);
            std::fs::create_dir_all(at.parent().unwrap()).unwrap();
            std::fs::write(at, content).unwrap();
        }
        git(&self.work, &["add", "-A"]);
        git(&self.work, &["commit", "-q", "-m", message]);
        let bare = self.bare.display().to_string();
        git(&self.work, &["push", "-q", &bare, "HEAD"]);
        git(&self.work, &["rev-parse", "HEAD"])
    }

    /// Makes later commits go to `branch`, a new branch from the current commit.
    pub fn branch_off(&self, branch: &str) {
        git(&self.work, &["checkout", "-q", "-b", branch]);
    }
}
