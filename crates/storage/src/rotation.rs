//! Rotating the key secrets are sealed with: every sealed value is opened with the keyring it
//! was written under and sealed again with the new key, in one transaction, in memory only.

use crate::cipher::Cipher;
use crate::db::{db_write_transaction, store_error, Db};
use diesel::sql_types::Text;
use diesel::QueryableByName;
use diesel_async::RunQueryDsl;
use domain::error::StoreResult;

/// Every column that holds sealed values: its table, the expression that tells its rows apart,
/// and which rows are sealed.
const SEALED: &[(&str, &str, &str, &str)] = &[
    ("cloud_credentials", "secret_access_key", "id", "TRUE"),
    ("container_registries", "secret_config", "id", "TRUE"),
    ("helm_repositories", "secret_config", "id", "TRUE"),
    ("git_tokens", "token", "id", "TRUE"),
    // Only secrets: a plain variable's value is the client's own text, whatever it reads.
    ("variables", "value", "id", "is_secret"),
    ("organization_webhooks", "target_secret", "id", "TRUE"),
    (
        "idempotency_keys",
        "response_body",
        "principal || ' ' || key",
        "TRUE",
    ),
];

#[derive(QueryableByName)]
struct SealedValue {
    #[diesel(sql_type = Text)]
    handle: String,
    #[diesel(sql_type = Text)]
    value: String,
}

impl Db {
    /// Seals every secret with `new_key`, in one transaction; the values must open with this
    /// store's keyring (the old key, and the new one if some were sealed with it already).
    /// From then on this store seals with the new key. Returns how many values were sealed
    /// again. No value leaves memory unsealed.
    pub async fn rotate_key(&self, new_key: &[u8; 32]) -> StoreResult<u64> {
        let target = Cipher::new(new_key);
        let opener = self.cipher.clone();
        let postgres = self.is_postgres();
        let resealed = self
            .write(|mut conn| async move {
                db_write_transaction!(conn, |c| {
                    let mut resealed = 0u64;
                    for (table, column, row, sealed) in SEALED {
                        let select = format!(
                            "SELECT {row} AS handle, {column} AS value FROM {table} \
                             WHERE {column} IS NOT NULL AND {sealed}"
                        );
                        // Only the value read: one written meanwhile (PostgreSQL's units do not
                        // wait for this one) is its writer's, sealed with its keyring.
                        let update = if postgres {
                            format!(
                                "UPDATE {table} SET {column} = $1 WHERE {row} = $2 AND {column} = $3"
                            )
                        } else {
                            format!(
                                "UPDATE {table} SET {column} = ? WHERE {row} = ? AND {column} = ?"
                            )
                        };
                        let rows: Vec<SealedValue> = diesel::sql_query(&select).load(c).await?;
                        for r in rows {
                            if target.is_current(&r.value) {
                                continue;
                            }
                            let sealed = opener
                                .decrypt(&r.value)
                                .and_then(|plain| target.encrypt(&plain))
                                .map_err(|e| diesel::result::Error::QueryBuilderError(e.into()))?;
                            let changed = diesel::sql_query(&update)
                                .bind::<Text, _>(sealed)
                                .bind::<Text, _>(r.handle)
                                .bind::<Text, _>(r.value)
                                .execute(c)
                                .await?;
                            resealed += changed as u64;
                        }
                    }
                    Ok::<_, diesel::result::Error>(resealed)
                })
                .map_err(store_error)
            })
            .await?;
        self.cipher.promote(new_key);
        Ok(resealed)
    }
}
