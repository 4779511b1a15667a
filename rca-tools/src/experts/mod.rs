//! Expert agents (RCAgent 3.2.2): focused sub-agents the controller calls as tools.
//!
//! - [`code`]: reads a class or symbol, asks an analyst what it does and which further classes
//!   are worth reading, and follows them through a task queue with a visited set.

pub mod code;
