//! A host-defined [`LogSource`]: the host's own file-backed log store.
//!
//! The store is a directory with one file per component, `<component>.log`, each line
//! `<unix millis>\t<LEVEL>\t<message>` in time order (the format of some in-house shipper).
//! Implementing [`LogSource`] takes two methods: `logs` answers a [`LogQuery`] (time range,
//! component, minimum level, limit) as a stream of [`LogRecord`]s, and `components` lists what
//! the store knows. Agents and tools of the library then read it like any built-in source.
//!
//! The store reads files on every query (no index, no cache), so it always sees what the
//! shipper appended; a line that does not parse is an error naming the file and line, never a
//! silent skip.

#![deny(missing_docs)]

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use rca_core::source::{Level, LogQuery, LogRecord, LogSource, RecordStream};
use rca_core::{SourceError, Timestamp};

/// A directory of `<component>.log` files.
#[derive(Debug, Clone)]
pub struct ShipperStore {
    dir: PathBuf,
}

impl ShipperStore {
    /// The store in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        ShipperStore { dir: dir.into() }
    }

    /// Appends one line (what the host's shipper does; used to fill stores in tests).
    pub fn append(
        &self,
        component: &str,
        at: Timestamp,
        level: Level,
        message: &str,
    ) -> std::io::Result<()> {
        use std::io::Write;
        std::fs::create_dir_all(&self.dir)?;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("{component}.log")))?;
        let message = message.replace(['\n', '\t'], " ");
        writeln!(file, "{}\t{}\t{message}", at.millis(), level_word(level))
    }

    fn read(&self, component: &str, query: &LogQuery) -> Result<Vec<LogRecord>, SourceError> {
        let path = self.dir.join(format!("{component}.log"));
        let text = std::fs::read_to_string(&path).map_err(|e| SourceError::Unavailable {
            message: format!("{}: {e}", path.display()),
        })?;
        let mut out = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let record = parse_line(component, line).map_err(|message| SourceError::Malformed {
                location: format!("{}:{}", path.display(), i + 1),
                message,
            })?;
            if query.matches(&record) {
                out.push(record);
            }
        }
        Ok(out)
    }
}

fn level_word(level: Level) -> String {
    level.to_string()
}

fn parse_line(component: &str, line: &str) -> Result<LogRecord, String> {
    let mut parts = line.splitn(3, '\t');
    let (Some(millis), Some(level), Some(message)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err("expected `<unix millis>\\t<LEVEL>\\t<message>`".into());
    };
    let millis: i64 = millis
        .parse()
        .map_err(|_| format!("`{millis}` is not a time in unix milliseconds"))?;
    Ok(LogRecord {
        timestamp: Timestamp(millis),
        component: component.into(),
        level: Level::parse(level),
        message: message.to_string(),
        attributes: Default::default(),
    })
}

fn component_of(path: &Path) -> Option<String> {
    (path.extension()? == "log").then_some(())?;
    Some(path.file_stem()?.to_string_lossy().to_string())
}

#[async_trait]
impl LogSource for ShipperStore {
    async fn logs(&self, query: &LogQuery) -> Result<RecordStream<LogRecord>, SourceError> {
        let components = match &query.component {
            Some(c) => vec![c.clone()],
            None => self.components().await?,
        };
        let mut records = Vec::new();
        for c in &components {
            records.extend(self.read(c, query)?);
        }
        records.sort_by_key(|r| r.timestamp);
        if let Some(limit) = query.limit {
            records.truncate(limit);
        }
        Ok(Box::pin(futures::stream::iter(records.into_iter().map(Ok))))
    }

    async fn components(&self) -> Result<Vec<String>, SourceError> {
        let entries = std::fs::read_dir(&self.dir).map_err(|e| SourceError::Unavailable {
            message: format!("{}: {e}", self.dir.display()),
        })?;
        let mut out: Vec<String> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| component_of(&e.path()))
            .collect();
        out.sort();
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use futures::TryStreamExt;
    use rca_core::TimeRange;

    use super::*;

    #[tokio::test]
    async fn answers_queries_like_any_source() {
        let dir = tempfile::tempdir().unwrap();
        let store = ShipperStore::new(dir.path());
        store
            .append("api", Timestamp(1_000), Level::Info, "GET /a 200")
            .unwrap();
        store
            .append("api", Timestamp(2_000), Level::Error, "upstream\ttimed out")
            .unwrap();
        store
            .append("db", Timestamp(1_500), Level::Warning, "slow query 900 ms")
            .unwrap();
        store
            .append("db", Timestamp(9_000), Level::Error, "later")
            .unwrap();
        let source: &dyn LogSource = &store;
        assert_eq!(source.components().await.unwrap(), vec!["api", "db"]);

        let all: Vec<LogRecord> = source
            .logs(&LogQuery::range(TimeRange::new(
                Timestamp(0),
                Timestamp(5_000),
            )))
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        let seen: Vec<(&str, i64)> = all
            .iter()
            .map(|r| (r.component.as_str(), r.timestamp.millis()))
            .collect();
        assert_eq!(seen, vec![("api", 1_000), ("db", 1_500), ("api", 2_000)]);
        assert_eq!(all[2].message, "upstream timed out");
        assert_eq!(all[2].level, Some(Level::Error));

        let mut q = LogQuery::range(TimeRange::new(Timestamp(0), Timestamp(10_000)));
        q.component = Some("db".into());
        q.min_level = Some(Level::Error);
        let errors: Vec<LogRecord> = source.logs(&q).await.unwrap().try_collect().await.unwrap();
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].message, "later");
    }

    #[tokio::test]
    async fn bad_lines_and_missing_stores_are_clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("api.log"),
            "1000\tINFO\tok\nyesterday\tINFO\tbad\n",
        )
        .unwrap();
        let store = ShipperStore::new(dir.path());
        let q = LogQuery::range(TimeRange::new(Timestamp(0), Timestamp(5_000)));
        let err = store.logs(&q).await.err().unwrap().to_string();
        assert!(
            err.contains("api.log:2") && err.contains("yesterday"),
            "{err}"
        );
        let missing = ShipperStore::new(dir.path().join("nope"));
        assert!(matches!(
            missing.components().await,
            Err(SourceError::Unavailable { .. })
        ));
    }
}
