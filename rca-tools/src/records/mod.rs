//! Tables of records (job lifecycle events, configuration changes) as a
//! [`TableSource`](rca_core::source::TableSource): CSV files, one table per file.

mod csv_tables;

pub use csv_tables::{CsvTables, TableOptions, parse_time_cell};
