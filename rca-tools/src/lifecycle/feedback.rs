//! Judging one trial run of a generated query: runtime feedback (errors, empty or malformed
//! output) and heuristic feedback (the contract's sanity checks, run as SQL assertions).

use rca_core::source::Value;

use super::contract::{SanityCheck, ToolContract};
use super::roles::{Feedback, FeedbackKind};
use crate::tables::{QueryResult, TableEngine};

/// The assertion query for one sanity check: counts the rows of the tool's output on which the
/// check does not hold (a NULL result counts as not holding).
pub fn assertion_sql(tool_sql: &str, check: &SanityCheck) -> String {
    format!(
        "WITH tool_output AS ({}) SELECT COUNT(*) AS violations FROM tool_output WHERE ({}) IS NOT TRUE",
        tool_sql.trim().trim_end_matches(';'),
        check.assertion
    )
}

/// Runs the query once and returns the result with every piece of feedback on it (empty
/// feedback means the trial passed).
pub async fn judge(
    engine: &dyn TableEngine,
    contract: &ToolContract,
    sql: &str,
    params: &[Value],
) -> (Option<QueryResult>, Vec<Feedback>) {
    let fb = |kind, message: String| Feedback {
        kind,
        message,
        contract: Some(contract.name.clone()),
        sql: Some(sql.to_string()),
    };
    let result = match engine.run(sql, params).await {
        Ok(r) => r,
        Err(e) => return (None, vec![fb(FeedbackKind::Runtime, e.to_string())]),
    };
    let missing: Vec<&str> = contract
        .output_columns
        .iter()
        .filter(|c| result.column_index(c).is_none())
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        let message = format!(
            "the output lacks the contract's columns {} (it has {})",
            missing.join(", "),
            if result.columns.is_empty() {
                "none".to_string()
            } else {
                result.columns.join(", ")
            }
        );
        let kind = if result.is_empty() && result.columns.is_empty() {
            FeedbackKind::EmptyOutput
        } else {
            FeedbackKind::MalformedOutput
        };
        return (Some(result), vec![fb(kind, message)]);
    }
    if result.is_empty() {
        let message = "the query returned no rows for the trial window; check the filters, \
                       the time units (epoch milliseconds) and the join conditions"
            .to_string();
        return (Some(result), vec![fb(FeedbackKind::EmptyOutput, message)]);
    }
    let mut feedback = Vec::new();
    for check in &contract.sanity_checks {
        match engine.run(&assertion_sql(sql, check), params).await {
            Ok(r) => match r.rows.first().and_then(|row| row.first()) {
                Some(Value::Int(0)) => {}
                Some(Value::Int(n)) => feedback.push(fb(
                    FeedbackKind::Heuristic,
                    format!(
                        "sanity check `{}` ({}) fails on {n} of {} rows",
                        check.description,
                        check.assertion,
                        result.len()
                    ),
                )),
                other => feedback.push(fb(
                    FeedbackKind::Heuristic,
                    format!(
                        "sanity check `{}` gave no count ({other:?})",
                        check.description
                    ),
                )),
            },
            Err(e) => feedback.push(fb(
                FeedbackKind::Heuristic,
                format!(
                    "sanity check `{}` ({}) could not run on the output: {e}",
                    check.description, check.assertion
                ),
            )),
        }
    }
    (Some(result), feedback)
}
