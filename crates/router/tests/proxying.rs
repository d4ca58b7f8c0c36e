//! The router in front of replicas served in this process, on 127.0.0.1: a request reaches the
//! replica its Host header names with the forwarded headers, an upgrade passes bytes both ways,
//! and names it does not serve or whose service is stopped are answered by the router.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use capstan_router::{
    check_replicas, ordered_folder, serve, serve_tls, Acme, AcmeSettings, Certificates, Routes,
    TrustedProxies,
};
use domain::model::{Backend, Route, RouteCheck, RouteTable};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A request's or answer's head, up to its blank line; none when the peer hung up first.
async fn read_head(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).await.unwrap_or(0) == 0 {
            return None;
        }
        head.push(byte[0]);
    }
    Some(head)
}

/// A replica: answers one request per connection with what it was sent (the request's head), or
/// for an upgrade, 101 and then echoes every byte.
async fn replica() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let Some(head) = read_head(&mut stream).await else {
                    return;
                };
                let head = String::from_utf8_lossy(&head).to_string();
                if head.to_ascii_lowercase().contains("upgrade: echo") {
                    stream
                        .write_all(
                            b"HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\nUpgrade: echo\r\n\r\n",
                        )
                        .await
                        .unwrap();
                    let mut buffer = [0u8; 64];
                    loop {
                        let n = stream.read(&mut buffer).await.unwrap_or(0);
                        if n == 0 || stream.write_all(&buffer[..n]).await.is_err() {
                            return;
                        }
                    }
                }
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{head}",
                    head.len()
                );
                let _ = stream.write_all(answer.as_bytes()).await;
            });
        }
    });
    port
}

async fn router(table: RouteTable) -> u16 {
    router_trusting(table, TrustedProxies::default()).await
}

/// A router that passes on the forwarded headers of the proxies in `trusted`.
async fn router_trusting(table: RouteTable, trusted: TrustedProxies) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let routes = Routes::default();
    routes.replace(table);
    tokio::spawn(serve(listener, routes, trusted, std::future::pending()));
    port
}

fn backend(port: u16) -> Backend {
    Backend {
        host: "127.0.0.1".into(),
        port,
    }
}

fn to(ports: &[u16]) -> Route {
    Route {
        backends: ports.iter().copied().map(backend).collect(),
        ..Route::default()
    }
}

fn table(entries: &[(&str, Route)]) -> RouteTable {
    let mut table = RouteTable::default();
    for (name, route) in entries {
        table.routes.insert((*name).to_string(), route.clone());
    }
    table
}

/// A replica that answers `GET /ready` with the status `ready` holds, and anything else
/// with its own port.
async fn checked_replica(ready: Arc<AtomicU16>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            let ready = ready.clone();
            tokio::spawn(async move {
                let Some(head) = read_head(&mut stream).await else {
                    return;
                };
                let (status, body) = if head.starts_with(b"GET /ready ") {
                    (ready.load(Ordering::SeqCst), String::new())
                } else {
                    (200, port.to_string())
                };
                let answer = format!(
                    "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(answer.as_bytes()).await;
            });
        }
    });
    port
}

async fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap().port()
}

#[tokio::test]
async fn requests_reach_the_replica_their_name_routes_to_and_upgrades_pass_through() {
    let (one, two) = (replica().await, replica().await);
    let port = router(table(&[
        ("p80-zone.localhost", to(&[one])),
        ("p80-ztwo.localhost", to(&[two])),
        ("p80-zstopped.localhost", to(&[])),
    ]))
    .await;
    let http = reqwest::Client::new();
    let get = |host: &'static str| {
        http.get(format!("http://127.0.0.1:{port}/path?q=1"))
            .header("host", host)
            .header("connection", "keep-alive, x-hop")
            .header("x-hop", "dropped")
            .send()
    };

    let seen = get("P80-ZONE.localhost:8000").await.unwrap();
    assert_eq!(seen.status(), 200);
    let seen = seen.text().await.unwrap().to_ascii_lowercase();
    assert!(seen.starts_with("get /path?q=1 http/1.1"), "{seen}");
    assert!(seen.contains("host: p80-zone.localhost:8000"), "{seen}");
    assert!(seen.contains("x-forwarded-for: 127.0.0.1"), "{seen}");
    assert!(
        seen.contains("x-forwarded-host: p80-zone.localhost:8000"),
        "{seen}"
    );
    assert!(seen.contains("x-forwarded-proto: http"), "{seen}");
    assert!(
        !seen.contains("x-hop"),
        "a one-hop header stays behind: {seen}"
    );

    assert_eq!(get("p80-ztwo.localhost").await.unwrap().status(), 200);
    let stopped = get("p80-zstopped.localhost").await.unwrap();
    assert_eq!(stopped.status(), 503);
    assert_eq!(get("nothing.localhost").await.unwrap().status(), 404);

    // An upgrade: the 101 comes back, then bytes go both ways on the same connection.
    let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    stream
        .write_all(
            b"GET /socket HTTP/1.1\r\nHost: p80-zone.localhost\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n",
        )
        .await
        .unwrap();
    let head = read_head(&mut stream).await.expect("the router hung up");
    let head = String::from_utf8_lossy(&head).to_string();
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    stream.write_all(b"ping").await.unwrap();
    let mut echoed = [0u8; 4];
    tokio::time::timeout(Duration::from_secs(5), stream.read_exact(&mut echoed))
        .await
        .expect("the echo came back")
        .unwrap();
    assert_eq!(&echoed, b"ping");
}

#[tokio::test]
async fn a_replica_that_refuses_is_left_out_and_a_request_without_a_body_goes_elsewhere() {
    let ready = Arc::new(AtomicU16::new(200));
    let (closed, alive) = (closed_port().await, checked_replica(ready).await);
    let port = router(table(&[
        ("p80-zboth.localhost", to(&[closed, alive])),
        ("p80-zgone.localhost", to(&[closed])),
    ]))
    .await;
    let http = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{port}/");
    for _ in 0..4 {
        let answer = http
            .get(&url)
            .header("host", "p80-zboth.localhost")
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 200);
        assert_eq!(answer.text().await.unwrap(), alive.to_string());
    }
    let answer = http
        .get(&url)
        .header("host", "p80-zgone.localhost")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 502, "no replica answers");
    let posted = http
        .post(&url)
        .header("host", "p80-zgone.localhost")
        .body("a body it could have read")
        .send()
        .await
        .unwrap();
    assert_eq!(posted.status(), 502);
}

#[tokio::test]
async fn replicas_failing_their_check_are_taken_out_until_it_passes_again() {
    let (sick, well) = (Arc::new(AtomicU16::new(200)), Arc::new(AtomicU16::new(200)));
    let (one, two) = (
        checked_replica(sick.clone()).await,
        checked_replica(well.clone()).await,
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let routes = Routes::default();
    routes.replace(table(&[(
        "p80-zweb.localhost",
        Route {
            check: Some(RouteCheck {
                http_path: Some("/ready".into()),
                period_seconds: 1,
                timeout_seconds: 1,
                failure_threshold: 2,
            }),
            ..to(&[one, two])
        },
    )]));
    tokio::spawn(serve(
        listener,
        routes.clone(),
        TrustedProxies::default(),
        std::future::pending(),
    ));
    tokio::spawn(check_replicas(routes, std::future::pending()));
    let (one, two) = (one.to_string(), two.to_string());
    let both = |seen: &[(u16, String)]| {
        seen.iter().any(|(_, b)| *b == one) && seen.iter().any(|(_, b)| *b == two)
    };
    seen_until(port, "p80-zweb.localhost", "both replicas answer", &both).await;
    sick.store(500, Ordering::SeqCst);
    seen_until(
        port,
        "p80-zweb.localhost",
        "the failing replica is taken out",
        &|seen| seen.iter().all(|(status, b)| *status == 200 && *b == two),
    )
    .await;
    well.store(503, Ordering::SeqCst);
    seen_until(
        port,
        "p80-zweb.localhost",
        "with none passing, the router says so",
        &|seen| seen.iter().all(|(status, _)| *status == 503),
    )
    .await;
    sick.store(200, Ordering::SeqCst);
    well.store(200, Ordering::SeqCst);
    seen_until(port, "p80-zweb.localhost", "both come back", &both).await;
}

/// A status and body the router answered.
type Answer = (u16, String);

/// Asks `host` six times at a time until what is answered is `done`; fails after ten seconds.
async fn seen_until(port: u16, host: &str, what: &str, done: &dyn Fn(&[Answer]) -> bool) {
    let http = reqwest::Client::new();
    for _ in 0..40 {
        let mut seen = Vec::new();
        for _ in 0..6 {
            let answer = http
                .get(format!("http://127.0.0.1:{port}/"))
                .header("host", host)
                .send()
                .await
                .unwrap();
            seen.push((answer.status().as_u16(), answer.text().await.unwrap()));
        }
        if done(&seen) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    panic!("{what}");
}

#[tokio::test]
async fn a_sticky_route_keeps_a_client_on_one_replica() {
    let ready = Arc::new(AtomicU16::new(200));
    let (one, two) = (
        checked_replica(ready.clone()).await,
        checked_replica(ready).await,
    );
    let port = router(table(&[(
        "p80-zweb.localhost",
        Route {
            sticky: true,
            ..to(&[one, two])
        },
    )]))
    .await;
    let http = reqwest::Client::new();
    let get = |cookie: Option<&str>| {
        let mut request = http
            .get(format!("http://127.0.0.1:{port}/"))
            .header("host", "p80-zweb.localhost");
        if let Some(cookie) = cookie {
            request = request.header("cookie", format!("theme=dark; {cookie}"));
        }
        request.send()
    };
    let first = get(None).await.unwrap();
    let set = first
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .expect("a sticky route sets its cookie")
        .to_string();
    assert!(
        set.starts_with("capstan_replica=") && set.contains("HttpOnly"),
        "{set}"
    );
    let cookie = set.split(';').next().unwrap().to_string();
    let kept = first.text().await.unwrap();
    for _ in 0..4 {
        let again = get(Some(&cookie)).await.unwrap();
        assert!(
            again.headers().get("set-cookie").is_none(),
            "kept, not set again"
        );
        assert_eq!(again.text().await.unwrap(), kept);
    }
    let mut unkept = Vec::new();
    for _ in 0..4 {
        unkept.push(get(None).await.unwrap().text().await.unwrap());
    }
    assert!(
        unkept.iter().any(|b| *b != kept),
        "without the cookie, in turn: {unkept:?}"
    );
}

/// A directory of its own under the system's temporary one, removed when dropped.
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new(what: &str) -> Self {
        let path = std::env::temp_dir().join(format!(
            "capstan-router-{what}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        std::fs::create_dir_all(&path).unwrap();
        Self(path)
    }

    fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn openssl(args: &[&str]) {
    let made = std::process::Command::new("openssl")
        .args(args)
        .output()
        .expect("openssl runs");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
}

/// Makes a test authority in `dir` (`ca.crt`, `ca.key`), once.
fn authority(dir: &std::path::Path) {
    let (crt, key) = (dir.join("ca.pem"), dir.join("ca-key.pem"));
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "2",
        "-subj",
        "/CN=capstan test authority",
        "-keyout",
        key.to_str().unwrap(),
        "-out",
        crt.to_str().unwrap(),
    ]);
}

/// Makes a certificate for `name`, signed by the test authority, as `<file>.crt` and
/// `<file>.key` in `dir`.
fn certificate(dir: &std::path::Path, name: &str, file: &str) {
    let path = |ext: &str| {
        dir.join(format!("{file}.{ext}"))
            .to_str()
            .unwrap()
            .to_string()
    };
    let extensions = path("ext");
    std::fs::write(&extensions, format!("subjectAltName=DNS:{name}\n")).unwrap();
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        &format!("/CN={name}"),
        "-keyout",
        &path("key"),
        "-out",
        &path("csr"),
    ]);
    openssl(&[
        "x509",
        "-req",
        "-in",
        &path("csr"),
        "-days",
        "2",
        "-extfile",
        &extensions,
        "-CA",
        dir.join("ca.pem").to_str().unwrap(),
        "-CAkey",
        dir.join("ca-key.pem").to_str().unwrap(),
        "-CAcreateserial",
        "-out",
        &path("crt"),
    ]);
}

fn trusting(dir: &std::path::Path, name: &str, port: u16) -> reqwest::Client {
    let pem = std::fs::read(dir.join("ca.pem")).unwrap();
    reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&pem).unwrap())
        .resolve(name, std::net::SocketAddr::from(([127, 0, 0, 1], port)))
        .build()
        .unwrap()
}

/// A certificates' directory with a test authority, a certificate for shop.example.test and
/// a wildcard one for *.apps.example.test.
fn shop_and_apps(label: &str) -> TempDir {
    let dir = TempDir::new(label);
    authority(dir.path());
    certificate(dir.path(), "shop.example.test", "shop.example.test");
    certificate(
        dir.path(),
        "*.apps.example.test",
        "_wildcard.apps.example.test",
    );
    dir
}

#[tokio::test]
async fn https_serves_each_name_with_its_certificate_and_reads_new_ones_without_a_restart() {
    let dir = shop_and_apps("certificates");
    let certificates = Arc::new(Certificates::default());
    assert_eq!(certificates.refresh(dir.path()), Ok(Some(2)));
    assert_eq!(
        certificates.refresh(dir.path()),
        Ok(None),
        "nothing changed"
    );
    let replica = checked_replica(Arc::new(AtomicU16::new(200))).await;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let routes = Routes::default();
    routes.replace(table(&[
        ("shop.example.test", to(&[replica])),
        ("*.apps.example.test", to(&[replica])),
        ("new.example.test", to(&[replica])),
    ]));
    tokio::spawn(serve_tls(
        listener,
        routes,
        certificates.clone(),
        TrustedProxies::default(),
        std::future::pending(),
    ));
    for name in ["shop.example.test", "a.apps.example.test"] {
        let answer = trusting(dir.path(), name, port)
            .get(format!("https://{name}:{port}/"))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 200);
        assert_eq!(answer.text().await.unwrap(), replica.to_string());
    }
    let unknown = trusting(dir.path(), "new.example.test", port)
        .get(format!("https://new.example.test:{port}/"))
        .send()
        .await;
    assert!(
        unknown.is_err(),
        "no certificate for the name: no handshake"
    );
    certificate(dir.path(), "new.example.test", "new.example.test");
    assert_eq!(certificates.refresh(dir.path()), Ok(Some(3)));
    let answer = trusting(dir.path(), "new.example.test", port)
        .get(format!("https://new.example.test:{port}/"))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
}

#[tokio::test]
async fn acme_orders_for_the_routed_names_the_directory_has_no_certificate_for() {
    let dir = shop_and_apps("acme");
    // An authority nobody answers for: the orders fail and back off; what is asked is the test.
    let acme = Arc::new(
        Acme::new(AcmeSettings {
            directory: format!("https://127.0.0.1:{}/dir", closed_port().await),
            contact: None,
            roots: None,
            cache: ordered_folder(dir.path()),
        })
        .unwrap(),
    );
    let certificates = Certificates::with_acme(acme.clone());
    assert_eq!(certificates.refresh(dir.path()), Ok(Some(2)));
    let certify = Route {
        certify: true,
        ..Route::default()
    };
    certificates.order_for(&table(&[
        ("shop.example.test", certify.clone()),
        ("a.apps.example.test", certify.clone()),
        ("*.wild.example.test", certify.clone()),
        ("new.example.test", certify.clone()),
        ("behind.cdn.example.test", to(&[])),
    ]));
    assert_eq!(
        acme.names(),
        ["new.example.test".to_string()].into(),
        "not the names with a certificate (their own or a wildcard's), nor a wildcard, nor one \
         whose certificate is someone else's (a CDN's)"
    );
    // What ACME obtained (here, or on another instance sharing the directory) is served from
    // the `acme/` folder, and its name stays ordered for: ACME renews it.
    certificate(dir.path(), "new.example.test", "new.example.test");
    let ordered = ordered_folder(dir.path());
    for ext in ["crt", "key"] {
        std::fs::rename(
            dir.path().join(format!("new.example.test.{ext}")),
            ordered.join(format!("new.example.test.{ext}")),
        )
        .unwrap();
    }
    assert_eq!(certificates.refresh(dir.path()), Ok(Some(3)));
    assert!(certificates.for_name("new.example.test").is_some());
    certificates.order_for(&table(&[
        ("new.example.test", certify.clone()),
        ("other.example.test", certify),
    ]));
    assert_eq!(
        acme.names(),
        [
            "new.example.test".to_string(),
            "other.example.test".to_string()
        ]
        .into(),
        "a name no longer routed is no longer ordered for"
    );
}

#[tokio::test]
async fn a_replica_that_does_not_answer_is_a_bad_gateway() {
    let closed = closed_port().await;
    let port = router(table(&[("p80-zgone.localhost", to(&[closed]))])).await;
    let answer = reqwest::Client::new()
        .get(format!("http://127.0.0.1:{port}/"))
        .header("host", "p80-zgone.localhost")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 502);
}

/// Sends `request` as written on a connection of its own: the answer's head and its body (as
/// long as its Content-Length says).
async fn raw(port: u16, request: &str) -> (String, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let answered = async {
        let head = read_head(&mut stream).await.expect("the router hung up");
        let head = String::from_utf8(head).unwrap();
        let length = head
            .lines()
            .find_map(|l| {
                let l = l.to_ascii_lowercase();
                Some(
                    l.strip_prefix("content-length:")?
                        .trim()
                        .parse::<usize>()
                        .unwrap(),
                )
            })
            .unwrap_or(0);
        let mut body = vec![0u8; length];
        stream.read_exact(&mut body).await.unwrap();
        (head, String::from_utf8(body).unwrap())
    };
    tokio::time::timeout(Duration::from_secs(10), answered)
        .await
        .expect("the router answered")
}

/// The values of the header `name` in a request head the replica echoed (lower case).
fn header_values(seen: &str, name: &str) -> Vec<String> {
    seen.to_ascii_lowercase()
        .lines()
        .filter_map(|l| Some(l.strip_prefix(&format!("{name}:"))?.trim().to_string()))
        .collect()
}

#[tokio::test]
async fn a_client_s_forwarded_headers_are_replaced_unless_it_is_a_trusted_proxy() {
    let replica = replica().await;
    let routes = table(&[("p80-zone.localhost", to(&[replica]))]);
    let send = |port: u16| {
        reqwest::Client::new()
            .get(format!("http://127.0.0.1:{port}/"))
            .header("host", "p80-zone.localhost")
            .header("x-forwarded-for", "6.6.6.6")
            .header("forwarded", "for=6.6.6.6")
            .header("x-forwarded-proto", "https")
            .header("x-forwarded-host", "evil.example")
            .send()
    };

    let untrusting = router(routes.clone()).await;
    let seen = send(untrusting).await.unwrap().text().await.unwrap();
    assert_eq!(
        header_values(&seen, "x-forwarded-for"),
        ["127.0.0.1"],
        "{seen}"
    );
    assert!(header_values(&seen, "forwarded").is_empty(), "{seen}");
    assert!(!seen.contains("6.6.6.6"), "{seen}");
    assert_eq!(
        header_values(&seen, "x-forwarded-proto"),
        ["http"],
        "{seen}"
    );
    assert_eq!(
        header_values(&seen, "x-forwarded-host"),
        ["p80-zone.localhost"],
        "{seen}"
    );

    let trusted = TrustedProxies::parse("10.0.0.0/8,127.0.0.1").unwrap();
    let trusting = router_trusting(routes, trusted).await;
    let seen = send(trusting).await.unwrap().text().await.unwrap();
    assert_eq!(
        header_values(&seen, "x-forwarded-for"),
        ["6.6.6.6, 127.0.0.1"],
        "{seen}"
    );
    assert_eq!(header_values(&seen, "forwarded"), ["for=6.6.6.6"], "{seen}");
    assert_eq!(
        header_values(&seen, "x-forwarded-proto"),
        ["http"],
        "{seen}"
    );
}

#[tokio::test]
async fn connection_cannot_name_away_the_host() {
    let replica = replica().await;
    let port = router(table(&[("p80-zone.localhost", to(&[replica]))])).await;
    let (head, seen) = raw(
        port,
        "GET / HTTP/1.1\r\nHost: p80-zone.localhost\r\nConnection: Host, X-Forwarded-For, \
         X-Forwarded-Host, X-Forwarded-Proto\r\nX-Forwarded-For: 6.6.6.6\r\n\r\n",
    )
    .await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(
        header_values(&seen, "host"),
        ["p80-zone.localhost"],
        "{seen}"
    );
    assert_eq!(
        header_values(&seen, "x-forwarded-for"),
        ["127.0.0.1"],
        "{seen}"
    );
    assert_eq!(
        header_values(&seen, "x-forwarded-host"),
        ["p80-zone.localhost"],
        "{seen}"
    );
    assert_eq!(
        header_values(&seen, "x-forwarded-proto"),
        ["http"],
        "{seen}"
    );
}

#[tokio::test]
async fn a_request_with_two_host_headers_is_refused() {
    let (one, two) = (replica().await, replica().await);
    let port = router(table(&[
        ("p80-zone.localhost", to(&[one])),
        ("p80-ztwo.localhost", to(&[two])),
    ]))
    .await;
    let (head, body) = raw(
        port,
        "GET / HTTP/1.1\r\nHost: p80-zone.localhost\r\nHost: p80-ztwo.localhost\r\n\r\n",
    )
    .await;
    assert!(head.starts_with("HTTP/1.1 400"), "{head}{body}");
    assert!(body.contains("Host"), "the router's own answer: {body}");
    let (head, _) = raw(port, "GET / HTTP/1.1\r\nHost: p80-zone.localhost\r\n\r\n").await;
    assert!(
        head.starts_with("HTTP/1.1 200"),
        "one Host still routes: {head}"
    );
}

#[tokio::test]
async fn https_refuses_a_host_other_than_the_name_its_handshake_asked_for() {
    let dir = shop_and_apps("misdirected");
    let certificates = Arc::new(Certificates::default());
    assert_eq!(certificates.refresh(dir.path()), Ok(Some(2)));
    let replica = checked_replica(Arc::new(AtomicU16::new(200))).await;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let routes = Routes::default();
    routes.replace(table(&[
        ("shop.example.test", to(&[replica])),
        ("*.apps.example.test", to(&[replica])),
    ]));
    tokio::spawn(serve_tls(
        listener,
        routes,
        certificates,
        TrustedProxies::default(),
        std::future::pending(),
    ));
    let shop = trusting(dir.path(), "shop.example.test", port);
    let url = format!("https://shop.example.test:{port}/");
    for host in [
        "a.apps.example.test".to_string(),
        format!("a.apps.example.test:{port}"),
        "example.test".to_string(),
    ] {
        let answer = shop.get(&url).header("host", &host).send().await.unwrap();
        assert_eq!(answer.status(), 421, "{host} over shop.example.test");
    }
    for host in [
        format!("shop.example.test:{port}"),
        "SHOP.example.test.".to_string(),
    ] {
        let answer = shop.get(&url).header("host", &host).send().await.unwrap();
        assert_eq!(answer.status(), 200, "{host}");
        assert_eq!(answer.text().await.unwrap(), replica.to_string());
    }
    let apps = trusting(dir.path(), "a.apps.example.test", port);
    let answer = apps
        .get(format!("https://a.apps.example.test:{port}/"))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200, "a wildcard's name, asked for by SNI");
    let answer = apps
        .get(format!("https://a.apps.example.test:{port}/"))
        .header("host", "b.apps.example.test")
        .send()
        .await
        .unwrap();
    assert_eq!(
        answer.status(),
        421,
        "another name under the same wildcard opens its own connection"
    );
}
