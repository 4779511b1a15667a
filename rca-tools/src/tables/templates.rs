//! Template mining as a DataFusion aggregate: `log_templates(message, chunk [, in_window])`.
//!
//! Each partial aggregate mines its lines with one [`OnlineMiner`] per *chunk* (the second
//! argument, an integer such as a time bucket) and per side of the window (the optional third
//! argument); its state is those miners' live templates and counts
//! (the miner's live templates without its caches), so on a cluster only templates and counts cross the network,
//! never lines. The final aggregate absorbs the chunk miners in the order of (chunk, side,
//! state) into one miner, the way the parallel miner folds its per-range miners, and returns
//! one row per template: `{template, lines, baseline, window}`, most lines first.
//!
//! The result depends only on which lines fall in which chunk and in which order they arrive
//! within a chunk, never on how chunks are spread over partitions, threads or executors. The
//! sessions of [`TelemetryTables`](super::TelemetryTables) keep a file in one partition and
//! never repartition a scan round-robin, so lines arrive in file order; a chunk that lies
//! within one file (time buckets inside a time partition, as `rca export parquet` writes them)
//! is therefore mined the same way locally and on any number of executors.
//! [`frequency_shift_sql`] builds the per-component shift query on top of it.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, BinaryArray, BooleanArray, Int64Array, ListArray, StringArray, StructArray,
};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Fields};
use datafusion::common::{DataFusionError, Result, ScalarValue};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Signature, TypeSignature, Volatility,
};
use rca_core::logs::{TemplateId, TemplateMiner};
use serde::{Deserialize, Serialize};

use crate::logs::{MinerConfig, OnlineMiner};

/// The SQL name of the template-mining aggregate.
pub const LOG_TEMPLATES: &str = "log_templates";

/// The template-mining aggregate (see the module docs); register it with
/// [`log_templates_udaf`].
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct LogTemplates {
    signature: Signature,
}

impl Default for LogTemplates {
    fn default() -> Self {
        let text = [DataType::Utf8, DataType::Utf8View, DataType::LargeUtf8];
        let mut forms = Vec::new();
        for t in text {
            forms.push(TypeSignature::Exact(vec![t.clone(), DataType::Int64]));
            forms.push(TypeSignature::Exact(vec![
                t,
                DataType::Int64,
                DataType::Boolean,
            ]));
        }
        LogTemplates {
            signature: Signature::one_of(forms, Volatility::Immutable),
        }
    }
}

/// The aggregate as DataFusion registers it (`ctx.register_udaf(log_templates_udaf())`).
pub fn log_templates_udaf() -> AggregateUDF {
    AggregateUDF::from(LogTemplates::default())
}

/// The element type of the aggregate's list: one template's row.
fn row_fields() -> Fields {
    Fields::from(vec![
        Field::new("template", DataType::Utf8, false),
        Field::new("lines", DataType::Int64, false),
        Field::new("baseline", DataType::Int64, false),
        Field::new("window", DataType::Int64, false),
    ])
}

fn item_field() -> FieldRef {
    Arc::new(Field::new_list_field(DataType::Struct(row_fields()), false))
}

impl AggregateUDFImpl for LogTemplates {
    fn name(&self) -> &str {
        LOG_TEMPLATES
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::List(item_field()))
    }

    fn accumulator(&self, _args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(TemplatesAccumulator::default()))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(vec![Arc::new(Field::new(
            format!("{}[chunks]", args.name),
            DataType::Binary,
            true,
        ))])
    }
}

/// One chunk miner as it travels between partial and final aggregates.
#[derive(Debug, Serialize, Deserialize)]
struct ChunkState {
    chunk: i64,
    window: bool,
    /// [`OnlineMiner::save`] of the compacted miner (live templates only).
    miner: String,
}

/// Chunk key: (chunk, in the window).
type ChunkKey = (i64, bool);

#[derive(Debug, Default)]
struct TemplatesAccumulator {
    /// Miners of the lines this accumulator saw itself.
    local: BTreeMap<ChunkKey, OnlineMiner>,
    /// Compacted miners received from other partial aggregates, with their saved form.
    received: Vec<(ChunkKey, String, OnlineMiner)>,
    /// Rough bytes held by `received` (their saved text).
    received_bytes: usize,
}

fn exec_err(message: String) -> DataFusionError {
    DataFusionError::Execution(format!("{LOG_TEMPLATES}: {message}"))
}

fn saved(m: &OnlineMiner) -> Result<String> {
    m.compacted()
        .save()
        .map_err(|e| exec_err(format!("cannot save a chunk miner: {e}")))
}

impl TemplatesAccumulator {
    /// Every chunk miner in the fold order: (chunk, side, saved form).
    fn parts(&self) -> Result<Vec<(ChunkKey, String, OnlineMiner)>> {
        let mut parts = self.received.clone();
        for (key, m) in &self.local {
            parts.push((*key, saved(m)?, m.compacted()));
        }
        parts.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        Ok(parts)
    }
}

impl Accumulator for TemplatesAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let (Some(messages), Some(chunks)) = (values.first(), values.get(1)) else {
            return Err(exec_err("expects (message, chunk [, in_window])".into()));
        };
        let messages = cast(messages, &DataType::Utf8)?;
        let messages = messages
            .as_any()
            .downcast_ref::<StringArray>()
            .ok_or_else(|| exec_err("message is not text".into()))?;
        let chunks = cast(chunks, &DataType::Int64)?;
        let chunks = chunks
            .as_any()
            .downcast_ref::<Int64Array>()
            .ok_or_else(|| exec_err("chunk is not an integer".into()))?;
        let windows = match values.get(2) {
            Some(w) => Some(cast(w, &DataType::Boolean)?),
            None => None,
        };
        let windows = match &windows {
            Some(w) => Some(
                w.as_any()
                    .downcast_ref::<BooleanArray>()
                    .ok_or_else(|| exec_err("in_window is not a boolean".into()))?,
            ),
            None => None,
        };
        for i in 0..messages.len() {
            if messages.is_null(i) {
                continue;
            }
            // A line without a chunk is mined in chunk i64::MIN; one with an unknown side is
            // baseline.
            let chunk = if chunks.is_null(i) {
                i64::MIN
            } else {
                chunks.value(i)
            };
            let window = windows.is_some_and(|w| w.is_valid(i) && w.value(i));
            self.local
                .entry((chunk, window))
                .or_insert_with(|| OnlineMiner::new(MinerConfig::default()))
                .ingest_line(messages.value(i));
        }
        Ok(())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        let states: Vec<ChunkState> = self
            .parts()?
            .into_iter()
            .map(|((chunk, window), miner, _)| ChunkState {
                chunk,
                window,
                miner,
            })
            .collect();
        let bytes = serde_json::to_vec(&states)
            .map_err(|e| exec_err(format!("cannot encode the state: {e}")))?;
        Ok(vec![ScalarValue::Binary(Some(bytes))])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let Some(states) = states.first() else {
            return Err(exec_err("no state column".into()));
        };
        let states = states
            .as_any()
            .downcast_ref::<BinaryArray>()
            .ok_or_else(|| exec_err("the state column is not binary".into()))?;
        for i in 0..states.len() {
            if states.is_null(i) {
                continue;
            }
            let parts: Vec<ChunkState> = serde_json::from_slice(states.value(i))
                .map_err(|e| exec_err(format!("a damaged partial state: {e}")))?;
            for p in parts {
                let miner = OnlineMiner::restore(&p.miner)
                    .map_err(|e| exec_err(format!("a damaged chunk miner: {e}")))?;
                self.received_bytes += p.miner.len();
                self.received.push(((p.chunk, p.window), p.miner, miner));
            }
        }
        Ok(())
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        let mut all = OnlineMiner::new(MinerConfig::default());
        // (template index in `all`, lines, in the window) of every chunk template.
        let mut placed: Vec<(TemplateId, u64, bool)> = Vec::new();
        for ((_, window), _, part) in self.parts()? {
            let map = all.absorb_miner(&part);
            for (id, count) in part.live_counts() {
                if let Some(&to) = map.get(id as usize) {
                    placed.push((to, count, window));
                }
            }
        }
        // Templates merged after a chunk was placed resolve to the one they joined.
        let mut rows: BTreeMap<TemplateId, [u64; 3]> = BTreeMap::new();
        for (id, count, window) in placed {
            let live = all.resolve(id).unwrap_or(id);
            let row = rows.entry(live).or_insert([0; 3]);
            row[0] += count;
            row[if window { 2 } else { 1 }] += count;
        }
        let mut rows: Vec<(String, [u64; 3])> = rows
            .into_iter()
            .filter_map(|(id, counts)| all.template(id).map(|t| (t.text, counts)))
            .collect();
        rows.sort_by(|a, b| b.1[0].cmp(&a.1[0]).then_with(|| a.0.cmp(&b.0)));
        let int = |k: usize| -> ArrayRef {
            Arc::new(Int64Array::from_iter_values(
                rows.iter()
                    .map(|r| i64::try_from(r.1[k]).unwrap_or(i64::MAX)),
            ))
        };
        let text: ArrayRef = Arc::new(StringArray::from_iter_values(
            rows.iter().map(|r| r.0.as_str()),
        ));
        let values = StructArray::try_new(row_fields(), vec![text, int(0), int(1), int(2)], None)?;
        let list = ListArray::try_new(
            item_field(),
            OffsetBuffer::from_lengths([rows.len()]),
            Arc::new(values),
            None,
        )?;
        Ok(ScalarValue::List(Arc::new(list)))
    }

    fn size(&self) -> usize {
        let local: usize = self
            .local
            .values()
            .map(|m| 256 + m.template_count() * 256)
            .sum();
        std::mem::size_of_val(self) + local + self.received_bytes * 2
    }
}

/// The component column after `unnest`, re-derived. DataFusion 55 keeps the aggregate's
/// functional dependency (`component` determines the row) through `unnest`, although unnest
/// makes many rows per component, and then drops every sort key after `component` as
/// redundant: `ORDER BY component, lines DESC` came back unordered within a component. A
/// computed column carries no dependency, so the sort keeps all its keys.
const UNKEYED_COMPONENT: &str = "concat(grouped, '') AS component";

/// The templates query over a logs table with columns `timestamp` (epoch ms), `component`
/// and `message`: per component, each template and its lines, mined in `chunk_ms`-long time
/// buckets; by component, then most lines first.
pub fn templates_sql(table: &str, chunk_ms: i64) -> String {
    let chunk_ms = chunk_ms.max(1);
    format!(
        "WITH mined AS (\
           SELECT component AS grouped, {LOG_TEMPLATES}(message, timestamp / {chunk_ms}) AS t \
           FROM {table} GROUP BY component), \
         rows AS (SELECT {UNKEYED_COMPONENT}, unnest(t) AS r FROM mined) \
         SELECT component, r['template'] AS template, r['lines'] AS lines FROM rows \
         ORDER BY component, lines DESC, template"
    )
}

/// The frequency-shift query over a logs table with columns `timestamp` (epoch ms),
/// `component` and `message`: per component and template, the lines before `window_start_ms`
/// (baseline) and from it on (window), and `shift`, the log2 ratio of the template's share of
/// the component's window lines to its share of its baseline lines (each count plus one half,
/// so a template new in the window has a finite shift). Chunks are `chunk_ms`-long time
/// buckets; most shifted first.
pub fn frequency_shift_sql(table: &str, window_start_ms: i64, chunk_ms: i64) -> String {
    let chunk_ms = chunk_ms.max(1);
    format!(
        "WITH mined AS (\
           SELECT component AS grouped, {LOG_TEMPLATES}(message, timestamp / {chunk_ms}, \
                  timestamp >= {window_start_ms}) AS t \
           FROM {table} GROUP BY component), \
         rows AS (SELECT {UNKEYED_COMPONENT}, unnest(t) AS r FROM mined), \
         counts AS (SELECT component, r['template'] AS template, r['baseline'] AS baseline, \
                           r['window'] AS window FROM rows) \
         SELECT component, template, baseline, window, \
                log2(((window + 0.5) / (sum(window) OVER (PARTITION BY component) + 0.5)) \
                   / ((baseline + 0.5) / (sum(baseline) OVER (PARTITION BY component) + 0.5))) \
                  AS shift \
         FROM counts ORDER BY shift DESC, component, template"
    )
}

#[cfg(test)]
#[path = "templates_tests.rs"]
mod tests;
