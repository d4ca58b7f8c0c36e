//! The router in front of replicas served in this process, on 127.0.0.1: a request reaches the
//! replica its Host header names with the forwarded headers, an upgrade passes bytes both ways,
//! and names it does not serve or whose service is stopped are answered by the router.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use capstan_router::{serve, Routes};
use domain::model::{Backend, RouteTable};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A replica: answers one request per connection with what it was sent (the request's head), or
/// for an upgrade, 101 and then echoes every byte.
async fn replica() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if stream.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
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
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let routes = Routes::default();
    routes.replace(table);
    tokio::spawn(serve(listener, routes, std::future::pending()));
    port
}

fn backend(port: u16) -> Backend {
    Backend {
        host: "127.0.0.1".into(),
        port,
    }
}

#[tokio::test]
async fn requests_reach_the_replica_their_name_routes_to_and_upgrades_pass_through() {
    let (one, two) = (replica().await, replica().await);
    let mut table = RouteTable::default();
    table
        .routes
        .insert("p80-zone.localhost".into(), vec![backend(one)]);
    table
        .routes
        .insert("p80-ztwo.localhost".into(), vec![backend(two)]);
    table
        .routes
        .insert("p80-zstopped.localhost".into(), Vec::new());
    let port = router(table).await;
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
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(
            stream.read(&mut byte).await.unwrap(),
            1,
            "the router hung up"
        );
        head.push(byte[0]);
    }
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
async fn a_replica_that_does_not_answer_is_a_bad_gateway() {
    let closed = {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        listener.local_addr().unwrap().port()
    };
    let mut table = RouteTable::default();
    table
        .routes
        .insert("p80-zgone.localhost".into(), vec![backend(closed)]);
    let port = router(table).await;
    let answer = reqwest::Client::new()
        .get(format!("http://127.0.0.1:{port}/"))
        .header("host", "p80-zgone.localhost")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 502);
}
