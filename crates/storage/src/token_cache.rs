//! API tokens found by hash, remembered by an embedded (SQLite) store so that a request costs no
//! token lookup: it is the only server on its file, so it sees every deletion and forgets at
//! once (when a unit that deleted tokens commits). A store that shares its database (PostgreSQL)
//! has no cache: a deletion through another server must fail on the very next request through
//! this one, which an asynchronous invalidation (LISTEN/NOTIFY) cannot promise under load
//! (measured: a notification arrived after the next request once in a few hundred).

use domain::model::ApiToken;
use std::collections::HashMap;
use std::sync::Mutex;

#[derive(Default)]
pub(crate) struct TokenCache(Mutex<Cached>);

#[derive(Default)]
struct Cached {
    /// Bumped by every forgetting: a lookup that began before one must not remember its answer.
    generation: u64,
    tokens: HashMap<String, ApiToken>,
}

impl TokenCache {
    pub(crate) fn get(&self, hash: &str) -> (Option<ApiToken>, u64) {
        match self.0.lock() {
            Ok(c) => (c.tokens.get(hash).cloned(), c.generation),
            Err(_) => (None, u64::MAX),
        }
    }

    /// Remembers a token read from the database, unless a deletion was committed since the
    /// lookup began (`generation` is what `get` returned then).
    pub(crate) fn remember(&self, hash: &str, token: &ApiToken, generation: u64) {
        if let Ok(mut c) = self.0.lock() {
            if c.generation == generation {
                c.tokens.insert(hash.to_string(), token.clone());
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
}

/// Forgets every token when dropped: a unit that may delete tokens (a reset, a restore) makes
/// the cache forget them when it ends, whether it finished or its caller gave up half way,
/// perhaps after its commit.
pub(crate) struct ForgetOnDrop<'a>(pub(crate) Option<&'a TokenCache>);

impl Drop for ForgetOnDrop<'_> {
    fn drop(&mut self) {
        if let Some(tokens) = self.0 {
            tokens.forget_all();
        }
    }
}
