//! Where the key encrypting secrets at rest comes from: `CAPSTAN_SECRET_KEY`, else (SQLite only) a
//! key file beside the database, generated on first start with mode 0600.

use anyhow::Context;
use base64::Engine;
use std::io::Write;
use std::path::{Path, PathBuf};
use storage::{Cipher, DatabaseUrl};

pub fn resolve(configured: Option<[u8; 32]>, database: &DatabaseUrl) -> anyhow::Result<[u8; 32]> {
    if let Some(key) = configured {
        return Ok(key);
    }
    match database {
        DatabaseUrl::Sqlite(path) if path == ":memory:" => Ok(Cipher::random_key()),
        DatabaseUrl::Sqlite(path) => key_file(&key_path(Path::new(path))),
        // Settings refuse PostgreSQL without a key; this is a second line of defence.
        DatabaseUrl::Postgres(_) => anyhow::bail!("CAPSTAN_SECRET_KEY is required with PostgreSQL"),
    }
}

pub fn key_path(database: &Path) -> PathBuf {
    let mut name = database.as_os_str().to_owned();
    name.push(".key");
    PathBuf::from(name)
}

fn key_file(path: &Path) -> anyhow::Result<[u8; 32]> {
    if path.exists() {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the key file {}", path.display()))?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text.trim())
            .ok()
            .filter(|b| b.len() == 32)
            .with_context(|| {
                format!(
                    "the key file {} does not hold a base64 32-byte key",
                    path.display()
                )
            })?;
        let mut key = [0u8; 32];
        key.copy_from_slice(&bytes);
        return Ok(key);
    }
    let key = Cipher::random_key();
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options
        .open(path)
        .with_context(|| format!("cannot create the key file {}", path.display()))?;
    writeln!(
        file,
        "{}",
        base64::engine::general_purpose::STANDARD.encode(key)
    )
    .with_context(|| format!("cannot write the key file {}", path.display()))?;
    tracing::info!(path = %path.display(), "generated a key for secrets at rest; keep it with the database");
    Ok(key)
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
        let first = resolve(None, &url).unwrap();
        let second = resolve(None, &url).unwrap();
        assert_eq!(first, second);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(key_path(&db))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert_eq!(resolve(Some([1; 32]), &url).unwrap(), [1; 32]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
