//! The proxying: hyper's HTTP/1 server on each connection, hyper-util's pooled client toward
//! the replicas.

use crate::{Pick, Routes};
use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderMap, HeaderName, HeaderValue, CONNECTION, CONTENT_TYPE, HOST, UPGRADE};
use hyper::{Request, Response, StatusCode, Uri};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::TcpListener;

type Body = BoxBody<Bytes, hyper::Error>;
type Upstream = Client<HttpConnector, Incoming>;

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

/// Serves `listener` until `stop` ends (connections already open finish on their own).
pub async fn serve(listener: TcpListener, routes: Routes, stop: impl Future<Output = ()>) {
    let upstream: Upstream = Client::builder(TokioExecutor::new()).build_http();
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
        let (routes, upstream) = (routes.clone(), upstream.clone());
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                forward(routes.clone(), upstream.clone(), req, peer)
            });
            let served = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .with_upgrades()
                .await;
            if let Err(e) = served {
                tracing::debug!(error = %e, "a router connection ended");
            }
        });
    }
}

async fn forward(
    routes: Routes,
    upstream: Upstream,
    mut req: Request<Incoming>,
    peer: SocketAddr,
) -> Result<Response<Body>, Infallible> {
    let host = req
        .headers()
        .get(HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_string)
        .or_else(|| req.uri().authority().map(ToString::to_string))
        .unwrap_or_default();
    let backend = match routes.pick(&host) {
        Pick::To(backend) => backend,
        Pick::NotRunning => {
            return Ok(said(
                StatusCode::SERVICE_UNAVAILABLE,
                "the service at this name is not running",
            ))
        }
        Pick::Unknown => {
            return Ok(said(
                StatusCode::NOT_FOUND,
                "no service answers at this name",
            ))
        }
    };
    let path = req.uri().path_and_query().map_or("/", |p| p.as_str());
    let Ok(uri) = format!("http://{}:{}{path}", backend.host, backend.port).parse::<Uri>() else {
        return Ok(said(
            StatusCode::BAD_REQUEST,
            "the request's path is not valid",
        ));
    };
    *req.uri_mut() = uri;
    let upgrading = req.headers().contains_key(UPGRADE);
    drop_hop_headers(req.headers_mut(), upgrading);
    let headers = req.headers_mut();
    let forwarded_for = match headers.get("x-forwarded-for").and_then(|v| v.to_str().ok()) {
        Some(earlier) => format!("{earlier}, {}", peer.ip()),
        None => peer.ip().to_string(),
    };
    if let Ok(value) = HeaderValue::from_str(&forwarded_for) {
        headers.insert("x-forwarded-for", value);
    }
    if let Ok(value) = HeaderValue::from_str(&host) {
        headers.insert("x-forwarded-host", value);
    }
    headers.insert("x-forwarded-proto", HeaderValue::from_static("http"));
    let from_client = upgrading.then(|| hyper::upgrade::on(&mut req));
    let mut answer = match upstream.request(req).await {
        Ok(answer) => answer,
        Err(e) => {
            tracing::debug!(error = %e, backend = %format!("{}:{}", backend.host, backend.port), "a replica did not answer");
            return Ok(said(StatusCode::BAD_GATEWAY, "the service did not answer"));
        }
    };
    if answer.status() == StatusCode::SWITCHING_PROTOCOLS {
        if let Some(from_client) = from_client {
            let from_backend = hyper::upgrade::on(&mut answer);
            tokio::spawn(async move {
                if let (Ok(client), Ok(backend)) = tokio::join!(from_client, from_backend) {
                    let (mut client, mut backend) = (TokioIo::new(client), TokioIo::new(backend));
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut backend).await;
                }
            });
        }
    } else {
        drop_hop_headers(answer.headers_mut(), false);
    }
    Ok(answer.map(BodyExt::boxed))
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
