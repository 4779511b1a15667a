//! CSV metric files, in the long layout (`timestamp,component,metric,value[,label...]`) or the
//! wide layout (`timestamp[,component],kpi1,kpi2,...`, one column per KPI).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use async_trait::async_trait;
use rca_core::source::{MetricQuery, MetricSample, MetricSource, RecordStream};
use rca_core::{SourceError, Timestamp};

use super::io::{ReadBudget, csv_stream_failure, open_text_within, parse_time, stem};
use super::{LoadReport, before_cutoff, find_col, norm_col};

/// How a metrics CSV is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricLayout {
    /// One sample per row: time, component, metric name, value; other columns are labels.
    Long,
    /// One row per instant: time, optionally a component column, then one numeric column per
    /// KPI.
    Wide,
}

/// Options for reading metric files.
#[derive(Debug, Clone, Default)]
pub struct MetricOptions {
    /// The layout; detected from the header when `None` (a `metric` and a `value` column mean
    /// long).
    pub layout: Option<MetricLayout>,
    /// The component of rows that name none; the file stem when `None`.
    pub component: Option<String>,
    /// Drop every sample at or after this instant.
    pub cutoff: Option<Timestamp>,
    /// The decompressed bytes the files may hold together; reading stops with an error once
    /// it is spent. `None`: no limit.
    pub budget: Option<ReadBudget>,
}

const TIME_COLS: &[&str] = &[
    "timestamp",
    "timeunixnano",
    "ts",
    "time",
    "datetime",
    "date",
];
const COMPONENT_COLS: &[&str] = &[
    "component",
    "service",
    "servicename",
    "pod",
    "podname",
    "instance",
    "host",
    "hostname",
    "cmdbid",
    "node",
];
const METRIC_COLS: &[&str] = &["metric", "metricname", "kpi", "kpiname", "name"];
const VALUE_COLS: &[&str] = &["value", "val"];

/// Metric samples read from CSV files, answering [`MetricSource`] queries from memory.
#[derive(Debug, Clone, Default)]
pub struct FileMetricSource {
    samples: Vec<MetricSample>,
    cutoff: Option<Timestamp>,
    report: LoadReport,
}

impl FileMetricSource {
    /// A source over samples already in memory (sorted here; the cutoff applies).
    pub fn from_samples(mut samples: Vec<MetricSample>, cutoff: Option<Timestamp>) -> Self {
        let before = samples.len();
        samples.retain(|s| before_cutoff(cutoff, s.timestamp));
        samples.sort_by(|a, b| {
            (a.timestamp, &a.component, &a.metric).cmp(&(b.timestamp, &b.component, &b.metric))
        });
        let report = LoadReport {
            records: samples.len(),
            after_cutoff: before - samples.len(),
            ..LoadReport::default()
        };
        FileMetricSource {
            samples,
            cutoff,
            report,
        }
    }

    /// Reads the given CSV files. A file that cannot be opened or has no time column is an
    /// error; a row that cannot be decoded is counted in the report and skipped.
    pub fn open<P: AsRef<Path>>(paths: &[P], options: &MetricOptions) -> Result<Self, SourceError> {
        let mut report = LoadReport::default();
        let mut samples = Vec::new();
        for path in paths {
            let path = path.as_ref();
            read_file(path, options, &mut samples, &mut report)?;
        }
        let mut s = FileMetricSource::from_samples(samples, options.cutoff);
        report.after_cutoff += s.report.after_cutoff;
        report.records = s.samples.len();
        s.report = report;
        Ok(s)
    }

    /// What loading produced.
    pub fn report(&self) -> &LoadReport {
        &self.report
    }

    /// Every sample, in time order.
    pub fn samples_all(&self) -> &[MetricSample] {
        &self.samples
    }

    /// The samples that match a query, in time order (the cutoff always applies).
    pub fn query(&self, query: &MetricQuery) -> Vec<MetricSample> {
        super::in_range(&self.samples, query.range, self.cutoff, |s| s.timestamp)
            .filter(|s| query.matches(s))
            .cloned()
            .collect()
    }
}

#[async_trait]
impl MetricSource for FileMetricSource {
    async fn samples(
        &self,
        query: &MetricQuery,
    ) -> Result<RecordStream<MetricSample>, SourceError> {
        let hits: Vec<_> = self.query(query).into_iter().map(Ok).collect();
        Ok(Box::pin(futures::stream::iter(hits)))
    }

    async fn series(&self) -> Result<Vec<(String, String)>, SourceError> {
        Ok(distinct_series(&self.samples))
    }
}

/// The (component, metric) series of `samples`, each once, in order.
pub(crate) fn distinct_series<'a>(
    samples: impl IntoIterator<Item = &'a MetricSample>,
) -> Vec<(String, String)> {
    let set: BTreeSet<(&str, &str)> = samples
        .into_iter()
        .map(|s| (s.component.as_str(), s.metric.as_str()))
        .collect();
    set.into_iter()
        .map(|(c, m)| (c.to_string(), m.to_string()))
        .collect()
}

/// Picks the time column: among the candidates, the first whose first data row parses.
fn time_column(headers: &[String], first: Option<&csv::StringRecord>) -> Option<usize> {
    let normed: Vec<String> = headers.iter().map(|h| norm_col(h)).collect();
    let candidates: Vec<usize> = TIME_COLS
        .iter()
        .filter_map(|a| normed.iter().position(|h| h == a))
        .collect();
    match first {
        Some(row) => candidates
            .iter()
            .copied()
            .find(|&i| row.get(i).and_then(parse_time).is_some())
            .or(candidates.first().copied()),
        None => candidates.first().copied(),
    }
}

fn read_file(
    path: &Path,
    options: &MetricOptions,
    out: &mut Vec<MetricSample>,
    report: &mut LoadReport,
) -> Result<(), SourceError> {
    let reader = open_text_within(path, options.budget.as_ref())?;
    report.files += 1;
    let mut csv = csv::ReaderBuilder::new()
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(reader);
    let headers: Vec<String> = csv
        .headers()
        .map_err(|e| match csv_stream_failure(path, &e) {
            Err(over) => over,
            Ok(_) => SourceError::Malformed {
                location: path.display().to_string(),
                message: format!("no CSV header: {e}"),
            },
        })?
        .iter()
        .map(str::to_string)
        .collect();
    let mut rows = csv.records();
    let first = match rows.next() {
        Some(Ok(r)) => Some(r),
        Some(Err(e)) => {
            csv_stream_failure(path, &e)?;
            report.bad(format!("{}:2", path.display()), e);
            None
        }
        None => None,
    };
    let time_col = time_column(&headers, first.as_ref()).ok_or_else(|| SourceError::Malformed {
        location: path.display().to_string(),
        message: format!("no time column among {headers:?}"),
    })?;
    let comp_col = find_col(&headers, COMPONENT_COLS);
    let metric_col = find_col(&headers, METRIC_COLS);
    let value_col = find_col(&headers, VALUE_COLS);
    let layout = options
        .layout
        .unwrap_or(if metric_col.is_some() && value_col.is_some() {
            MetricLayout::Long
        } else {
            MetricLayout::Wide
        });
    let default_component = options.component.clone().unwrap_or_else(|| stem(path));
    // Columns that are not values in the wide layout: time-like, component and text columns.
    let skip: BTreeSet<usize> = headers
        .iter()
        .enumerate()
        .filter(|(i, h)| {
            *i == time_col
                || Some(*i) == comp_col
                || TIME_COLS.contains(&norm_col(h).as_str())
                || COMPONENT_COLS.contains(&norm_col(h).as_str())
        })
        .map(|(i, _)| i)
        .collect();
    if layout == MetricLayout::Long && (metric_col.is_none() || value_col.is_none()) {
        return Err(SourceError::Malformed {
            location: path.display().to_string(),
            message: "long layout needs a metric and a value column".into(),
        });
    }
    let all = first.into_iter().map(Ok).chain(rows);
    for (line, row) in (2usize..).zip(all) {
        let loc = || format!("{}:{line}", path.display());
        let row = match row {
            Ok(r) => r,
            Err(e) => {
                let ends = csv_stream_failure(path, &e)?;
                report.bad(loc(), e);
                if ends {
                    break;
                }
                continue;
            }
        };
        let Some(timestamp) = row.get(time_col).and_then(parse_time) else {
            report.bad(loc(), "unreadable time");
            continue;
        };
        let component = comp_col
            .and_then(|c| row.get(c))
            .filter(|c| !c.is_empty())
            .map(str::to_string)
            .unwrap_or_else(|| default_component.clone());
        match layout {
            MetricLayout::Long => {
                let (Some(m), Some(v)) = (metric_col, value_col) else {
                    continue;
                };
                let metric = row.get(m).unwrap_or("").to_string();
                match row.get(v).and_then(|v| v.parse::<f64>().ok()) {
                    Some(value) if value.is_finite() && !metric.is_empty() => {
                        let labels = headers
                            .iter()
                            .enumerate()
                            .filter(|(i, _)| {
                                *i != time_col && Some(*i) != comp_col && *i != m && *i != v
                            })
                            .filter_map(|(i, h)| row.get(i).map(|x| (h.clone(), x.to_string())))
                            .collect();
                        out.push(MetricSample {
                            timestamp,
                            component,
                            metric,
                            value,
                            labels,
                        });
                    }
                    _ => report.bad(loc(), "missing metric name or non-numeric value"),
                }
            }
            MetricLayout::Wide => {
                for (i, h) in headers.iter().enumerate() {
                    if skip.contains(&i) {
                        continue;
                    }
                    // Empty and non-numeric cells (NaN, text columns) carry no sample.
                    if let Some(value) = row.get(i).and_then(|v| v.parse::<f64>().ok())
                        && value.is_finite()
                    {
                        out.push(MetricSample {
                            timestamp,
                            component: component.clone(),
                            metric: h.clone(),
                            value,
                            labels: BTreeMap::new(),
                        });
                    }
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rca_core::TimeRange;

    #[test]
    fn wide_layout_with_units_and_text_time() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("pods.csv");
        std::fs::write(
            &p,
            "Time,TimeStamp,PodName,CpuUsage(m),Mem\n\
             2023-01-29 08:41:09.7 +0000 UTC m=+0.7,1674981669,api-1,4.5,100\n\
             garbage,xx,api-1,1,1\n\
             2023-01-29 08:42:09.3 +0000 UTC,1674981729,api-1,NaN,101\n",
        )
        .unwrap();
        let s = FileMetricSource::open(&[&p], &MetricOptions::default()).unwrap();
        assert_eq!(s.report().bad_rows, 1);
        let all = s.samples_all();
        assert_eq!(all.len(), 3);
        assert_eq!(all[0].timestamp, Timestamp::from_secs(1_674_981_669));
        assert_eq!(all[0].component, "api-1");
        assert_eq!(all[0].metric, "CpuUsage(m)");
    }

    #[tokio::test]
    async fn long_layout_labels_and_cutoff() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.csv.gz");
        {
            use std::io::Write;
            let mut enc = flate2::write::GzEncoder::new(
                std::fs::File::create(&p).unwrap(),
                Default::default(),
            );
            enc.write_all(
                b"timestamp,component,metric,value,zone\n\
                  1000,db,cpu,0.5,a\n2000,db,cpu,0.9,a\n3000,db,cpu,x,a\n4000,db,cpu,1,a\n",
            )
            .unwrap();
            enc.finish().unwrap();
        }
        let s = FileMetricSource::open(
            &[&p],
            &MetricOptions {
                cutoff: Some(Timestamp::from_secs(4000)),
                ..MetricOptions::default()
            },
        )
        .unwrap();
        assert_eq!(s.samples_all().len(), 2);
        assert_eq!(s.report().bad_rows, 1);
        assert_eq!(s.report().after_cutoff, 1);
        assert_eq!(s.samples_all()[0].labels["zone"], "a");
        let q = MetricQuery::range(TimeRange::new(Timestamp(0), Timestamp(i64::MAX)));
        assert_eq!(
            super::super::collect_samples(&s, &q).await.unwrap().len(),
            2
        );
        assert_eq!(s.series().await.unwrap(), [("db".into(), "cpu".into())]);
    }

    #[test]
    fn no_time_column_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.csv");
        std::fs::write(&p, "a,b\n1,2\n").unwrap();
        assert!(FileMetricSource::open(&[&p], &MetricOptions::default()).is_err());
    }
}
