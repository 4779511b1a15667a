//! # rca-llm
//!
//! Everything about talking to a language model:
//!
//! - backends implementing [`rca_core::ChatModel`]: the OpenAI-compatible HTTP client
//!   ([`OpenAiClient`], feature `http`), [`ScriptedModel`] (canned turns for tests), and
//!   record/replay ([`RecordingModel`], [`ReplayModel`]) over cassette files;
//! - tower-style wrappers around any backend: [`Retry`], [`FanOut`], [`Traced`];
//! - JSON repair and regeneration ([`json`]) and redaction of secrets ([`redact`]);
//! - embedders implementing [`rca_core::embed::Embedder`]: [`HashingEmbedder`] (pure Rust, the
//!   default) and `FastEmbedder` (all-MiniLM-L6-v2 through ONNX Runtime, feature `fastembed`);
//! - embedding matrices ([`vectors::EmbeddingMatrix`]): batch cosine, nearest neighbours and
//!   similarity graphs as matrix products, used by segmentation, long-term memory, the
//!   self-consistency vote and tool selection;
//! - getting JSON out of model output: local repair and JsonRegen via YAML ([`json`]).
//!
//! No reqwest, fastembed or ort type appears in a public signature.
#![deny(missing_docs)]

pub mod backoff;
pub mod canonical;
pub mod cassette;
pub mod fanout;
pub mod hashing;
pub mod json;
#[cfg(feature = "fastembed")]
pub mod minilm;
#[cfg(feature = "http")]
pub mod openai;
pub mod record;
pub mod redact;
pub mod replay;
pub mod retry;
pub mod scripted;
pub mod traced;
pub mod vectors;

pub use backoff::RetryPolicy;
pub use cassette::{Cassette, CassetteError, ModelProvenance};
pub use fanout::FanOut;
pub use hashing::{HashingConfig, HashingEmbedder};
#[cfg(feature = "fastembed")]
pub use minilm::{FastEmbedConfig, FastEmbedder};
#[cfg(feature = "http")]
pub use openai::{OpenAiClient, OpenAiConfig, ServerFeatures, WarningSink};
pub use record::RecordingModel;
pub use redact::{RedactingModel, Redactor};
pub use replay::ReplayModel;
pub use retry::Retry;
pub use scripted::{ScriptedModel, ScriptedTurn};
pub use traced::Traced;
