//! Webhook deliveries leaving Capstan: the port a sender implements, and how a request is
//! signed (both the public API's header and Standard Webhooks).

use async_trait::async_trait;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::time::Duration;

/// One HTTP POST to a receiver. Its headers may hold a secret: it has no `Debug` that shows
/// them.
pub struct Outgoing {
    pub url: String,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

impl std::fmt::Debug for Outgoing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outgoing")
            .field("url", &self.url)
            .field("headers", &"[redacted]")
            .finish_non_exhaustive()
    }
}

/// What came back: a status and the start of the body, or why nothing did.
#[derive(Debug, Clone, Default)]
pub struct Answer {
    pub status: Option<u16>,
    pub body: Option<String>,
    pub error: Option<String>,
    pub duration: Duration,
}

impl Answer {
    pub fn delivered(&self) -> bool {
        self.status.is_some_and(|s| (200..300).contains(&s))
    }
}

/// Sends webhook requests (the HTTP client lives outside the domain).
#[async_trait]
pub trait WebhookSender: Send + Sync {
    async fn send(&self, request: Outgoing) -> Answer;
}

/// How deliveries are retried: the wait before attempt n+1 is `base * 2^(n-1)`, at most
/// `max_wait`, with up to half of it taken off at random (jitter, so receivers that came back
/// are not hit by every sender at once); a delivery still failing `give_up_after` its first
/// attempt is marked FAILED.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    pub base: Duration,
    pub max_wait: Duration,
    pub give_up_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            base: Duration::from_secs(5),
            max_wait: Duration::from_secs(15 * 60),
            give_up_after: Duration::from_secs(24 * 3600),
        }
    }
}

impl RetryPolicy {
    /// The wait after failed attempt number `attempt` (from 1), jitter taken by `jitter`
    /// (0 to 1).
    pub fn wait_after(&self, attempt: i32, jitter: f64) -> Duration {
        let doubling = 2u32.saturating_pow(attempt.saturating_sub(1).clamp(0, 30) as u32);
        let full = self.base.saturating_mul(doubling).min(self.max_wait);
        full.mul_f64(1.0 - jitter.clamp(0.0, 1.0) / 2.0)
    }
}

/// The Standard Webhooks signature of a request: `v1,` and the base64 HMAC-SHA256 of
/// `{id}.{timestamp}.{body}`. The key is the secret's base64 part when it reads
/// `whsec_<base64>` (the scheme's own form), and the secret's bytes otherwise.
pub fn standard_signature(secret: &str, id: &str, timestamp: i64, body: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD;
    let key = secret
        .strip_prefix("whsec_")
        .and_then(|k| b64.decode(k).ok())
        .unwrap_or_else(|| secret.as_bytes().to_vec());
    // HMAC takes a key of any length.
    let mut mac = match Hmac::<Sha256>::new_from_slice(&key) {
        Ok(m) => m,
        Err(_) => return String::new(),
    };
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("v1,{}", b64.encode(mac.finalize().into_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_follows_the_standard_webhooks_example() {
        // The example of the Standard Webhooks specification.
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let id = "msg_p5jXN8AQM9LWM0D4loKWxJek";
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            standard_signature(secret, id, 1614265330, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn a_plain_secret_is_its_own_key() {
        let a = standard_signature("plain", "id", 1, b"{}");
        let b = standard_signature("other", "id", 1, b"{}");
        assert!(a.starts_with("v1,"));
        assert_ne!(a, b);
    }

    #[test]
    fn retries_wait_longer_each_time_up_to_the_cap() {
        let p = RetryPolicy {
            base: Duration::from_millis(100),
            max_wait: Duration::from_millis(1000),
            give_up_after: Duration::from_secs(10),
        };
        assert_eq!(p.wait_after(1, 0.0), Duration::from_millis(100));
        assert_eq!(p.wait_after(2, 0.0), Duration::from_millis(200));
        assert_eq!(p.wait_after(4, 0.0), Duration::from_millis(800));
        assert_eq!(p.wait_after(5, 0.0), Duration::from_millis(1000));
        assert_eq!(p.wait_after(40, 0.0), Duration::from_millis(1000));
        assert_eq!(p.wait_after(2, 1.0), Duration::from_millis(100));
    }
}
