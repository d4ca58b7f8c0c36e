//! The router's certificates: a directory of `<host name>.crt` (the chain, PEM) and
//! `<host name>.key` (its private key, PEM) pairs, a wildcard's named `*.<domain>` or
//! `_wildcard.<domain>`; each connection gets the one its SNI name asks for (its own name's,
//! else its parent's wildcard). Read again when the directory's files change, without a
//! restart.

use domain::model::wildcard_over;
use rustls::crypto::ring::sign::any_supported_type;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

/// The certificates of a directory, by host name.
#[derive(Debug, Default)]
pub struct Certificates {
    by_name: RwLock<HashMap<String, Arc<CertifiedKey>>>,
    /// What the directory held when last read: each file's name, size and modification time.
    read: RwLock<Vec<(PathBuf, u64, Option<SystemTime>)>>,
}

impl Certificates {
    /// Reads `dir` when its files changed since the last read (or were never read); how many
    /// certificates it now holds, or why it could not read them (the last ones stay).
    pub fn refresh(&self, dir: &Path) -> Result<Option<usize>, String> {
        let listing = listing(dir)?;
        if self.read.read().is_ok_and(|r| *r == listing) {
            return Ok(None);
        }
        let mut by_name = HashMap::new();
        let mut refused = Vec::new();
        for (path, _, _) in listing.iter().filter(|(p, _, _)| is_ext(p, "crt")) {
            let Some(name) = path.file_stem().and_then(|s| s.to_str()) else {
                continue;
            };
            let name = match name.strip_prefix("_wildcard.") {
                Some(rest) => format!("*.{rest}"),
                None => name.to_string(),
            }
            .to_ascii_lowercase();
            match certified(path, &path.with_extension("key")) {
                Ok(key) => {
                    by_name.insert(name, Arc::new(key));
                }
                // The file's name only: nothing of a key reaches a log.
                Err(why) => refused.push(format!("{}: {why}", path.display())),
            }
        }
        let count = by_name.len();
        if let Ok(mut held) = self.by_name.write() {
            *held = by_name;
        }
        if let Ok(mut read) = self.read.write() {
            *read = listing;
        }
        if refused.is_empty() {
            Ok(Some(count))
        } else {
            Err(format!(
                "{count} certificate(s) read; refused: {}",
                refused.join("; ")
            ))
        }
    }

    /// The certificate for `name`: its own, else its parent's wildcard.
    pub fn for_name(&self, name: &str) -> Option<Arc<CertifiedKey>> {
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        let held = self.by_name.read().ok()?;
        held.get(&name)
            .or_else(|| held.get(&wildcard_over(&name)?))
            .cloned()
    }
}

impl ResolvesServerCert for Certificates {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.for_name(hello.server_name()?)
    }
}

fn is_ext(path: &Path, ext: &str) -> bool {
    path.extension().and_then(|e| e.to_str()) == Some(ext)
}

fn listing(dir: &Path) -> Result<Vec<(PathBuf, u64, Option<SystemTime>)>, String> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| format!("cannot read the directory {}: {e}", dir.display()))?;
    let mut out: Vec<(PathBuf, u64, Option<SystemTime>)> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| is_ext(p, "crt") || is_ext(p, "key"))
        .filter_map(|p| {
            let meta = std::fs::metadata(&p).ok()?;
            Some((p, meta.len(), meta.modified().ok()))
        })
        .collect();
    out.sort();
    Ok(out)
}

fn certified(crt: &Path, key: &Path) -> Result<CertifiedKey, String> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(crt)
        .map_err(|e| format!("cannot read the certificate: {e}"))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("the certificate is not PEM: {e}"))?;
    if chain.is_empty() {
        return Err("the file holds no certificate".into());
    }
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|_| format!("no PEM private key in {}", key.display()))?;
    let signer = any_supported_type(&key).map_err(|_| "the private key's type is not supported")?;
    Ok(CertifiedKey::new(chain, signer))
}
