//! API tokens found by hash, remembered by an embedded (SQLite) store: it is the only server on
//! its database, so it sees every deletion and can forget at once. A store shared by several
//! processes (PostgreSQL) looks every token up, so a token deleted through one instance fails on
//! its very next request through any other.

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
