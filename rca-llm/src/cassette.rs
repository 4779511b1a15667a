//! Cassettes: the JSON files [`crate::RecordingModel`] writes and [`crate::ReplayModel`] reads.
//!
//! A cassette holds, for each call a wrapped model answered, the request (in full, so a miss
//! can show the closest one), its key (see [`crate::canonical::request_key`]), the model id of
//! the model that answered and the response. The file carries a format version; a version this
//! build does not know is an error, never a guess.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rca_core::llm::{CompletionRequest, CompletionResponse};
use serde::{Deserialize, Serialize};

/// The cassette format this build writes. Version 2 added [`ModelProvenance`]; version 1
/// files (the same without it) are still read.
pub const CASSETTE_FORMAT_VERSION: u32 = 2;

/// Where a recording came from: the model file, its checksum and quantisation, the server
/// and its version, and the sampling settings of the run. A recording of a real model carries
/// it; a scripted model's recording does not (its entries keep their `scripted-...` ids).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelProvenance {
    /// The model name the server was asked for (its alias).
    pub model: String,
    /// The model file the server loaded (its file name).
    pub model_file: String,
    /// The sha256 of the model file.
    pub model_sha256: String,
    /// The quantisation of the weights (`Q4_K_M`).
    pub quantization: String,
    /// The server software (`llama-cpp-python`).
    pub server: String,
    /// Its version.
    pub server_version: String,
    /// The sampling settings of the recorded run (temperature, seed, token limits), as the
    /// recorder describes them.
    pub sampling: serde_json::Value,
}

/// What went wrong loading or saving a cassette, sorted by what the caller should do.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CassetteError {
    /// The file was written by a build with another format: re-record it with this build.
    #[error(
        "cassette {path} has format version {found}; this build reads version {expected} (re-record it)"
    )]
    UnsupportedVersion {
        /// The file.
        path: PathBuf,
        /// The version in the file.
        found: u32,
        /// The version this build reads.
        expected: u32,
    },
    /// The file is not a cassette (bad JSON, missing fields).
    #[error("cassette {path} is corrupt: {message}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// Reading or writing the file failed.
    #[error("cassette {path}: {message}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What happened.
        message: String,
    },
}

/// One recorded call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CassetteEntry {
    /// [`crate::canonical::request_key`] of `request`.
    pub key: String,
    /// The model id of the model that answered (for a scripted model in a test, its
    /// `scripted-...` name; never relabelled).
    pub model_id: String,
    /// The request as sent.
    pub request: CompletionRequest,
    /// The response as received.
    pub response: CompletionResponse,
}

/// A recorded session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cassette {
    /// [`CASSETTE_FORMAT_VERSION`] when written by this build.
    pub format_version: u32,
    /// What wrote the file (`rca-llm <version>`).
    pub recorded_with: String,
    /// The model, server and sampling behind the entries (a real model's recording).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<ModelProvenance>,
    /// The calls, in the order they completed.
    pub entries: Vec<CassetteEntry>,
}

impl Default for Cassette {
    fn default() -> Self {
        Cassette {
            format_version: CASSETTE_FORMAT_VERSION,
            recorded_with: concat!("rca-llm ", env!("CARGO_PKG_VERSION")).to_string(),
            provenance: None,
            entries: Vec::new(),
        }
    }
}

#[derive(Deserialize)]
struct VersionProbe {
    format_version: Option<u32>,
}

impl Cassette {
    /// Reads a cassette, checking its format version before anything else.
    pub fn load(path: &Path) -> Result<Cassette, CassetteError> {
        let text = std::fs::read_to_string(path).map_err(|e| CassetteError::Io {
            path: path.to_path_buf(),
            message: format!("cannot read: {e}"),
        })?;
        Self::parse(&text, path)
    }

    /// Parses cassette text; `path` is only used in error messages.
    pub fn parse(text: &str, path: &Path) -> Result<Cassette, CassetteError> {
        let corrupt = |e: serde_json::Error| CassetteError::Corrupt {
            path: path.to_path_buf(),
            message: e.to_string(),
        };
        let probe: VersionProbe = serde_json::from_str(text).map_err(corrupt)?;
        match probe.format_version {
            Some(1 | CASSETTE_FORMAT_VERSION) => serde_json::from_str(text).map_err(corrupt),
            Some(found) => Err(CassetteError::UnsupportedVersion {
                path: path.to_path_buf(),
                found,
                expected: CASSETTE_FORMAT_VERSION,
            }),
            None => Err(CassetteError::Corrupt {
                path: path.to_path_buf(),
                message: "no `format_version` field".into(),
            }),
        }
    }

    /// Writes the cassette atomically: to a temporary file in the same folder, flushed to disk,
    /// then renamed over `path`, so a reader never sees a half-written file.
    pub fn save(&self, path: &Path) -> Result<(), CassetteError> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let io = |message: String| CassetteError::Io {
            path: path.to_path_buf(),
            message,
        };
        let text = serde_json::to_string_pretty(self).map_err(|e| io(e.to_string()))?;
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        std::fs::create_dir_all(&dir).map_err(|e| io(format!("cannot create folder: {e}")))?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "cassette.json".into());
        let tmp = dir.join(format!(
            ".{name}.tmp-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.write_all(b"\n")?;
            f.sync_all()?;
            std::fs::rename(&tmp, path)
        };
        write().map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            io(format!("cannot write: {e}"))
        })
    }
}

#[cfg(test)]
mod tests {
    use rca_core::llm::{Message, Usage};

    use super::*;
    use crate::canonical::request_key;

    fn sample() -> Cassette {
        let request = CompletionRequest::new(vec![Message::user("q")]);
        Cassette {
            entries: vec![CassetteEntry {
                key: request_key(&request),
                model_id: "scripted-cassette-test".into(),
                request,
                response: CompletionResponse {
                    served: None,
                    model: "scripted-cassette-test".into(),
                    choices: vec![],
                    usage: Usage::default(),
                },
            }],
            ..Cassette::default()
        }
    }

    #[test]
    fn save_load_round_trip_leaves_no_temp_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/c.json");
        let c = sample();
        c.save(&path).unwrap();
        c.save(&path).unwrap();
        assert_eq!(Cassette::load(&path).unwrap(), c);
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["c.json"]);
    }

    #[test]
    fn unknown_version_and_garbage_are_clear_errors() {
        let p = Path::new("x.json");
        let err =
            Cassette::parse(r#"{"format_version": 99, "entries": "whatever"}"#, p).unwrap_err();
        assert!(matches!(
            err,
            CassetteError::UnsupportedVersion { found: 99, .. }
        ));
        assert!(err.to_string().contains("re-record"));
        assert!(matches!(
            Cassette::parse("not json", p).unwrap_err(),
            CassetteError::Corrupt { .. }
        ));
        assert!(matches!(
            Cassette::parse("{}", p).unwrap_err(),
            CassetteError::Corrupt { .. }
        ));
        assert!(matches!(
            Cassette::load(Path::new("/nonexistent/c.json")).unwrap_err(),
            CassetteError::Io { .. }
        ));
    }
}
