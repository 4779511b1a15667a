//! Source code as a data source: a directory walk that honours `.gitignore`, and definition
//! lookup for Java, Kotlin, Python, Go, Rust and TypeScript/JavaScript.

mod definitions;
mod directory;

pub use definitions::{Language, find_definitions};
pub use directory::CodeDirectory;
