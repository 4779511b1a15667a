//! `rca diagnose DIR`: staged multi-modal diagnosis of an incident directory.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
#[cfg(feature = "sql")]
use rca_agents::orchestra::IncidentTelemetry;
#[cfg(feature = "sql")]
use rca_agents::orchestra::pipeline::service_graph;
use rca_agents::orchestra::{DiagnosisPipeline, Onset, PipelineConfig, RoleModels};
use rca_agents::report::runs;
use rca_agents::report::{ReportBundle, render_html, render_json, render_markdown};
use rca_tools::incident_dir::IncidentDir;

use crate::config::Config;
use crate::progress::Progress;

/// Arguments of `rca diagnose`.
#[derive(Debug, Args)]
pub struct DiagnoseArgs {
    /// The incident directory (an `incident.json` manifest and telemetry files).
    pub dir: PathBuf,
    /// Read telemetry files that resolve (through symbolic links) outside the incident
    /// directory; by default they are refused.
    #[arg(long)]
    pub allow_outside_links: bool,
    /// The bytes the incident's telemetry files may hold together once decompressed; a larger
    /// incident is refused with an error (the records are held in memory).
    #[arg(long, value_name = "BYTES", default_value_t = rca_tools::sources::DEFAULT_MAX_TELEMETRY_BYTES)]
    pub max_telemetry_bytes: u64,
    /// Print the report as JSON instead of Markdown.
    #[arg(long)]
    pub json: bool,
    /// Also write a self-contained HTML report here.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Where to save the trajectory (default: a new run in the runs store,
    /// `rca-runs/<incident id>/<run id>/trajectory.json`, named in
    /// `rca-runs/<incident id>/latest`).
    #[arg(long, value_name = "FILE")]
    pub trajectory: Option<PathBuf>,
    /// Length of the current window before the detection time, in minutes (default: the
    /// config's `diagnosis.current_minutes`, 10).
    #[arg(long)]
    pub current_minutes: Option<i64>,
    /// How many modalities must agree before the controller concludes (default: the config's
    /// `diagnosis.min_modalities`, 2).
    #[arg(long)]
    pub min_modalities: Option<usize>,
    /// A configuration file (see `rca config check`).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Long-term memory in this folder (created when missing): past incidents with a similar
    /// alert are offered to the planner and past actions to the explorers, and this run is
    /// remembered for the next.
    #[arg(long, value_name = "DIR")]
    pub memory: Option<PathBuf>,
    /// Explore with generated SQL tools from this inventory (created when missing, saved
    /// after the run; see `rca tools warm-up`) instead of the built-in analyzers.
    #[cfg(feature = "sql")]
    #[arg(long, value_name = "FILE")]
    pub generated_tools: Option<PathBuf>,
}

/// Runs the command.
pub async fn run(args: DiagnoseArgs) -> anyhow::Result<()> {
    let config = load_config(args.config.as_deref())?;
    let redactor = config.redactor();
    let current_minutes = args
        .current_minutes
        .unwrap_or(config.diagnosis.current_minutes);
    let min_modalities = args
        .min_modalities
        .unwrap_or(config.diagnosis.min_modalities);
    // Three stages; loading (decompressing and parsing every telemetry file) is the long one
    // on large incidents. The bar draws only when stderr is a terminal.
    let progress = Progress::bar(3, "diagnose");
    progress.set_message(&format!("loading telemetry from {}", args.dir.display()));
    let loaded = IncidentDir::open_with(
        &args.dir,
        rca_tools::incident_dir::IncidentOptions {
            allow_outside: args.allow_outside_links,
            max_telemetry_bytes: args.max_telemetry_bytes,
        },
    )
    .with_context(|| format!("cannot load the incident directory {}", args.dir.display()))?;
    for report in [
        loaded.logs.report(),
        loaded.metrics.report(),
        loaded.traces.report(),
    ] {
        if report.bad_rows > 0 {
            eprintln!(
                "note: {} telemetry rows could not be read and were skipped (first: {})",
                report.bad_rows,
                report.problems.first().map(String::as_str).unwrap_or("-")
            );
        }
        if report.repaired_rows > 0 {
            eprintln!(
                "note: {} telemetry rows were repaired and kept (invalid UTF-8 decoded lossily, \
                 NUL bytes replaced, over-long lines cut)",
                report.repaired_rows
            );
        }
    }
    progress.inc(1);
    // Roles with a model in the config are model-backed (their policies answer when the
    // model fails); the rest are deterministic policies.
    let models = role_models(&config)?;
    if config.roles.explorer.is_some() {
        eprintln!(
            "note: explorers run the telemetry analyzers; `roles.explorer` is used by agents \
             that call tools (rca-agents react), not by this command"
        );
    }
    let pipeline_config = pipeline_config(&config, current_minutes, min_modalities);
    #[cfg(feature = "sql")]
    let generated = match &args.generated_tools {
        Some(path) => Some(crate::generated_tools::GeneratedTools::open(path, &loaded)?),
        None => None,
    };
    let pipeline = {
        #[cfg(feature = "sql")]
        if let Some(tools) = &generated {
            DiagnosisPipeline::with_explorers(
                tools.explorers(),
                service_graph(&loaded),
                models,
                pipeline_config,
            )
            .map(|p| p.with_onset_telemetry(IncidentTelemetry::of_dir(&loaded)))
        } else {
            DiagnosisPipeline::new(&loaded, models, pipeline_config)
        }
        #[cfg(not(feature = "sql"))]
        DiagnosisPipeline::new(&loaded, models, pipeline_config)
    }?;
    let pipeline = match &args.memory {
        Some(dir) => {
            let mut memory = rca_agents::orchestra::DiagnosisMemory::open(dir)
                .with_context(|| format!("cannot open the memory folder {}", dir.display()))?;
            pipeline.with_memory(&mut memory)?
        }
        None => pipeline,
    };
    let graph_edges = pipeline.service_graph.clone();
    progress.set_message("diagnosing");
    let run = pipeline
        .run(&loaded.incident)
        .await
        .context("diagnosis failed")?;
    match &run.onset {
        Some(Onset::Estimated(e)) => eprintln!(
            "onset estimated at {} ({} of {} series changed, agreement {:.2}); the current \
             window runs from it to the detection time",
            e.at, e.voting, e.series, e.agreement
        ),
        Some(Onset::Known { at }) => eprintln!("onset stated by the incident: {at}"),
        None => {}
    }
    for event in &run.events {
        if let rca_agents::orchestra::RunEvent::Recalled { incidents } = event {
            let ids: Vec<&str> = incidents.iter().map(|p| p.incident.as_str()).collect();
            eprintln!(
                "long-term memory offered {} past incident(s): {}",
                ids.len(),
                ids.join(", ")
            );
        }
    }
    for (role, error) in run.fallbacks() {
        eprintln!(
            "warning: the {role}'s model failed ({error}); its deterministic policy answered"
        );
    }
    #[cfg(feature = "sql")]
    if let Some(tools) = &generated {
        let concluded = matches!(
            run.decision,
            Some(rca_agents::orchestra::Decision::Conclude { .. })
        );
        tools.finish(concluded)?;
    }
    progress.inc(1);
    progress.set_message("writing the trajectory and reports");
    let bundle = report_bundle(
        &loaded,
        run.report.clone(),
        run.trajectory(),
        graph_edges,
        run.onset.map(|o| o.at()),
        current_minutes,
    )
    .await;
    // Everything persisted or printed is redacted.
    let record = serde_json::json!({
        "format_version": TRAJECTORY_FORMAT_VERSION,
        "incident": bundle.incident,
        "trajectory": bundle.trajectory,
        "events": run.events,
        "evidence": run.evidence,
        "onset": run.onset,
        "report": run.report,
    });
    let outputs = Outputs {
        trajectory: args.trajectory.as_deref(),
        html: args.html.as_deref(),
        json: args.json,
    };
    let saved = outputs.write(&bundle, record, &redactor)?;
    progress.inc(1);
    progress.finish();
    outputs.print(&bundle, &redactor);
    if bundle.report.candidates.is_empty() {
        // Nothing pointed at a component: not a success (the report says why).
        return Err(crate::NoRootCause(format!(
            "{}; trajectory saved to {}",
            bundle.report.root_cause,
            saved.display()
        ))
        .into());
    }
    eprintln!("trajectory saved to {}", saved.display());
    Ok(())
}

/// What a report shows of a diagnosis of `loaded` (see
/// [`ReportBundle::of_incident_dir`]); `rca diagnose`, `rca react` and `rca flash` build their
/// bundles here.
pub(crate) async fn report_bundle(
    loaded: &IncidentDir,
    report: rca_core::DiagnosisReport,
    trajectory: rca_core::trajectory::Trajectory,
    service_graph: Vec<(String, String)>,
    onset: Option<rca_core::Timestamp>,
    current_minutes: i64,
) -> ReportBundle {
    ReportBundle::of_incident_dir(
        loaded,
        report,
        trajectory,
        service_graph,
        onset,
        current_minutes,
    )
    .await
}

/// The models of the pipeline's roles from the configuration (a role without one runs its
/// deterministic policy). `rca diagnose` and `rca mcp` share it.
pub(crate) fn role_models(config: &Config) -> anyhow::Result<RoleModels> {
    Ok(RoleModels {
        planner: config.model_for(config.roles.planner.as_ref())?,
        controller: config.model_for(config.roles.controller.as_ref())?,
        reasoner: config.model_for(config.roles.reasoner.as_ref())?,
    })
}

/// The pipeline's settings from the configuration and the command's overrides. `rca diagnose`
/// and `rca mcp` share it.
pub(crate) fn pipeline_config(
    config: &Config,
    current_minutes: i64,
    min_modalities: usize,
) -> PipelineConfig {
    PipelineConfig {
        current_minutes,
        min_modalities,
        wall_time: Some(std::time::Duration::from_secs(config.budgets.wall_seconds)),
        taxonomy: config.diagnosis.taxonomy.clone().unwrap_or_default(),
        ..PipelineConfig::default()
    }
}

/// Loads the configuration file, or the built-in defaults without one.
pub(crate) fn load_config(path: Option<&std::path::Path>) -> anyhow::Result<Config> {
    match path {
        Some(path) => Config::load(path).map_err(|problems| {
            for p in &problems {
                eprintln!("error: {p}");
            }
            anyhow::anyhow!("{}: {} problem(s)", path.display(), problems.len())
        }),
        None => Ok(Config::default()),
    }
}

/// Where a diagnosis goes: the trajectory record, an optional HTML report, and the report on
/// stdout as Markdown or JSON. Everything is redacted first.
pub(crate) struct Outputs<'a> {
    /// The trajectory file (default: a new run in `rca-runs/<incident id>/<run id>/`).
    pub trajectory: Option<&'a std::path::Path>,
    /// The HTML report, if asked for.
    pub html: Option<&'a std::path::Path>,
    /// Print JSON instead of Markdown.
    pub json: bool,
}

impl Outputs<'_> {
    /// Writes the trajectory record, the HTML report, and for a run in the runs store its
    /// Markdown report (`report.md` beside the trajectory); returns the trajectory's path.
    pub fn write(
        &self,
        bundle: &ReportBundle,
        record: serde_json::Value,
        redactor: &rca_llm::Redactor,
    ) -> anyhow::Result<PathBuf> {
        let path = self.write_record(&bundle.incident, record, redactor)?;
        // A run in the runs store keeps its Markdown report beside the trajectory (as the MCP
        // server's runs do, which serves both).
        if self.trajectory.is_none()
            && let Some(dir) = path.parent()
        {
            let report = dir.join(runs::REPORT_FILE);
            write_atomic(
                &report,
                redactor.redact(&render_markdown(bundle)).as_bytes(),
            )
            .with_context(|| format!("cannot write {}", report.display()))?;
        }
        if let Some(html) = self.html {
            write_atomic(html, redactor.redact(&render_html(bundle)).as_bytes())
                .with_context(|| format!("cannot write {}", html.display()))?;
        }
        Ok(path)
    }

    /// Writes the trajectory record only; returns its path. Without an explicit path the run
    /// gets its own folder in the runs store, `rca-runs/<incident id>/<run id>/trajectory.json`
    /// (see [`rca_agents::report::runs`]), and becomes the incident's `latest`: runs sit side
    /// by side instead of overwriting one another.
    pub fn write_record(
        &self,
        incident: &rca_core::Incident,
        mut record: serde_json::Value,
        redactor: &rca_llm::Redactor,
    ) -> anyhow::Result<PathBuf> {
        redactor.redact_json(&mut record);
        let Some(trajectory_path) = self.trajectory else {
            let root = PathBuf::from(runs::DEFAULT_RUNS_DIR);
            return save_run(&root, &incident.id, record);
        };
        let text = serde_json::to_string_pretty(&record)?;
        if let Some(dir) = trajectory_path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
        {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        write_atomic(trajectory_path, text.as_bytes())
            .with_context(|| format!("cannot write {}", trajectory_path.display()))?;
        Ok(trajectory_path.to_path_buf())
    }

    /// Prints the report.
    pub fn print(&self, bundle: &ReportBundle, redactor: &rca_llm::Redactor) {
        if self.json {
            println!("{}", redactor.redact(&render_json(&bundle.report)));
        } else {
            print!("{}", redactor.redact(&render_markdown(bundle)));
        }
    }
}

/// The format version of the saved trajectory record (`format_version` in the file).
pub use rca_agents::report::TRAJECTORY_FORMAT_VERSION;

/// Writes an output file: atomically for a regular file, directly for a device or FIFO,
/// through a symlink, `-` to stdout (see [`rca_tools::files::write_atomic`]).
pub use rca_tools::files::write_atomic;

/// Saves a (redacted) trajectory record as a new run of `incident_id` in the runs store under
/// `root`: a run folder of its own, the record with its `run_id`, then the `latest` pointer.
/// Returns the trajectory's path.
pub(crate) fn save_run(
    root: &std::path::Path,
    incident_id: &str,
    mut record: serde_json::Value,
) -> anyhow::Result<PathBuf> {
    let run = runs::create_run(root, incident_id).with_context(|| {
        format!(
            "cannot create a run folder for {incident_id} in {}",
            root.display()
        )
    })?;
    if let Some(fields) = record.as_object_mut() {
        fields.insert("run_id".into(), serde_json::json!(run.id));
    }
    let text = serde_json::to_string_pretty(&record)?;
    let path = run.dir.join(runs::TRAJECTORY_FILE);
    write_atomic(&path, text.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))?;
    runs::set_latest(root, incident_id, &run.id).with_context(|| {
        format!(
            "cannot record {} as the latest run in {}",
            run.id,
            root.display()
        )
    })?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_atomically_and_replaces_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trajectory.json");
        write_atomic(&path, b"old").unwrap();
        write_atomic(&path, b"new").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        // A directory in the way: the write fails and leaves no temporary file behind.
        let blocked = dir.path().join("blocked");
        std::fs::create_dir_all(blocked.join("inside")).unwrap();
        assert!(write_atomic(&blocked, b"x").is_err());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }
}
