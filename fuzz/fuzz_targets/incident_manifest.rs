//! Incident manifests: `IncidentDir::open` on an arbitrary `incident.json` (with one small log
//! beside it) is an error or an incident, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rca_tools::incident_dir::{IncidentDir, MANIFEST};

fuzz_target!(|data: &[u8]| {
    let Ok(dir) = std::env::temp_dir().canonicalize() else {
        return;
    };
    let dir = dir.join(format!("rca-fuzz-incident-{}", std::process::id()));
    if std::fs::create_dir_all(&dir).is_err() {
        return;
    }
    let log = "2024-05-01T10:01:00Z ERROR boom\n2024-05-01T10:02:00Z INFO ok\n";
    if std::fs::write(dir.join("app.log"), log).is_err()
        || std::fs::write(dir.join(MANIFEST), data).is_err()
    {
        return;
    }
    let _ = IncidentDir::open(&dir);
});
