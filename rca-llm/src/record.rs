//! [`RecordingModel`]: wraps any [`ChatModel`] and writes every answered call to a cassette.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use async_trait::async_trait;
use rca_core::LlmError;
use rca_core::llm::{Capabilities, ChatModel, CompletionRequest, CompletionResponse};

use crate::canonical::request_key;
use crate::cassette::{Cassette, CassetteEntry, CassetteError, ModelProvenance};

/// Records the calls a wrapped model answers into a cassette file that
/// [`crate::ReplayModel`] serves offline.
///
/// The cassette is rewritten (atomically) after every answered call, so a run that dies
/// half-way still leaves a valid file. Errors are passed through and not recorded. Each entry
/// keeps the wrapped model's own id: recording a scripted model yields a cassette labelled
/// with the scripted model's name, never a real model's.
#[derive(Debug)]
pub struct RecordingModel<M> {
    inner: M,
    path: PathBuf,
    cassette: Mutex<Cassette>,
}

impl<M: ChatModel> RecordingModel<M> {
    /// Records into a new cassette at `path` (an existing file is replaced on the first write).
    pub fn create(inner: M, path: impl Into<PathBuf>) -> Self {
        RecordingModel {
            inner,
            path: path.into(),
            cassette: Mutex::new(Cassette::default()),
        }
    }

    /// Records into the cassette at `path`, keeping its entries (a missing file starts empty).
    pub fn append(inner: M, path: impl Into<PathBuf>) -> Result<Self, CassetteError> {
        let path = path.into();
        let cassette = if path.exists() {
            Cassette::load(&path)?
        } else {
            Cassette::default()
        };
        Ok(RecordingModel {
            inner,
            path,
            cassette: Mutex::new(cassette),
        })
    }

    /// Names the model, server and sampling behind the recording (written into the
    /// cassette's header with the next call).
    pub fn with_provenance(self, provenance: ModelProvenance) -> Self {
        if let Ok(mut c) = self.cassette.lock() {
            c.provenance = Some(provenance);
        }
        self
    }

    /// The cassette file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How many calls are recorded.
    pub fn len(&self) -> usize {
        self.cassette.lock().map(|c| c.entries.len()).unwrap_or(0)
    }

    /// Whether nothing is recorded yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The wrapped model.
    pub fn inner(&self) -> &M {
        &self.inner
    }
}

#[async_trait]
impl<M: ChatModel> ChatModel for RecordingModel<M> {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    async fn complete(&self, request: CompletionRequest) -> Result<CompletionResponse, LlmError> {
        let response = self.inner.complete(request.clone()).await?;
        let entry = CassetteEntry {
            key: request_key(&request),
            model_id: self.inner.model_id().to_string(),
            request,
            response: response.clone(),
        };
        // The lock is held across the write so concurrent calls cannot save out of order.
        let mut cassette = self
            .cassette
            .lock()
            .map_err(|_| LlmError::permanent("recording model state poisoned"))?;
        cassette.entries.push(entry);
        cassette
            .save(&self.path)
            .map_err(|e| LlmError::permanent(format!("recording failed: {e}")))?;
        Ok(response)
    }
}
