//! The recurring-incident suite: FLASH (`rca_agents::flash`) on real incidents.
//!
//! Each folder under `cases/` is one incident type: a troubleshooting guide (`guide.md`), the
//! alert that opens the incident (`case.json`: the component the alert names and the bundled
//! incident directory), the expected answer (`expected.json`, taken from the Nezha fault list)
//! and `recordings/`: every tool call and result of our own tools
//! (`rca_tools::tools::IncidentTools`) while the deterministic policy followed each guide of
//! the suite on this incident, written by `recurring-incidents record` through
//! `rca_tools::stub::ToolRecorder`. Runs replay those recordings offline with
//! `rca_tools::stub::ToolStub`, or use the live tools over the bundled telemetry.

pub mod entry_alert;
pub mod nezha_eval;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rca_agents::flash::{
    FlashAgent, FlashPolicy, FlashRun, GuideCatalog, HindsightBase, Reviewer, RulePolicy, Verdict,
    parse_tsg,
};
use rca_agents::orchestra::{IncidentTelemetry, RankComponents};
use rca_core::Incident;
use rca_core::tool::{ToolRegistry, ToolSpec};
use rca_llm::redact::Redactor;
use rca_tools::incident_dir::IncidentDir;
use rca_tools::stub::{StubFallback, StubWriter, ToolRecorder, ToolStub, read_stub};
use rca_tools::tools::IncidentTools;
use serde::{Deserialize, Serialize};

/// The suite's hindsight base (written by `recurring-incidents learn`).
pub const HINDSIGHT_FILE: &str = "hindsight.json";

/// The suite's triage guide (next to `cases/`): what runs first when the alert names only a
/// symptom at the entry point.
pub const TRIAGE_FILE: &str = "triage.md";

/// The folder of a case that holds its recordings.
pub const RECORDINGS_DIR: &str = "recordings";
/// The file (in a case's recordings) holding the incident and the tool specs of the recording.
pub const CONTEXT_FILE: &str = "context.json";

/// What went wrong.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SuiteError {
    /// No case of that name.
    #[error("no case `{0}` (see `recurring-incidents list`)")]
    NoSuchCase(String),
    /// A suite file could not be read or parsed.
    #[error("{path}: {message}")]
    File {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// The bundled telemetry could not be loaded.
    #[error("incident data: {0}")]
    Data(String),
    /// The tools could not be built, or a stub could not be read or written.
    #[error("tools: {0}")]
    Tools(String),
    /// The FLASH run failed.
    #[error("flash: {0}")]
    Flash(#[from] rca_agents::flash::FlashError),
}

fn file_error(path: &Path, e: impl std::fmt::Display) -> SuiteError {
    SuiteError::File {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

/// The alert that opens an incident: what the on-call engineer is told.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Alert {
    /// The component the alert fired on (the guide's `{component}`).
    pub component: String,
    /// The alert text.
    pub summary: String,
}

/// `case.json`: where the incident data is and what the alert says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseFile {
    /// The incident directory, relative to the case folder.
    pub incident_dir: String,
    /// The troubleshooting guide, relative to the case folder (default `guide.md`); a
    /// recurrence of a known incident type points at that type's guide.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guide: Option<String>,
    /// The Nezha case it was exported from (`rca eval nezha DATA --export <id> --out DIR`).
    pub nezha_case: String,
    /// The alert.
    pub alert: Alert,
}

/// `expected.json`: the ground truth of the incident, with where it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Expected {
    /// The injected fault type (`inject_type` of the Nezha fault list).
    pub fault_type: String,
    /// The pod the fault was injected into (`inject_pod`).
    pub pod: String,
    /// Where the truth comes from.
    pub source: String,
}

/// One incident type of the suite.
#[derive(Debug, Clone)]
pub struct Case {
    /// The folder name (`cpu-contention`, ...).
    pub name: String,
    /// The folder.
    pub dir: PathBuf,
    /// The troubleshooting guide (Markdown).
    pub guide: String,
    /// `case.json`.
    pub file: CaseFile,
    /// `expected.json`.
    pub expected: Expected,
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T, SuiteError> {
    let text = std::fs::read_to_string(path).map_err(|e| file_error(path, e))?;
    serde_json::from_str(&text).map_err(|e| file_error(path, e))
}

impl Case {
    /// Reads a case folder.
    pub fn load(dir: &Path) -> Result<Case, SuiteError> {
        let file: CaseFile = read_json(&dir.join("case.json"))?;
        let guide_path = dir.join(file.guide.as_deref().unwrap_or("guide.md"));
        let guide = std::fs::read_to_string(&guide_path).map_err(|e| file_error(&guide_path, e))?;
        Ok(Case {
            name: dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            dir: dir.to_path_buf(),
            guide,
            file,
            expected: read_json(&dir.join("expected.json"))?,
        })
    }

    /// The bundled incident directory.
    pub fn incident_dir(&self) -> PathBuf {
        self.dir.join(&self.file.incident_dir)
    }

    /// The facts a run starts from: the alert's component and the start of the alert's
    /// look-back ([`ALERT_LOOK_BACK_MILLIS`] before it fired, or the window's start if that
    /// is later).
    pub fn facts(&self, incident: &Incident) -> BTreeMap<String, serde_json::Value> {
        let alert_start = incident
            .detected_at
            .offset_millis(-ALERT_LOOK_BACK_MILLIS)
            .max(incident.window.start);
        BTreeMap::from([
            (
                "component".to_string(),
                serde_json::json!(self.file.alert.component),
            ),
            (
                "alert_start".to_string(),
                serde_json::json!(alert_start.to_string()),
            ),
        ])
    }
}

/// How far back an alert looks when it fires: alert rules judge a recent range (five minutes
/// is the common default of Prometheus-style rules), so "since the alert" in a guide means
/// since the start of that range.
pub const ALERT_LOOK_BACK_MILLIS: i64 = 5 * 60_000;

/// The triage guide that sits next to the cases folder `cases_dir`.
pub fn triage_guide(cases_dir: &Path) -> Result<String, SuiteError> {
    let path = cases_dir
        .parent()
        .unwrap_or(Path::new("."))
        .join(TRIAGE_FILE);
    std::fs::read_to_string(&path).map_err(|e| file_error(&path, e))
}

/// The suite's guides as a catalogue to pick from, by case name.
pub fn catalog(cases: &[Case]) -> Result<GuideCatalog, SuiteError> {
    Ok(GuideCatalog::new(
        cases.iter().map(|c| (c.name.clone(), c.guide.clone())),
    )?)
}

/// The suite's own `cases/` folder.
pub fn default_cases_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("cases")
}

/// Every case under `dir`, sorted by name.
pub fn load_suite(dir: &Path) -> Result<Vec<Case>, SuiteError> {
    let entries = std::fs::read_dir(dir).map_err(|e| file_error(dir, e))?;
    let mut cases = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| file_error(dir, e))?.path();
        if path.join("case.json").is_file() {
            cases.push(Case::load(&path)?);
        }
    }
    cases.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(cases)
}

/// Finds a case by name.
pub fn find_case<'a>(cases: &'a [Case], name: &str) -> Result<&'a Case, SuiteError> {
    cases
        .iter()
        .find(|c| c.name == name)
        .ok_or_else(|| SuiteError::NoSuchCase(name.to_string()))
}

/// What a replay needs besides the calls: the incident and the tools' specs, as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordingContext {
    /// The incident the tools ran on.
    pub incident: Incident,
    /// The specs of the recorded tools (what a model is shown).
    pub tools: Vec<ToolSpec>,
}

/// A case's bundled incident directory, opened.
fn open_incident(case: &Case) -> Result<IncidentDir, SuiteError> {
    let dir = case.incident_dir();
    IncidentDir::open(&dir).map_err(|e| SuiteError::Data(format!("{}: {e}", dir.display())))
}

/// Our tools over an opened incident directory (deterministic experts, no model).
async fn incident_tools(loaded: IncidentDir) -> Result<ToolRegistry, SuiteError> {
    IncidentTools::from_dir(loaded)
        .map_err(|e| SuiteError::Data(e.to_string()))?
        .registry(None)
        .await
        .map_err(|e| SuiteError::Tools(e.to_string()))
}

/// The live tools over a case's bundled telemetry (deterministic experts, no model).
pub async fn live_tools(case: &Case) -> Result<(Incident, ToolRegistry), SuiteError> {
    let loaded = open_incident(case)?;
    let incident = loaded.incident.clone();
    Ok((incident, incident_tools(loaded).await?))
}

/// The live tools of [`live_tools`] plus `rank_components` (the deterministic diagnosis over
/// the same telemetry): what a run needs that must find the component itself.
pub async fn full_job_tools(case: &Case) -> Result<(Incident, ToolRegistry), SuiteError> {
    let loaded = open_incident(case)?;
    let incident = loaded.incident.clone();
    let telemetry = IncidentTelemetry::of_dir(&loaded);
    let mut registry = incident_tools(loaded).await?;
    registry
        .register_typed(RankComponents::new(telemetry, incident.clone()))
        .map_err(|e| SuiteError::Tools(e.to_string()))?;
    Ok((incident, registry))
}

/// The recording of the tools of `case` while following `guide_case`'s guide.
pub fn recording_path(root: &Path, case: &str, guide_case: &str) -> PathBuf {
    root.join(case)
        .join(RECORDINGS_DIR)
        .join(format!("{guide_case}.stub.jsonl"))
}

/// Records the suite: for every case, the live tools run under every guide of the suite with
/// the deterministic policy, each call and result written through `ToolRecorder` to
/// `<out>/<case>/recordings/<guide>.stub.jsonl`, plus `context.json`. With `out` the cases
/// folder itself, this refreshes the committed recordings. Returns the files written.
pub async fn record(cases: &[Case], out: &Path) -> Result<Vec<PathBuf>, SuiteError> {
    let mut written = Vec::new();
    for case in cases {
        let (incident, live) = live_tools(case).await?;
        let dir = out.join(&case.name).join(RECORDINGS_DIR);
        std::fs::create_dir_all(&dir).map_err(|e| file_error(&dir, e))?;
        let context = RecordingContext {
            incident: incident.clone(),
            tools: live.specs(),
        };
        let context_path = dir.join(CONTEXT_FILE);
        let text =
            serde_json::to_string_pretty(&context).map_err(|e| file_error(&context_path, e))?;
        std::fs::write(&context_path, text + "\n").map_err(|e| file_error(&context_path, e))?;
        written.push(context_path);
        for guide in cases {
            let path = recording_path(out, &case.name, &guide.name);
            let writer = Arc::new(
                StubWriter::create(&path, Redactor::default())
                    .map_err(|e| SuiteError::Tools(e.to_string()))?,
            );
            let recording = ToolRecorder::wrap_registry(&live, writer);
            FlashAgent::new(Arc::new(RulePolicy), recording)
                .run(&incident, &guide.guide, case.facts(&incident))
                .await?;
            written.push(path);
        }
    }
    Ok(written)
}

/// A recorded case, ready to replay offline.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The incident as recorded.
    pub incident: Incident,
    /// The tools' specs as recorded.
    pub tools: Vec<ToolSpec>,
}

/// Reads `<root>/<case>/recordings/context.json`.
pub fn recorded(root: &Path, case: &str) -> Result<Recorded, SuiteError> {
    let context: RecordingContext =
        read_json(&root.join(case).join(RECORDINGS_DIR).join(CONTEXT_FILE))?;
    Ok(Recorded {
        incident: context.incident,
        tools: context.tools,
    })
}

/// The tools of `case` replayed from its recording under `guide_case`'s guide; a call that
/// matches no recording goes to `fallback`.
pub fn replay_tools(
    root: &Path,
    case: &str,
    guide_case: &str,
    fallback: StubFallback,
) -> Result<(Incident, ToolStub), SuiteError> {
    let rec = recorded(root, case)?;
    let stub = ToolStub::load(&recording_path(root, case, guide_case), rec.tools, fallback)
        .map_err(|e| SuiteError::Tools(e.to_string()))?;
    Ok((rec.incident, stub))
}

/// Every recorded call of `case` under all the guides of `guides`, as one stub: a fallback
/// for replays that leave their guide's recording (a model's own choices, a hindsight hint).
pub fn all_recordings(root: &Path, case: &str, guides: &[Case]) -> Result<ToolStub, SuiteError> {
    let rec = recorded(root, case)?;
    let mut calls = Vec::new();
    for guide in guides {
        calls.extend(
            read_stub(&recording_path(root, case, &guide.name))
                .map_err(|e| SuiteError::Tools(e.to_string()))?,
        );
    }
    Ok(ToolStub::new(calls, rec.tools, StubFallback::Error))
}

/// Runs FLASH on `case` following `guide`'s troubleshooting guide, with `policy` and `tools`.
pub async fn run_case(
    case: &Case,
    guide: &Case,
    incident: &Incident,
    policy: Arc<dyn FlashPolicy>,
    tools: ToolRegistry,
    hindsight: HindsightBase,
) -> Result<FlashRun, SuiteError> {
    Ok(FlashAgent::new(policy, tools)
        .with_hindsight(hindsight)
        .run(incident, &guide.guide, case.facts(incident))
        .await?)
}

/// One step without its timing: thought, action, observation text and error.
pub type ComparableStep = (
    String,
    Option<rca_core::trajectory::Action>,
    Option<String>,
    Option<String>,
);

/// The steps of a trajectory without their timings: what must be equal between a run and its
/// replay.
pub fn comparable_steps(run: &FlashRun) -> Vec<ComparableStep> {
    run.trajectory
        .steps
        .iter()
        .map(|s| {
            (
                s.thought.clone(),
                s.action.clone(),
                s.observation.as_ref().map(|o| o.text.clone()),
                s.error.clone(),
            )
        })
        .collect()
}

impl Case {
    /// The host's verdict on this incident: its fault type about its pod.
    pub fn verdict(&self) -> Verdict {
        Verdict::new(&self.expected.fault_type, &self.expected.pod)
    }
}

/// One run of [`learn`].
#[derive(Debug, Clone, Serialize)]
pub struct LearnedRun {
    /// The incident (case name).
    pub case: String,
    /// The guide followed (case name).
    pub guide: String,
    /// The run's answer.
    pub answer: Option<String>,
    /// Whether the case's verdict accepts it.
    pub solved: bool,
    /// How many lessons were offered to the run (the base so far).
    pub lessons_before: usize,
    /// The hint of the lesson the failure taught, when one was added.
    pub lesson: Option<String>,
}

/// Collects hindsight on the suite: every case under every guide, in order, with the
/// deterministic policy, the live tools and the lessons collected so far. A run whose answer
/// the case's verdict rejects is reviewed by `reviewer`, and its lesson (if any, and not a
/// duplicate) joins `base` for the runs after it.
pub async fn learn(
    cases: &[Case],
    reviewer: &dyn Reviewer,
    base: &mut HindsightBase,
) -> Result<Vec<LearnedRun>, SuiteError> {
    let mut out = Vec::new();
    for case in cases {
        let verdict = case.verdict();
        for guide in cases {
            let (incident, tools) = live_tools(case).await?;
            let lessons_before = base.lessons().len();
            let run = run_case(
                case,
                guide,
                &incident,
                Arc::new(RulePolicy),
                tools,
                base.clone(),
            )
            .await?;
            let solved = verdict.accepts(run.answer.as_deref());
            let lesson = rca_agents::flash::learn(reviewer, None, base, &run, &verdict)
                .await?
                .map(|l| l.hint.text);
            out.push(LearnedRun {
                case: case.name.clone(),
                guide: guide.name.clone(),
                answer: run.answer,
                solved,
                lessons_before,
                lesson,
            });
        }
    }
    Ok(out)
}

/// The suite's guides as plans (what a rule reviewer knows).
pub fn guide_plans(cases: &[Case]) -> Result<Vec<rca_agents::flash::DiagnosisPlan>, SuiteError> {
    cases
        .iter()
        .map(|c| parse_tsg(&c.guide).map_err(SuiteError::from))
        .collect()
}
