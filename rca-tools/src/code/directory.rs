//! A code repository on disk as a [`CodeSource`].

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use async_trait::async_trait;
use rca_core::SourceError;
use rca_core::source::{CodeFile, CodeSource, Definition};

use super::definitions::{Language, find_definitions};

/// Files larger than this are not read (generated or vendored blobs).
const MAX_FILE_BYTES: u64 = 1 << 20;

/// A directory of source code. The walk honours `.gitignore`, `.ignore` and hidden files the
/// way `git` and ripgrep do, and lists only files of the supported languages.
#[derive(Debug)]
pub struct CodeDirectory {
    root: PathBuf,
    files: OnceLock<Vec<String>>,
}

impl CodeDirectory {
    /// A source over the directory `root`.
    pub fn new(root: impl Into<PathBuf>) -> Result<Self, SourceError> {
        let root = root.into();
        if !root.is_dir() {
            return Err(SourceError::InvalidQuery {
                message: format!("{} is not a directory", root.display()),
            });
        }
        Ok(CodeDirectory {
            root,
            files: OnceLock::new(),
        })
    }

    fn walk(&self) -> Vec<String> {
        let mut out = Vec::new();
        let walker = ignore::WalkBuilder::new(&self.root)
            .require_git(false)
            .follow_links(false)
            .build();
        for entry in walker.flatten() {
            let path = entry.path();
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            if entry
                .metadata()
                .map(|m| m.len() > MAX_FILE_BYTES)
                .unwrap_or(true)
            {
                continue;
            }
            let Ok(rel) = path.strip_prefix(&self.root) else {
                continue;
            };
            let rel = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect::<Vec<_>>()
                .join("/");
            if Language::of_path(&rel).is_some() {
                out.push(rel);
            }
        }
        out.sort();
        out
    }

    fn listed(&self) -> &[String] {
        self.files.get_or_init(|| self.walk())
    }

    fn resolve(&self, rel: &str) -> Result<PathBuf, SourceError> {
        // Only files the walk listed may be read: no `..`, no ignored or absolute paths.
        if !self.listed().iter().any(|f| f == rel) {
            return Err(SourceError::InvalidQuery {
                message: format!("no source file `{rel}` in the repository"),
            });
        }
        Ok(self.root.join(Path::new(rel)))
    }
}

#[async_trait]
impl CodeSource for CodeDirectory {
    async fn files(&self) -> Result<Vec<String>, SourceError> {
        Ok(self.listed().to_vec())
    }

    async fn read(&self, path: &str) -> Result<CodeFile, SourceError> {
        let full = self.resolve(path)?;
        let bytes = std::fs::read(&full).map_err(|e| SourceError::Unavailable {
            message: format!("{}: {e}", full.display()),
        })?;
        Ok(CodeFile {
            path: path.to_string(),
            text: String::from_utf8_lossy(&bytes).into_owned(),
        })
    }

    async fn find_definition(&self, symbol: &str) -> Result<Vec<Definition>, SourceError> {
        let name = symbol.rsplit(['.', ':', '#', '/']).next().unwrap_or(symbol);
        let mut hits = Vec::new();
        for rel in self.listed() {
            let Ok(bytes) = std::fs::read(self.root.join(rel)) else {
                continue;
            };
            let text = String::from_utf8_lossy(&bytes);
            if !text.contains(name) {
                continue;
            }
            hits.extend(find_definitions(symbol, rel, &text));
        }
        // A qualified name (`com.acme.Foo`) prefers files whose path matches its package.
        let qualifier: Vec<&str> = symbol
            .split(['.', ':', '#', '/'])
            .filter(|p| !p.is_empty())
            .collect();
        hits.sort_by_key(|d| {
            let matched = qualifier.iter().filter(|q| d.path.contains(*q)).count();
            (std::cmp::Reverse(matched), d.path.clone(), d.line)
        });
        Ok(hits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    #[tokio::test]
    async fn walks_honouring_gitignore_and_finds_definitions() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, ".gitignore", "build/\n");
        write(
            root,
            "src/main/java/com/acme/Job.java",
            "package com.acme;\npublic class Job {}\n",
        );
        write(
            root,
            "src/test/java/com/other/Job.java",
            "package com.other;\nclass Job {}\n",
        );
        write(root, "build/gen/Job.java", "class Job {}\n");
        write(root, "notes.txt", "class Job");
        let src = CodeDirectory::new(root).unwrap();
        let files = src.files().await.unwrap();
        assert_eq!(
            files,
            vec![
                "src/main/java/com/acme/Job.java",
                "src/test/java/com/other/Job.java"
            ]
        );
        let defs = src.find_definition("com.acme.Job").await.unwrap();
        assert_eq!(defs.len(), 2);
        assert_eq!(defs[0].path, "src/main/java/com/acme/Job.java");
        assert_eq!(defs[0].line, 2);
        let file = src.read("src/main/java/com/acme/Job.java").await.unwrap();
        assert!(file.text.contains("public class Job"));
        assert!(src.read("../etc/passwd").await.is_err());
        assert!(src.read("build/gen/Job.java").await.is_err());
        assert!(CodeDirectory::new(root.join("nope")).is_err());
    }
}
