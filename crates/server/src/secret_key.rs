//! Where the keys encrypting secrets at rest come from: `CAPSTAN_SECRET_KEY` (with
//! `CAPSTAN_SECRET_KEY_PREVIOUS` also opening what older keys sealed), else (SQLite only) a key
//! file beside the database, generated on first start with mode 0600: one base64 key a line,
//! the first sealing, the others opening what they sealed (a rotation leaves the old key there).

use anyhow::Context;
use base64::Engine;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use storage::{Cipher, DatabaseUrl};

/// The keys of a store: the first seals, all open; and the file they were read from.
pub struct Keyring {
    pub primary: [u8; 32],
    pub accepted: Vec<[u8; 32]>,
    pub file: Option<PathBuf>,
}

impl Keyring {
    /// The key that has been in the ring longest (rotations add keys before it). What must
    /// outlive rotations derives from it: the git webhooks' signing secrets, which providers
    /// keep.
    pub fn oldest(&self) -> [u8; 32] {
        self.accepted.last().copied().unwrap_or(self.primary)
    }

    /// A cipher of these keys, which reads the key file again once it has changed (rotated
    /// by `capstan secrets rotate-key` beside this server): before it seals, and when it meets
    /// a value sealed by a key it lacks.
    pub fn cipher(&self) -> Cipher {
        let cipher = Cipher::with_keys(&self.primary, &self.accepted);
        let Some(file) = self.file.clone() else {
            return cipher;
        };
        // The file as it was when last read: looked at (not read) before every seal.
        let seen = std::sync::Mutex::new(stamp(&file));
        cipher.reloading_from(Arc::new(move || {
            let now = stamp(&file);
            let mut last = seen.lock().unwrap_or_else(|e| e.into_inner());
            if now.is_some() && *last == now {
                return None;
            }
            let keys = read_keys(&file).ok()?;
            *last = now;
            Some(keys)
        }))
    }
}

pub fn resolve(
    configured: Option<[u8; 32]>,
    previous: &[[u8; 32]],
    database: &DatabaseUrl,
) -> anyhow::Result<Keyring> {
    if let Some(primary) = configured {
        return Ok(Keyring {
            primary,
            accepted: previous.to_vec(),
            file: None,
        });
    }
    match database {
        DatabaseUrl::Sqlite(path) if path == ":memory:" => Ok(Keyring {
            primary: Cipher::random_key(),
            accepted: Vec::new(),
            file: None,
        }),
        DatabaseUrl::Sqlite(path) => {
            let file = key_path(Path::new(path));
            let keys = key_file(&file)?;
            let (primary, rest) = keys
                .split_first()
                .with_context(|| format!("the key file {} holds no key", file.display()))?;
            let mut accepted = rest.to_vec();
            accepted.extend_from_slice(previous);
            Ok(Keyring {
                primary: *primary,
                accepted,
                file: Some(file),
            })
        }
        // Settings refuse PostgreSQL without a key; this is a second line of defence.
        DatabaseUrl::Postgres(_) => anyhow::bail!("CAPSTAN_SECRET_KEY is required with PostgreSQL"),
    }
}

pub fn key_path(database: &Path) -> PathBuf {
    let mut name = database.as_os_str().to_owned();
    name.push(".key");
    PathBuf::from(name)
}

/// When a file was last written, and its length: a rotation changes both.
fn stamp(path: &Path) -> Option<(std::time::SystemTime, u64)> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

fn read_keys(path: &Path) -> anyhow::Result<Vec<[u8; 32]>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the key file {}", path.display()))?;
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|line| {
            base64::engine::general_purpose::STANDARD
                .decode(line)
                .ok()
                .and_then(|b| <[u8; 32]>::try_from(b).ok())
                .with_context(|| {
                    format!(
                        "the key file {} holds a line that is not a base64 32-byte key",
                        path.display()
                    )
                })
        })
        .collect()
}

fn key_file(path: &Path) -> anyhow::Result<Vec<[u8; 32]>> {
    if path.exists() {
        return read_keys(path);
    }
    let key = Cipher::random_key();
    write_keys(path, &[key], true)?;
    tracing::info!(path = %path.display(), "generated a key for secrets at rest; keep it with the database");
    Ok(vec![key])
}

/// Writes the key file, owner-only; replacing one goes through a new file renamed over it, so
/// a reader sees the old keys or the new ones, never half a file.
pub fn write_keys(path: &Path, keys: &[[u8; 32]], create_new: bool) -> anyhow::Result<()> {
    let target = if create_new {
        path.to_path_buf()
    } else {
        path.with_extension("key.partial")
    };
    let mut options = std::fs::OpenOptions::new();
    options.write(true);
    if create_new {
        options.create_new(true);
    } else {
        options.create(true).truncate(true);
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options
        .open(&target)
        .with_context(|| format!("cannot create the key file {}", target.display()))?;
    for key in keys {
        writeln!(
            file,
            "{}",
            base64::engine::general_purpose::STANDARD.encode(key)
        )
        .with_context(|| format!("cannot write the key file {}", target.display()))?;
    }
    file.sync_all()
        .with_context(|| format!("cannot write the key file {}", target.display()))?;
    if !create_new {
        std::fs::rename(&target, path)
            .with_context(|| format!("cannot replace the key file {}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_file_is_generated_once_with_owner_only_access() {
        let dir = std::env::temp_dir().join(format!("capstan-key-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let db = dir.join("data.db");
        let url = DatabaseUrl::Sqlite(db.to_string_lossy().into_owned());
        let first = resolve(None, &[], &url).unwrap();
        let second = resolve(None, &[], &url).unwrap();
        assert_eq!(first.primary, second.primary);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(key_path(&db))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert_eq!(
            resolve(Some([1; 32]), &[[2; 32]], &url).unwrap().accepted,
            [[2; 32]]
        );
        // A rotated file: the first line seals, the others open.
        write_keys(&key_path(&db), &[[3; 32], first.primary], false).unwrap();
        let rotated = resolve(None, &[], &url).unwrap();
        assert_eq!(
            (rotated.primary, rotated.accepted),
            ([3; 32], vec![first.primary])
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
