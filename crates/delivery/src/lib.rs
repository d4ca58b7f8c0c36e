//! The webhook sender: one HTTP POST per attempt, with a short timeout, no redirects, no
//! proxy, and only to what the outbound policy permits (no private, loopback or link-local
//! target unless allowed, whether the URL names the address or a host name resolves to it).

use async_trait::async_trait;
use domain::model::RESPONSE_BODY_CAP;
use domain::outbound::{Answer, Outgoing, WebhookSender};
use domain::outbound_policy::OutboundPolicy;
use outbound::{GuardedClient, Redirects};
use reqwest::Method;
use std::time::{Duration, Instant};

pub struct HttpSender {
    client: GuardedClient,
}

impl HttpSender {
    /// A sender whose attempts give up after `timeout`, reaching what `policy` permits (the
    /// server's policy, with the webhooks' `CAPSTAN_WEBHOOK_ALLOW_PRIVATE` switch).
    pub fn new(timeout: Duration, policy: OutboundPolicy) -> Result<Self, String> {
        let builder = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .user_agent(concat!("Capstan-Webhooks/", env!("CARGO_PKG_VERSION")));
        Ok(Self {
            client: GuardedClient::new(builder, policy, Redirects::None)?,
        })
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
        let mut builder = match self.client.request(Method::POST, &request.url) {
            Ok(b) => b.body(request.body),
            Err(refused) => return failed(refused.to_string()),
        };
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

    /// The server's policy for webhooks: `allow` as CAPSTAN_OUTBOUND_ALLOW, `private` as
    /// CAPSTAN_WEBHOOK_ALLOW_PRIVATE.
    fn policy(allow: &str, private: bool) -> OutboundPolicy {
        OutboundPolicy::parse(allow)
            .unwrap()
            .allowing_every_address("CAPSTAN_WEBHOOK_ALLOW_PRIVATE", private)
    }

    #[tokio::test]
    async fn a_loopback_target_is_refused_unless_allowed() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(header("webhook-id", "d1"))
            .respond_with(ResponseTemplate::new(202).set_body_string("thanks"))
            .mount(&server)
            .await;
        let guarded = HttpSender::new(Duration::from_secs(2), policy("", false)).unwrap();
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

        let open = HttpSender::new(Duration::from_secs(2), policy("", true)).unwrap();
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
        let sender =
            HttpSender::new(Duration::from_millis(300), policy("127.0.0.1", false)).unwrap();
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
