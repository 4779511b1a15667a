//! ToolStub (FLASH): record every tool call and result of a real run, and replay them offline.
//!
//! [`ToolRecorder`] wraps tools so each call is appended to a stub file (JSON lines, redacted,
//! with a format-version header). [`ToolStub`] serves a stub file: each call must match a
//! recorded call of the same tool with the same arguments (recorded calls are consumed in
//! order, so repeated calls replay repeated results); a call that matches nothing is a clear
//! error naming the closest recorded call, or goes to a configured fallback.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use rca_core::tool::{Tool, ToolContext, ToolOutput, ToolRegistry};
use rca_core::{StoreError, ToolError};
use rca_llm::redact::Redactor;
use serde::{Deserialize, Serialize};

/// The stub-file format this build writes and reads.
pub const STUB_FORMAT_VERSION: u32 = 1;

/// One recorded call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedCall {
    /// The tool.
    pub tool: String,
    /// The arguments.
    pub args: serde_json::Value,
    /// The result: the output, or the error message.
    pub result: Result<ToolOutput, String>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Header {
    tool_stub_version: u32,
}

/// Arguments in a canonical form (object keys sorted, recursively), so that key order never
/// makes two equal calls differ.
pub fn canonical_args(value: &serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let mut out = serde_json::Map::new();
            for k in keys {
                out.insert(k.clone(), canonical_args(&map[k]));
            }
            serde_json::Value::Object(out)
        }
        serde_json::Value::Array(items) => {
            serde_json::Value::Array(items.iter().map(canonical_args).collect())
        }
        other => other.clone(),
    }
}

/// Appends calls to a stub file.
#[derive(Debug)]
pub struct StubWriter {
    path: PathBuf,
    file: Mutex<std::fs::File>,
    redactor: Redactor,
}

impl StubWriter {
    /// Creates (truncates) the stub file at `path` and writes its header. Everything written
    /// is redacted with `redactor` first.
    pub fn create(path: &Path, redactor: Redactor) -> Result<Self, StoreError> {
        let io = |e: std::io::Error| StoreError::Io {
            message: format!("{}: {e}", path.display()),
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let header = serde_json::to_string(&Header {
            tool_stub_version: STUB_FORMAT_VERSION,
        })
        .map_err(|e| StoreError::Io {
            message: e.to_string(),
        })?;
        // The header goes to a temporary sibling that is renamed over `path`, so a previous
        // stub is replaced only by a valid one; appends then go to the renamed file.
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(format!(".tmp-{}", std::process::id()));
        let tmp = PathBuf::from(tmp);
        let mut file = std::fs::File::create(&tmp).map_err(io)?;
        writeln!(file, "{header}")
            .and_then(|_| file.flush())
            .map_err(io)?;
        std::fs::rename(&tmp, path).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            io(e)
        })?;
        Ok(StubWriter {
            path: path.to_path_buf(),
            file: Mutex::new(file),
            redactor,
        })
    }

    /// Appends one call (flushed at once, so a crash loses at most the call in flight).
    pub fn append(&self, call: &RecordedCall) -> Result<(), StoreError> {
        let mut value = serde_json::to_value(call).map_err(|e| StoreError::Io {
            message: e.to_string(),
        })?;
        self.redactor.redact_json(&mut value);
        let line = value.to_string();
        let mut file = self.file.lock().map_err(|_| StoreError::Io {
            message: "stub writer poisoned".into(),
        })?;
        writeln!(file, "{line}")
            .and_then(|_| file.flush())
            .map_err(|e| StoreError::Io {
                message: format!("{}: {e}", self.path.display()),
            })
    }
}

/// Wraps a tool so that every call is recorded.
pub struct ToolRecorder {
    inner: Arc<dyn Tool>,
    writer: Arc<StubWriter>,
}

impl ToolRecorder {
    /// Records calls of `inner` into `writer`.
    pub fn new(inner: Arc<dyn Tool>, writer: Arc<StubWriter>) -> Self {
        ToolRecorder { inner, writer }
    }

    /// A registry whose every tool records into `writer`.
    pub fn wrap_registry(registry: &ToolRegistry, writer: Arc<StubWriter>) -> ToolRegistry {
        let mut out = ToolRegistry::new();
        for name in registry.names() {
            if let Some(tool) = registry.get(&name) {
                // Names are unique in the source registry, so this cannot collide.
                let _ = out.register(Arc::new(ToolRecorder::new(
                    Arc::clone(tool),
                    Arc::clone(&writer),
                )));
            }
        }
        out
    }
}

#[async_trait]
impl Tool for ToolRecorder {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn description(&self) -> &str {
        self.inner.description()
    }
    fn parameters(&self) -> serde_json::Value {
        self.inner.parameters()
    }
    fn is_stateless(&self) -> bool {
        self.inner.is_stateless()
    }
    async fn call(
        &self,
        args: serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let result = self.inner.call(args.clone(), ctx).await;
        let record = RecordedCall {
            tool: self.inner.name().to_string(),
            args: canonical_args(&args),
            result: result.clone().map_err(|e| e.to_string()),
        };
        if let Err(e) = self.writer.append(&record) {
            tracing::warn!(error = %e, "tool stub could not record a call");
        }
        result
    }
}

/// Reads a stub file.
pub fn read_stub(path: &Path) -> Result<Vec<RecordedCall>, StoreError> {
    let text = std::fs::read_to_string(path).map_err(|e| StoreError::Io {
        message: format!("{}: {e}", path.display()),
    })?;
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header: Header = lines
        .next()
        .and_then(|l| serde_json::from_str(l).ok())
        .ok_or_else(|| StoreError::Corrupt {
            location: path.display().to_string(),
            message: "missing tool-stub header".into(),
        })?;
    if header.tool_stub_version != STUB_FORMAT_VERSION {
        return Err(StoreError::UnsupportedVersion {
            location: path.display().to_string(),
            found: header.tool_stub_version,
            expected: STUB_FORMAT_VERSION,
        });
    }
    let body: Vec<&str> = lines.collect();
    // Calls are appended one line at a time; a crash mid-append leaves a last line without
    // its newline. That torn call is dropped (it was in flight); damage anywhere else is an
    // error.
    let torn_tail = !text.ends_with('\n');
    let mut calls = Vec::with_capacity(body.len());
    for (i, l) in body.iter().enumerate() {
        match serde_json::from_str(l) {
            Ok(call) => calls.push(call),
            Err(_) if torn_tail && i + 1 == body.len() => {
                tracing::warn!(path = %path.display(), "dropping a torn last call (no newline)");
            }
            Err(e) => {
                return Err(StoreError::Corrupt {
                    location: format!("{}:{}", path.display(), i + 2),
                    message: e.to_string(),
                });
            }
        }
    }
    Ok(calls)
}

/// What a replayed call that matches no recording does.
#[derive(Clone, Default)]
pub enum StubFallback {
    /// Fail with an error naming the closest recorded call (the default).
    #[default]
    Error,
    /// Call the real tool of the same name in this registry.
    Live(ToolRegistry),
    /// Answer with this text.
    Text(String),
}

/// Serves recorded calls in place of the real tools.
#[derive(Clone)]
pub struct ToolStub {
    calls: Arc<Mutex<Vec<(RecordedCall, bool)>>>,
    fallback: StubFallback,
    specs: Vec<rca_core::tool::ToolSpec>,
}

impl ToolStub {
    /// A stub over recorded calls, presenting the tools described by `specs`.
    pub fn new(
        calls: Vec<RecordedCall>,
        specs: Vec<rca_core::tool::ToolSpec>,
        fallback: StubFallback,
    ) -> Self {
        ToolStub {
            calls: Arc::new(Mutex::new(calls.into_iter().map(|c| (c, false)).collect())),
            fallback,
            specs,
        }
    }

    /// A stub over a stub file.
    pub fn load(
        path: &Path,
        specs: Vec<rca_core::tool::ToolSpec>,
        fallback: StubFallback,
    ) -> Result<Self, StoreError> {
        Ok(Self::new(read_stub(path)?, specs, fallback))
    }

    /// A registry whose tools are served by this stub.
    pub fn registry(&self) -> ToolRegistry {
        let mut out = ToolRegistry::new();
        for spec in &self.specs {
            let _ = out.register(Arc::new(StubbedTool {
                spec: spec.clone(),
                stub: self.clone(),
            }));
        }
        out
    }

    /// Recorded calls not replayed yet.
    pub fn unused(&self) -> Vec<RecordedCall> {
        self.calls
            .lock()
            .map(|c| {
                c.iter()
                    .filter(|(_, used)| !used)
                    .map(|(c, _)| c.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    fn take(&self, tool: &str, args: &serde_json::Value) -> Result<Option<RecordedCall>, String> {
        let wanted = canonical_args(args);
        let mut calls = self
            .calls
            .lock()
            .map_err(|_| "tool stub poisoned".to_string())?;
        if let Some((call, used)) = calls
            .iter_mut()
            .find(|(c, used)| !*used && c.tool == tool && c.args == wanted)
        {
            *used = true;
            return Ok(Some(call.clone()));
        }
        // The closest recording of the same tool, for the error message.
        let closest = calls
            .iter()
            .filter(|(c, _)| c.tool == tool)
            .map(|(c, _)| c.args.to_string())
            .min_by_key(|a| strsim_distance(a, &wanted.to_string()));
        Err(match closest {
            Some(a) => format!(
                "no recorded call of `{tool}` with arguments {wanted}; closest recorded arguments: {a}"
            ),
            None => format!("no recorded call of `{tool}` at all"),
        })
    }
}

fn strsim_distance(a: &str, b: &str) -> usize {
    // A cheap distance: length difference plus differing characters at equal positions.
    let diff = a.chars().zip(b.chars()).filter(|(x, y)| x != y).count();
    diff + a.chars().count().abs_diff(b.chars().count())
}

struct StubbedTool {
    spec: rca_core::tool::ToolSpec,
    stub: ToolStub,
}

#[async_trait]
impl Tool for StubbedTool {
    fn name(&self) -> &str {
        &self.spec.name
    }
    fn description(&self) -> &str {
        &self.spec.description
    }
    fn parameters(&self) -> serde_json::Value {
        self.spec.parameters.clone()
    }
    async fn call(
        &self,
        args: serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        match self.stub.take(&self.spec.name, &args) {
            Ok(Some(call)) => call.result.map_err(|message| ToolError::Failed { message }),
            Ok(None) => Err(ToolError::failed("tool stub returned nothing")),
            Err(miss) => match &self.stub.fallback {
                StubFallback::Error => Err(ToolError::Failed {
                    message: format!("tool stub miss: {miss}"),
                }),
                StubFallback::Text(text) => Ok(ToolOutput::text(text.clone())),
                StubFallback::Live(registry) => registry.dispatch(&self.spec.name, args, ctx).await,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rca_core::tool::TypedTool;

    #[derive(Deserialize, schemars::JsonSchema)]
    struct CountArgs {
        component: String,
        #[serde(default)]
        level: Option<String>,
    }

    struct CountErrors(Mutex<u32>);

    #[async_trait]
    impl TypedTool for CountErrors {
        type Args = CountArgs;
        fn name(&self) -> &str {
            "count_errors"
        }
        fn description(&self) -> &str {
            "Counts error lines of a component."
        }
        fn is_stateless(&self) -> bool {
            false
        }
        async fn run(&self, a: CountArgs, _: &ToolContext) -> Result<ToolOutput, ToolError> {
            let mut n = self.0.lock().unwrap();
            *n += 1;
            if a.component == "down" {
                return Err(ToolError::failed("backend unavailable"));
            }
            Ok(ToolOutput::text(format!(
                "{} errors in {} at {} (call {n}; password=hunter2)",
                a.component.len(),
                a.component,
                a.level.unwrap_or_default()
            )))
        }
    }

    #[tokio::test]
    async fn record_then_replay_identically() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.stub.jsonl");
        let mut live = ToolRegistry::new();
        live.register_typed(CountErrors(Mutex::new(0))).unwrap();
        let writer = Arc::new(StubWriter::create(&path, Redactor::default()).unwrap());
        let recording = ToolRecorder::wrap_registry(&live, writer);
        let ctx = ToolContext::default();
        let a = serde_json::json!({"component": "db", "level": "ERROR"});
        let b = serde_json::json!({"level": "ERROR", "component": "db"});
        let r1 = recording
            .dispatch("count_errors", a.clone(), &ctx)
            .await
            .unwrap();
        let r2 = recording
            .dispatch("count_errors", b.clone(), &ctx)
            .await
            .unwrap();
        let r3 = recording
            .dispatch(
                "count_errors",
                serde_json::json!({"component": "down"}),
                &ctx,
            )
            .await;
        assert!(r3.is_err());
        assert!(r1.text.contains("call 1") && r2.text.contains("call 2"));

        let calls = read_stub(&path).unwrap();
        assert_eq!(calls.len(), 3);
        assert!(
            calls[0]
                .result
                .as_ref()
                .unwrap()
                .text
                .contains("password=[REDACTED:secret-value]")
        );

        let stub = ToolStub::new(calls, live.specs(), StubFallback::Error);
        let replay = stub.registry();
        let p1 = replay.dispatch("count_errors", b, &ctx).await.unwrap();
        let p2 = replay
            .dispatch("count_errors", a.clone(), &ctx)
            .await
            .unwrap();
        assert!(
            p1.text.contains("call 1") && p2.text.contains("call 2"),
            "repeated calls replay in order"
        );
        let err = replay
            .dispatch(
                "count_errors",
                serde_json::json!({"component": "down"}),
                &ctx,
            )
            .await
            .unwrap_err();
        assert!(err.to_string().contains("backend unavailable"));
        let miss = replay
            .dispatch(
                "count_errors",
                serde_json::json!({"component": "dbx"}),
                &ctx,
            )
            .await
            .unwrap_err();
        assert!(
            miss.to_string().contains("closest recorded arguments"),
            "{miss}"
        );
        assert!(stub.unused().is_empty());
    }

    #[tokio::test]
    async fn fallbacks_and_bad_files() {
        let dir = tempfile::tempdir().unwrap();
        let mut live = ToolRegistry::new();
        live.register_typed(CountErrors(Mutex::new(0))).unwrap();
        let ctx = ToolContext::default();
        let text =
            ToolStub::new(vec![], live.specs(), StubFallback::Text("no data".into())).registry();
        assert_eq!(
            text.dispatch("count_errors", serde_json::json!({"component": "x"}), &ctx)
                .await
                .unwrap()
                .text,
            "no data"
        );
        let passthrough =
            ToolStub::new(vec![], live.specs(), StubFallback::Live(live.clone())).registry();
        assert!(
            passthrough
                .dispatch("count_errors", serde_json::json!({"component": "x"}), &ctx)
                .await
                .unwrap()
                .text
                .contains("call 1")
        );

        let p = dir.path().join("future.jsonl");
        std::fs::write(&p, "{\"tool_stub_version\": 99}\n").unwrap();
        assert!(matches!(
            read_stub(&p),
            Err(StoreError::UnsupportedVersion { found: 99, .. })
        ));
        std::fs::write(&p, "not json\n").unwrap();
        assert!(matches!(read_stub(&p), Err(StoreError::Corrupt { .. })));
        std::fs::write(&p, "{\"tool_stub_version\": 1}\n{broken\n").unwrap();
        assert!(matches!(read_stub(&p), Err(StoreError::Corrupt { .. })));
    }

    #[test]
    fn a_crash_mid_append_loses_only_the_call_in_flight() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("calls.jsonl");
        // An older stub is replaced only once the new header is complete.
        std::fs::write(&p, "{\"tool_stub_version\": 1}\n").unwrap();
        let writer = StubWriter::create(&p, Redactor::disabled()).unwrap();
        let call = RecordedCall {
            tool: "count_errors".into(),
            args: serde_json::json!({"component": "db"}),
            result: Err("no data".into()),
        };
        writer.append(&call).unwrap();
        writer.append(&call).unwrap();
        // No temporary file is left beside the stub.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        // Simulate a crash half-way through a third append.
        let mut f = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
        write!(f, "{{\"tool\": \"count_err").unwrap();
        drop(f);
        assert_eq!(read_stub(&p).unwrap(), vec![call.clone(), call]);
    }
}
