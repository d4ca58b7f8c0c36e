//! Encryption at rest of secret values (secret variables, cloud credentials, registry passwords,
//! git tokens, webhook secrets, replayed answers): AES-256-GCM with a random 96-bit nonce per
//! value.
//!
//! Stored form: `enc:v2:<key id>:` + base64(nonce || ciphertext || tag), where the key id is
//! the first 4 bytes of the key's SHA-256 in hex: a value says which key sealed it, so a
//! keyring of several keys (during a rotation) opens it with the right one. Values of the
//! first form, `enc:v1:` + base64(...), name no key and are tried with each.

use aes_gcm::aead::{Aead, KeyInit};
use aes_gcm::{Aes256Gcm, Key, Nonce};
use base64::Engine;
use domain::error::StoreError;
use rand::RngCore;
use sha2::{Digest, Sha256};
use std::fmt;
use std::sync::{Arc, RwLock};

const V1: &str = "enc:v1:";
const V2: &str = "enc:v2:";
const NONCE_LEN: usize = 12;

/// Where a keyring can be read again (a key file another process may have rotated).
pub type KeySource = Arc<dyn Fn() -> Option<Vec<[u8; 32]>> + Send + Sync>;

struct SealingKey {
    id: String,
    aead: Aes256Gcm,
}

impl SealingKey {
    fn new(key: &[u8; 32]) -> Self {
        Self {
            id: key_id(key),
            aead: Aes256Gcm::new(Key::<Aes256Gcm>::from_slice(key)),
        }
    }
}

/// The id a value sealed with `key` carries.
pub fn key_id(key: &[u8; 32]) -> String {
    domain::hex::encode(&Sha256::digest(key)[..4])
}

/// The first key seals; every key opens what it sealed.
struct Keyring {
    keys: Vec<SealingKey>,
}

impl Keyring {
    fn of(primary: &[u8; 32], accepted: &[[u8; 32]]) -> Self {
        let mut keys = vec![SealingKey::new(primary)];
        for k in accepted {
            let key = SealingKey::new(k);
            if keys.iter().all(|known| known.id != key.id) {
                keys.push(key);
            }
        }
        Self { keys }
    }
}

#[derive(Clone)]
pub struct Cipher {
    ring: Arc<RwLock<Keyring>>,
    /// Read again when a value names a key this ring lacks.
    source: Option<KeySource>,
}

impl fmt::Debug for Cipher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Cipher(***)")
    }
}

fn unreadable() -> StoreError {
    StoreError::Other(
        "a secret value cannot be decrypted: is CAPSTAN_SECRET_KEY the key it was written with \
         (or CAPSTAN_SECRET_KEY_PREVIOUS, during a rotation)?"
            .into(),
    )
}

impl Cipher {
    pub fn new(key: &[u8; 32]) -> Self {
        Self::with_keys(key, &[])
    }

    /// Seals with `primary`; opens what any of the keys sealed.
    pub fn with_keys(primary: &[u8; 32], accepted: &[[u8; 32]]) -> Self {
        Self {
            ring: Arc::new(RwLock::new(Keyring::of(primary, accepted))),
            source: None,
        }
    }

    /// Reads the keyring again from `source` (its first key seals) before sealing and when a
    /// value names a key this one lacks; keys already known stay known. The source answers
    /// none when nothing changed since it last answered.
    pub fn reloading_from(mut self, source: KeySource) -> Self {
        self.source = Some(source);
        self
    }

    /// A fresh random key (for in-memory databases and tests).
    pub fn random_key() -> [u8; 32] {
        let mut key = [0u8; 32];
        rand::rng().fill_bytes(&mut key);
        key
    }

    /// The id of the key that seals.
    pub fn primary_id(&self) -> String {
        self.read(|ring| ring.keys[0].id.clone())
    }

    fn read<R>(&self, f: impl FnOnce(&Keyring) -> R) -> R {
        f(&self.ring.read().unwrap_or_else(|e| e.into_inner()))
    }

    pub fn encrypt(&self, plaintext: &str) -> Result<String, StoreError> {
        // A key rotated by another process seals from now on (its source tells whether it
        // changed cheaply), so nothing new is sealed by the key the rotation retires.
        self.reload();
        let mut nonce = [0u8; NONCE_LEN];
        rand::rng().fill_bytes(&mut nonce);
        let (id, sealed) = self.read(|ring| {
            let key = &ring.keys[0];
            let sealed = key
                .aead
                .encrypt(Nonce::from_slice(&nonce), plaintext.as_bytes())
                .map_err(|_| StoreError::Other("encryption failed".into()));
            (key.id.clone(), sealed)
        });
        let mut out = nonce.to_vec();
        out.extend_from_slice(&sealed?);
        Ok(format!(
            "{V2}{id}:{}",
            base64::engine::general_purpose::STANDARD.encode(out)
        ))
    }

    /// Decrypts a stored value. A value that does not decrypt (another key, tampering) is an
    /// error that says so without showing anything of the value.
    pub fn decrypt(&self, stored: &str) -> Result<String, StoreError> {
        if let Some(rest) = stored.strip_prefix(V2) {
            let (id, encoded) = rest.split_once(':').ok_or_else(unreadable)?;
            let bytes = decode(encoded)?;
            if let Some(plain) = self.open_with(id, &bytes) {
                return plain;
            }
            // A key this ring lacks: rotated elsewhere, perhaps.
            self.reload();
            return self
                .open_with(id, &bytes)
                .unwrap_or_else(|| Err(unreadable()));
        }
        let bytes = decode(stored.strip_prefix(V1).ok_or_else(unreadable)?)?;
        self.read(|ring| {
            ring.keys
                .iter()
                .find_map(|k| open(&k.aead, &bytes).ok())
                .ok_or_else(unreadable)
        })
    }

    /// Whether `stored` is sealed with the key that seals now.
    pub fn is_current(&self, stored: &str) -> bool {
        let primary = self.primary_id();
        stored
            .strip_prefix(V2)
            .and_then(|rest| rest.split_once(':'))
            .is_some_and(|(id, _)| id == primary)
    }

    fn open_with(&self, id: &str, bytes: &[u8]) -> Option<Result<String, StoreError>> {
        self.read(|ring| {
            ring.keys
                .iter()
                .find(|k| k.id == id)
                .map(|k| open(&k.aead, bytes))
        })
    }

    fn reload(&self) {
        let Some(keys) = self.source.as_ref().and_then(|s| s()) else {
            return;
        };
        let Some((primary, rest)) = keys.split_first() else {
            return;
        };
        let mut ring = self.ring.write().unwrap_or_else(|e| e.into_inner());
        let mut fresh = Keyring::of(primary, rest);
        for known in ring.keys.drain(..) {
            if fresh.keys.iter().all(|k| k.id != known.id) {
                fresh.keys.push(known);
            }
        }
        *ring = fresh;
    }

    /// Seals with `primary` from now on, still opening what the keys known so far sealed.
    pub fn promote(&self, primary: &[u8; 32]) {
        let mut ring = self.ring.write().unwrap_or_else(|e| e.into_inner());
        let mut fresh = Keyring::of(primary, &[]);
        for known in ring.keys.drain(..) {
            if fresh.keys.iter().all(|k| k.id != known.id) {
                fresh.keys.push(known);
            }
        }
        *ring = fresh;
    }
}

fn decode(encoded: &str) -> Result<Vec<u8>, StoreError> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .map_err(|_| unreadable())?;
    if bytes.len() < NONCE_LEN {
        return Err(unreadable());
    }
    Ok(bytes)
}

fn open(aead: &Aes256Gcm, bytes: &[u8]) -> Result<String, StoreError> {
    let (nonce, sealed) = bytes.split_at(NONCE_LEN);
    let plain = aead
        .decrypt(Nonce::from_slice(nonce), sealed)
        .map_err(|_| unreadable())?;
    String::from_utf8(plain).map_err(|_| unreadable())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_with_fresh_nonces() {
        let c = Cipher::new(&Cipher::random_key());
        let a = c.encrypt("hunter2").unwrap();
        let b = c.encrypt("hunter2").unwrap();
        assert_ne!(a, b);
        assert!(!a.contains("hunter2"));
        assert!(a.starts_with(&format!("enc:v2:{}:", c.primary_id())));
        assert_eq!(c.decrypt(&a).unwrap(), "hunter2");
    }

    #[test]
    fn another_key_or_tampering_fails_without_leaking() {
        let a = Cipher::new(&Cipher::random_key());
        let b = Cipher::new(&Cipher::random_key());
        let sealed = a.encrypt("hunter2").unwrap();
        let err = b.decrypt(&sealed).unwrap_err().to_string();
        assert!(!err.contains("hunter2"));
        let mut tampered = sealed.clone();
        tampered.pop();
        tampered.push('A');
        assert!(a.decrypt(&tampered).is_err());
        assert!(a.decrypt("plain").is_err());
    }

    #[test]
    fn a_keyring_opens_what_each_key_sealed_and_seals_with_its_first() {
        let (old, new) = (Cipher::random_key(), Cipher::random_key());
        let before = Cipher::new(&old).encrypt("s3cret").unwrap();
        let ring = Cipher::with_keys(&new, &[old]);
        assert_eq!(ring.decrypt(&before).unwrap(), "s3cret");
        assert!(!ring.is_current(&before));
        let after = ring.encrypt("s3cret").unwrap();
        assert!(ring.is_current(&after));
        assert!(Cipher::new(&old).decrypt(&after).is_err());
        // The first form, which names no key, is tried with each.
        let v1 = format!("enc:v1:{}", before.rsplit(':').next().unwrap());
        assert_eq!(ring.decrypt(&v1).unwrap(), "s3cret");
    }

    #[test]
    fn a_value_of_an_unknown_key_reloads_the_ring_from_its_source() {
        let (old, new) = (Cipher::random_key(), Cipher::random_key());
        let rotated = Cipher::with_keys(&new, &[old]).encrypt("s3cret").unwrap();
        let stale = Cipher::new(&old);
        assert!(stale.decrypt(&rotated).is_err());
        let reloading = Cipher::new(&old).reloading_from(Arc::new(move || Some(vec![new, old])));
        assert_eq!(reloading.decrypt(&rotated).unwrap(), "s3cret");
        assert!(reloading.is_current(&reloading.encrypt("x").unwrap()));
        assert_eq!(reloading.primary_id(), key_id(&new));
    }

    #[test]
    fn a_rotation_elsewhere_seals_from_the_next_value_on() {
        let (old, new) = (Cipher::random_key(), Cipher::random_key());
        let file = Arc::new(std::sync::Mutex::new(Some(vec![old])));
        let read = file.clone();
        // The source answers once per change, as the key file's does.
        let c = Cipher::new(&old).reloading_from(Arc::new(move || read.lock().unwrap().take()));
        let before = c.encrypt("a").unwrap();
        assert!(Cipher::new(&old).decrypt(&before).is_ok());
        *file.lock().unwrap() = Some(vec![new, old]);
        let after = c.encrypt("b").unwrap();
        assert_eq!(Cipher::new(&new).decrypt(&after).unwrap(), "b");
        assert_eq!(c.decrypt(&before).unwrap(), "a", "the old key still opens");
        assert_eq!(c.primary_id(), key_id(&new));
    }
}
