//! Log clustering: the [`TemplateMiner`] (lines to templates) and the [`LogSegmenter`]
//! (a log into contiguous blocks of related lines). Implementations live in rca-tools.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::error::EmbedError;

/// Identifier of a template inside one miner (stable across save and restore).
pub type TemplateId = u64;

/// Where one ingested line went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TemplateMatch {
    /// The template the line was assigned to.
    pub template_id: TemplateId,
    /// Whether the line created that template.
    pub is_new: bool,
}

/// A mined template with its statistics.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Template {
    /// Its identifier.
    pub id: TemplateId,
    /// The template text; `<*>` marks a parameter.
    pub text: String,
    /// How many lines it matched.
    pub count: u64,
    /// Sequence number (0-based, in ingestion order) of the first matching line.
    pub first_seen: u64,
    /// Sequence number of the last matching line.
    pub last_seen: u64,
}

/// Online template mining: each message body is assigned to a template as it streams in.
///
/// Ingestion takes `&mut self`: a miner is a stateful, order-dependent accumulator (each
/// line may create or generalise a template), so a shared `&self` API would only hide a lock
/// inside every implementation. A host that shares one miner wraps it in a `Mutex`; the trait
/// stays object-safe (`Box<dyn TemplateMiner>`, `Mutex<Box<dyn TemplateMiner>>`).
///
/// ```
/// use std::collections::HashMap;
/// use rca_core::logs::{Template, TemplateId, TemplateMatch, TemplateMiner};
///
/// /// Every distinct line is its own template: a toy, but a valid miner.
/// #[derive(Default)]
/// struct Exact { ids: HashMap<String, TemplateId>, stats: Vec<Template>, seq: u64 }
///
/// impl TemplateMiner for Exact {
///     fn ingest(&mut self, content: &str) -> TemplateMatch {
///         let seq = self.seq;
///         self.seq += 1;
///         if let Some(&id) = self.ids.get(content) {
///             let t = &mut self.stats[id as usize];
///             t.count += 1;
///             t.last_seen = seq;
///             return TemplateMatch { template_id: id, is_new: false };
///         }
///         let id = self.stats.len() as TemplateId;
///         self.ids.insert(content.to_string(), id);
///         self.stats.push(Template { id, text: content.to_string(), count: 1, first_seen: seq, last_seen: seq });
///         TemplateMatch { template_id: id, is_new: true }
///     }
///     fn template(&self, id: TemplateId) -> Option<Template> { self.stats.get(id as usize).cloned() }
///     fn templates(&self) -> Vec<Template> { self.stats.clone() }
///     fn parameters(&self, _id: TemplateId, _content: &str) -> Vec<String> { Vec::new() }
/// }
///
/// let mut m = Exact::default();
/// assert!(m.ingest("disk full").is_new);
/// assert!(!m.ingest("disk full").is_new);
/// assert_eq!(m.templates()[0].count, 2);
/// ```
pub trait TemplateMiner: Send + Sync {
    /// Assigns one message body to a template, creating or generalising one.
    fn ingest(&mut self, content: &str) -> TemplateMatch;
    /// The current state of a template; ids of templates merged into another resolve to it.
    fn template(&self, id: TemplateId) -> Option<Template>;
    /// Every template, in a deterministic order.
    fn templates(&self) -> Vec<Template>;
    /// The values of `content` at the parameter positions of template `id` (empty when the
    /// line does not fit the template or the id is unknown).
    fn parameters(&self, id: TemplateId, content: &str) -> Vec<String>;
}

fn _miner_object_safe(_: &dyn TemplateMiner) {}

/// A contiguous block of lines found by a [`LogSegmenter`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogBlock {
    /// First line of the block (0-based, inclusive).
    pub start: usize,
    /// One past the last line (exclusive).
    pub end: usize,
    /// The community the block came from (blocks split from one community share it).
    pub community: usize,
}

impl LogBlock {
    /// Number of lines in the block.
    pub fn len(&self) -> usize {
        self.end.saturating_sub(self.start)
    }

    /// Whether the block holds no line.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Splits a log into contiguous blocks of semantically related lines (RCAgent Algorithm 1).
///
/// ```
/// use async_trait::async_trait;
/// use rca_core::logs::{LogBlock, LogSegmenter};
/// use rca_core::EmbedError;
///
/// /// One block per run of lines with the same first word: a toy, but a valid segmenter.
/// struct FirstWord;
///
/// #[async_trait]
/// impl LogSegmenter for FirstWord {
///     async fn segment(&self, lines: &[String]) -> Result<Vec<LogBlock>, EmbedError> {
///         let mut blocks: Vec<LogBlock> = Vec::new();
///         for (i, line) in lines.iter().enumerate() {
///             let word = line.split_whitespace().next();
///             match blocks.last_mut() {
///                 Some(b) if lines[b.start].split_whitespace().next() == word => b.end = i + 1,
///                 _ => blocks.push(LogBlock { start: i, end: i + 1, community: blocks.len() }),
///             }
///         }
///         Ok(blocks)
///     }
/// }
/// ```
#[async_trait]
pub trait LogSegmenter: Send + Sync {
    /// The blocks of `lines`, in order, covering every line exactly once.
    async fn segment(&self, lines: &[String]) -> Result<Vec<LogBlock>, EmbedError>;
}

fn _segmenter_object_safe(_: &dyn LogSegmenter) {}
