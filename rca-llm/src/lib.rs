//! # rca-llm
//!
//! Everything about talking to a language model: backends implementing
//! [`rca_core::ChatModel`], wrappers around any backend, and embedders implementing
//! [`rca_core::embed::Embedder`].
#![deny(missing_docs)]

pub mod json;
pub mod redact;
pub mod scripted;

pub use redact::{RedactingModel, Redactor};
pub use scripted::{ScriptedModel, ScriptedTurn};
