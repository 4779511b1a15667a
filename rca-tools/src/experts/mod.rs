//! Expert agents (RCAgent 3.2.2): focused sub-agents the controller calls as tools.
//!
//! - [`code`]: reads a class or symbol, asks an analyst what it does and which further classes
//!   are worth reading, and follows them through a task queue with a visited set.
//! - [`logs`]: RCAgent Algorithm 1 end to end: segments a log, retrieves similar past analyses
//!   as in-context examples, asks for explanations with verbatim evidence, drops explanations
//!   whose evidence the block does not support, and summarises what remains.

pub mod code;
mod error;
pub mod logs;

pub use error::ExpertError;

/// The token limit of one analyst answer of a model-backed expert.
pub const EXPERT_MAX_TOKENS: u32 = 256;
