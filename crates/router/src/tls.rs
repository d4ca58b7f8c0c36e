//! The router's certificates: a directory of `<host name>.crt` (the chain, PEM) and
//! `<host name>.key` (its private key, PEM) pairs, a wildcard's named `*.<domain>` or
//! `_wildcard.<domain>`; each connection gets the one its SNI name asks for (its own name's,
//! else its parent's wildcard). Read again when the directory's files change, without a
//! restart. A name the directory was given no certificate for gets the one ACME obtained
//! for it (kept in the directory's `acme/` folder, read the same way), when there is one.

use crate::acme::{is_challenge, ordered_folder, Acme};
use domain::model::{wildcard_over, RouteTable};
use rustls::crypto::ring::sign::any_supported_type;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::SystemTime;

/// The certificates of a directory, by host name: those given (in the directory) and those
/// ACME obtained (in its `acme/` folder, whichever instance ordered them).
#[derive(Debug, Default)]
pub struct Certificates {
    held: RwLock<Held>,
    /// What the directory held when last read: each file's name, size and modification time.
    read: RwLock<Vec<(PathBuf, u64, Option<SystemTime>)>>,
    acme: OnceLock<Arc<Acme>>,
}

#[derive(Debug, Default)]
struct Held {
    given: HashMap<String, Arc<CertifiedKey>>,
    ordered: HashMap<String, Arc<CertifiedKey>>,
}

impl Certificates {
    /// Certificates that, for a name the directory has none for, ask `acme`.
    pub fn with_acme(acme: Arc<Acme>) -> Self {
        let certificates = Self::default();
        let _ = certificates.acme.set(acme);
        certificates
    }

    /// The ACME orders behind these certificates, when ACME is on.
    pub fn acme(&self) -> Option<&Arc<Acme>> {
        self.acme.get()
    }

    /// Reads `dir` (and its ACME folder) when their files changed since the last read (or
    /// were never read); how many certificates they now hold, or why they could not all be
    /// read (the last ones stay).
    pub fn refresh(&self, dir: &Path) -> Result<Option<usize>, String> {
        let ordered_dir = ordered_folder(dir);
        let mut files = listing(dir)?;
        if ordered_dir.is_dir() {
            files.extend(listing(&ordered_dir)?);
        }
        if self.read.read().is_ok_and(|r| *r == files) {
            return Ok(None);
        }
        let mut held = Held::default();
        let mut refused = Vec::new();
        for (path, _, _) in files.iter().filter(|(p, _, _)| is_ext(p, "crt")) {
            let Some(name) = path.file_stem().and_then(|s| s.to_str()) else {
                continue;
            };
            let name = match name.strip_prefix("_wildcard.") {
                Some(rest) => format!("*.{rest}"),
                None => name.to_string(),
            }
            .to_ascii_lowercase();
            let into = if path.parent() == Some(ordered_dir.as_path()) {
                &mut held.ordered
            } else {
                &mut held.given
            };
            match certified(path, &path.with_extension("key")) {
                Ok(key) => {
                    into.insert(name, Arc::new(key));
                }
                // The file's name only: nothing of a key reaches a log.
                Err(why) => refused.push(format!("{}: {why}", path.display())),
            }
        }
        let count = held.given.len() + held.ordered.len();
        if let Ok(mut kept) = self.held.write() {
            *kept = held;
        }
        if let Ok(mut read) = self.read.write() {
            *read = files;
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

    /// Has ACME (when on) order, and renew, for each name `table` routes that may be
    /// certified and the directory was given no certificate for; not for wildcards, which
    /// TLS-ALPN-01 cannot prove.
    pub fn order_for(&self, table: &RouteTable) {
        let Some(acme) = self.acme.get() else {
            return;
        };
        let names = table
            .routes
            .iter()
            .filter(|(name, route)| {
                route.certify && !name.starts_with("*.") && !self.is_given(name)
            })
            .map(|(name, _)| name.clone())
            .collect();
        acme.follow(&names);
    }

    /// The certificate for `name`: its own given, else its parent's wildcard's, else the one
    /// ACME obtained for it.
    pub fn for_name(&self, name: &str) -> Option<Arc<CertifiedKey>> {
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        let held = self.held.read().ok()?;
        held.given
            .get(&name)
            .or_else(|| held.given.get(&wildcard_over(&name)?))
            .or_else(|| held.ordered.get(&name))
            .cloned()
    }

    /// Whether the directory itself has a certificate for `name` (its own or a wildcard's).
    fn is_given(&self, name: &str) -> bool {
        self.held.read().is_ok_and(|held| {
            held.given.contains_key(name)
                || wildcard_over(name).is_some_and(|w| held.given.contains_key(&w))
        })
    }
}

impl ResolvesServerCert for Certificates {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        if !is_challenge(&hello) {
            if let Some(held) = self.for_name(hello.server_name()?) {
                return Some(held);
            }
        }
        self.acme.get()?.resolve(hello)
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
