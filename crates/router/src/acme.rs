//! Certificates ordered from an ACME directory (Let's Encrypt, or a private one) for each
//! routed name the certificates' directory has none for, proven over the TLS-ALPN-01
//! challenge, which the router's HTTPS listener answers itself. rustls-acme does the
//! ordering and the renewing; each name is ordered on its own, so a name that comes or goes
//! with a service never re-orders the others. What it obtains is kept in the certificates'
//! directory's `acme/` folder (owner-only) as `<name>.crt` and `<name>.key`, which every
//! instance sharing the directory serves (ACME on or not), and a restart serves instead of
//! ordering again; the account's key beside them, in `accounts/`.

use rustls::pki_types::CertificateDer;
use rustls::server::ClientHello;
use rustls::sign::CertifiedKey;
use rustls_acme::caches::DirCache;
use rustls_acme::{AcmeConfig, CertCache, ResolvesServerCertAcme};
use std::collections::{BTreeSet, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Where ACME keeps what it obtains, in a certificates' directory.
pub fn ordered_folder(certificates: &Path) -> PathBuf {
    certificates.join("acme")
}

pub use rustls_acme::acme::{LETS_ENCRYPT_PRODUCTION_DIRECTORY, LETS_ENCRYPT_STAGING_DIRECTORY};

/// Where and how certificates are ordered.
#[derive(Clone)]
pub struct AcmeSettings {
    /// The ACME directory's URL.
    pub directory: String,
    /// Whom the certificate authority may write to (`mailto:...`), if anyone.
    pub contact: Option<String>,
    /// The authorities trusted for the directory's own HTTPS; none: the public web's.
    pub roots: Option<Vec<CertificateDer<'static>>>,
    /// The folder certificates and the account key are kept in ([`ordered_folder`]).
    pub cache: PathBuf,
}

impl std::fmt::Debug for AcmeSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AcmeSettings")
            .field("directory", &self.directory)
            .field("contact", &self.contact)
            .field("roots", &self.roots.as_ref().map(Vec::len))
            .field("cache", &self.cache)
            .finish()
    }
}

/// The names being ordered for, each with the resolver that holds its certificate (and, while
/// an order is proven, its challenge's).
pub struct Acme {
    settings: AcmeSettings,
    client: Option<Arc<rustls::ClientConfig>>,
    names: Mutex<HashMap<String, Issuer>>,
}

impl std::fmt::Debug for Acme {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Acme")
            .field("directory", &self.settings.directory)
            .field("names", &self.names())
            .finish_non_exhaustive()
    }
}

struct Issuer {
    resolver: Arc<ResolvesServerCertAcme>,
    ordering: tokio::task::JoinHandle<()>,
}

impl Drop for Issuer {
    fn drop(&mut self) {
        self.ordering.abort();
    }
}

impl Acme {
    /// Makes the cache folder (owner-only: it holds private keys); why not, if it cannot.
    pub fn new(settings: AcmeSettings) -> Result<Self, String> {
        owner_only_folder(&settings.cache)?;
        let client = match &settings.roots {
            None => None,
            Some(roots) => {
                let mut store = rustls::RootCertStore::empty();
                for root in roots {
                    store
                        .add(root.clone())
                        .map_err(|e| format!("an ACME root is not usable: {e}"))?;
                }
                let provider = Arc::new(rustls::crypto::ring::default_provider());
                let config = rustls::ClientConfig::builder_with_provider(provider)
                    .with_safe_default_protocol_versions()
                    .map_err(|e| format!("cannot set up TLS: {e}"))?
                    .with_root_certificates(store)
                    .with_no_client_auth();
                Some(Arc::new(config))
            }
        };
        Ok(Self {
            settings,
            client,
            names: Mutex::new(HashMap::new()),
        })
    }

    /// Orders for each of `names` not yet ordered for (must run in a Tokio runtime), and
    /// stops ordering for those no longer among them.
    pub fn follow(&self, names: &BTreeSet<String>) {
        let Ok(mut held) = self.names.lock() else {
            return;
        };
        held.retain(|name, _| names.contains(name));
        for name in names {
            if !held.contains_key(name) {
                held.insert(name.clone(), self.issuer(name));
            }
        }
    }

    fn issuer(&self, name: &str) -> Issuer {
        let config = match &self.client {
            Some(client) => AcmeConfig::new_with_client_config([name], client.clone()),
            None => AcmeConfig::new([name]),
        };
        let config = config
            .directory(&self.settings.directory)
            .contact(self.settings.contact.iter())
            .cache_compose(
                NamedFiles(self.settings.cache.clone()),
                DirCache::new(self.settings.cache.join("accounts")),
            );
        let mut state = config.state();
        let resolver = state.resolver();
        let name = name.to_string();
        let ordering = tokio::spawn(async move {
            use futures_util::StreamExt;
            // rustls-acme backs off after a failed order (up to about 18 hours), so a name
            // the authority refuses is not asked for again and again.
            while let Some(event) = state.next().await {
                match event {
                    Ok(done) => tracing::info!(name, event = ?done, "ACME"),
                    Err(e) => {
                        tracing::warn!(name, error = %e, "ACME could not order a certificate")
                    }
                }
            }
        });
        Issuer { resolver, ordering }
    }

    /// The certificate ordered for the name a handshake asks for (once there is one), or,
    /// when the handshake is an ACME server's challenge, the challenge's answer.
    pub fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let resolver = self.resolver(hello.server_name()?)?;
        rustls::server::ResolvesServerCert::resolve(resolver.as_ref(), hello)
    }

    fn resolver(&self, name: &str) -> Option<Arc<ResolvesServerCertAcme>> {
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        let held = self.names.lock().ok()?;
        held.get(&name).map(|issuer| issuer.resolver.clone())
    }

    /// The names being ordered for.
    pub fn names(&self) -> BTreeSet<String> {
        self.names
            .lock()
            .map(|held| held.keys().cloned().collect())
            .unwrap_or_default()
    }
}

/// The certificates of a PEM file; why not, when it holds none or cannot be read.
pub fn read_roots(path: &std::path::Path) -> Result<Vec<CertificateDer<'static>>, String> {
    use rustls::pki_types::pem::PemObject;
    let roots = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("{} cannot be read: {e}", path.display()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{} is not PEM: {e}", path.display()))?;
    if roots.is_empty() {
        return Err(format!("{} holds no PEM certificate", path.display()));
    }
    Ok(roots)
}

/// Whether a handshake is an ACME server's TLS-ALPN-01 challenge rather than a client's.
pub fn is_challenge(hello: &ClientHello<'_>) -> bool {
    rustls_acme::is_tls_alpn_challenge(hello)
}

/// The ALPN protocol a challenge's handshake negotiates: its connection carries no request.
pub const CHALLENGE_PROTOCOL: &[u8] = rustls_acme::acme::ACME_TLS_ALPN_NAME;

/// Certificates kept as the router reads them: `<name>.crt` (the chain) and `<name>.key`
/// (owner-only), with `<name>.from` naming the directory that issued them (one from another
/// directory, say staging's, is ordered again rather than served).
struct NamedFiles(PathBuf);

/// The end of the private key's PEM that rustls-acme puts before the chain.
const KEY_END: &str = "-----END PRIVATE KEY-----";

impl NamedFiles {
    fn path(&self, domains: &[String], ext: &str) -> Option<PathBuf> {
        match domains {
            [name] if !name.contains(['/', '\\']) && !name.starts_with('.') => {
                Some(self.0.join(format!("{name}.{ext}")))
            }
            _ => None,
        }
    }
}

#[async_trait::async_trait]
impl CertCache for NamedFiles {
    type EC = io::Error;

    async fn load_cert(&self, domains: &[String], directory: &str) -> io::Result<Option<Vec<u8>>> {
        let (Some(key), Some(crt), Some(from)) = (
            self.path(domains, "key"),
            self.path(domains, "crt"),
            self.path(domains, "from"),
        ) else {
            return Ok(None);
        };
        match tokio::fs::read_to_string(from).await {
            Ok(issuer) if issuer.trim() == directory => {}
            Ok(_) => return Ok(None),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        }
        let key = tokio::fs::read(key).await?;
        let chain = tokio::fs::read(crt).await?;
        Ok(Some([key, b"\n".to_vec(), chain].concat()))
    }

    async fn store_cert(&self, domains: &[String], directory: &str, pem: &[u8]) -> io::Result<()> {
        let (Some(key_path), Some(crt), Some(from)) = (
            self.path(domains, "key"),
            self.path(domains, "crt"),
            self.path(domains, "from"),
        ) else {
            return Err(io::Error::other("one name per certificate"));
        };
        let pem = String::from_utf8_lossy(pem);
        let Some(end) = pem.find(KEY_END).map(|at| at + KEY_END.len()) else {
            return Err(io::Error::other("the certificate came without its key"));
        };
        let (key, chain) = pem.split_at(end);
        // The key first: the router reads a pair when the certificate's file changes.
        write_replacing(&key_path, format!("{}\n", key.trim()).as_bytes(), 0o600).await?;
        write_replacing(&crt, format!("{}\n", chain.trim()).as_bytes(), 0o644).await?;
        write_replacing(&from, directory.as_bytes(), 0o644).await
    }
}

/// Writes `path` whole or not at all (a reader never sees half a file), with `mode`.
async fn write_replacing(path: &Path, contents: &[u8], mode: u32) -> io::Result<()> {
    let mut staged = path.as_os_str().to_owned();
    staged.push(".staged");
    let mut options = tokio::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    options.mode(mode);
    #[cfg(not(unix))]
    let _ = mode;
    let mut file = options.open(&staged).await?;
    tokio::io::AsyncWriteExt::write_all(&mut file, contents).await?;
    file.sync_all().await?;
    tokio::fs::rename(&staged, path).await
}

fn owner_only_folder(path: &std::path::Path) -> Result<(), String> {
    std::fs::create_dir_all(path)
        .map_err(|e| format!("cannot make the ACME folder {}: {e}", path.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| format!("cannot make {} owner-only: {e}", path.display()))?;
    }
    Ok(())
}
