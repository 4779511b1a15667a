//! The read-only gate of the sandbox: a query is parsed with DataFusion's SQL parser and
//! admitted only when it is one `SELECT`/`WITH` query with no data-changing part anywhere
//! (no DML inside a CTE, no `SELECT ... INTO`, no row locks).

use datafusion::sql::sqlparser::ast::{Query, SetExpr, Statement};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::parser::Parser;

use super::error::TableError;

/// Admits `sql` when it is a single read-only query; otherwise says why not.
pub fn check_read_only(sql: &str) -> Result<(), TableError> {
    let statements =
        Parser::parse_sql(&GenericDialect {}, sql).map_err(|e| TableError::InvalidQuery {
            message: e.to_string(),
        })?;
    let refuse = |reason: String| Err(TableError::Refused { reason });
    match statements.as_slice() {
        [] => refuse("the text holds no statement".into()),
        [Statement::Query(q)] => check_query(q),
        [other] => refuse(format!(
            "only SELECT or WITH queries may run, not `{}`",
            statement_kind(other)
        )),
        many => refuse(format!("exactly one statement may run, got {}", many.len())),
    }
}

fn statement_kind(s: &Statement) -> String {
    let text = s.to_string();
    text.split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ")
}

fn check_query(q: &Query) -> Result<(), TableError> {
    if !q.locks.is_empty() {
        return Err(TableError::Refused {
            reason: "row locks (FOR UPDATE / FOR SHARE) are not allowed".into(),
        });
    }
    if let Some(with) = &q.with {
        for cte in &with.cte_tables {
            check_query(&cte.query)?;
        }
    }
    check_set_expr(&q.body)
}

fn check_set_expr(body: &SetExpr) -> Result<(), TableError> {
    match body {
        SetExpr::Select(select) => {
            if select.into.is_some() {
                return Err(TableError::Refused {
                    reason: "SELECT ... INTO writes a table and is not allowed".into(),
                });
            }
            Ok(())
        }
        SetExpr::Query(q) => check_query(q),
        SetExpr::SetOperation { left, right, .. } => {
            check_set_expr(left)?;
            check_set_expr(right)
        }
        SetExpr::Values(_) | SetExpr::Table(_) => Ok(()),
        other => Err(TableError::Refused {
            reason: format!("a data-changing clause is not allowed: `{other}`"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admits_only_single_read_only_queries() {
        for ok in [
            "SELECT 1",
            "select a from t where b > $1",
            "WITH x AS (SELECT 1 AS a) SELECT a FROM x",
            "SELECT 1 UNION ALL SELECT 2",
            "VALUES (1), (2)",
        ] {
            assert!(check_read_only(ok).is_ok(), "{ok}");
        }
        for bad in [
            "DROP TABLE logs",
            "CREATE TABLE x AS SELECT 1",
            "INSERT INTO logs VALUES (1)",
            "DELETE FROM logs",
            "UPDATE logs SET a = 1",
            "SELECT 1; DROP TABLE logs",
            "SELECT * INTO copy FROM logs",
            "WITH d AS (DELETE FROM logs RETURNING *) SELECT * FROM d",
            "COPY logs TO '/tmp/x.csv'",
            "SET datafusion.execution.batch_size = 1",
            "SELECT * FROM logs FOR UPDATE",
            "",
        ] {
            match check_read_only(bad) {
                Err(TableError::Refused { .. }) | Err(TableError::InvalidQuery { .. }) => {}
                other => panic!("{bad:?} was not refused: {other:?}"),
            }
        }
        // Words that merely look dangerous are fine inside a read-only query.
        assert!(check_read_only("SELECT 'DROP TABLE x; DELETE' AS note").is_ok());
    }
}
