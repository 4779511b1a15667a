//! The two roles backed by a [`ChatModel`]: one call per contract or query, JSON answers read
//! robustly (fences stripped, prose tolerated).

use std::sync::Arc;

use async_trait::async_trait;
use rca_core::llm::{ChatModel, CompletionRequest, Message, ResponseFormat};

use super::contract::ToolContract;
use super::error::LifecycleError;
use super::json::{fenced_blocks_with_lang, json_object};
use super::roles::{ContractWriter, Feedback, SqlWriter, ToolTask};
use crate::tables::TableSchema;

const CONTRACT_SYSTEM: &str = "You design diagnostic tools for cloud incidents. A tool is one \
parameterised, read-only SQL query over telemetry tables. Write its contract as one JSON object \
with the keys: name (lower-case identifier), purpose (one sentence), parameters (list of \
{name, kind, description, default}; kind is one of window_start, window_end, integer, float, \
text; window parameters are epoch milliseconds and need no default, every other parameter needs \
one), output_columns (list of names), sanity_checks (list of {description, assertion}; an \
assertion is a SQL boolean expression over the output columns that must hold on every row). \
Answer with the JSON object only.";

const SQL_SYSTEM: &str = "You write one read-only SQL query (SELECT or WITH, DataFusion \
dialect) that implements a tool contract. Refer to parameters as $1, $2, ... in the order the \
contract lists them. The output must have the contract's output columns. Answer with a JSON \
object {\"sql\": \"...\"}.";

fn tables_text(tables: &[TableSchema]) -> String {
    tables
        .iter()
        .map(|t| format!("- {t}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn feedback_text(feedback: &[Feedback]) -> String {
    feedback
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let mut line = match &f.contract {
                Some(c) => format!("{}. [{c}] {f}", i + 1),
                None => format!("{}. {f}", i + 1),
            };
            if let Some(sql) = &f.sql {
                line.push_str(&format!("\n   query was: {}", sql.trim()));
            }
            line
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The token limit of one contract or query.
pub const ROLE_MAX_TOKENS: u32 = 512;

/// Asks for JSON following `schema` (structured output where the server has it).
async fn ask(
    model: &dyn ChatModel,
    system: &str,
    user: String,
    name: &str,
    schema: serde_json::Value,
) -> Result<String, LifecycleError> {
    let mut request = CompletionRequest::new(vec![Message::system(system), Message::user(user)])
        .with_max_tokens(ROLE_MAX_TOKENS);
    request.response_format = ResponseFormat::JsonSchema {
        name: name.to_string(),
        schema,
    };
    let response = model.complete(request).await?;
    Ok(response.text().to_string())
}

/// The reasoning role as one model call per contract.
pub struct ModelContractWriter {
    model: Arc<dyn ChatModel>,
}

impl ModelContractWriter {
    /// A reasoning role backed by `model`.
    pub fn new(model: Arc<dyn ChatModel>) -> Self {
        ModelContractWriter { model }
    }
}

#[async_trait]
impl ContractWriter for ModelContractWriter {
    fn uses_model(&self) -> bool {
        true
    }

    async fn write_contract(
        &self,
        task: &ToolTask,
        tables: &[TableSchema],
        previous: &[Feedback],
    ) -> Result<ToolContract, LifecycleError> {
        let mut user = format!(
            "Task: {}\n\nTables:\n{}\n",
            task.description,
            tables_text(tables)
        );
        if !task.context.is_empty() {
            user.push_str(&format!("\nContext:\n{}\n", task.context));
        }
        if !previous.is_empty() {
            user.push_str(&format!(
                "\nEarlier contracts for this task failed; design a different tool:\n{}\n",
                feedback_text(previous)
            ));
        }
        let raw = ask(
            self.model.as_ref(),
            CONTRACT_SYSTEM,
            user,
            "contract",
            rca_core::llm::output_schema::<ToolContract>(),
        )
        .await?;
        parse_contract(&raw)
    }
}

/// Reads a contract from a model's answer.
pub fn parse_contract(raw: &str) -> Result<ToolContract, LifecycleError> {
    let malformed = |message: String| LifecycleError::Malformed {
        role: "reasoning".into(),
        what: "contract".into(),
        message,
        raw: raw.to_string(),
    };
    let value =
        json_object(raw).ok_or_else(|| malformed("no JSON object in the answer".to_string()))?;
    // Some models wrap the object: {"contract": {...}}.
    let value = match value.get("contract") {
        Some(inner) if inner.is_object() => inner.clone(),
        _ => value,
    };
    serde_json::from_value(value).map_err(|e| malformed(e.to_string()))
}

/// The coding role as one model call per query.
pub struct ModelSqlWriter {
    model: Arc<dyn ChatModel>,
}

impl ModelSqlWriter {
    /// A coding role backed by `model`.
    pub fn new(model: Arc<dyn ChatModel>) -> Self {
        ModelSqlWriter { model }
    }
}

#[async_trait]
impl SqlWriter for ModelSqlWriter {
    fn uses_model(&self) -> bool {
        true
    }

    async fn write_sql(
        &self,
        contract: &ToolContract,
        tables: &[TableSchema],
        feedback: &[Feedback],
    ) -> Result<String, LifecycleError> {
        let contract_json = serde_json::to_string_pretty(contract).unwrap_or_default();
        let mut user = format!(
            "Contract:\n{contract_json}\n\nTables:\n{}\n",
            tables_text(tables)
        );
        if !feedback.is_empty() {
            user.push_str(&format!(
                "\nEarlier queries failed; fix the query:\n{}\n",
                feedback_text(feedback)
            ));
        }
        let schema = serde_json::json!({
            "type": "object",
            "properties": {"sql": {"type": "string"}},
            "required": ["sql"]
        });
        let raw = ask(self.model.as_ref(), SQL_SYSTEM, user, "query", schema).await?;
        parse_sql(&raw)
    }
}

/// Reads a query from a model's answer: a JSON object's `sql` (or `query`) field, else a
/// ```` ```sql ```` fence, else the answer itself when it starts like a query.
pub fn parse_sql(raw: &str) -> Result<String, LifecycleError> {
    if let Some(v) = json_object(raw)
        && let Some(sql) = ["sql", "query"]
            .iter()
            .find_map(|k| v.get(*k).and_then(|s| s.as_str()))
    {
        return Ok(sql.trim().to_string());
    }
    let blocks = fenced_blocks_with_lang(raw);
    if let Some((_, body)) = blocks
        .iter()
        .find(|(lang, _)| lang == "sql")
        .or_else(|| blocks.first())
        && starts_like_query(body)
    {
        return Ok(body.trim().to_string());
    }
    if starts_like_query(raw) {
        return Ok(raw.trim().to_string());
    }
    Err(LifecycleError::Malformed {
        role: "coding".into(),
        what: "SQL".into(),
        message: "no query found (expected {\"sql\": \"...\"} or a ```sql fence)".into(),
        raw: raw.to_string(),
    })
}

fn starts_like_query(text: &str) -> bool {
    let first = text
        .trim_start()
        .split(|c: char| c.is_whitespace() || c == '(')
        .next()
        .unwrap_or("");
    first.eq_ignore_ascii_case("select") || first.eq_ignore_ascii_case("with")
}

#[cfg(test)]
mod tests {
    use super::*;
    use rca_llm::ScriptedModel;

    #[test]
    fn reads_contracts_and_sql_from_untidy_answers() {
        let raw = "I propose:\n```json\n{\"contract\": {\"name\": \"n\", \"purpose\": \"p\", \
                   \"output_columns\": [\"a\"]}}\n```";
        let c = parse_contract(raw).unwrap();
        assert_eq!(c.name, "n");
        assert!(c.parameters.is_empty());
        assert!(matches!(
            parse_contract("sorry, I cannot"),
            Err(LifecycleError::Malformed { .. })
        ));
        assert_eq!(parse_sql("{\"sql\": \" SELECT 1 \"}").unwrap(), "SELECT 1");
        assert_eq!(
            parse_sql("Here:\n```sql\nWITH x AS (SELECT 1) SELECT * FROM x\n```").unwrap(),
            "WITH x AS (SELECT 1) SELECT * FROM x"
        );
        assert_eq!(parse_sql("select 2").unwrap(), "select 2");
        assert!(parse_sql("I would count the errors.").is_err());
    }

    #[tokio::test]
    async fn contract_prompt_carries_tables_and_feedback() {
        let model = Arc::new(ScriptedModel::from_texts(
            "scripted-contract-prompt",
            ["{\"name\": \"t\", \"purpose\": \"p\", \"output_columns\": [\"x\"]}"],
        ));
        let writer = ModelContractWriter::new(model.clone());
        let tables = vec![TableSchema::new("logs", vec![])];
        let previous = vec![Feedback {
            kind: super::super::roles::FeedbackKind::Contract,
            message: "every round failed".into(),
            contract: Some("old".into()),
            sql: None,
        }];
        let task = ToolTask::new("count errors", None);
        writer
            .write_contract(&task, &tables, &previous)
            .await
            .unwrap();
        let prompt = &model.requests()[0].messages[1].content;
        assert!(prompt.contains("logs(") && prompt.contains("every round failed"));
    }
}
