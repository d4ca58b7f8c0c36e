//! `column IN (SELECT value FROM json_each(?))`: a list of ids as one bound JSON array, so that
//! SQLite keeps the statement prepared whatever the number of ids (diesel's `IN (?, ?, ...)`,
//! and any SQL literal, is written out and parsed anew on every execution).

use diesel::expression::{AppearsOnTable, Expression, SelectableExpression, ValidGrouping};
use diesel::query_builder::{AstPass, QueryFragment, QueryId};
use diesel::sql_types::{Bool, Text};
use diesel::sqlite::Sqlite;
use diesel::QueryResult;

#[derive(Debug, Clone)]
pub(crate) struct InJsonList<C> {
    column: C,
    json: String,
}

/// `column` in `ids` (each written as its stored text).
pub(crate) fn in_json_list<C, T: std::fmt::Display>(column: C, ids: &[T]) -> InJsonList<C> {
    let texts: Vec<String> = ids.iter().map(ToString::to_string).collect();
    InJsonList {
        column,
        json: serde_json::Value::from(texts).to_string(),
    }
}

impl<C: Expression> Expression for InJsonList<C> {
    type SqlType = Bool;
}

impl<C: QueryFragment<Sqlite>> QueryFragment<Sqlite> for InJsonList<C> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Sqlite>) -> QueryResult<()> {
        self.column.walk_ast(out.reborrow())?;
        out.push_sql(" IN (SELECT value FROM json_each(");
        out.push_bind_param::<Text, _>(&self.json)?;
        out.push_sql("))");
        Ok(())
    }
}

// The SQL depends only on the column: statements are cached by the query's type.
impl<C: QueryId> QueryId for InJsonList<C> {
    type QueryId = InJsonList<C::QueryId>;
    const HAS_STATIC_QUERY_ID: bool = C::HAS_STATIC_QUERY_ID;
}

impl<C: AppearsOnTable<QS>, QS: ?Sized> AppearsOnTable<QS> for InJsonList<C> {}

impl<C: SelectableExpression<QS>, QS: ?Sized> SelectableExpression<QS> for InJsonList<C> {}

impl<C: ValidGrouping<()>> ValidGrouping<()> for InJsonList<C> {
    type IsAggregate = C::IsAggregate;
}
