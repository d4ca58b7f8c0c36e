//! Ids and closed values as a SQL store's text columns hold them (feature `diesel`): written
//! with their `Display`, read back with their `FromStr`, so the stored text is the one the API
//! shows and a store needs no parsing of its own.

use diesel::deserialize;
use diesel::pg::Pg;
use diesel::serialize::{self, IsNull, Output};
use diesel::sqlite::Sqlite;
use std::fmt::Display;
use std::io::Write;
use std::str::FromStr;

/// A column's text read as `T`. Text that does not read was written by something else: an
/// error naming what was expected, never a panic.
pub fn read<T: FromStr>(type_name: &str, text: String) -> deserialize::Result<T> {
    text.parse()
        .map_err(|_| format!("unreadable {type_name} in store: {text:?}").into())
}

pub fn write_pg<T: Display>(value: &T, out: &mut Output<'_, '_, Pg>) -> serialize::Result {
    write!(out, "{value}")?;
    Ok(IsNull::No)
}

pub fn write_sqlite<T: Display>(value: &T, out: &mut Output<'_, '_, Sqlite>) -> serialize::Result {
    out.set_value(value.to_string());
    Ok(IsNull::No)
}

/// The `ToSql`/`FromSql` impls of a type with `Display` and `FromStr`, for both backends. The
/// type also derives `AsExpression` and `FromSqlRow` with `sql_type = Text`.
macro_rules! text_column {
    ($name:ident) => {
        impl diesel::serialize::ToSql<diesel::sql_types::Text, diesel::sqlite::Sqlite> for $name {
            fn to_sql<'b>(
                &'b self,
                out: &mut diesel::serialize::Output<'b, '_, diesel::sqlite::Sqlite>,
            ) -> diesel::serialize::Result {
                $crate::sql_text::write_sqlite(self, out)
            }
        }

        impl diesel::serialize::ToSql<diesel::sql_types::Text, diesel::pg::Pg> for $name {
            fn to_sql<'b>(
                &'b self,
                out: &mut diesel::serialize::Output<'b, '_, diesel::pg::Pg>,
            ) -> diesel::serialize::Result {
                $crate::sql_text::write_pg(self, out)
            }
        }

        impl diesel::deserialize::FromSql<diesel::sql_types::Text, diesel::sqlite::Sqlite>
            for $name
        {
            fn from_sql(
                value: diesel::sqlite::SqliteValue<'_, '_, '_>,
            ) -> diesel::deserialize::Result<Self> {
                let text = <String as diesel::deserialize::FromSql<
                    diesel::sql_types::Text,
                    diesel::sqlite::Sqlite,
                >>::from_sql(value)?;
                $crate::sql_text::read(stringify!($name), text)
            }
        }

        impl diesel::deserialize::FromSql<diesel::sql_types::Text, diesel::pg::Pg> for $name {
            fn from_sql(value: diesel::pg::PgValue<'_>) -> diesel::deserialize::Result<Self> {
                let text = <String as diesel::deserialize::FromSql<
                    diesel::sql_types::Text,
                    diesel::pg::Pg,
                >>::from_sql(value)?;
                $crate::sql_text::read(stringify!($name), text)
            }
        }
    };
}
