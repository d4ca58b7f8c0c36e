//! API tokens found by hash, remembered so that a request costs no token lookup.
//!
//! A store forgets every token when one of its own units that deleted tokens commits. An
//! embedded (SQLite) store is the only server on its file, so that is all it needs. Servers
//! sharing a PostgreSQL database also hear each other: a trigger notifies `capstan_tokens` in
//! the transaction that changes or deletes tokens, delivered to every listening server when it
//! commits. A server remembers tokens only while its listening connection is up and answering;
//! and whatever happens to notifications, nothing is remembered longer than [`SHARED_TTL`].

use domain::model::ApiToken;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The longest a server sharing its database trusts a remembered token.
pub(crate) const SHARED_TTL: Duration = Duration::from_secs(5);

pub(crate) struct TokenCache(Mutex<Cached>);

struct Cached {
    /// Bumped by every forgetting: a lookup that began before one must not remember its answer.
    generation: u64,
    /// Whether deletions by other servers are heard (always, for an embedded store).
    live: bool,
    ttl: Option<Duration>,
    tokens: HashMap<String, (ApiToken, Instant)>,
}

impl TokenCache {
    /// For the only server on its database.
    pub(crate) fn embedded() -> Self {
        Self::new(true, None)
    }

    /// For a server sharing its database: remembers nothing until [`TokenCache::set_live`].
    pub(crate) fn shared() -> Self {
        Self::new(false, Some(SHARED_TTL))
    }

    fn new(live: bool, ttl: Option<Duration>) -> Self {
        Self(Mutex::new(Cached {
            generation: 0,
            live,
            ttl,
            tokens: HashMap::new(),
        }))
    }

    pub(crate) fn get(&self, hash: &str) -> (Option<ApiToken>, u64) {
        match self.0.lock() {
            Ok(c) => {
                let fresh = |at: &Instant| c.ttl.is_none_or(|ttl| at.elapsed() < ttl);
                let token = c
                    .tokens
                    .get(hash)
                    .filter(|(_, at)| c.live && fresh(at))
                    .map(|(t, _)| t.clone());
                (token, c.generation)
            }
            Err(_) => (None, u64::MAX),
        }
    }

    /// Remembers a token read from the database, unless a deletion was committed since the
    /// lookup began (`generation` is what `get` returned then).
    pub(crate) fn remember(&self, hash: &str, token: &ApiToken, generation: u64) {
        if let Ok(mut c) = self.0.lock() {
            if c.live && c.generation == generation {
                c.tokens
                    .insert(hash.to_string(), (token.clone(), Instant::now()));
            }
        }
    }

    /// Forgets every token: some were deleted (a token, or an organization with its tokens).
    pub(crate) fn forget_all(&self) {
        if let Ok(mut c) = self.0.lock() {
            c.generation = c.generation.wrapping_add(1);
            c.tokens.clear();
        }
    }

    /// Whether remembered tokens are trusted (tests).
    pub(crate) fn is_live(&self) -> bool {
        self.0.lock().is_ok_and(|c| c.live)
    }

    /// Whether other servers' deletions are heard from now on; either way, what was remembered
    /// before is forgotten (a deletion may have gone unheard).
    pub(crate) fn set_live(&self, live: bool) {
        if let Ok(mut c) = self.0.lock() {
            c.live = live;
            c.generation = c.generation.wrapping_add(1);
            c.tokens.clear();
        }
    }
}
