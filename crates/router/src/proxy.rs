//! The proxying: hyper's HTTP/1 server on each connection (behind rustls for HTTPS),
//! hyper-util's pooled client toward the replicas.

use crate::acme::CHALLENGE_PROTOCOL;
use crate::{Certificates, Pick, Routes, STICKY_COOKIE};
use bytes::Bytes;
use domain::ip_network::IpNetwork;
use domain::model::{host_name_of, Backend};
use http_body_util::{combinators::BoxBody, BodyExt, Empty, Full};
use hyper::body::{Body as _, Incoming};
use hyper::header::{
    HeaderMap, HeaderName, HeaderValue, CONNECTION, CONTENT_TYPE, COOKIE, FORWARDED, HOST,
    SET_COOKIE, UPGRADE,
};
use hyper::{Request, Response, StatusCode, Uri};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
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

/// The client's address and those of the proxies before the router, as de facto standard.
const X_FORWARDED_FOR: &str = "x-forwarded-for";

/// How long a client has to finish its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves plain HTTP on `listener` until `stop` ends (connections already open finish on
/// their own). Only peers in `trusted` have the forwarded headers they send passed on.
pub async fn serve(
    listener: TcpListener,
    routes: Routes,
    trusted: TrustedProxies,
    stop: impl Future<Output = ()>,
) {
    let upstream = upstream();
    accept(listener, stop, move |stream, peer| {
        let caller = Caller {
            peer,
            proto: "http",
            sni: None,
            trusted: trusted.trusts(peer.ip()),
        };
        connection(stream, caller, routes.clone(), upstream.clone())
    })
    .await;
}

/// Serves HTTPS on `listener`, each connection with the certificate its SNI name asks for
/// (a name without one: the handshake fails), until `stop` ends. Only peers in `trusted`
/// have the forwarded headers they send passed on.
pub async fn serve_tls(
    listener: TcpListener,
    routes: Routes,
    certificates: Arc<Certificates>,
    trusted: TrustedProxies,
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
        let trusted = trusted.trusts(peer.ip());
        async move {
            let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(e)) => return tracing::debug!(error = %e, "a TLS handshake failed"),
                Err(_) => return tracing::debug!("a TLS handshake took too long"),
            };
            let (_, session) = tls.get_ref();
            // An ACME server's challenge ends with its handshake: no request follows.
            if session.alpn_protocol() == Some(CHALLENGE_PROTOCOL) {
                return;
            }
            // The certificate was chosen by this name: the requests must be for it too. Without
            // one no certificate is chosen, so this is only in case that ever changes.
            let Some(sni) = session.server_name().map(Arc::<str>::from) else {
                return tracing::debug!("a TLS connection without an SNI name");
            };
            let caller = Caller {
                peer,
                proto: "https",
                sni: Some(sni),
                trusted,
            };
            connection(tls, caller, routes, upstream).await;
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

/// What a connection tells of the requests it carries.
#[derive(Debug, Clone)]
struct Caller {
    peer: SocketAddr,
    /// `http` or `https`: what X-Forwarded-Proto says.
    proto: &'static str,
    /// The name the client's TLS handshake asked for (SNI); none over plain HTTP.
    sni: Option<Arc<str>>,
    /// Whether the peer is a proxy the operator trusts with the forwarded headers it sends.
    trusted: bool,
}

/// Serves one client connection with hyper's HTTP/1 server.
async fn connection<IO>(io: IO, caller: Caller, routes: Routes, upstream: Upstream)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |req| {
        forward(routes.clone(), upstream.clone(), req, caller.clone())
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
    caller: Caller,
) -> Result<Response<Body>, Infallible> {
    let host = host_of(&req);
    if let Some((status, why)) = refusal(req.headers(), &host, caller.sni.as_deref()) {
        return Ok(said(status, why));
    }
    let cookie = sticky_cookie(req.headers());
    let path = req
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    let upgrading = req.headers().contains_key(UPGRADE);
    let from_client = upgrading.then(|| hyper::upgrade::on(&mut req));
    add_forwarded(req.headers_mut(), &host, &caller, upgrading);
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

/// The name a request is for: its Host header, else its URI's authority (absolute form).
fn host_of(req: &Request<Incoming>) -> String {
    req.headers()
        .get(HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_string)
        .or_else(|| req.uri().authority().map(ToString::to_string))
        .unwrap_or_default()
}

/// Why the router answers a request itself instead of routing it, if it does.
fn refusal(
    headers: &HeaderMap,
    host: &str,
    sni: Option<&str>,
) -> Option<(StatusCode, &'static str)> {
    // The router routes by the first; a replica (or a proxy behind it) may believe the other
    // (RFC 9112, 3.2: a server answers 400).
    if headers.get_all(HOST).iter().nth(1).is_some() {
        return Some((
            StatusCode::BAD_REQUEST,
            "a request carries one Host header, not several",
        ));
    }
    // The certificate vouched for the handshake's name only: a request for another on the
    // same connection (a reused connection, or a name hidden behind an innocent one) is sent
    // back to open its own (RFC 9110, 15.5.20).
    if let Some(sni) = sni {
        if host_name_of(host) != sni.trim_end_matches('.').to_ascii_lowercase() {
            return Some((
                StatusCode::MISDIRECTED_REQUEST,
                "this connection's TLS name is not the request's host",
            ));
        }
    }
    None
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

/// Drops the headers of one hop and sets X-Forwarded-For, -Host and -Proto: after the drop,
/// so that a `Connection` header cannot name them away. What a peer the operator does not
/// trust says of earlier hops (X-Forwarded-For, Forwarded) is dropped: anyone can write it,
/// and replicas take it for their client's address.
fn add_forwarded(headers: &mut HeaderMap, host: &str, caller: &Caller, upgrading: bool) {
    drop_hop_headers(headers, upgrading);
    let forwarded_for = forwarded_for(headers, caller);
    if !caller.trusted {
        headers.remove(FORWARDED);
        headers.remove("x-real-ip");
    }
    if let Ok(value) = HeaderValue::from_str(&forwarded_for) {
        headers.insert(X_FORWARDED_FOR, value);
    }
    if let Ok(value) = HeaderValue::from_str(host) {
        headers.insert("x-forwarded-host", value);
    }
    headers.insert("x-forwarded-proto", HeaderValue::from_static(caller.proto));
}

/// X-Forwarded-For as the replica gets it: the peer's address, after the addresses a trusted
/// proxy says came before it (every X-Forwarded-For it sent, in order).
fn forwarded_for(headers: &HeaderMap, caller: &Caller) -> String {
    let peer = caller.peer.ip().to_canonical().to_string();
    if !caller.trusted {
        return peer;
    }
    headers
        .get_all(X_FORWARDED_FOR)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .chain([peer.as_str()])
        .collect::<Vec<&str>>()
        .join(", ")
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
        // Host is not one hop's: without it the replica would be sent its own address.
        .filter(|name| *name != HOST)
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

/// The proxies in front of the router whose forwarded headers (X-Forwarded-For, Forwarded)
/// are passed on: addresses and networks. Empty (the default): nobody's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies {
    networks: Vec<IpNetwork>,
}

impl TrustedProxies {
    /// Reads a list of addresses (`127.0.0.1`, `::1`) and networks (`10.0.0.0/8`,
    /// `fd00::/8`), separated by commas or spaces. The error names the entry at fault.
    pub fn parse(list: &str) -> Result<Self, String> {
        let networks = list
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|entry| !entry.is_empty())
            .map(|entry| {
                IpNetwork::parse(entry).ok_or_else(|| {
                    format!("'{entry}' is neither an IP address nor a network (address/prefix)")
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { networks })
    }

    /// Whether the peer at `ip` is one of the trusted proxies (a dual-stack listener sees IPv4
    /// peers as IPv4-mapped IPv6 addresses: they count as themselves).
    pub fn trusts(&self, ip: IpAddr) -> bool {
        self.networks.iter().any(|n| n.contains(ip))
    }

    pub fn is_empty(&self) -> bool {
        self.networks.is_empty()
    }
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

    fn caller(peer: &str, trusted: bool, sni: Option<&str>) -> Caller {
        Caller {
            peer: SocketAddr::new(peer.parse().unwrap(), 40000),
            proto: "https",
            sni: sni.map(Arc::from),
            trusted,
        }
    }

    fn values(headers: &HeaderMap, name: &str) -> Vec<String> {
        headers
            .get_all(name)
            .iter()
            .map(|v| v.to_str().unwrap().to_string())
            .collect()
    }

    /// What a client claims of earlier hops.
    fn claiming() -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(HOST, HeaderValue::from_static("a.example"));
        headers.append(X_FORWARDED_FOR, HeaderValue::from_static("6.6.6.6"));
        headers.append(
            X_FORWARDED_FOR,
            HeaderValue::from_static("7.7.7.7, 8.8.8.8"),
        );
        headers.insert(FORWARDED, HeaderValue::from_static("for=6.6.6.6"));
        headers.insert("x-real-ip", HeaderValue::from_static("6.6.6.6"));
        headers.insert("x-forwarded-host", HeaderValue::from_static("evil.example"));
        headers.insert("x-forwarded-proto", HeaderValue::from_static("https"));
        headers
    }

    #[test]
    fn a_client_s_forwarded_headers_are_replaced_by_what_the_router_saw() {
        let mut headers = claiming();
        let peer = caller("203.0.113.9", false, None);
        add_forwarded(
            &mut headers,
            "a.example",
            &Caller {
                proto: "http",
                ..peer
            },
            false,
        );
        assert_eq!(values(&headers, X_FORWARDED_FOR), ["203.0.113.9"]);
        assert!(!headers.contains_key(FORWARDED), "{headers:?}");
        assert!(!headers.contains_key("x-real-ip"), "{headers:?}");
        assert_eq!(values(&headers, "x-forwarded-host"), ["a.example"]);
        assert_eq!(values(&headers, "x-forwarded-proto"), ["http"]);
        assert_eq!(values(&headers, "host"), ["a.example"]);
    }

    #[test]
    fn a_trusted_proxy_s_forwarded_headers_are_kept_and_the_peer_appended() {
        let mut headers = claiming();
        add_forwarded(
            &mut headers,
            "a.example",
            &caller("10.1.2.3", true, None),
            false,
        );
        assert_eq!(
            values(&headers, X_FORWARDED_FOR),
            ["6.6.6.6, 7.7.7.7, 8.8.8.8, 10.1.2.3"]
        );
        assert_eq!(values(&headers, FORWARDED.as_str()), ["for=6.6.6.6"]);
        assert_eq!(values(&headers, "x-forwarded-host"), ["a.example"]);
        // An IPv4 peer on a dual-stack listener is named as IPv4.
        let mut headers = HeaderMap::new();
        add_forwarded(
            &mut headers,
            "a",
            &caller("::ffff:10.1.2.3", true, None),
            false,
        );
        assert_eq!(values(&headers, X_FORWARDED_FOR), ["10.1.2.3"]);
    }

    #[test]
    fn connection_cannot_name_away_the_host_or_the_forwarded_headers() {
        let mut headers = HeaderMap::new();
        headers.insert(HOST, HeaderValue::from_static("a.example"));
        headers.insert(
            CONNECTION,
            HeaderValue::from_static("Host, X-Forwarded-For, X-Forwarded-Host, X-Forwarded-Proto"),
        );
        headers.insert(X_FORWARDED_FOR, HeaderValue::from_static("6.6.6.6"));
        add_forwarded(
            &mut headers,
            "a.example",
            &caller("127.0.0.1", false, None),
            false,
        );
        assert_eq!(values(&headers, "host"), ["a.example"]);
        assert_eq!(values(&headers, X_FORWARDED_FOR), ["127.0.0.1"]);
        assert_eq!(values(&headers, "x-forwarded-host"), ["a.example"]);
        assert_eq!(values(&headers, "x-forwarded-proto"), ["https"]);
        assert!(!headers.contains_key(CONNECTION));
    }

    #[test]
    fn two_host_headers_and_a_host_other_than_the_tls_name_are_refused() {
        let mut one = HeaderMap::new();
        one.insert(HOST, HeaderValue::from_static("a.example"));
        let mut two = one.clone();
        two.append(HOST, HeaderValue::from_static("b.example"));
        assert_eq!(refusal(&one, "a.example", None), None);
        assert_eq!(
            refusal(&two, "a.example", None).map(|r| r.0),
            Some(StatusCode::BAD_REQUEST)
        );
        assert_eq!(
            refusal(&two, "a.example", Some("a.example")).map(|r| r.0),
            Some(StatusCode::BAD_REQUEST)
        );
        for (host, sni) in [
            ("a.example", "a.example"),
            ("A.Example:8443", "a.example"),
            ("a.example.", "A.EXAMPLE"),
            ("a.example", "a.example."),
        ] {
            assert_eq!(refusal(&one, host, Some(sni)), None, "{host} over {sni}");
        }
        for (host, sni) in [
            ("b.example", "a.example"),
            ("", "a.example"),
            ("b.a.example", "a.example"),
        ] {
            assert_eq!(
                refusal(&one, host, Some(sni)).map(|r| r.0),
                Some(StatusCode::MISDIRECTED_REQUEST),
                "{host} over {sni}"
            );
        }
    }

    #[test]
    fn trusted_proxies_are_addresses_and_networks() {
        let trusted =
            TrustedProxies::parse(" 10.0.0.0/8, 127.0.0.1 fd00::/8,::1,192.168.1.7/24").unwrap();
        let trusts = |ip: &str| trusted.trusts(ip.parse().unwrap());
        for ip in [
            "10.0.0.1",
            "10.255.255.255",
            "127.0.0.1",
            "::ffff:127.0.0.1",
            "fd12::1",
            "::1",
            "192.168.1.200",
        ] {
            assert!(trusts(ip), "{ip}");
        }
        for ip in [
            "11.0.0.1",
            "127.0.0.2",
            "fe80::1",
            "::2",
            "192.168.2.1",
            "::ffff:11.0.0.1",
        ] {
            assert!(!trusts(ip), "{ip}");
        }
        let mapped = TrustedProxies::parse("::ffff:10.0.0.0/104").unwrap();
        assert!(mapped.trusts("10.9.9.9".parse().unwrap()));
        assert!(!mapped.trusts("11.0.0.1".parse().unwrap()));
        let every = TrustedProxies::parse("0.0.0.0/0").unwrap();
        assert!(every.trusts("203.0.113.9".parse().unwrap()));
        assert!(!every.trusts("2001:db8::1".parse().unwrap()));

        let nobody = TrustedProxies::parse("").unwrap();
        assert!(nobody.is_empty() && !nobody.trusts("127.0.0.1".parse().unwrap()));
        assert_eq!(
            TrustedProxies::parse(" , ").unwrap(),
            TrustedProxies::default()
        );
        for bad in [
            "10.0.0.0/33",
            "::/129",
            "localhost",
            "10.0.0/8",
            "10.0.0.0/",
            "10.0.0.0/x",
            "::ffff:10.0.0.0/95",
        ] {
            let why = TrustedProxies::parse(&format!("127.0.0.1,{bad}")).unwrap_err();
            assert!(why.contains(&format!("'{bad}'")), "{why}");
        }
    }
}
