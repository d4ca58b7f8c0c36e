//! How many live sockets each credential holds open on this instance, against the operator's
//! cap (CAPSTAN_LIVE_SOCKETS_PER_TOKEN): one token must not hold the instance's memory and
//! file descriptors.

use crate::error::ApiError;
use actix_web::http::StatusCode;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

/// The default cap of sockets one credential may hold open on one instance.
pub const DEFAULT_PER_TOKEN: usize = 32;

#[derive(Debug)]
pub struct Sockets {
    per_token: usize,
    /// Open sockets by a digest of their credential (the credential itself is not kept).
    open: Arc<Mutex<HashMap<u64, usize>>>,
}

impl Default for Sockets {
    fn default() -> Self {
        Self::new(DEFAULT_PER_TOKEN)
    }
}

/// One open socket's place in its credential's count, given back when dropped.
#[derive(Debug)]
pub struct Seat {
    key: u64,
    open: Arc<Mutex<HashMap<u64, usize>>>,
}

impl Drop for Seat {
    fn drop(&mut self) {
        if let Ok(mut open) = self.open.lock() {
            if let Some(n) = open.get_mut(&self.key) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    open.remove(&self.key);
                }
            }
        }
    }
}

impl Sockets {
    pub fn new(per_token: usize) -> Self {
        Self {
            per_token,
            open: Arc::default(),
        }
    }

    /// A seat for one more socket of `credential`, or 429 when it holds the cap already.
    pub fn take(&self, credential: &str) -> Result<Seat, ApiError> {
        let mut digest = std::collections::hash_map::DefaultHasher::new();
        credential.hash(&mut digest);
        let key = digest.finish();
        let mut open = self
            .open
            .lock()
            .map_err(|_| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "sockets lost"))?;
        let count = open.entry(key).or_insert(0);
        if *count >= self.per_token {
            return Err(ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                format!(
                    "this token holds {} live sockets open already, the most this server \
                     allows (CAPSTAN_LIVE_SOCKETS_PER_TOKEN); close one first",
                    self.per_token
                ),
            ));
        }
        *count += 1;
        Ok(Seat {
            key,
            open: self.open.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_credential_holds_at_most_its_cap_and_a_closed_socket_gives_its_seat_back() {
        let sockets = Sockets::new(2);
        let a = sockets.take("Token a").unwrap();
        let _b = sockets.take("Token a").unwrap();
        let refused = sockets.take("Token a").unwrap_err();
        assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
        assert!(!refused.message.contains("Token a"), "{}", refused.message);
        let _other = sockets.take("Token b").expect("another token's own count");
        drop(a);
        sockets.take("Token a").expect("a seat given back");
    }
}
