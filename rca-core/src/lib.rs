//! # rca-core
//!
//! The vocabulary and the plug-in traits of the `rca` workspace. Everything a host may want to
//! replace is a small, object-safe trait here: [`llm::ChatModel`], [`embed::Embedder`],
//! [`tool::Tool`], the data sources in [`source`], the memory stores in [`memory`] and the
//! self-consistency [`consistency::Aggregator`].
//!
//! Invariants (checked by review and by `docs/ARCHITECTURE.md`'s tidy test):
//! - rca-core does no IO and starts no runtime; it depends only on serde, schemars,
//!   async-trait, futures, thiserror and tracing.
//! - every plug-in trait is `Send + Sync`, takes `&self`, and works as `Arc<dyn Trait>`.
//! - library code never panics: every fallible operation returns one of the error enums in
//!   [`error`], sorted by what the caller should do.
#![deny(missing_docs)]

pub mod attributes;
pub mod consistency;
pub mod embed;
pub mod error;
pub mod incident;
pub mod llm;
pub mod logs;
pub mod memory;
pub mod name;
pub mod seeded;
pub mod source;
pub mod testing;
pub mod time;
pub mod tool;
pub mod trajectory;

pub use attributes::Attributes;
pub use error::{EmbedError, LlmError, SourceError, StoreError, ToolError};
pub use incident::{Evidence, Incident, Modality};
pub use llm::{ChatModel, CompletionRequest, CompletionResponse, Message, Role, Usage};
pub use name::{Name, NameInterner};
pub use time::{TimeRange, Timestamp};
pub use tool::{Tool, ToolContext, ToolOutput, ToolRegistry, ToolSpec, TypedTool};
pub use trajectory::{DiagnosisReport, Observation, Responsibility, Step, Trajectory};
