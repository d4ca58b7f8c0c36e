//! Encryption at rest of secret values (secret variables, cloud credentials, registry passwords,
//! git tokens): AES-256-GCM with a random 96-bit nonce per value.
//!
//! Stored form: `enc:v1:` + base64(nonce || ciphertext || tag).

use aes_gcm::aead::{Aead, KeyInit};
use aes_gcm::{Aes256Gcm, Key, Nonce};
use base64::Engine;
use domain::error::StoreError;
use rand::RngCore;
use std::fmt;

const PREFIX: &str = "enc:v1:";
const NONCE_LEN: usize = 12;

#[derive(Clone)]
pub struct Cipher {
    aead: Aes256Gcm,
}

impl fmt::Debug for Cipher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Cipher(***)")
    }
}

impl Cipher {
    pub fn new(key: &[u8; 32]) -> Self {
        Self {
            aead: Aes256Gcm::new(Key::<Aes256Gcm>::from_slice(key)),
        }
    }

    /// A fresh random key (for in-memory databases and tests).
    pub fn random_key() -> [u8; 32] {
        let mut key = [0u8; 32];
        rand::rng().fill_bytes(&mut key);
        key
    }

    pub fn encrypt(&self, plaintext: &str) -> Result<String, StoreError> {
        let mut nonce = [0u8; NONCE_LEN];
        rand::rng().fill_bytes(&mut nonce);
        let sealed = self
            .aead
            .encrypt(Nonce::from_slice(&nonce), plaintext.as_bytes())
            .map_err(|_| StoreError::Other("encryption failed".into()))?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&sealed);
        Ok(format!(
            "{PREFIX}{}",
            base64::engine::general_purpose::STANDARD.encode(out)
        ))
    }

    /// Decrypts a stored value. A value that does not decrypt (another key, tampering) is an
    /// error that says so without showing anything of the value.
    pub fn decrypt(&self, stored: &str) -> Result<String, StoreError> {
        let unreadable = || {
            StoreError::Other("a secret value cannot be decrypted: is CAPSTAN_SECRET_KEY the key it was written with?".into())
        };
        let encoded = stored.strip_prefix(PREFIX).ok_or_else(unreadable)?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map_err(|_| unreadable())?;
        if bytes.len() < NONCE_LEN {
            return Err(unreadable());
        }
        let (nonce, sealed) = bytes.split_at(NONCE_LEN);
        let plain = self
            .aead
            .decrypt(Nonce::from_slice(nonce), sealed)
            .map_err(|_| unreadable())?;
        String::from_utf8(plain).map_err(|_| unreadable())
    }
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
}
