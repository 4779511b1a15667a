//! Table schemas as the tool lifecycle sees them: names and coarse column types, with no
//! query-engine type in sight.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The coarse type of a column.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ColumnType {
    /// Whole numbers.
    Integer,
    /// Floating-point or decimal numbers.
    Float,
    /// Text.
    Text,
    /// True or false.
    Boolean,
    /// A date-time type of the engine (not an integer of epoch milliseconds).
    Timestamp,
    /// Something else, named as the engine names it.
    Other(String),
    /// The engine did not say (a plain [`rca_core::source::SqlSource`] reports names only).
    Unknown,
}

impl ColumnType {
    /// Whether values of this type are numbers.
    pub fn is_numeric(&self) -> bool {
        matches!(self, ColumnType::Integer | ColumnType::Float)
    }

    /// The SQL-ish word used in prompts.
    pub fn sql_name(&self) -> &str {
        match self {
            ColumnType::Integer => "BIGINT",
            ColumnType::Float => "DOUBLE",
            ColumnType::Text => "TEXT",
            ColumnType::Boolean => "BOOLEAN",
            ColumnType::Timestamp => "TIMESTAMP",
            ColumnType::Other(name) => name,
            ColumnType::Unknown => "UNKNOWN",
        }
    }
}

/// One column of a table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColumnInfo {
    /// Its name.
    pub name: String,
    /// Its coarse type.
    pub ty: ColumnType,
}

impl ColumnInfo {
    /// A column.
    pub fn new(name: impl Into<String>, ty: ColumnType) -> Self {
        ColumnInfo {
            name: name.into(),
            ty,
        }
    }
}

/// A table: its name and columns in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableSchema {
    /// The name queries use.
    pub name: String,
    /// The columns, in order.
    pub columns: Vec<ColumnInfo>,
}

impl TableSchema {
    /// A table.
    pub fn new(name: impl Into<String>, columns: Vec<ColumnInfo>) -> Self {
        TableSchema {
            name: name.into(),
            columns,
        }
    }

    /// The column of that name (compared case-insensitively).
    pub fn column(&self, name: &str) -> Option<&ColumnInfo> {
        self.columns
            .iter()
            .find(|c| c.name.eq_ignore_ascii_case(name))
    }
}

impl fmt::Display for TableSchema {
    /// `name(col TYPE, col TYPE, ...)`, the form prompts show.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}(", self.name)?;
        for (i, c) in self.columns.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{} {}", c.name, c.ty.sql_name())?;
        }
        f.write_str(")")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_and_lookup() {
        let t = TableSchema::new(
            "logs",
            vec![
                ColumnInfo::new("timestamp", ColumnType::Integer),
                ColumnInfo::new("Message", ColumnType::Text),
            ],
        );
        assert_eq!(t.to_string(), "logs(timestamp BIGINT, Message TEXT)");
        assert_eq!(t.column("message").map(|c| &c.ty), Some(&ColumnType::Text));
        assert!(t.column("level").is_none());
        assert!(ColumnType::Float.is_numeric() && !ColumnType::Text.is_numeric());
    }
}
