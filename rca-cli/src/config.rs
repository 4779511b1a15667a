//! The CLI's TOML configuration (`rca.toml`): model endpoints per role, data sources, budgets,
//! redaction. `rca config check FILE` validates it and names the key and the fix of every
//! problem. Documented in `docs/guides/configuration.md`.

use std::collections::BTreeMap;
use std::path::Path;

use clap::Subcommand;
use serde::Deserialize;

/// An OpenAI-compatible endpoint: `rca_llm::OpenAiConfig`, as documented in
/// `docs/guides/llm.md` (base URL, model, key, timeouts, retries, server features).
pub type ModelConfig = rca_llm::OpenAiConfig;

/// Which model each role uses; a role without one runs as a deterministic policy.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RolesConfig {
    /// The planner.
    pub planner: Option<String>,
    /// The explorers.
    pub explorer: Option<String>,
    /// The controller.
    pub controller: Option<String>,
    /// The reasoner.
    pub reasoner: Option<String>,
}

/// Limits of agent runs.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetsConfig {
    /// Steps of a ReAct run.
    #[serde(default = "default_steps")]
    pub max_steps: usize,
    /// Prompt tokens of a run.
    #[serde(default = "default_tokens")]
    pub max_prompt_tokens: u64,
    /// Wall time of a run, in seconds.
    #[serde(default = "default_wall")]
    pub wall_seconds: u64,
}

fn default_steps() -> usize {
    15
}
fn default_tokens() -> u64 {
    200_000
}
fn default_wall() -> u64 {
    600
}

impl Default for BudgetsConfig {
    fn default() -> Self {
        BudgetsConfig {
            max_steps: default_steps(),
            max_prompt_tokens: default_tokens(),
            wall_seconds: default_wall(),
        }
    }
}

/// How diagnoses cut their windows and conclude.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiagnosisConfig {
    /// Length of the current window before detection, in minutes.
    #[serde(default = "default_current")]
    pub current_minutes: i64,
    /// Modalities that must agree before concluding.
    #[serde(default = "default_min_modalities")]
    pub min_modalities: usize,
    /// The fault-type vocabulary the report names types with (`[[diagnosis.taxonomy.rules]]`
    /// tables with `label`, `kinds`, optional `min_score` and `dominates_metrics`); absent:
    /// the generic default.
    #[serde(default)]
    pub taxonomy: Option<rca_tools::analyze::classify::FaultTaxonomy>,
}

fn default_current() -> i64 {
    10
}
fn default_min_modalities() -> usize {
    2
}

impl Default for DiagnosisConfig {
    fn default() -> Self {
        DiagnosisConfig {
            current_minutes: default_current(),
            min_modalities: default_min_modalities(),
            taxonomy: None,
        }
    }
}

/// A host-defined redaction rule.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleConfig {
    /// The rule's name (shown in `[REDACTED:<name>]`).
    pub name: String,
    /// A regular expression.
    pub pattern: String,
    /// The capture group holding the secret (0: the whole match).
    #[serde(default)]
    pub group: usize,
}

/// Redaction settings.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedactionConfig {
    /// On by default.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Built-in rules to turn off, by name.
    #[serde(default)]
    pub disable: Vec<String>,
    /// Extra rules.
    #[serde(default)]
    pub rules: Vec<RuleConfig>,
}

fn yes() -> bool {
    true
}

impl Default for RedactionConfig {
    fn default() -> Self {
        RedactionConfig {
            enabled: true,
            disable: Vec::new(),
            rules: Vec::new(),
        }
    }
}

/// A Prometheus server.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrometheusSourceConfig {
    /// Base URL.
    pub url: String,
    /// The label whose values are components.
    #[serde(default = "default_component_label")]
    pub component_label: String,
}

fn default_component_label() -> String {
    "instance".into()
}

/// A PostgreSQL database.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PostgresSourceConfig {
    /// libpq-style connection string (`host=... port=... user=... dbname=...`).
    pub url: String,
    /// The schema whose tables are read.
    #[serde(default = "default_schema")]
    pub schema: String,
}

fn default_schema() -> String {
    "public".into()
}

/// Data sources beyond incident directories.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourcesConfig {
    /// Prometheus.
    pub prometheus: Option<PrometheusSourceConfig>,
    /// PostgreSQL.
    pub postgres: Option<PostgresSourceConfig>,
}

/// The whole file.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Named model endpoints.
    #[serde(default)]
    pub models: BTreeMap<String, ModelConfig>,
    /// Which model each role uses.
    #[serde(default)]
    pub roles: RolesConfig,
    /// Limits.
    #[serde(default)]
    pub budgets: BudgetsConfig,
    /// Diagnosis settings.
    #[serde(default)]
    pub diagnosis: DiagnosisConfig,
    /// Redaction.
    #[serde(default)]
    pub redaction: RedactionConfig,
    /// Data sources.
    #[serde(default)]
    pub sources: SourcesConfig,
}

/// One problem in a configuration: where, what, and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The key, as a dotted path (`roles.reasoner`).
    pub key: String,
    /// What is wrong and the fix.
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.key, self.message)
    }
}

fn check_url(key: &str, url: &str, problems: &mut Vec<Problem>) {
    if !(url.starts_with("http://") || url.starts_with("https://")) || url.len() < 10 {
        problems.push(Problem {
            key: key.into(),
            message: format!(
                "\"{url}\" is not an http(s) URL; write it like \"http://localhost:8000/v1\""
            ),
        });
    }
}

/// The prefix that turns a line with a problem into a comment while the rest is read again.
const SET_ASIDE: &str = "#rca-config-check: ";

fn is_set_aside(line: &str) -> bool {
    line.starts_with(SET_ASIDE)
}

/// Problems found while reading, in the order of their lines (the reader meets them in the
/// order of its fields, not of the file).
fn sort_by_line(problems: &mut [Problem]) {
    problems.sort_by_key(|p| {
        p.key
            .strip_prefix("line ")
            .and_then(|n| n.parse::<usize>().ok())
            .unwrap_or(usize::MAX)
    });
}

impl Config {
    /// Parses TOML text. Every syntax error, unknown key and wrongly typed value comes back as
    /// a problem naming its line: after each, the offending line (or the whole table, when the
    /// problem is its header) is set aside and the rest is read again, so one typo does not
    /// hide the next. A text with problems also gets the semantic checks of what remains.
    pub fn parse(text: &str) -> Result<Config, Vec<Problem>> {
        /// Bounds the re-reads: a file with more problems than this is reported in part.
        const MAX_PROBLEMS: usize = 50;
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        let mut problems = Vec::new();
        while problems.len() < MAX_PROBLEMS {
            let joined = lines.join("\n");
            let e = match toml::from_str::<Config>(&joined) {
                Ok(config) if problems.is_empty() => return Ok(config),
                Ok(config) => {
                    sort_by_line(&mut problems);
                    problems.extend(config.check());
                    return Err(problems);
                }
                Err(e) => e,
            };
            let line = e
                .span()
                .and_then(|span| joined.get(..span.start))
                .map(|before| before.matches('\n').count());
            problems.push(Problem {
                key: line.map_or_else(|| "file".into(), |l| format!("line {}", l + 1)),
                message: e.message().trim().to_string(),
            });
            let Some(l) = line.filter(|l| *l < lines.len() && !is_set_aside(&lines[*l])) else {
                sort_by_line(&mut problems);
                return Err(problems);
            };
            let header = lines[l].trim_start().starts_with('[');
            let mut end = l + 1;
            if header {
                while end < lines.len() && !lines[end].trim_start().starts_with('[') {
                    end += 1;
                }
            }
            for line in &mut lines[l..end] {
                *line = format!("{SET_ASIDE}{line}");
            }
        }
        sort_by_line(&mut problems);
        Err(problems)
    }

    /// Semantic checks: roles name defined models, URLs look like URLs, patterns compile,
    /// budgets are positive.
    pub fn check(&self) -> Vec<Problem> {
        let mut problems = Vec::new();
        for (name, m) in &self.models {
            check_url(
                &format!("models.{name}.base_url"),
                &m.base_url,
                &mut problems,
            );
            if m.model.trim().is_empty() {
                problems.push(Problem {
                    key: format!("models.{name}.model"),
                    message:
                        "is empty; name the model the server serves (e.g. \"qwen2.5:7b-instruct\")"
                            .into(),
                });
            }
            if let Some(var) = &m.api_key_env
                && std::env::var_os(var).is_none()
            {
                problems.push(Problem {
                    key: format!("models.{name}.api_key_env"),
                    message: format!(
                        "the environment variable {var} is not set; export it or remove the key"
                    ),
                });
            }
        }
        let roles = [
            ("planner", &self.roles.planner),
            ("explorer", &self.roles.explorer),
            ("controller", &self.roles.controller),
            ("reasoner", &self.roles.reasoner),
        ];
        for (role, model) in roles {
            if let Some(name) = model
                && !self.models.contains_key(name)
            {
                let known: Vec<&str> = self.models.keys().map(String::as_str).collect();
                problems.push(Problem {
                    key: format!("roles.{role}"),
                    message: format!(
                        "names model \"{name}\", which is not defined; define [models.{name}] or use one of: {}",
                        if known.is_empty() { "(none defined)".to_string() } else { known.join(", ") }
                    ),
                });
            }
        }
        if self.budgets.max_steps == 0 {
            problems.push(Problem {
                key: "budgets.max_steps".into(),
                message: "must be at least 1".into(),
            });
        }
        if self.budgets.wall_seconds == 0 {
            problems.push(Problem {
                key: "budgets.wall_seconds".into(),
                message: "must be at least 1".into(),
            });
        }
        if self.diagnosis.current_minutes <= 0 {
            problems.push(Problem {
                key: "diagnosis.current_minutes".into(),
                message: "must be at least 1".into(),
            });
        }
        if let Some(t) = &self.diagnosis.taxonomy {
            for message in t.problems() {
                problems.push(Problem {
                    key: "diagnosis.taxonomy".into(),
                    message,
                });
            }
        }
        if self.diagnosis.min_modalities == 0 {
            problems.push(Problem {
                key: "diagnosis.min_modalities".into(),
                message: "must be at least 1 (2 is the paper's rule)".into(),
            });
        }
        let builtin: Vec<&str> = rca_llm::redact::BUILTIN_RULES.iter().map(|r| r.0).collect();
        for (i, name) in self.redaction.disable.iter().enumerate() {
            if !builtin.contains(&name.as_str()) {
                problems.push(Problem {
                    key: format!("redaction.disable[{i}]"),
                    message: format!(
                        "\"{name}\" is not a built-in rule; built-in rules: {}",
                        builtin.join(", ")
                    ),
                });
            }
        }
        for (i, rule) in self.redaction.rules.iter().enumerate() {
            if let Err(e) =
                rca_llm::redact::RedactionRule::new(&rule.name, &rule.pattern, rule.group)
            {
                problems.push(Problem {
                    key: format!("redaction.rules[{i}].pattern"),
                    message: format!("{}; fix the regular expression", e.message),
                });
            }
        }
        if let Some(p) = &self.sources.prometheus {
            check_url("sources.prometheus.url", &p.url, &mut problems);
        }
        if let Some(p) = &self.sources.postgres
            && !p.url.contains('=')
            && !p.url.starts_with("postgres")
        {
            problems.push(Problem {
                key: "sources.postgres.url".into(),
                message: "write a connection string like \"host=127.0.0.1 port=5432 user=rca dbname=ops\"".into(),
            });
        }
        problems
    }

    /// Reads and checks a file.
    pub fn load(path: &Path) -> Result<Config, Vec<Problem>> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            vec![Problem {
                key: path.display().to_string(),
                message: format!("cannot read: {e}"),
            }]
        })?;
        let config = Config::parse(&text)?;
        let problems = config.check();
        if problems.is_empty() {
            Ok(config)
        } else {
            Err(problems)
        }
    }

    /// The model a role uses, built as an OpenAI-compatible client; `None` when the role has
    /// no model (it runs as a deterministic policy).
    pub fn model_for(
        &self,
        role: Option<&String>,
    ) -> anyhow::Result<Option<std::sync::Arc<dyn rca_core::ChatModel>>> {
        let Some(name) = role else {
            return Ok(None);
        };
        let config = self
            .models
            .get(name)
            .ok_or_else(|| anyhow::anyhow!("model \"{name}\" is not defined"))?;
        // Warnings (an answer from another model than the configured one) as they happen,
        // once per configured model however many roles use it.
        let label = name.clone();
        let client = rca_llm::OpenAiClient::new(config.clone())
            .map_err(|e| anyhow::anyhow!("model \"{name}\": {e}"))?
            .with_warnings(std::sync::Arc::new(move |message: &str| {
                if first_warning(&label, message) {
                    eprintln!("warning: model \"{label}\": {message}");
                }
            }));
        let redacted = rca_llm::RedactingModel::new(client, self.redactor());
        Ok(Some(std::sync::Arc::new(redacted)))
    }

    /// The redactor the configuration describes.
    pub fn redactor(&self) -> rca_llm::redact::Redactor {
        if !self.redaction.enabled {
            return rca_llm::redact::Redactor::disabled();
        }
        let mut r = rca_llm::redact::Redactor::default();
        for name in &self.redaction.disable {
            r = r.without(name);
        }
        for rule in &self.redaction.rules {
            if let Ok(rule) =
                rca_llm::redact::RedactionRule::new(&rule.name, &rule.pattern, rule.group)
            {
                r = r.with_rule(rule);
            }
        }
        r
    }
}

/// Whether `message` about model `name` is said for the first time in this process (the roles
/// that share a model each have a client; the warning is printed once).
fn first_warning(name: &str, message: &str) -> bool {
    static SAID: std::sync::OnceLock<std::sync::Mutex<std::collections::HashSet<String>>> =
        std::sync::OnceLock::new();
    SAID.get_or_init(Default::default)
        .lock()
        .map(|mut said| said.insert(format!("{name}\n{message}")))
        .unwrap_or(true)
}

/// `rca config ...`
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validate a configuration file; every problem names its key and the fix. Each model's
    /// server is then asked which models it serves (`GET {base_url}/models`): a model name it
    /// does not serve is a problem; a server that cannot be asked is a warning (the name is
    /// left unchecked). Exit status 0 when the file is good, 1 otherwise.
    Check {
        /// The TOML file.
        file: std::path::PathBuf,
        /// Do not ask the model servers for their models (check the file alone).
        #[arg(long)]
        offline: bool,
        /// How long each server may take to list its models, in seconds.
        #[arg(long, value_name = "SECONDS", default_value_t = 5)]
        server_timeout: u64,
    },
}

/// What a model's server said about the configured model name.
#[derive(Debug, Clone, PartialEq)]
pub enum ServedCheck {
    /// The server lists the model.
    Served,
    /// The server lists other models only (these).
    NotServed(Vec<String>),
    /// The server could not be asked (why).
    Unasked(String),
}

/// Asks the server of `model` which models it serves (`GET {base_url}/models`, bounded by
/// `timeout`) and whether the configured name is among them.
pub async fn check_served(model: &ModelConfig, timeout: std::time::Duration) -> ServedCheck {
    let client = match rca_llm::OpenAiClient::new(model.clone()) {
        Ok(c) => c,
        Err(e) => return ServedCheck::Unasked(e.to_string()),
    };
    match client.served_models(timeout).await {
        Ok(served)
            if served
                .iter()
                .any(|s| rca_llm::openai::wire::same_model(&model.model, s)) =>
        {
            ServedCheck::Served
        }
        Ok(served) => ServedCheck::NotServed(served),
        Err(e) => ServedCheck::Unasked(e.to_string()),
    }
}

/// The model-name problems of `config`'s models as their servers answer (see
/// [`check_served`]); the servers that could not be asked are printed as warnings.
async fn served_problems(config: &Config, timeout: std::time::Duration) -> Vec<Problem> {
    let mut problems = Vec::new();
    for (name, m) in &config.models {
        match check_served(m, timeout).await {
            ServedCheck::Served => println!(
                "models.{name}: the server at {} serves \"{}\"",
                m.base_url, m.model
            ),
            ServedCheck::NotServed(served) => problems.push(Problem {
                key: format!("models.{name}.model"),
                message: format!(
                    "\"{}\" is not among the models the server at {} serves ({}); name one of \
                     them (a server that answers any name would otherwise run another model)",
                    m.model,
                    m.base_url,
                    if served.is_empty() {
                        "it lists none".to_string()
                    } else {
                        served.join(", ")
                    }
                ),
            }),
            ServedCheck::Unasked(why) => eprintln!(
                "warning: models.{name}: the server at {} could not be asked for its models \
                 ({why}); the model name \"{}\" is unchecked",
                m.base_url, m.model
            ),
        }
    }
    problems
}

/// Runs `rca config ...`.
pub fn run(command: ConfigCommand) -> anyhow::Result<()> {
    match command {
        ConfigCommand::Check {
            file,
            offline,
            server_timeout,
        } => {
            let mut problems = match Config::load(&file) {
                Ok(c) => {
                    let served = if offline || c.models.is_empty() {
                        Vec::new()
                    } else {
                        let timeout = std::time::Duration::from_secs(server_timeout.max(1));
                        tokio::runtime::Builder::new_current_thread()
                            .enable_all()
                            .build()?
                            .block_on(served_problems(&c, timeout))
                    };
                    if served.is_empty() {
                        println!(
                            "{}: ok ({} model(s), roles with models: {})",
                            file.display(),
                            c.models.len(),
                            [
                                &c.roles.planner,
                                &c.roles.explorer,
                                &c.roles.controller,
                                &c.roles.reasoner
                            ]
                            .iter()
                            .filter(|r| r.is_some())
                            .count()
                        );
                        return Ok(());
                    }
                    served
                }
                Err(problems) => problems,
            };
            sort_by_line(&mut problems);
            for p in &problems {
                eprintln!("error: {p}");
            }
            anyhow::bail!("{}: {} problem(s)", file.display(), problems.len())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[models.local]
base_url = "http://localhost:11434/v1"
model = "qwen2.5:7b-instruct"

[roles]
explorer = "local"
reasoner = "local"

[budgets]
max_steps = 12

[redaction]
disable = ["email"]
[[redaction.rules]]
name = "employee-id"
pattern = '\bEMP-\d{6}\b'

[sources.prometheus]
url = "http://127.0.0.1:9090"
component_label = "pod"
"#;

    #[test]
    fn a_good_file_passes() {
        let c = Config::parse(GOOD).unwrap();
        assert!(c.check().is_empty(), "{:?}", c.check());
        assert_eq!(c.budgets.max_steps, 12);
        assert_eq!(c.budgets.wall_seconds, 600);
        assert_eq!(
            c.redactor().redact("EMP-123456 a@b.io").into_owned(),
            "[REDACTED:employee-id] a@b.io"
        );
    }

    #[test]
    fn problems_name_the_key_and_the_fix() {
        let bad = GOOD
            .replace("reasoner = \"local\"", "reasoner = \"cloud\"")
            .replace("http://localhost:11434/v1", "localhost:11434")
            .replace("disable = [\"email\"]", "disable = [\"emails\"]")
            .replace(r"'\bEMP-\d{6}\b'", "'(unclosed'");
        let problems = Config::parse(&bad).unwrap().check();
        let keys: Vec<&str> = problems.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "models.local.base_url",
                "roles.reasoner",
                "redaction.disable[0]",
                "redaction.rules[0].pattern"
            ]
        );
        assert!(problems[1].message.contains("define [models.cloud]"));
        let unknown = Config::parse("[budgets]\nmax_stepz = 3\n").unwrap_err();
        assert!(unknown[0].message.contains("max_stepz"), "{:?}", unknown);
        assert_eq!(unknown[0].key, "line 2");
        assert!(Config::parse("not = [toml").is_err());
        // Every problem, not the first: two unknown keys, a wrong type, an unknown table (its
        // keys are not reported again), and a role naming a model that is not defined.
        let many = "[budgets]\nmax_stepz = 3\nwall_seconds = \"soon\"\n[roles]\nexplorer = \"gpt\"\n\
                    [nonsense]\na = 1\nb = 2\n[diagnosis]\nmin_modalitiez = 2\n";
        let problems = Config::parse(many).unwrap_err();
        let keys: Vec<&str> = problems.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(
            keys,
            ["line 2", "line 3", "line 6", "line 10", "roles.explorer"],
            "{problems:?}"
        );
        assert!(problems[1].message.contains("invalid type"), "{problems:?}");
    }

    #[test]
    fn a_host_taxonomy_is_read_and_checked() {
        let text = r#"
[[diagnosis.taxonomy.rules]]
label = "cpu_hog"
kinds = ["metric_shift:*cpu*"]
min_score = 10.0
dominates_metrics = true

[[diagnosis.taxonomy.rules]]
label = "slow_link"
kinds = ["call_gap:*"]
"#;
        let c = Config::parse(text).unwrap();
        assert!(c.check().is_empty(), "{:?}", c.check());
        let t = c.diagnosis.taxonomy.unwrap();
        assert_eq!(t.rules.len(), 2);
        assert_eq!(t.rules[1].label, "slow_link");
        // A repeated label is a problem under the taxonomy's key; an unknown field an error.
        let repeated = text.replace("slow_link", "cpu_hog");
        let problems = Config::parse(&repeated).unwrap().check();
        assert_eq!(problems[0].key, "diagnosis.taxonomy");
        let typo = text.replace("min_score", "min_scor");
        assert!(Config::parse(&typo).is_err());
    }
}
