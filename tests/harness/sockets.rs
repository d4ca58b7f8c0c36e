//! Sockets in front of a Docker daemon that slow it down or drop its calls: faults to test
//! against.

use super::*;

/// A Unix socket at `at` in front of the Docker socket `to` that holds each piece a client
/// sends for the delay `delay` holds (in milliseconds, changeable while it runs): a daemon that
/// answers slowly. Stops with the test.
pub fn slow_socket(
    at: &std::path::Path,
    to: PathBuf,
    delay: std::sync::Arc<std::sync::atomic::AtomicU64>,
) {
    let listener = tokio::net::UnixListener::bind(at).expect("the slow socket binds");
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let (to, delay) = (to.clone(), delay.clone());
            tokio::spawn(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let Ok(daemon) = tokio::net::UnixStream::connect(&to).await else {
                    return;
                };
                let (mut from_client, mut to_client) = client.into_split();
                let (mut from_daemon, mut to_daemon) = daemon.into_split();
                let up = async move {
                    let mut buffer = vec![0u8; 64 * 1024];
                    loop {
                        let read = match from_client.read(&mut buffer).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        let wait = delay.load(std::sync::atomic::Ordering::Relaxed);
                        tokio::time::sleep(Duration::from_millis(wait)).await;
                        if to_daemon.write_all(&buffer[..read]).await.is_err() {
                            break;
                        }
                    }
                    let _ = to_daemon.shutdown().await;
                };
                let down = async move {
                    let _ = tokio::io::copy(&mut from_daemon, &mut to_client).await;
                };
                tokio::join!(up, down);
            });
        }
    });
}

/// A Unix socket at `at` in front of the Docker socket `to` that drops the connection of the
/// next `refusals` calls that create a container, without an answer (a daemon restarting
/// under the call), and passes every other call through. Stops with the test.
pub fn refusing_socket(
    at: &std::path::Path,
    to: PathBuf,
    refusals: std::sync::Arc<std::sync::atomic::AtomicUsize>,
) {
    use std::sync::atomic::Ordering;
    let listener = tokio::net::UnixListener::bind(at).expect("the refusing socket binds");
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let (to, refusals) = (to.clone(), refusals.clone());
            tokio::spawn(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let Ok(daemon) = tokio::net::UnixStream::connect(&to).await else {
                    return;
                };
                let (mut from_client, mut to_client) = client.into_split();
                let (mut from_daemon, mut to_daemon) = daemon.into_split();
                let refused = |piece: &[u8]| {
                    let first_line = piece.split(|b| *b == b'\r').next().unwrap_or_default();
                    let creates = first_line.starts_with(b"POST ")
                        && String::from_utf8_lossy(first_line).contains("/containers/create");
                    creates
                        && refusals
                            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                            .is_ok()
                };
                let up = async move {
                    let mut buffer = vec![0u8; 64 * 1024];
                    loop {
                        let read = match from_client.read(&mut buffer).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        if refused(&buffer[..read]) {
                            return true;
                        }
                        if to_daemon.write_all(&buffer[..read]).await.is_err() {
                            break;
                        }
                    }
                    let _ = to_daemon.shutdown().await;
                    false
                };
                let down = async move {
                    let _ = tokio::io::copy(&mut from_daemon, &mut to_client).await;
                };
                tokio::pin!(down);
                tokio::select! {
                    refused = up => if !refused { down.await },
                    () = &mut down => {}
                }
            });
        }
    });
}
