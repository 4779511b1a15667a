//! `recurring-incidents`: the recurring-incident suite's command.
//!
//! ```text
//! recurring-incidents [--cases DIR] list
//! recurring-incidents [--cases DIR] record [--out DIR]
//! recurring-incidents [--cases DIR] run <case> [--guide <case>] [--live]
//! recurring-incidents [--cases DIR] eval-nezha <NEZHA_DIR> [--json] [--learn] [--model] [--first N] [--write-docs FILE]
//! recurring-incidents [--cases DIR] learn [--out FILE]
//! ```
//! `learn` collects hindsight: every case under every guide in order (deterministic policy,
//! live tools, the lessons so far); each failed run is reviewed by the rule reviewer and its
//! lesson written to `FILE` (default: the package's `hindsight.json`, which is so produced).
//! `--cases` points at another suite folder (default: the package's `cases/`). `eval-nezha`
//! exports every Nezha case whose fault type has a guide in the suite (the first `N` with
//! `--first`), lets the alert name the injected pod and runs every guide on it with the
//! deterministic policy and live tools, then runs the full job (the alert names the entry
//! point; triage finds the pod and the guide). `--learn` runs it all again with hindsight
//! collecting itself; `--model` lets the model of `RCA_OPENAI_BASE_URL` drive the runs (each
//! case under its own guide only, no full job).
//! `record` runs our tools on each bundled incident under every guide (deterministic policy)
//! and writes the ToolStub recordings (by default into the suite's own `cases/`). `run`
//! diagnoses one case: with `RCA_OPENAI_BASE_URL` and `RCA_OPENAI_MODEL` set (and the `http`
//! feature) a model drives FLASH, otherwise the deterministic policy does; tools are replayed
//! from the recordings unless `--live`. `RCA_OPENAI_API_KEY` is sent as a bearer token when
//! set; `RCA_HINDSIGHT=path.json` loads a hindsight knowledge base.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use example_recurring_incidents as suite;
use rca_agents::flash::{FlashPolicy, HindsightBase, ModelPolicy, RulePolicy, RuleReviewer};
use rca_core::llm::{ChatModel, CompletionRequest, Message};
use rca_tools::stub::StubFallback;

type Error = Box<dyn std::error::Error + Send + Sync>;

const USAGE: &str = "usage: recurring-incidents list | record [--out DIR] | run <case> [--guide <case>] [--live] | eval-nezha <NEZHA_DIR> [--json] [--learn] [--model] [--first N] [--write-docs FILE] | learn [--out FILE]";

/// The model named by the environment, if any.
fn model_from_env() -> Result<Option<Arc<dyn ChatModel>>, Error> {
    let Ok(base_url) = std::env::var("RCA_OPENAI_BASE_URL") else {
        return Ok(None);
    };
    let model = std::env::var("RCA_OPENAI_MODEL")
        .map_err(|_| "RCA_OPENAI_BASE_URL is set: set RCA_OPENAI_MODEL too")?;
    connect(base_url, model)
}

#[cfg(feature = "http")]
fn connect(base_url: String, model: String) -> Result<Option<Arc<dyn ChatModel>>, Error> {
    // llama-cpp-python's server (the local model of `scripts/services.sh`) has its own quirks.
    let mut config = if std::env::var("RCA_LLM_SERVER").as_deref() == Ok("llama-cpp-python") {
        rca_llm::OpenAiConfig::llama_cpp_python(base_url, model)
    } else {
        rca_llm::OpenAiConfig::new(base_url, model)
    };
    if let Ok(key) = std::env::var("RCA_OPENAI_API_KEY") {
        config = config.with_api_key(key);
    }
    Ok(Some(Arc::new(rca_llm::OpenAiClient::new(config)?)))
}

#[cfg(not(feature = "http"))]
fn connect(_base_url: String, _model: String) -> Result<Option<Arc<dyn ChatModel>>, Error> {
    Err(
        "RCA_OPENAI_BASE_URL is set but this build has no HTTP client: \
         run with `--features http`"
            .into(),
    )
}

fn flag_value(args: &[String], flag: &str) -> Option<String> {
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cases_dir =
        flag_value(&args, "--cases").map_or_else(suite::default_cases_dir, PathBuf::from);
    let cases = suite::load_suite(&cases_dir)?;
    // `--cases DIR` may come first; the command is the first other word.
    let args: Vec<String> = match args.first().map(String::as_str) {
        Some("--cases") => args.iter().skip(2).cloned().collect(),
        _ => args,
    };
    match args.first().map(String::as_str) {
        Some("list") => {
            for c in &cases {
                println!(
                    "{:16} {}  (Nezha {}, truth: {} on {})",
                    c.name,
                    c.file.alert.summary,
                    c.file.nezha_case,
                    c.expected.fault_type,
                    c.expected.pod
                );
            }
        }
        Some("record") => {
            let out = flag_value(&args, "--out").map_or(cases_dir.clone(), PathBuf::from);
            for path in suite::record(&cases, &out).await? {
                eprintln!("wrote {}", path.display());
            }
        }
        Some("run") => {
            let name = args.get(1).ok_or(USAGE)?;
            let case = suite::find_case(&cases, name)?;
            let guide = match flag_value(&args, "--guide") {
                Some(g) => suite::find_case(&cases, &g)?,
                None => case,
            };
            let model = model_from_env()?;
            if let Some(m) = &model {
                // One short request first: an unreachable server fails here, once, instead of
                // failing every decision of the run.
                let probe = CompletionRequest::new(vec![Message::user(
                    "Answer with the JSON object {\"ok\": true}.",
                )])
                .json();
                m.complete(probe).await.map_err(|e| {
                    format!("the model at RCA_OPENAI_BASE_URL does not answer: {e}")
                })?;
            }
            let policy: Arc<dyn FlashPolicy> = match &model {
                Some(m) => Arc::new(ModelPolicy::new(Arc::clone(m))),
                None => Arc::new(RulePolicy),
            };
            let (incident, tools) = if args.iter().any(|a| a == "--live") {
                suite::live_tools(case).await?
            } else {
                // Calls the guide's recording lacks are served from the case's other
                // recordings; a call in none of them comes back as an error observation.
                let others = suite::all_recordings(&cases_dir, &case.name, &cases)?;
                let fallback = StubFallback::Live(others.registry());
                let (incident, stub) =
                    suite::replay_tools(&cases_dir, &case.name, &guide.name, fallback)?;
                (incident, stub.registry())
            };
            let hindsight_path = std::env::var("RCA_HINDSIGHT").ok().map(PathBuf::from);
            let hindsight = match &hindsight_path {
                Some(p) => HindsightBase::load(p)?,
                None => HindsightBase::new(),
            };
            let run = suite::run_case(case, guide, &incident, policy, tools, hindsight).await?;
            println!("{}", serde_json::to_string_pretty(&run)?);
            eprintln!(
                "answer: {}\ntruth: {} on {} ({})",
                run.answer.as_deref().unwrap_or("-"),
                case.expected.fault_type,
                case.expected.pod,
                case.expected.source
            );
        }
        Some("learn") => {
            let out = flag_value(&args, "--out").map_or_else(
                || Path::new(env!("CARGO_MANIFEST_DIR")).join(suite::HINDSIGHT_FILE),
                PathBuf::from,
            );
            let reviewer = RuleReviewer::new(suite::guide_plans(&cases)?);
            let mut base = HindsightBase::new();
            for r in suite::learn(&cases, &reviewer, &mut base).await? {
                eprintln!(
                    "{:16} under {:16} {}{}",
                    r.case,
                    r.guide,
                    if r.solved { "solved" } else { "failed" },
                    r.lesson
                        .map(|l| format!("; lesson: {l}"))
                        .unwrap_or_default()
                );
            }
            base.save(&out)?;
            eprintln!(
                "wrote {} lesson(s) to {}",
                base.lessons().len(),
                out.display()
            );
        }
        Some("eval-nezha") => {
            let data = args.get(1).ok_or(USAGE)?;
            let work = tempfile::tempdir()?;
            let mut progress = |id: &str| eprintln!("case {id}");
            let triage = suite::triage_guide(&cases_dir)?;
            let model = if args.iter().any(|a| a == "--model") {
                Some(
                    model_from_env()?
                        .ok_or("--model: set RCA_OPENAI_BASE_URL and RCA_OPENAI_MODEL")?,
                )
            } else {
                None
            };
            let first = match flag_value(&args, "--first") {
                Some(n) => Some(
                    n.parse::<usize>()
                        .map_err(|e| format!("--first {n}: {e}"))?,
                ),
                None => None,
            };
            let mut options = suite::nezha_eval::EvalOptions {
                triage: &triage,
                first,
                model: model.clone(),
                ..Default::default()
            };
            let results = suite::nezha_eval::evaluate(
                data.as_ref(),
                &cases,
                work.path(),
                &options,
                &mut progress,
            )
            .await?;
            if args.iter().any(|a| a == "--learn") {
                // The same cases again, in order, with hindsight collected from the earlier
                // ones by the rule reviewer.
                let reviewer = RuleReviewer::new(suite::guide_plans(&cases)?);
                options.reviewer = Some(&reviewer);
                let learned = suite::nezha_eval::evaluate(
                    data.as_ref(),
                    &cases,
                    work.path(),
                    &options,
                    &mut progress,
                )
                .await?;
                let table = suite::nezha_eval::hindsight_table(&results, &learned);
                println!("{table}");
                if let (Some(path), Some(model)) = (flag_value(&args, "--write-docs"), &model) {
                    let limit = first.map(|n| format!(" --first {n}")).unwrap_or_default();
                    let command = format!(
                        "RCA_OPENAI_BASE_URL=$RCA_LLM_BASE_URL RCA_OPENAI_MODEL=$RCA_LLM_MODEL cargo run -p example-recurring-incidents --features http -- eval-nezha {data} --learn --model{limit} --write-docs {path}"
                    );
                    let file = std::env::var("RCA_LLM_MODEL_FILE").unwrap_or_default();
                    let body = format!(
                        "Demonstrates that FLASH's loop runs on a real model (it measures \
                         nothing a strong model would reach); the trivial row is the baseline \
                         of the suite's tables. The same measurement with a real model driving FLASH: `{}` (file \
                         `{}`, served by `scripts/services.sh start-llm`), the first {} \
                         cases of the day in time order, each under its own type's guide \
                         (the model reads the status, plans and decides; the rules supervise), \
                         without hindsight and with the lessons `RuleReviewer` collected from \
                         the failed runs of the cases before. The model is weak (270M \
                         parameters, a base model): the figure shows that the loop runs with a \
                         real model, not what a strong one would reach.\n\n{table}",
                        model.model_id(),
                        Path::new(&file)
                            .file_name()
                            .map(|f| f.to_string_lossy().into_owned())
                            .unwrap_or_else(|| "unknown".into()),
                        learned.len(),
                    );
                    rca_eval::docs::write_section(
                        path.as_ref(),
                        "flash-suite-hindsight-model",
                        &command,
                        &body,
                    )?;
                    eprintln!("updated {path}");
                } else if let Some(path) = flag_value(&args, "--write-docs") {
                    let command = format!(
                        "cargo run -p example-recurring-incidents -- eval-nezha {data} --learn --write-docs {path}"
                    );
                    let body = format!(
                        "Measures, in-sample (the guides were written on this day's data), \
                         what hindsight adds; the trivial row names the day's most common fault \
                         type for the given pod, the baseline the guides must beat. \
                         The suite's guides on the Nezha cases in time order (deterministic \
                         policy, live tools, the alert names the pod), without hindsight and \
                         with the lessons `RuleReviewer` collected from the failed runs (under \
                         any guide) of the cases before, the Nezha fault list being the host's \
                         verdict. A case counts as solved when its own type's guide names the \
                         fault and the pod.\n\n{table}"
                    );
                    rca_eval::docs::write_section(
                        path.as_ref(),
                        "flash-suite-hindsight",
                        &command,
                        &body,
                    )?;
                    eprintln!("updated {path}");
                }
                return Ok(());
            }
            let table = suite::nezha_eval::markdown_table(&results);
            if args.iter().any(|a| a == "--json") {
                println!("{}", serde_json::to_string_pretty(&results)?);
            } else {
                println!("{table}");
                for r in &results {
                    println!(
                        "{} {:15} {}{}",
                        r.id,
                        r.fault_type,
                        if r.own_guide_right {
                            "solved"
                        } else {
                            "missed"
                        },
                        if r.wrong_fault_named {
                            ", a guide named a wrong fault:"
                        } else {
                            ""
                        }
                    );
                    if r.wrong_fault_named {
                        for (guide, answer) in &r.answers {
                            println!("    {guide} guide: {answer}");
                        }
                    }
                }
            }
            if let Some(path) = flag_value(&args, "--write-docs") {
                let command = format!(
                    "cargo run -p example-recurring-incidents -- eval-nezha {data} --write-docs {path}"
                );
                let body = format!(
                    "Measures, in-sample (the guides and their triggers were written on this \
                     day's data); the trivial row names the day's most common fault type for \
                     the given pod and for the entry point, the baseline both jobs must beat. \
                     FLASH recurring-incident guides (`examples/recurring-incidents`) on every Nezha \
                     case of a type they cover (alert protocol), deterministic policy, live \
                     tools. *Pod and guide given*: the alert names the injected pod and each \
                     guide runs on it; the case is solved when its type's guide names the fault \
                     type and the pod. *Full job*: the alert names only the entry point and its \
                     symptom (the component most traces start at, and its error rate or \
                     latency over the alert's look-back); the triage guide (`triage.md`) finds \
                     the component with `rank_components` and reads its errors and metrics, \
                     the guide whose `Trigger:` lines match runs on it; solved when its answer \
                     names the fault type and the pod. The triggers were written on this day's \
                     data: an in-sample figure.\n\n{table}"
                );
                rca_eval::docs::write_section(path.as_ref(), "flash-suite", &command, &body)?;
                eprintln!("updated {path}");
            }
        }
        _ => return Err(USAGE.into()),
    }
    Ok(())
}
