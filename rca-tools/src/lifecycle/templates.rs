//! The deterministic policy for both roles: tool templates over the table schemas.
//!
//! Each template needs certain [`ColumnRole`]s in one table; a task description picks the
//! template whose keywords it mentions most. On an analysis-level retry the policy moves on to
//! the next (template, table) pair it has not tried. No model is involved.

use async_trait::async_trait;

use super::contract::{ParamKind, ParamSpec, SanityCheck, ToolContract};
use super::error::LifecycleError;
use super::roles::{ContractWriter, Feedback, SqlWriter, ToolTask};
use crate::tables::{ColumnInfo, ColumnRole, ColumnType, TableSchema, find_column};

/// The shapes of tool the deterministic policy can write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Template {
    /// Error and total counts per component in the window (logs or spans).
    ErrorCounts,
    /// Call counts and latency percentiles per component and operation (spans).
    LatencyPercentiles,
    /// Per component and metric, the peak z-score of the window's samples against the series.
    MetricZScores,
}

impl Template {
    /// Every template, in tie-break order.
    pub const ALL: [Template; 3] = [
        Template::ErrorCounts,
        Template::LatencyPercentiles,
        Template::MetricZScores,
    ];

    /// The stem of the tool names it produces.
    pub fn stem(self) -> &'static str {
        match self {
            Template::ErrorCounts => "error_counts_per_component",
            Template::LatencyPercentiles => "latency_percentiles_per_operation",
            Template::MetricZScores => "metric_zscores_per_component",
        }
    }

    /// Words in a task description that point at this template.
    pub fn keywords(self) -> &'static [&'static str] {
        match self {
            Template::ErrorCounts => &[
                "error",
                "errors",
                "exception",
                "exceptions",
                "fail",
                "failed",
                "failure",
                "failures",
                "fatal",
                "crash",
                "log",
                "logs",
                "warning",
                "warnings",
            ],
            Template::LatencyPercentiles => &[
                "latency",
                "latencies",
                "slow",
                "slowness",
                "duration",
                "durations",
                "percentile",
                "percentiles",
                "p50",
                "p95",
                "p99",
                "response",
                "trace",
                "traces",
                "span",
                "spans",
                "delay",
                "delays",
                "call",
                "calls",
            ],
            Template::MetricZScores => &[
                "metric",
                "metrics",
                "cpu",
                "memory",
                "disk",
                "network",
                "kpi",
                "kpis",
                "anomaly",
                "anomalous",
                "spike",
                "spikes",
                "usage",
                "utilization",
                "utilisation",
                "zscore",
                "resource",
                "resources",
                "saturation",
            ],
        }
    }

    fn score(self, description: &str) -> usize {
        let words: Vec<String> = description
            .split(|c: char| !c.is_ascii_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(|w| w.to_ascii_lowercase())
            .collect();
        words
            .iter()
            .filter(|w| self.keywords().contains(&w.as_str()))
            .count()
    }
}

/// A template bound to a table whose columns fit it.
#[derive(Debug, Clone)]
struct Binding {
    template: Template,
    table: TableSchema,
    name: String,
}

impl Binding {
    fn col(&self, role: ColumnRole) -> Option<&ColumnInfo> {
        find_column(&self.table, role)
    }
}

/// Which (template, table) pairs fit the schemas, in table order.
fn bindings(tables: &[TableSchema]) -> Vec<Binding> {
    let mut out = Vec::new();
    for template in Template::ALL {
        for table in tables {
            let has = |r| find_column(table, r).is_some();
            let fits = has(ColumnRole::Time)
                && match template {
                    Template::ErrorCounts => {
                        has(ColumnRole::Component)
                            && (has(ColumnRole::Level)
                                || has(ColumnRole::ErrorFlag)
                                || has(ColumnRole::Message))
                            && !has(ColumnRole::MetricValue)
                    }
                    Template::LatencyPercentiles => {
                        has(ColumnRole::Duration)
                            && (has(ColumnRole::Component) || has(ColumnRole::Operation))
                    }
                    Template::MetricZScores => {
                        has(ColumnRole::Component) && has(ColumnRole::MetricValue)
                    }
                };
            if fits {
                out.push(Binding {
                    template,
                    table: table.clone(),
                    name: format!("{}_{}", template.stem(), identifier(&table.name)),
                });
            }
        }
    }
    out
}

fn identifier(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    if s.starts_with(|c: char| c.is_ascii_digit()) || s.is_empty() {
        s.insert(0, 't');
    }
    s
}

/// A quoted SQL identifier.
fn q(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// A quoted SQL string literal.
fn lit(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

fn window_filter(time: &ColumnInfo) -> String {
    let c = q(&time.name);
    match time.ty {
        ColumnType::Timestamp => {
            format!("{c} >= to_timestamp_millis($1) AND {c} < to_timestamp_millis($2)")
        }
        ColumnType::Text => format!(
            "to_timestamp({c}) >= to_timestamp_millis($1) AND to_timestamp({c}) < to_timestamp_millis($2)"
        ),
        _ => format!("{c} >= $1 AND {c} < $2"),
    }
}

fn window_params() -> Vec<ParamSpec> {
    vec![
        ParamSpec {
            name: "window_start".into(),
            kind: ParamKind::WindowStart,
            description: "start of the window, epoch milliseconds".into(),
            default: None,
        },
        ParamSpec {
            name: "window_end".into(),
            kind: ParamKind::WindowEnd,
            description: "end of the window (exclusive), epoch milliseconds".into(),
            default: None,
        },
    ]
}

fn check(description: &str, assertion: &str) -> SanityCheck {
    SanityCheck {
        description: description.into(),
        assertion: assertion.into(),
    }
}

fn contract(b: &Binding) -> ToolContract {
    let t = &b.table.name;
    let (purpose, output_columns, sanity_checks) = match b.template {
        Template::ErrorCounts => (
            format!(
                "Counts error records and all records per component of table {t} in a time window, most errors first, to find components that fail."
            ),
            vec!["component", "total", "errors", "error_ratio"],
            vec![
                check("counts are non-negative", "errors >= 0 AND total > 0"),
                check("errors are a subset of all records", "errors <= total"),
                check(
                    "the ratio is a fraction",
                    "error_ratio >= 0 AND error_ratio <= 1",
                ),
                check("every row names a component", "component IS NOT NULL"),
            ],
        ),
        Template::LatencyPercentiles => (
            format!(
                "Call counts and latency percentiles (p50, p95, p99) per component and operation of table {t} in a time window, slowest first, to find slow operations."
            ),
            vec!["component", "operation", "calls", "p50", "p95", "p99"],
            vec![
                check("every group has calls", "calls > 0"),
                check("percentiles are ordered", "p50 <= p95 AND p95 <= p99"),
                check("latencies are non-negative", "p50 >= 0"),
            ],
        ),
        Template::MetricZScores => (
            format!(
                "Peak z-score of each component's metric samples in a time window against the whole series of table {t}, most anomalous first, to find metric anomalies such as CPU or memory spikes."
            ),
            vec![
                "component",
                "metric",
                "samples",
                "mean",
                "std_dev",
                "peak_z",
            ],
            vec![
                check("every series has samples in the window", "samples > 0"),
                check(
                    "spread and scores are non-negative",
                    "std_dev >= 0 AND peak_z >= 0",
                ),
            ],
        ),
    };
    ToolContract {
        name: b.name.clone(),
        purpose,
        parameters: window_params(),
        output_columns: output_columns.into_iter().map(String::from).collect(),
        sanity_checks,
    }
}

fn error_condition(b: &Binding) -> Option<String> {
    if let Some(level) = b.col(ColumnRole::Level) {
        let words = [
            "ERROR", "ERR", "FATAL", "CRITICAL", "CRIT", "SEVERE", "EMERG", "ALERT", "PANIC",
        ];
        let list: Vec<String> = words.iter().map(|w| lit(w)).collect();
        return Some(format!(
            "upper(CAST({} AS VARCHAR)) IN ({})",
            q(&level.name),
            list.join(", ")
        ));
    }
    if let Some(flag) = b.col(ColumnRole::ErrorFlag) {
        return Some(match flag.ty {
            ColumnType::Boolean => q(&flag.name),
            _ => format!("CAST({} AS BIGINT) <> 0", q(&flag.name)),
        });
    }
    let msg = b.col(ColumnRole::Message)?;
    let m = format!("lower(CAST({} AS VARCHAR))", q(&msg.name));
    let words = ["error", "exception", "fail", "fatal", "panic"];
    let likes: Vec<String> = words
        .iter()
        .map(|w| format!("{m} LIKE {}", lit(&format!("%{w}%"))))
        .collect();
    Some(format!("({})", likes.join(" OR ")))
}

fn sql(b: &Binding) -> Option<String> {
    let table = q(&b.table.name);
    let window = window_filter(b.col(ColumnRole::Time)?);
    Some(match b.template {
        Template::ErrorCounts => {
            let comp = q(&b.col(ColumnRole::Component)?.name);
            let cond = error_condition(b)?;
            format!(
                "SELECT CAST({comp} AS VARCHAR) AS component, COUNT(*) AS total, \
                 SUM(CASE WHEN {cond} THEN 1 ELSE 0 END) AS errors, \
                 CAST(SUM(CASE WHEN {cond} THEN 1 ELSE 0 END) AS DOUBLE) / COUNT(*) AS error_ratio \
                 FROM {table} WHERE {window} AND {comp} IS NOT NULL \
                 GROUP BY {comp} ORDER BY errors DESC, component LIMIT 50"
            )
        }
        Template::LatencyPercentiles => {
            let comp = b
                .col(ColumnRole::Component)
                .map(|c| format!("CAST({} AS VARCHAR)", q(&c.name)))
                .unwrap_or_else(|| "''".into());
            let op = b
                .col(ColumnRole::Operation)
                .filter(|c| {
                    Some(c.name.as_str()) != b.col(ColumnRole::Component).map(|x| x.name.as_str())
                })
                .map(|c| format!("CAST({} AS VARCHAR)", q(&c.name)))
                .unwrap_or_else(|| "''".into());
            let d = format!("CAST({} AS DOUBLE)", q(&b.col(ColumnRole::Duration)?.name));
            format!(
                "SELECT {comp} AS component, {op} AS operation, COUNT(*) AS calls, \
                 approx_percentile_cont({d}, 0.5) AS p50, \
                 approx_percentile_cont({d}, 0.95) AS p95, \
                 approx_percentile_cont({d}, 0.99) AS p99 \
                 FROM {table} WHERE {window} \
                 GROUP BY {comp}, {op} ORDER BY p95 DESC, component, operation LIMIT 50"
            )
        }
        Template::MetricZScores => {
            let comp = format!(
                "CAST({} AS VARCHAR)",
                q(&b.col(ColumnRole::Component)?.name)
            );
            let value_col = b.col(ColumnRole::MetricValue)?;
            let metric = b
                .col(ColumnRole::MetricName)
                .filter(|c| c.name != value_col.name)
                .map(|c| format!("CAST({} AS VARCHAR)", q(&c.name)))
                .unwrap_or_else(|| lit(&value_col.name));
            let v = format!("CAST({} AS DOUBLE)", q(&value_col.name));
            format!(
                "WITH series AS (SELECT {comp} AS component, {metric} AS metric, \
                 AVG({v}) AS mean, STDDEV_POP({v}) AS std_dev FROM {table} GROUP BY {comp}, {metric}), \
                 win AS (SELECT {comp} AS component, {metric} AS metric, {v} AS val \
                 FROM {table} WHERE {window}) \
                 SELECT win.component AS component, win.metric AS metric, COUNT(*) AS samples, \
                 MAX(series.mean) AS mean, MAX(series.std_dev) AS std_dev, \
                 MAX(CASE WHEN series.std_dev > 0 THEN abs(win.val - series.mean) / series.std_dev ELSE 0.0 END) AS peak_z \
                 FROM win JOIN series ON win.component = series.component AND win.metric = series.metric \
                 GROUP BY win.component, win.metric ORDER BY peak_z DESC, component, metric LIMIT 50"
            )
        }
    })
}

/// The deterministic policy: plays both roles from templates over the table schemas.
#[derive(Debug, Clone, Copy, Default)]
pub struct TemplatePolicy;

impl TemplatePolicy {
    /// The contracts the policy can write for these tables, best first for `description`
    /// (ties in template and table order). Templates the description does not mention at all
    /// are left out.
    pub fn candidates(&self, description: &str, tables: &[TableSchema]) -> Vec<ToolContract> {
        let mut scored: Vec<(usize, usize, Binding)> = bindings(tables)
            .into_iter()
            .enumerate()
            .map(|(i, b)| (b.template.score(description), i, b))
            .filter(|(score, _, _)| *score > 0)
            .collect();
        scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        scored.iter().map(|(_, _, b)| contract(b)).collect()
    }
}

#[async_trait]
impl ContractWriter for TemplatePolicy {
    fn uses_model(&self) -> bool {
        false
    }

    async fn write_contract(
        &self,
        task: &ToolTask,
        tables: &[TableSchema],
        previous: &[Feedback],
    ) -> Result<ToolContract, LifecycleError> {
        let tried: Vec<&str> = previous
            .iter()
            .filter_map(|f| f.contract.as_deref())
            .collect();
        self.candidates(&task.description, tables)
            .into_iter()
            .find(|c| !tried.contains(&c.name.as_str()))
            .ok_or_else(|| LifecycleError::NoTemplate {
                message: format!(
                    "no untried template fits the task `{}` over tables {}",
                    task.description,
                    tables
                        .iter()
                        .map(|t| t.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            })
    }
}

#[async_trait]
impl SqlWriter for TemplatePolicy {
    fn uses_model(&self) -> bool {
        false
    }

    async fn write_sql(
        &self,
        contract: &ToolContract,
        tables: &[TableSchema],
        _feedback: &[Feedback],
    ) -> Result<String, LifecycleError> {
        bindings(tables)
            .iter()
            .find(|b| b.name == contract.name)
            .and_then(sql)
            .ok_or_else(|| LifecycleError::NoTemplate {
                message: format!(
                    "contract `{}` was not written from a template",
                    contract.name
                ),
            })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn telemetry_schemas() -> Vec<TableSchema> {
        use ColumnType::*;
        let col = ColumnInfo::new;
        vec![
            TableSchema::new(
                "logs",
                vec![
                    col("timestamp", Integer),
                    col("component", Text),
                    col("level", Text),
                    col("message", Text),
                ],
            ),
            TableSchema::new(
                "metrics",
                vec![
                    col("timestamp", Integer),
                    col("component", Text),
                    col("metric", Text),
                    col("value", Float),
                ],
            ),
            TableSchema::new(
                "spans",
                vec![
                    col("start", Integer),
                    col("component", Text),
                    col("operation", Text),
                    col("duration_us", Integer),
                    col("error", Boolean),
                ],
            ),
        ]
    }

    #[tokio::test]
    async fn picks_templates_by_keywords_and_moves_on_when_tried() {
        let tables = telemetry_schemas();
        let p = TemplatePolicy;
        let task = ToolTask::new("Which services log errors?", None);
        let c = p.write_contract(&task, &tables, &[]).await.unwrap();
        assert_eq!(c.name, "error_counts_per_component_logs");
        assert!(c.problems().is_empty(), "{:?}", c.problems());
        let sql = p.write_sql(&c, &tables, &[]).await.unwrap();
        assert!(sql.contains("\"level\"") && sql.contains("$1") && sql.contains("$2"));

        // The spans table also fits error counts: the retry moves there.
        let tried = vec![Feedback {
            kind: super::super::roles::FeedbackKind::Contract,
            message: "failed".into(),
            contract: Some(c.name.clone()),
            sql: None,
        }];
        let c2 = p.write_contract(&task, &tables, &tried).await.unwrap();
        assert_eq!(c2.name, "error_counts_per_component_spans");
        assert!(
            p.write_sql(&c2, &tables, &[])
                .await
                .unwrap()
                .contains("\"error\"")
        );

        let slow = ToolTask::new("p99 latency of slow calls", None);
        let c3 = p.write_contract(&slow, &tables, &[]).await.unwrap();
        assert_eq!(c3.name, "latency_percentiles_per_operation_spans");
        let cpu = ToolTask::new("CPU usage spike", None);
        let c4 = p.write_contract(&cpu, &tables, &[]).await.unwrap();
        assert_eq!(c4.name, "metric_zscores_per_component_metrics");

        let none = ToolTask::new("what happened?", None);
        assert!(matches!(
            p.write_contract(&none, &tables, &[]).await,
            Err(LifecycleError::NoTemplate { .. })
        ));
        let mut foreign = c.clone();
        foreign.name = "hand_written".into();
        assert!(p.write_sql(&foreign, &tables, &[]).await.is_err());
    }
}
