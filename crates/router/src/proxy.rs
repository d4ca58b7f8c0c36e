//! The proxying: hyper's HTTP/1 server on each connection (behind rustls for HTTPS),
//! hyper-util's pooled client toward the replicas.

use crate::acme::CHALLENGE_PROTOCOL;
use crate::{Certificates, Pick, Routes, STICKY_COOKIE};
use bytes::Bytes;
use domain::model::Backend;
use http_body_util::{combinators::BoxBody, BodyExt, Empty, Full};
use hyper::body::{Body as _, Incoming};
use hyper::header::{
    HeaderMap, HeaderName, HeaderValue, CONNECTION, CONTENT_TYPE, COOKIE, HOST, SET_COOKIE, UPGRADE,
};
use hyper::{Request, Response, StatusCode, Uri};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

type Body = BoxBody<Bytes, hyper::Error>;
type Upstream = Client<HttpConnector, Body>;

/// Headers of one hop, which a proxy does not pass on (RFC 9110, 7.6.1), besides those its
/// `Connection` header names. `Connection` and `Upgrade` do go on for an upgrade.
const HOP_BY_HOP: [&str; 7] = [
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "proxy-authenticate",
    "proxy-authorization",
];

/// How long a client has to finish its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves plain HTTP on `listener` until `stop` ends (connections already open finish on
/// their own).
pub async fn serve(listener: TcpListener, routes: Routes, stop: impl Future<Output = ()>) {
    let upstream = upstream();
    accept(listener, stop, move |stream, peer| {
        connection(stream, peer, "http", routes.clone(), upstream.clone())
    })
    .await;
}

/// Serves HTTPS on `listener`, each connection with the certificate its SNI name asks for
/// (a name without one: the handshake fails), until `stop` ends.
pub async fn serve_tls(
    listener: TcpListener,
    routes: Routes,
    certificates: Arc<Certificates>,
    stop: impl Future<Output = ()>,
) -> Result<(), String> {
    let acme = certificates.acme().is_some();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("cannot set up TLS: {e}"))?
        .with_no_client_auth()
        .with_cert_resolver(certificates);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    if acme {
        config.alpn_protocols.push(CHALLENGE_PROTOCOL.to_vec());
    }
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let upstream = upstream();
    accept(listener, stop, move |stream, peer| {
        let (acceptor, routes, upstream) = (acceptor.clone(), routes.clone(), upstream.clone());
        async move {
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                // An ACME server's challenge ends with its handshake: no request follows.
                Ok(Ok(tls)) if tls.get_ref().1.alpn_protocol() == Some(CHALLENGE_PROTOCOL) => {}
                Ok(Ok(tls)) => connection(tls, peer, "https", routes, upstream).await,
                Ok(Err(e)) => tracing::debug!(error = %e, "a TLS handshake failed"),
                Err(_) => tracing::debug!("a TLS handshake took too long"),
            }
        }
    })
    .await;
    Ok(())
}

fn upstream() -> Upstream {
    Client::builder(TokioExecutor::new()).build_http()
}

/// Accepts connections until `stop` ends, each served by `serve` on a task of its own.
async fn accept<F, S>(listener: TcpListener, stop: impl Future<Output = ()>, serve: S)
where
    S: Fn(TcpStream, SocketAddr) -> F,
    F: Future<Output = ()> + Send + 'static,
{
    tokio::pin!(stop);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    // Out of descriptors, most often: wait rather than spin.
                    tracing::warn!(error = %e, "the router could not accept a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut stop => return,
        };
        tokio::spawn(serve(stream, peer));
    }
}

/// Serves one client connection with hyper's HTTP/1 server.
async fn connection<IO>(
    io: IO,
    peer: SocketAddr,
    proto: &'static str,
    routes: Routes,
    upstream: Upstream,
) where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |req| {
        forward(routes.clone(), upstream.clone(), req, peer, proto)
    });
    let served = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(io), service)
        .with_upgrades()
        .await;
    if let Err(e) = served {
        tracing::debug!(error = %e, "a router connection ended");
    }
}

/// Sends a request on to a replica of its route. A replica that refuses the connection is
/// left out, and a request without a body (which it cannot have read) goes to another.
async fn forward(
    routes: Routes,
    upstream: Upstream,
    mut req: Request<Incoming>,
    peer: SocketAddr,
    proto: &'static str,
) -> Result<Response<Body>, Infallible> {
    let host = req
        .headers()
        .get(HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_string)
        .or_else(|| req.uri().authority().map(ToString::to_string))
        .unwrap_or_default();
    let cookie = sticky_cookie(req.headers());
    let path = req
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    let upgrading = req.headers().contains_key(UPGRADE);
    let from_client = upgrading.then(|| hyper::upgrade::on(&mut req));
    add_forwarded(req.headers_mut(), &host, peer, proto, upgrading);
    let bodiless = req.body().is_end_stream();
    let (parts, body) = req.into_parts();
    let mut body = Some(body.boxed());
    let mut tried: Vec<Backend> = Vec::new();
    loop {
        let (backend, stick) = match routes.pick(&host, cookie.as_deref(), &tried) {
            Pick::To { backend, stick } => (backend, stick),
            // Every replica left refused the connection.
            Pick::Unhealthy | Pick::Unknown if !tried.is_empty() => {
                return Ok(said(StatusCode::BAD_GATEWAY, "the service did not answer"))
            }
            Pick::NotRunning => {
                return Ok(said(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the service at this name is not running",
                ))
            }
            Pick::Unhealthy => {
                return Ok(said(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "no replica of the service at this name passes its checks",
                ))
            }
            Pick::Unknown => {
                return Ok(said(
                    StatusCode::NOT_FOUND,
                    "no service answers at this name",
                ))
            }
        };
        let Ok(uri) = format!("http://{}:{}{path}", backend.host, backend.port).parse::<Uri>()
        else {
            return Ok(said(
                StatusCode::BAD_REQUEST,
                "the request's path is not valid",
            ));
        };
        let mut out = Request::new(body.take().unwrap_or_else(nothing));
        *out.method_mut() = parts.method.clone();
        *out.uri_mut() = uri;
        *out.version_mut() = parts.version;
        *out.headers_mut() = parts.headers.clone();
        let mut answer = match upstream.request(out).await {
            Ok(answer) => answer,
            Err(e) => {
                tracing::debug!(error = %e, backend = %format!("{}:{}", backend.host, backend.port), "a replica did not answer");
                if e.is_connect() {
                    routes.refused(&backend);
                    if bodiless {
                        tried.push(backend);
                        continue;
                    }
                }
                return Ok(said(StatusCode::BAD_GATEWAY, "the service did not answer"));
            }
        };
        if answer.status() == StatusCode::SWITCHING_PROTOCOLS {
            if let Some(from_client) = from_client {
                let from_backend = hyper::upgrade::on(&mut answer);
                tokio::spawn(async move {
                    if let (Ok(client), Ok(backend)) = tokio::join!(from_client, from_backend) {
                        let (mut client, mut backend) =
                            (TokioIo::new(client), TokioIo::new(backend));
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut backend).await;
                    }
                });
            }
        } else {
            drop_hop_headers(answer.headers_mut(), false);
        }
        if let Some(token) = stick {
            let cookie = format!("{STICKY_COOKIE}={token}; Path=/; HttpOnly; SameSite=Lax");
            if let Ok(value) = HeaderValue::from_str(&cookie) {
                answer.headers_mut().append(SET_COOKIE, value);
            }
        }
        return Ok(answer.map(BodyExt::boxed));
    }
}

fn nothing() -> Body {
    Empty::new().map_err(|never| match never {}).boxed()
}

/// The replica a sticky route's cookie names, if the request carries one.
fn sticky_cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == STICKY_COOKIE)
        .map(|(_, value)| value.to_string())
}

/// Drops the headers of one hop and adds X-Forwarded-For, -Host and -Proto.
fn add_forwarded(
    headers: &mut HeaderMap,
    host: &str,
    peer: SocketAddr,
    proto: &'static str,
    upgrading: bool,
) {
    drop_hop_headers(headers, upgrading);
    let forwarded_for = match headers.get("x-forwarded-for").and_then(|v| v.to_str().ok()) {
        Some(earlier) => format!("{earlier}, {}", peer.ip()),
        None => peer.ip().to_string(),
    };
    if let Ok(value) = HeaderValue::from_str(&forwarded_for) {
        headers.insert("x-forwarded-for", value);
    }
    if let Ok(value) = HeaderValue::from_str(host) {
        headers.insert("x-forwarded-host", value);
    }
    headers.insert("x-forwarded-proto", HeaderValue::from_static(proto));
}

/// Removes the headers of one hop: the fixed ones and those `Connection` names; `Connection`
/// and `Upgrade` stay when `upgrading`.
fn drop_hop_headers(headers: &mut HeaderMap, upgrading: bool) {
    let named: Vec<HeaderName> = headers
        .get_all(CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .filter(|name| !(upgrading && *name == UPGRADE))
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in HOP_BY_HOP {
        headers.remove(name);
    }
    if !upgrading {
        headers.remove(CONNECTION);
        headers.remove(UPGRADE);
    }
}

/// The router's own answer.
fn said(status: StatusCode, text: &'static str) -> Response<Body> {
    let body = Full::new(Bytes::from_static(text.as_bytes()))
        .map_err(|never| match never {})
        .boxed();
    let mut answer = Response::new(body);
    *answer.status_mut() = status;
    answer.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    answer
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_hop_headers_stay_behind_unless_an_upgrade_needs_them() {
        let mut headers = HeaderMap::new();
        headers.insert(
            CONNECTION,
            HeaderValue::from_static("keep-alive, x-secret-hop"),
        );
        headers.insert("x-secret-hop", HeaderValue::from_static("1"));
        headers.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        headers.insert("x-kept", HeaderValue::from_static("1"));
        drop_hop_headers(&mut headers, false);
        assert_eq!(headers.len(), 1, "{headers:?}");
        assert!(headers.contains_key("x-kept"));

        let mut headers = HeaderMap::new();
        headers.insert(CONNECTION, HeaderValue::from_static("Upgrade"));
        headers.insert(UPGRADE, HeaderValue::from_static("websocket"));
        drop_hop_headers(&mut headers, true);
        assert!(headers.contains_key(CONNECTION) && headers.contains_key(UPGRADE));
    }
}
