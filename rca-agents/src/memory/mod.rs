//! Memory stores implementing the traits of [`rca_core::memory`]: snapshot stores for
//! observation snapshot keys (in memory and on disk), working memory, the short-term broadcast
//! queue and long-term vector memory (in memory and on disk).
//!
//! On-disk stores carry a format version and write atomically (a temporary file renamed over
//! the target), so a crash never leaves a half-written file behind. Their IO is blocking and
//! small (one file per call); hosts with a busy runtime may wrap them in `spawn_blocking`.

mod ltm;
mod snapshot;
mod stm;
mod working;

pub use ltm::{DiskLongTermMemory, InMemoryLongTermMemory, LTM_FORMAT_VERSION};
pub use snapshot::{DiskSnapshotStore, InMemorySnapshotStore, SNAPSHOT_FORMAT_VERSION};
pub use stm::InMemoryShortTermMemory;
pub use working::InMemoryWorkingMemory;

use std::path::Path;

use rca_core::StoreError;

/// Writes `bytes` to `path` (creating its folder) with [`rca_tools::files::write_atomic`].
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let io = |e: std::io::Error| StoreError::Io {
        message: format!("{}: {e}", path.display()),
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    rca_tools::files::write_atomic(path, bytes).map_err(io)
}

/// A poisoned lock as a store error.
pub(crate) fn poisoned<T>(_: T) -> StoreError {
    StoreError::Io {
        message: "memory store lock poisoned".into(),
    }
}
