//! The HTTP client of every call Capstan makes on a user's behalf (git provider APIs, webhook
//! deliveries): the outbound policy (`domain::outbound_policy`) applied to each address a
//! request connects to. A URL naming an address is checked before the request; a host name is
//! resolved here and only the addresses the policy permits are connected to (so a name cannot
//! point somewhere else between a check and the connection); each redirect is checked again,
//! or none is followed. No proxy is used: it would resolve the names itself, past the guard.

use domain::outbound_policy::{OutboundPolicy, Refused};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::{Method, RequestBuilder};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;

/// What a client does with a redirect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Redirects {
    /// The answer is the redirect itself.
    None,
    /// Followed up to this many times, each target checked as the first was, and only on the
    /// same host and port without leaving https: a redirect elsewhere would carry what the
    /// caller sent (a token in a header of its own) to a host it did not choose.
    Checked(usize),
}

/// A reqwest client that reaches only what the policy permits.
#[derive(Clone)]
pub struct GuardedClient {
    client: reqwest::Client,
    policy: Arc<OutboundPolicy>,
}

impl GuardedClient {
    /// `builder` carries the caller's own settings (timeouts, user agent); the guard adds the
    /// resolver, the redirect rule and turns proxies off.
    pub fn new(
        builder: reqwest::ClientBuilder,
        policy: OutboundPolicy,
        redirects: Redirects,
    ) -> Result<Self, String> {
        let policy = Arc::new(policy);
        let redirect = match redirects {
            Redirects::None => reqwest::redirect::Policy::none(),
            Redirects::Checked(most) => {
                let policy = policy.clone();
                reqwest::redirect::Policy::custom(move |attempt| {
                    if attempt.previous().len() > most {
                        return attempt.error(format!("more than {most} redirects"));
                    }
                    if let Err(refused) = policy.check_url(attempt.url().as_str()) {
                        return attempt.error(refused);
                    }
                    let here = attempt.url();
                    let same_place = attempt.previous().last().is_some_and(|from| {
                        from.host_str() == here.host_str()
                            && from.port_or_known_default() == here.port_or_known_default()
                            && !(from.scheme() == "https" && here.scheme() != "https")
                    });
                    if same_place {
                        attempt.follow()
                    } else {
                        attempt.error("a redirect to another host is not followed")
                    }
                })
            }
        };
        let client = builder
            .redirect(redirect)
            .no_proxy()
            .dns_resolver(Arc::new(Guard(policy.clone())))
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(Self { client, policy })
    }

    /// A request to `url`, unless the policy refuses its scheme or the address it names.
    pub fn request(&self, method: Method, url: &str) -> Result<RequestBuilder, Refused> {
        let url = self.policy.check_url(url)?;
        Ok(self.client.request(method, url))
    }
}

/// The policy's refusal behind a failed request (at resolution or at a redirect), if that is
/// why it failed.
pub fn refusal(e: &reqwest::Error) -> Option<Refused> {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(refused) = s.downcast_ref::<Refused>() {
            return Some(refused.clone());
        }
        source = s.source();
    }
    None
}

/// Resolves with the system's resolver and keeps only the addresses the policy permits: a
/// name left with none is refused before any connection is made.
struct Guard(Arc<OutboundPolicy>);

impl Resolve for Guard {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.0.clone();
        Box::pin(async move {
            let host = name.as_str().to_string();
            let lookup = host.clone();
            let found = tokio::task::spawn_blocking(move || {
                (lookup.as_str(), 0)
                    .to_socket_addrs()
                    .map(|a| a.collect::<Vec<SocketAddr>>())
            })
            .await
            .map_err(|e| -> Box<dyn std::error::Error + Send + Sync> { Box::new(e) })??;
            let permitted: Vec<SocketAddr> = found
                .into_iter()
                .filter(|a| policy.permits(&host, a.ip()))
                .collect();
            if permitted.is_empty() {
                return Err(Box::new(policy.refusal(&host)) as Box<_>);
            }
            Ok(Box::new(permitted.into_iter()) as Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::time::Duration;
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    fn client(allow: &str, redirects: Redirects) -> GuardedClient {
        let builder = reqwest::Client::builder().timeout(Duration::from_secs(2));
        GuardedClient::new(builder, OutboundPolicy::parse(allow).unwrap(), redirects).unwrap()
    }

    async fn get(c: &GuardedClient, url: &str) -> Result<reqwest::Response, String> {
        let req = c.request(Method::GET, url).map_err(|r| r.to_string())?;
        req.send().await.map_err(|e| match refusal(&e) {
            Some(r) => r.to_string(),
            None => format!("other: {e}"),
        })
    }

    async fn server() -> MockServer {
        let server = MockServer::start().await;
        Mock::given(method("GET"))
            .and(path("/ok"))
            .respond_with(ResponseTemplate::new(200).set_body_string("fine"))
            .mount(&server)
            .await;
        server
    }

    #[tokio::test]
    async fn loopback_and_metadata_are_refused_by_default_naming_the_setting() {
        let s = server().await;
        let guarded = client("", Redirects::Checked(3));
        for url in [
            format!("{}/ok", s.uri()),
            s.uri().replace("127.0.0.1", "localhost") + "/ok",
            "http://169.254.169.254/latest/meta-data/".to_string(),
        ] {
            let err = get(&guarded, &url).await.unwrap_err();
            assert!(err.contains("CAPSTAN_OUTBOUND_ALLOW"), "{url}: {err}");
        }
        assert!(s.received_requests().await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn an_allowed_name_or_network_is_reached() {
        let s = server().await;
        let by_name = s.uri().replace("127.0.0.1", "localhost") + "/ok";
        let r = get(&client("localhost", Redirects::None), &by_name).await;
        assert_eq!(r.unwrap().status(), 200);
        let r = get(&client("127.0.0.0/8", Redirects::None), &by_name).await;
        assert_eq!(
            r.unwrap().status(),
            200,
            "an allowed network, reached by name"
        );
        let r = get(
            &client("127.0.0.1", Redirects::None),
            &format!("{}/ok", s.uri()),
        )
        .await;
        assert_eq!(r.unwrap().status(), 200);
        let err = get(&client("git.corp.example", Redirects::None), &by_name).await;
        assert!(
            err.unwrap_err().contains("localhost"),
            "another name does not help"
        );
    }

    #[tokio::test]
    async fn each_redirect_is_checked_again() {
        let s = server().await;
        for (from, to) in [
            (
                "/meta",
                "http://169.254.169.254/latest/meta-data/".to_string(),
            ),
            ("/loop6", "http://[::1]:9/".to_string()),
            ("/file", "file:///etc/passwd".to_string()),
            ("/here", format!("{}/ok", s.uri())),
        ] {
            Mock::given(method("GET"))
                .and(path(from))
                .respond_with(ResponseTemplate::new(302).insert_header("location", to.as_str()))
                .mount(&s)
                .await;
        }
        let c = client("127.0.0.1", Redirects::Checked(3));
        for from in ["/meta", "/loop6"] {
            let err = get(&c, &format!("{}{from}", s.uri())).await.unwrap_err();
            assert!(err.contains("CAPSTAN_OUTBOUND_ALLOW"), "{from}: {err}");
        }
        // reqwest itself never follows a redirect to another scheme: the answer is the 302.
        let file = get(&c, &format!("{}/file", s.uri())).await.unwrap();
        assert_eq!(file.status(), 302);
        let followed = get(&c, &format!("{}/here", s.uri())).await.unwrap();
        assert_eq!(
            followed.text().await.unwrap(),
            "fine",
            "an allowed target is followed"
        );
        let held = get(
            &client("127.0.0.1", Redirects::None),
            &format!("{}/meta", s.uri()),
        )
        .await
        .unwrap();
        assert_eq!(held.status(), 302, "not followed at all");
    }
}
