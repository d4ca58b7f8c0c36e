//! The webhook sender: one HTTP POST per attempt, with a short timeout, no redirects, no
//! proxy, and (unless allowed) no private, loopback or link-local target, whether the URL
//! names the address or a host name resolves to it.

use async_trait::async_trait;
use domain::model::RESPONSE_BODY_CAP;
use domain::outbound::{Answer, Outgoing, WebhookSender};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Whether an address is one a webhook may reach from a server: not loopback, private,
/// link-local (cloud metadata lives there), shared (CGNAT), multicast or unspecified.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => public_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => public_v4(v4),
            None => public_v6(v6),
        },
    }
}

fn public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0
        || (a == 100 && (64..128).contains(&b))
        || (a == 192 && b == 0 && c == 0)
        || (a == 198 && (b == 18 || b == 19))
        || a >= 240)
}

fn public_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    let v4 = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
    // Addresses that carry an IPv4 address reach it: NAT64 (64:ff9b::/96, 64:ff9b:1::/48),
    // 6to4 (2002::/16) and the deprecated IPv4-compatible form (::a.b.c.d).
    let embedded = match s {
        [0x64, 0xff9b, 0, 0, 0, 0, hi, lo] => Some(v4(hi, lo)),
        [0x64, 0xff9b, 1, ..] => Some(v4(s[6], s[7])),
        [0x2002, hi, lo, ..] => Some(v4(hi, lo)),
        [0, 0, 0, 0, 0, 0, hi, lo] if hi != 0 => Some(v4(hi, lo)),
        _ => None,
    };
    if let Some(v4) = embedded {
        return public_v4(v4);
    }
    !(ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || (s[0] & 0xfe00) == 0xfc00
        || (s[0] & 0xffc0) == 0xfe80
        // Site-local (deprecated), and Teredo, which tunnels to an address it hides.
        || (s[0] & 0xffc0) == 0xfec0
        || (s[0] == 0x2001 && s[1] == 0))
}

/// Resolves with the system's resolver and keeps only public addresses: a name that resolves
/// to nothing else is refused before any connection is made.
struct PublicOnly;

impl Resolve for PublicOnly {
    fn resolve(&self, name: Name) -> Resolving {
        Box::pin(async move {
            let host = name.as_str().to_string();
            let found = tokio::task::spawn_blocking(move || {
                (host.as_str(), 0)
                    .to_socket_addrs()
                    .map(|a| a.collect::<Vec<SocketAddr>>())
            })
            .await
            .map_err(|e| -> Box<dyn std::error::Error + Send + Sync> { Box::new(e) })??;
            let public: Vec<SocketAddr> = found.into_iter().filter(|a| is_public(a.ip())).collect();
            if public.is_empty() {
                return Err(Refused.into());
            }
            Ok(Box::new(public.into_iter()) as Addrs)
        })
    }
}

#[derive(Debug)]
struct Refused;

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(
            "the target resolves to a private, loopback or link-local address \
             (set CAPSTAN_WEBHOOK_ALLOW_PRIVATE to allow it)",
        )
    }
}

impl std::error::Error for Refused {}

pub struct HttpSender {
    client: reqwest::Client,
    allow_private: bool,
}

impl HttpSender {
    /// A sender whose attempts give up after `timeout`; `allow_private` lets it reach
    /// private and loopback addresses (tests, receivers on the same network).
    pub fn new(timeout: Duration, allow_private: bool) -> Result<Self, String> {
        let mut builder = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .user_agent(concat!("Capstan-Webhooks/", env!("CARGO_PKG_VERSION")));
        if !allow_private {
            builder = builder.dns_resolver(Arc::new(PublicOnly));
        }
        let client = builder.build().map_err(|e| e.to_string())?;
        Ok(Self {
            client,
            allow_private,
        })
    }

    /// Why `url` may not be sent to, when it names a refused address itself (a host name is
    /// checked when it resolves).
    fn refused(&self, url: &reqwest::Url) -> Option<String> {
        if self.allow_private {
            return None;
        }
        let ip = match url.host()? {
            url::Host::Ipv4(v4) => IpAddr::V4(v4),
            url::Host::Ipv6(v6) => IpAddr::V6(v6),
            url::Host::Domain(d) if d.eq_ignore_ascii_case("localhost") => {
                return Some(Refused.to_string())
            }
            url::Host::Domain(_) => return None,
        };
        (!is_public(ip)).then(|| Refused.to_string())
    }
}

/// The error of a failed request, with its causes (reqwest's own message says little).
fn describe(e: &reqwest::Error) -> String {
    let mut text = if e.is_timeout() {
        "timed out".to_string()
    } else if e.is_connect() {
        "could not connect".to_string()
    } else {
        "request failed".to_string()
    };
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[async_trait]
impl WebhookSender for HttpSender {
    async fn send(&self, request: Outgoing) -> Answer {
        let started = Instant::now();
        let failed = |error: String| Answer {
            error: Some(error),
            duration: started.elapsed(),
            ..Answer::default()
        };
        let url = match reqwest::Url::parse(&request.url) {
            Ok(u) => u,
            Err(e) => return failed(format!("invalid target URL: {e}")),
        };
        if let Some(why) = self.refused(&url) {
            return failed(why);
        }
        let mut builder = self.client.post(url).body(request.body);
        for (name, value) in request.headers {
            builder = builder.header(name, value);
        }
        let mut response = match builder.send().await {
            Ok(r) => r,
            Err(e) => return failed(describe(&e)),
        };
        let status = response.status().as_u16();
        // Only the start of the body is kept; the rest is not read.
        let mut body: Vec<u8> = Vec::new();
        while body.len() < RESPONSE_BODY_CAP {
            match response.chunk().await {
                Ok(Some(chunk)) => body.extend_from_slice(&chunk),
                Ok(None) | Err(_) => break,
            }
        }
        body.truncate(RESPONSE_BODY_CAP);
        Answer {
            status: Some(status),
            body: Some(String::from_utf8_lossy(&body).into_owned()),
            error: None,
            duration: started.elapsed(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wiremock::matchers::{header, method};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    fn outgoing(url: String) -> Outgoing {
        Outgoing {
            url,
            headers: vec![("webhook-id", "d1".into())],
            body: b"{}".to_vec(),
        }
    }

    #[test]
    fn private_and_loopback_addresses_are_not_public() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::",
            "::127.0.0.1",
            "64:ff9b::10.0.0.1",
            "64:ff9b:1::a00:1",
            "2002:a00:1::1",
            "2001:0:4136:e378::1",
            "fec0::1",
            "198.18.0.1",
        ] {
            assert!(!is_public(ip.parse().unwrap()), "{ip}");
        }
        for ip in [
            "93.184.216.34",
            "8.8.8.8",
            "2606:4700::1111",
            "64:ff9b::808:808",
            "2002:808:808::1",
        ] {
            assert!(is_public(ip.parse().unwrap()), "{ip}");
        }
    }

    #[tokio::test]
    async fn a_loopback_target_is_refused_unless_allowed() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(header("webhook-id", "d1"))
            .respond_with(ResponseTemplate::new(202).set_body_string("thanks"))
            .mount(&server)
            .await;
        let guarded = HttpSender::new(Duration::from_secs(2), false).unwrap();
        let refused = guarded.send(outgoing(server.uri())).await;
        assert_eq!(refused.status, None);
        assert!(refused
            .error
            .unwrap()
            .contains("CAPSTAN_WEBHOOK_ALLOW_PRIVATE"));
        let by_name = guarded
            .send(outgoing(server.uri().replace("127.0.0.1", "localhost")))
            .await;
        assert!(by_name.error.is_some());
        assert!(server.received_requests().await.unwrap().is_empty());

        let open = HttpSender::new(Duration::from_secs(2), true).unwrap();
        let answer = open.send(outgoing(server.uri())).await;
        assert_eq!(answer.status, Some(202));
        assert_eq!(answer.body.as_deref(), Some("thanks"));
        assert!(answer.delivered());
    }

    #[tokio::test]
    async fn a_slow_receiver_times_out_and_a_long_body_is_capped() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_delay(Duration::from_secs(3)))
            .mount(&server)
            .await;
        let sender = HttpSender::new(Duration::from_millis(300), true).unwrap();
        let answer = sender.send(outgoing(server.uri())).await;
        assert_eq!(answer.status, None);
        assert!(answer.error.unwrap().contains("timed out"));

        let big = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(500).set_body_string("x".repeat(100_000)))
            .mount(&big)
            .await;
        let answer = sender.send(outgoing(big.uri())).await;
        assert_eq!(answer.status, Some(500));
        assert_eq!(answer.body.unwrap().len(), RESPONSE_BODY_CAP);
    }
}
