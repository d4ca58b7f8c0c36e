//! Sockets in front of a Docker daemon that slow it down or drop its calls: faults to test
//! against.

use super::*;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// What a faulty socket does with a piece a client sent.
enum Piece {
    /// Passes it on to the daemon after this wait.
    PassAfter(Duration),
    /// Drops the connection without an answer.
    Drop,
}

/// A Unix socket at `at` in front of the Docker socket `to`, doing with each piece a client
/// sends what `fault` says; the daemon's answers pass as they come. Stops with the test.
fn faulty_socket(
    at: &std::path::Path,
    to: PathBuf,
    fault: impl Fn(&[u8]) -> Piece + Clone + Send + Sync + 'static,
) {
    let listener = tokio::net::UnixListener::bind(at).expect("the faulty socket binds");
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let (to, fault) = (to.clone(), fault.clone());
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
                        match fault(&buffer[..read]) {
                            Piece::Drop => return true,
                            Piece::PassAfter(wait) => tokio::time::sleep(wait).await,
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
                // Dropped, the connection goes with this task: the client reads no answer.
                tokio::select! {
                    dropped = up => if !dropped { down.await },
                    () = &mut down => {}
                }
            });
        }
    });
}

/// A Unix socket at `at` in front of the Docker socket `to` that holds each piece a client
/// sends for the delay `delay` holds (in milliseconds, changeable while it runs): a daemon that
/// answers slowly. Stops with the test.
pub fn slow_socket(at: &std::path::Path, to: PathBuf, delay: Arc<AtomicU64>) {
    faulty_socket(at, to, move |_| {
        Piece::PassAfter(Duration::from_millis(delay.load(Ordering::Relaxed)))
    });
}

/// A Unix socket at `at` in front of the Docker socket `to` that drops the connection of the
/// next `refusals` calls that create a container, without an answer (a daemon restarting
/// under the call), and passes every other call through. Stops with the test.
pub fn refusing_socket(at: &std::path::Path, to: PathBuf, refusals: Arc<AtomicUsize>) {
    faulty_socket(at, to, move |piece| {
        let first_line = piece.split(|b| *b == b'\r').next().unwrap_or_default();
        let creates = first_line.starts_with(b"POST ")
            && String::from_utf8_lossy(first_line).contains("/containers/create");
        let refused = creates
            && refusals
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
        if refused {
            Piece::Drop
        } else {
            Piece::PassAfter(Duration::ZERO)
        }
    });
}
