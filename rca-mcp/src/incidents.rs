//! The incidents a server serves: one incident directory, or a folder of them, confined.
//!
//! A client names an incident by the name of its folder under the root (one path component);
//! anything else (a path, `..`, a link leading outside the root) is refused. The incident is
//! then loaded as `rca diagnose` loads it: telemetry files that resolve outside the incident
//! directory are refused, and its decompressed size is capped. Loaded incidents are kept, the
//! least recently used dropped first past a count.

use std::collections::VecDeque;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use rca_core::tool::ToolRegistry;
use rca_tools::incident_dir::{IncidentDir, IncidentOptions};
use rca_tools::tools::{FULL_OUTPUT_CHARS, IncidentTools};

use crate::error::McpError;

/// The manifest file that makes a folder an incident directory.
const MANIFEST: &str = "incident.json";

/// An incident loaded, with its tools.
pub struct LoadedIncident {
    /// The name the client uses for it.
    pub name: String,
    /// Its telemetry and manifest.
    pub dir: IncidentDir,
    /// Its information-gathering tools and experts (deterministic policies), returning full
    /// outputs up to [`FULL_OUTPUT_CHARS`]: the server cuts them with snapshot keys.
    pub tools: ToolRegistry,
}

impl std::fmt::Debug for LoadedIncident {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedIncident")
            .field("name", &self.name)
            .field("tools", &self.tools.names())
            .finish()
    }
}

/// The root the server serves incidents from.
#[derive(Debug)]
pub struct IncidentRoot {
    root: PathBuf,
    single: bool,
    options: IncidentOptions,
    max_loaded: usize,
    loaded: Mutex<VecDeque<Arc<LoadedIncident>>>,
}

impl IncidentRoot {
    /// Serves `root`: an incident directory (it holds `incident.json`) or a folder whose
    /// subfolders are incident directories. `allow_outside` and `max_telemetry_bytes` are
    /// `rca diagnose`'s `--allow-outside-links` and `--max-telemetry-bytes`.
    pub fn new(
        root: &Path,
        allow_outside: bool,
        max_telemetry_bytes: u64,
        max_loaded: usize,
    ) -> Result<Self, McpError> {
        let root = root.canonicalize().map_err(|e| {
            McpError::config(format!(
                "cannot open the incident root {}: {e}",
                root.display()
            ))
        })?;
        if !root.is_dir() {
            return Err(McpError::config(format!(
                "the incident root {} is not a directory",
                root.display()
            )));
        }
        let single = root.join(MANIFEST).is_file();
        Ok(IncidentRoot {
            root,
            single,
            options: IncidentOptions {
                allow_outside,
                max_telemetry_bytes,
            },
            max_loaded: max_loaded.max(1),
            loaded: Mutex::default(),
        })
    }

    /// The root (canonical).
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// Whether the root is itself one incident directory.
    pub fn is_single(&self) -> bool {
        self.single
    }

    /// The names of the incidents served, sorted, at most `max`; and whether more were left out.
    pub fn names(&self, max: usize) -> (Vec<String>, bool) {
        if self.single {
            return (vec![self.single_name()], false);
        }
        let mut names: Vec<String> = std::fs::read_dir(&self.root)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.path().join(MANIFEST).is_file())
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .collect();
        names.sort();
        let cut = names.len() > max;
        names.truncate(max);
        (names, cut)
    }

    fn single_name(&self) -> String {
        self.root
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("incident")
            .to_string()
    }

    /// The directory of the incident `name` (its folder's name under the root; for a single
    /// incident, its own folder's name, `.` or nothing), refusing anything outside the root.
    pub fn resolve(&self, name: Option<&str>) -> Result<(String, PathBuf), McpError> {
        let name = name.map(str::trim).filter(|n| !n.is_empty());
        if let Some(n) = name
            && !(n == "." && self.single)
        {
            let mut parts = Path::new(n).components();
            let one = matches!(
                (parts.next(), parts.next()),
                (Some(Component::Normal(_)), None)
            );
            if !one || n.contains(['/', '\\']) {
                return Err(McpError::refused(format!(
                    "incident {n:?} is not the name of a folder under the incident root: paths are refused"
                )));
            }
        }
        if self.single {
            let own = self.single_name();
            return match name {
                None | Some(".") => Ok((own, self.root.clone())),
                Some(n) if n == own => Ok((own, self.root.clone())),
                Some(n) => Err(McpError::refused(format!(
                    "unknown incident {n:?}: this server serves one incident, {own:?}"
                ))),
            };
        }
        let Some(name) = name else {
            let (names, _) = self.names(20);
            return Err(McpError::refused(format!(
                "name an incident (`incident`): this server serves a folder of incidents, e.g. {}",
                names.join(", ")
            )));
        };
        let dir = self.root.join(name);
        let canonical = dir
            .canonicalize()
            .map_err(|_| McpError::refused(format!("unknown incident {name:?}")))?;
        if !canonical.starts_with(&self.root) {
            return Err(McpError::refused(format!(
                "incident {name:?} resolves outside the incident root: refused"
            )));
        }
        if !canonical.join(MANIFEST).is_file() {
            return Err(McpError::refused(format!(
                "unknown incident {name:?}: its folder has no {MANIFEST}"
            )));
        }
        Ok((name.to_string(), canonical))
    }

    /// The incident `name`, loaded (or taken from the cache). Loading reads every telemetry
    /// file: it runs on a blocking thread.
    pub async fn load(&self, name: Option<&str>) -> Result<Arc<LoadedIncident>, McpError> {
        let (name, dir) = self.resolve(name)?;
        if let Some(hit) = self.cached(&name) {
            return Ok(hit);
        }
        let options = self.options;
        let load_name = name.clone();
        let dir_shown = dir.display().to_string();
        let loaded = tokio::task::spawn_blocking(move || {
            IncidentDir::open_with(&dir, options).map_err(|e| {
                McpError::failed(format!("cannot load the incident {load_name:?}: {e}"))
            })
        })
        .await
        .map_err(|e| McpError::failed(format!("loading {dir_shown} stopped: {e}")))??;
        let mut tools = IncidentTools::from_dir(loaded.clone()).map_err(|e| {
            McpError::failed(format!("cannot open the incident's tables or code: {e}"))
        })?;
        tools.output_chars = FULL_OUTPUT_CHARS;
        let registry = tools
            .registry(None)
            .await
            .map_err(|e| McpError::failed(format!("cannot build the incident's tools: {e}")))?;
        let incident = Arc::new(LoadedIncident {
            name,
            dir: loaded,
            tools: registry,
        });
        if let Ok(mut cache) = self.loaded.lock() {
            cache.retain(|l| l.name != incident.name);
            cache.push_back(Arc::clone(&incident));
            while cache.len() > self.max_loaded {
                cache.pop_front();
            }
        }
        Ok(incident)
    }

    fn cached(&self, name: &str) -> Option<Arc<LoadedIncident>> {
        let mut cache = self.loaded.lock().ok()?;
        let at = cache.iter().position(|l| l.name == name)?;
        let hit = cache.remove(at)?;
        cache.push_back(Arc::clone(&hit));
        Some(hit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder_of_incidents() -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        for name in ["a", "b"] {
            std::fs::create_dir(tmp.path().join(name)).unwrap();
            std::fs::write(tmp.path().join(name).join(MANIFEST), "{}").unwrap();
        }
        std::fs::create_dir(tmp.path().join("not-an-incident")).unwrap();
        tmp
    }

    #[test]
    fn names_and_resolves_only_folders_under_the_root() {
        let tmp = folder_of_incidents();
        let root = IncidentRoot::new(tmp.path(), false, 1 << 20, 2).unwrap();
        assert!(!root.is_single());
        assert_eq!(
            root.names(10),
            (vec!["a".to_string(), "b".to_string()], false)
        );
        assert_eq!(root.names(1), (vec!["a".to_string()], true));
        assert!(root.resolve(Some("a")).is_ok());
        for bad in [
            "..",
            "../a",
            "a/..",
            "/etc",
            "a/b",
            "not-an-incident",
            "missing",
            ".",
        ] {
            let e = root.resolve(Some(bad)).unwrap_err();
            assert!(matches!(e, McpError::Refused { .. }), "{bad}: {e}");
        }
        assert!(matches!(root.resolve(None), Err(McpError::Refused { .. })));
    }

    #[cfg(unix)]
    #[test]
    fn a_link_leading_outside_the_root_is_refused() {
        let tmp = folder_of_incidents();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join(MANIFEST), "{}").unwrap();
        std::os::unix::fs::symlink(outside.path(), tmp.path().join("escape")).unwrap();
        let root = IncidentRoot::new(tmp.path(), false, 1 << 20, 2).unwrap();
        let e = root.resolve(Some("escape")).unwrap_err();
        assert!(e.to_string().contains("outside"), "{e}");
    }

    #[test]
    fn a_single_incident_answers_to_its_own_name_only() {
        let tmp = folder_of_incidents();
        let root = IncidentRoot::new(&tmp.path().join("a"), false, 1 << 20, 2).unwrap();
        assert!(root.is_single());
        assert_eq!(root.resolve(None).unwrap().0, "a");
        assert_eq!(root.resolve(Some("a")).unwrap().0, "a");
        assert!(root.resolve(Some("b")).is_err());
        assert!(root.resolve(Some("../b")).is_err());
    }
}
