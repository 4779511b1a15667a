//! The incident directory, the input of `rca diagnose`: an `incident.json` manifest and
//! telemetry files (documented in `docs/guides/incident-format.md`). The implementation lives
//! in [`crate::sources::incident`]; this module is its stable name.

pub use crate::sources::incident::*;
