//! [`FastEmbedder`] (feature `fastembed`): all-MiniLM-L6-v2 (384 dimensions) run by a
//! dynamically loaded ONNX Runtime, from files on disk. Nothing is downloaded at build or run
//! time: `scripts/fetch-model.sh` puts the files in `.models/`.
//!
//! Where the files are looked for (see [`FastEmbedConfig::from_env`]):
//! - `RCA_EMBED_MODEL_DIR`: the folder with `model.onnx`, `tokenizer.json`, `config.json`,
//!   `special_tokens_map.json` and `tokenizer_config.json`; default
//!   `.models/all-MiniLM-L6-v2` in the current folder or its nearest ancestor that has one;
//! - `RCA_ORT_LIB`: the ONNX Runtime shared library (>= 1.24); default
//!   `.models/onnxruntime/libonnxruntime.so.1.32.0`, found the same way;
//! - `RCA_EMBED_THREADS` (default 1) and `RCA_EMBED_BATCH` (default 64).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use fastembed::{
    InitOptionsUserDefined, Pooling, QuantizationMode, TextEmbedding, TokenizerFiles,
    UserDefinedEmbeddingModel,
};
use rca_core::EmbedError;
use rca_core::embed::Embedder;
use serde::{Deserialize, Serialize};

/// The environment variable naming the model folder.
pub const MODEL_DIR_ENV: &str = "RCA_EMBED_MODEL_DIR";
/// The environment variable naming the ONNX Runtime library file.
pub const ORT_LIB_ENV: &str = "RCA_ORT_LIB";
/// The environment variable setting the thread count.
pub const THREADS_ENV: &str = "RCA_EMBED_THREADS";
/// The environment variable setting the batch size.
pub const BATCH_ENV: &str = "RCA_EMBED_BATCH";
/// The model folder below the repository root that `scripts/fetch-model.sh` fills.
pub const DEFAULT_MODEL_DIR: &str = ".models/all-MiniLM-L6-v2";
/// The runtime library below the repository root that `scripts/fetch-model.sh` fetches.
pub const DEFAULT_ORT_LIB: &str = ".models/onnxruntime/libonnxruntime.so.1.32.0";
/// The files a model folder must hold.
pub const MODEL_FILES: [&str; 5] = [
    "model.onnx",
    "tokenizer.json",
    "config.json",
    "special_tokens_map.json",
    "tokenizer_config.json",
];

/// Where the model and runtime are, and how to run them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FastEmbedConfig {
    /// The folder holding [`MODEL_FILES`].
    pub model_dir: PathBuf,
    /// The ONNX Runtime shared library.
    pub ort_library: PathBuf,
    /// Intra-op threads. On a busy 2-core machine 1 thread beats 2.
    #[serde(default = "default_threads")]
    pub threads: usize,
    /// Texts per model call (64 is fastest on small machines; 256 is slower and takes ~1 GB).
    #[serde(default = "default_batch")]
    pub batch_size: usize,
    /// Longest input in tokens; longer texts are truncated.
    #[serde(default = "default_max_length")]
    pub max_length: usize,
}

fn default_threads() -> usize {
    1
}
fn default_batch() -> usize {
    64
}
fn default_max_length() -> usize {
    256
}

/// `rel` below the current folder or its nearest ancestor where it exists.
fn find_upwards(rel: &str) -> Option<PathBuf> {
    let cwd = std::env::current_dir().ok()?;
    cwd.ancestors().map(|d| d.join(rel)).find(|p| p.exists())
}

fn env_number(name: &str, default: usize) -> Result<usize, EmbedError> {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => match v.trim().parse::<usize>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(EmbedError::Unavailable {
                message: format!("{name}={v:?} is not a positive whole number"),
            }),
        },
        _ => Ok(default),
    }
}

impl FastEmbedConfig {
    /// A config for the files at these paths, with default settings.
    pub fn new(model_dir: impl Into<PathBuf>, ort_library: impl Into<PathBuf>) -> Self {
        FastEmbedConfig {
            model_dir: model_dir.into(),
            ort_library: ort_library.into(),
            threads: default_threads(),
            batch_size: default_batch(),
            max_length: default_max_length(),
        }
    }

    /// Reads [`MODEL_DIR_ENV`], [`ORT_LIB_ENV`], [`THREADS_ENV`] and [`BATCH_ENV`]; unset paths
    /// default to [`DEFAULT_MODEL_DIR`] and [`DEFAULT_ORT_LIB`] in the current folder or the
    /// nearest ancestor holding them (so tests and binaries run anywhere in the repository
    /// find `.models/`). Does not check that the files exist: [`FastEmbedder::new`] does.
    pub fn from_env() -> Result<Self, EmbedError> {
        let path = |var: &str, default: &str| {
            std::env::var_os(var)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .or_else(|| find_upwards(default))
                .unwrap_or_else(|| PathBuf::from(default))
        };
        Ok(FastEmbedConfig {
            model_dir: path(MODEL_DIR_ENV, DEFAULT_MODEL_DIR),
            ort_library: path(ORT_LIB_ENV, DEFAULT_ORT_LIB),
            threads: env_number(THREADS_ENV, default_threads())?,
            batch_size: env_number(BATCH_ENV, default_batch())?,
            max_length: default_max_length(),
        })
    }

    /// The first missing file (model files, then the runtime library), if any.
    pub fn missing_file(&self) -> Option<PathBuf> {
        MODEL_FILES
            .iter()
            .map(|f| self.model_dir.join(f))
            .chain(std::iter::once(self.ort_library.clone()))
            .find(|p| !p.is_file())
    }
}

/// all-MiniLM-L6-v2 sentence embeddings (L2-normalised, mean pooling) through fastembed and
/// ONNX Runtime. The model call is synchronous: [`Embedder::embed`] runs it on a blocking
/// thread (when inside a Tokio runtime) behind a mutex.
pub struct FastEmbedder {
    model: Arc<Mutex<TextEmbedding>>,
    config: FastEmbedConfig,
    dimension: usize,
}

impl std::fmt::Debug for FastEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FastEmbedder")
            .field("config", &self.config)
            .field("dimension", &self.dimension)
            .finish()
    }
}

fn unavailable(message: String) -> EmbedError {
    EmbedError::Unavailable { message }
}

fn read(path: &Path) -> Result<Vec<u8>, EmbedError> {
    std::fs::read(path).map_err(|e| unavailable(format!("cannot read {}: {e}", path.display())))
}

impl FastEmbedder {
    /// Loads the runtime library and the model. Fails with [`EmbedError::Unavailable`],
    /// naming the missing file, when a model file or the library is absent, and with the
    /// runtime's message when the library cannot be loaded; never panics on a bad set-up.
    /// Takes about a second: call it once, outside hot paths.
    pub fn new(config: FastEmbedConfig) -> Result<Self, EmbedError> {
        let hint = "run scripts/fetch-model.sh and export the variables it prints";
        for f in MODEL_FILES {
            let p = config.model_dir.join(f);
            if !p.is_file() {
                return Err(unavailable(format!(
                    "model file {} is missing ({MODEL_DIR_ENV} selects the folder; {hint})",
                    p.display()
                )));
            }
        }
        if !config.ort_library.is_file() {
            return Err(unavailable(format!(
                "ONNX Runtime library {} is missing ({ORT_LIB_ENV} selects it; {hint})",
                config.ort_library.display()
            )));
        }
        // Load the library first: fastembed panics on a bad library, ort returns an error.
        let _environment = ort::init_from(&config.ort_library).map_err(|e| {
            unavailable(format!(
                "cannot load ONNX Runtime from {}: {e}",
                config.ort_library.display()
            ))
        })?;
        let dir = &config.model_dir;
        let tokenizer = TokenizerFiles {
            tokenizer_file: read(&dir.join("tokenizer.json"))?,
            config_file: read(&dir.join("config.json"))?,
            special_tokens_map_file: read(&dir.join("special_tokens_map.json"))?,
            tokenizer_config_file: read(&dir.join("tokenizer_config.json"))?,
        };
        let model = UserDefinedEmbeddingModel::new(read(&dir.join("model.onnx"))?, tokenizer)
            .with_pooling(Pooling::Mean)
            .with_quantization(QuantizationMode::None);
        let options = InitOptionsUserDefined::new()
            .with_max_length(config.max_length.max(1))
            .with_intra_threads(config.threads.max(1));
        let mut embedding = TextEmbedding::try_new_from_user_defined(model, options)
            .map_err(|e| unavailable(format!("cannot load model from {}: {e}", dir.display())))?;
        let probe =
            embedding
                .embed(["dimension probe"], Some(1))
                .map_err(|e| EmbedError::Failed {
                    message: format!("model loaded but failed on a probe text: {e}"),
                })?;
        let dimension = probe.first().map(Vec::len).unwrap_or(0);
        if dimension == 0 {
            return Err(EmbedError::Failed {
                message: "model returned an empty vector for a probe text".into(),
            });
        }
        Ok(FastEmbedder {
            model: Arc::new(Mutex::new(embedding)),
            config,
            dimension,
        })
    }

    /// Loads from the locations [`FastEmbedConfig::from_env`] resolves.
    pub fn from_env() -> Result<Self, EmbedError> {
        Self::new(FastEmbedConfig::from_env()?)
    }

    /// The settings in force.
    pub fn config(&self) -> &FastEmbedConfig {
        &self.config
    }

    fn embed_blocking(
        model: &Mutex<TextEmbedding>,
        texts: &[String],
        batch: usize,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut m = model.lock().map_err(|_| EmbedError::Failed {
            message: "embedding model state poisoned by an earlier failure".into(),
        })?;
        m.embed(texts, Some(batch)).map_err(|e| EmbedError::Failed {
            message: e.to_string(),
        })
    }
}

#[async_trait]
impl Embedder for FastEmbedder {
    fn dimension(&self) -> usize {
        self.dimension
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let batch = self.config.batch_size.max(1);
        if tokio::runtime::Handle::try_current().is_err() {
            return Self::embed_blocking(&self.model, texts, batch);
        }
        let model = self.model.clone();
        let owned = texts.to_vec();
        tokio::task::spawn_blocking(move || Self::embed_blocking(&model, &owned, batch))
            .await
            .map_err(|e| EmbedError::Failed {
                message: format!("embedding task failed: {e}"),
            })?
    }
}

#[cfg(test)]
mod tests {
    use rca_core::embed::cosine;

    use super::*;

    fn required() -> bool {
        rca_core::testing::require_all()
    }

    #[test]
    fn missing_files_are_named_not_panicked_on() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = FastEmbedConfig::new(dir.path(), dir.path().join("libonnxruntime.so"));
        let err = FastEmbedder::new(cfg.clone()).unwrap_err();
        assert!(matches!(err, EmbedError::Unavailable { .. }));
        assert!(err.to_string().contains("model.onnx"), "{err}");
        for f in MODEL_FILES {
            std::fs::write(dir.path().join(f), b"x").unwrap();
        }
        let err = FastEmbedder::new(cfg.clone()).unwrap_err();
        assert!(err.to_string().contains("libonnxruntime.so"), "{err}");
        assert_eq!(
            cfg.missing_file(),
            Some(dir.path().join("libonnxruntime.so"))
        );
    }

    #[tokio::test]
    async fn embeds_with_the_real_model() {
        let cfg = FastEmbedConfig::from_env().unwrap();
        if let Some(missing) = cfg.missing_file() {
            assert!(
                !required(),
                "RCA_REQUIRE_ALL is set but {} is missing: run scripts/fetch-model.sh",
                missing.display()
            );
            eprintln!(
                "skipping: {} is missing (run scripts/fetch-model.sh)",
                missing.display()
            );
            return;
        }
        let e = FastEmbedder::new(cfg).unwrap();
        assert_eq!(e.dimension(), 384);
        let texts: Vec<String> = [
            "db connection refused",
            "the database refused the connection",
            "user logged in successfully",
        ]
        .map(String::from)
        .to_vec();
        let v = e.embed(&texts).await.unwrap();
        assert_eq!(v.len(), 3);
        for x in &v {
            assert_eq!(x.len(), 384);
            let n: f32 = x.iter().map(|a| a * a).sum::<f32>().sqrt();
            assert!((n - 1.0).abs() < 1e-3, "norm {n}");
        }
        let near = cosine(&v[0], &v[1]);
        let far = cosine(&v[0], &v[2]);
        assert!(near > far + 0.2, "paraphrase {near} vs unrelated {far}");
        // Deterministic, and the same outside a runtime's blocking pool.
        let again = FastEmbedder::embed_blocking(&e.model, &texts[..1], 8).unwrap();
        assert!(cosine(&again[0], &v[0]) > 0.9999);
        assert!(e.embed(&[]).await.unwrap().is_empty());
    }
}
