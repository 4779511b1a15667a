//! The online template miner.
//!
//! Algorithm (see `docs/guides/log-clustering.md`):
//! 1. Each line is tokenised and masked by the generic rules of [`super::mask`]; the masked
//!    token sequence is hashed. An exact cache maps a sequence hash to its template, so a
//!    repeated shape costs one lookup.
//! 2. On a miss, the templates with the same token count are scanned for one the line fits
//!    exactly (equal at every constant position); the most specific fit wins.
//! 3. Otherwise the line founds a new template. For every constant position `k` of it, the
//!    template joins the *family* of templates equal to it everywhere except at `k`. When a
//!    family holds `variable_threshold` distinct templates, position `k` takes that many
//!    different words in otherwise identical lines: it is a parameter, and the family merges
//!    into one template with `<*>` at `k`. A handful of alternatives (`opened`/`closed`,
//!    `Started`/`Stopped`) stay separate templates, as constants do.
//! 4. Cross-context evidence: a family with at least `value_threshold` distinct words at `k`
//!    also merges when another family (other constant words, any length) has already seen
//!    at least [`SHARED_VALUES`] of those same words at `k`. The same small set recurring
//!    in different contexts (`session opened for user X` / `session closed for user X`) is a
//!    parameter's value set; a closed set of state words belongs to one context.
//! 5. Templates across token counts (`join_anchors`): a parameter whose value spans a
//!    varying number of tokens (a chain of hops, a list, a size with an optional unit, a flag
//!    next to a name) gives one event templates of several lengths. Templates whose
//!    constant words agree in order (the same [`skeleton`](super::skeleton), at least
//!    `join_anchors` words) are joined into one template; their shapes stay in the
//!    length-keyed index, so matching a line costs what it did. A skeleton *family* (the
//!    same skeleton but for one word) that holds as many different words as the family rule
//!    asks for opens that word in every member, across lengths: constants are told from
//!    values by how many different words occur in one place, not by their shape.
//!
//! Everything is deterministic: hashes are unseeded, leaves and families keep insertion order.

use std::hash::Hasher;

use rca_core::logs::{Template, TemplateId, TemplateMatch, TemplateMiner};
use rustc_hash::{FxHashMap, FxHasher};
use serde::{Deserialize, Serialize};

use super::error::LogsError;
use super::mask::{
    MaskRules, Token, WILDCARD, WILDCARD_HASH, is_empty_value, is_value_like, masked_text_with,
    tokenize_with,
};
use super::skeleton::{merge_text, run_content, run_key, skeleton, skeleton_key};

/// Constant tokens a template must keep besides a position before that position may become
/// a parameter (a one-word message is never generalised into `<*>`).
const MIN_CONTEXT: usize = 2;

/// How many words of a family's position must recur at the same position of another family
/// for cross-context evidence (see the module docs).
const SHARED_VALUES: usize = 2;

/// The longest run of skeleton words a run family leaves open (a multi-word value such as
/// a reason or a list of names).
const MAX_RUN: usize = 4;

/// One distinct run of a run family: its words, one shape that had it, and whether it is a
/// single value-like word.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct RunEntry {
    content: u64,
    shape: u32,
    value_like: bool,
    /// The run's words.
    words: Vec<u64>,
}

/// The fewest different words that a place of a family's runs holds: every place that all
/// non-empty runs have, counted from their start and from their end (0 when one word occurs
/// in most of the runs). The family rule asks this of each place, not only of whole runs: a
/// run is one value when every place of it varies, while a word that stays in one place
/// across the runs, or recurs in most of them (`from X to Y`, or the words of another
/// event's message after a varying name), is a constant.
fn fewest_words_at_a_place(family: &[RunEntry]) -> usize {
    let runs: Vec<&[u64]> = family
        .iter()
        .map(|e| e.words.as_slice())
        .filter(|w| !w.is_empty())
        .collect();
    let Some(shortest) = runs.iter().map(|w| w.len()).min() else {
        return 0;
    };
    // A word in most of the runs, wherever it stands in them, is a constant.
    let mut words: Vec<u64> = runs.iter().flat_map(|w| w.iter().copied()).collect();
    words.sort_unstable();
    words.dedup();
    let most = runs.len() / 2;
    if runs.len() >= 2
        && words
            .iter()
            .any(|w| runs.iter().filter(|r| r.contains(w)).count() > most)
    {
        return 0;
    }
    let mut fewest = usize::MAX;
    let mut seen: Vec<u64> = Vec::with_capacity(runs.len());
    for o in 0..shortest {
        for from_end in [false, true] {
            seen.clear();
            seen.extend(
                runs.iter()
                    .map(|w| if from_end { w[w.len() - 1 - o] } else { w[o] }),
            );
            seen.sort_unstable();
            seen.dedup();
            fewest = fewest.min(seen.len());
        }
    }
    fewest
}

/// Version of the serialised miner state; restoring another version is refused.
pub const STATE_VERSION: u32 = 4;

/// The one configuration of the miner. The defaults serve every log; nothing in it names a
/// system. They are the configuration that leave-one-system-out cross-validation chooses on
/// the twelve Loghub-2k development systems and the three generated ones of
/// `rca-eval/data/grammar-2k` (`rca eval loghub --extra ... --leave-one-out`; the grid is
/// `rca_eval::loghub::crossval::default_grid`); a test checks that no single change of one
/// of them scores higher there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MinerConfig {
    /// How many distinct words at one position of otherwise identical templates make that
    /// position a parameter.
    pub variable_threshold: usize,
    /// The same, when every one of those tokens looks like a value (a dotted name or an
    /// identifier with `_` or inner capitals).
    pub value_threshold: usize,
    /// Lines with more tokens fold the rest into the last token.
    pub max_tokens: usize,
    /// Entries of the exact masked-line cache before it is cleared (bounds memory).
    pub cache_capacity: usize,
    /// Adjacent all-variable tokens read as one parameter, so a value written in one token
    /// or in several (`<1 sec`, `00:02`) gives the same template.
    #[serde(default)]
    pub collapse_wildcards: bool,
    /// The value of a `key=value` pair is a parameter even when it is a word.
    #[serde(default)]
    pub key_values: bool,
    /// A name followed by a port number (`db.internal:5432`) is one parameter.
    #[serde(default)]
    pub endpoints: bool,
    /// A word ending in one digit (`eth0`, `ssh2`) is a name, kept as a constant unless the
    /// family rule finds it varying.
    #[serde(default)]
    pub numbered_names: bool,
    /// A parameter found by masking (a number, an address, a path) accepts only masked
    /// tokens; a word there founds its own template. Positions generalised by the family
    /// rule accept anything.
    #[serde(default)]
    pub strict_fit: bool,
    /// Templates of different token counts whose constant words agree in order (at least
    /// this many of them) join into one template, and a word that varies in one place of
    /// such templates (as many different words as the family rule asks for) becomes a
    /// parameter in all of them. 0 turns the join off.
    #[serde(default)]
    pub join_anchors: usize,
    /// Shapes of one length that agree at their frequent words (Brain's longest common
    /// pattern) merge when every other place holds as many different words as the family
    /// rule asks for, even when those places vary together.
    #[serde(default)]
    pub anchor_groups: bool,
}

impl MinerConfig {
    fn mask_rules(&self) -> MaskRules {
        MaskRules {
            collapse_wildcards: self.collapse_wildcards,
            key_values: self.key_values,
            endpoints: self.endpoints,
            numbered_names: self.numbered_names,
        }
    }
}

impl Default for MinerConfig {
    fn default() -> Self {
        MinerConfig {
            variable_threshold: 5,
            value_threshold: 3,
            max_tokens: 256,
            cache_capacity: 1 << 16,
            collapse_wildcards: false,
            key_values: false,
            endpoints: false,
            numbered_names: true,
            strict_fit: true,
            join_anchors: 2,
            anchor_groups: true,
        }
    }
}

/// One template cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Cluster {
    /// Masked token hashes; [`WILDCARD_HASH`] at parameters.
    pub hashes: Vec<u64>,
    /// Display text of each token.
    pub tokens: Vec<String>,
    pub count: u64,
    pub first_seen: u64,
    pub last_seen: u64,
    /// Set when this cluster was merged into another (its id now resolves there).
    pub merged_into: Option<u32>,
    /// Positions made parameters by the family rule (sorted), as opposed to by masking.
    #[serde(default)]
    pub opened: Vec<u32>,
    /// Set when this live shape was joined to a template of another token count: its lines
    /// count as that template's (a lower index). Unlike `merged_into`, the shape stays in
    /// the length index and keeps fitting lines.
    #[serde(default)]
    pub joined_to: Option<u32>,
    /// On a template that others joined: those shapes (they resolve here).
    #[serde(default)]
    pub members: Vec<u32>,
}

/// The serialisable state of an [`OnlineMiner`].
#[derive(Debug, Clone, Serialize, Deserialize)]
struct MinerState {
    version: u32,
    config: MinerConfig,
    clusters: Vec<Cluster>,
    cache: Vec<(u64, u32)>,
    families: Vec<(u64, Vec<u32>)>,
    positions: Vec<(u64, Vec<u64>)>,
    skeletons: Vec<(u64, Vec<u32>)>,
    skeleton_families: Vec<(u64, Vec<RunEntry>)>,
    seq: u64,
}

/// The online template miner (see the module docs and `docs/guides/log-clustering.md`).
///
/// ```
/// use rca_core::logs::TemplateMiner;
/// use rca_tools::logs::OnlineMiner;
///
/// let mut m = OnlineMiner::default();
/// let a = m.ingest("Connected to 10.0.0.1:80 in 12 ms");
/// let b = m.ingest("Connected to 10.0.0.7:443 in 3 ms");
/// assert_eq!(a.template_id, b.template_id);
/// assert_eq!(m.template(a.template_id).unwrap().text, "Connected to <*> in <*> <*>");
/// // A chain of hops takes more tokens: same constant words in the same order, one template.
/// let c = m.ingest("Connected to 10.0.0.2:80 -> 10.0.0.3:80 in 5 ms");
/// assert_eq!(m.resolve(c.template_id), m.resolve(a.template_id));
/// assert_eq!(m.template(a.template_id).unwrap().count, 3);
/// assert_eq!(m.parameters(a.template_id, "Connected to 10.0.0.9:80 in 5 ms"), ["10.0.0.9:80", "5", "ms"]);
/// ```
#[derive(Debug, Clone)]
pub struct OnlineMiner {
    config: MinerConfig,
    clusters: Vec<Cluster>,
    leaves: FxHashMap<usize, Vec<u32>>,
    cache: FxHashMap<u64, u32>,
    families: FxHashMap<u64, Vec<u32>>,
    /// `(position, word)` -> the families that saw that word at that position.
    positions: FxHashMap<u64, Vec<u64>>,
    /// Skeleton -> the shapes that had it.
    skeletons: FxHashMap<u64, Vec<u32>>,
    /// Skeleton with one run open -> its distinct runs.
    skeleton_families: FxHashMap<u64, Vec<RunEntry>>,
    seq: u64,
    buf: Vec<Token>,
    hashes: Vec<u64>,
}

impl Default for OnlineMiner {
    fn default() -> Self {
        OnlineMiner::new(MinerConfig::default())
    }
}

/// Whether a cluster is a template of its own: neither merged into nor joined to another.
fn is_root(c: &Cluster) -> bool {
    c.merged_into.is_none() && c.joined_to.is_none()
}

fn sequence_key(hashes: &[u64]) -> u64 {
    let mut h = FxHasher::default();
    h.write_usize(hashes.len());
    for &x in hashes {
        h.write_u64(x);
    }
    h.finish()
}

fn family_key(hashes: &[u64], k: usize) -> u64 {
    let mut h = FxHasher::default();
    h.write_usize(hashes.len());
    h.write_usize(k);
    for (j, &x) in hashes.iter().enumerate() {
        h.write_u64(if j == k { WILDCARD_HASH } else { x });
    }
    h.finish()
}

fn position_key(k: usize, word: u64) -> u64 {
    let mut h = FxHasher::default();
    h.write_usize(k);
    h.write_u64(word);
    h.finish()
}

/// Whether a token is punctuation only (no letter, digit or non-ASCII character): a marker
/// or a separator, never a parameter's value. An empty bracket or quote pair (`()`, `""`)
/// is an empty value, not a marker.
fn is_punctuation(token: &[u8]) -> bool {
    !token.is_empty()
        && token
            .iter()
            .all(|b| b.is_ascii() && !b.is_ascii_alphanumeric())
        && !is_empty_value(token)
}

/// Whether a line (or a template) fits `template` exactly: equal at every constant position.
/// `punct` marks the line's punctuation-only tokens: a parameter that masking made does not
/// take one (a marker such as `****` in some lines of a list is a constant of their event).
/// With `strict`, a parameter that masking made accepts only a masked token; one the family
/// rule opened accepts anything.
fn fits(template: &Cluster, line: &[u64], punct: &[bool], strict: bool) -> bool {
    let strict = strict
        && template
            .hashes
            .iter()
            .filter(|&&h| h != WILDCARD_HASH)
            .count()
            <= MIN_CONTEXT;
    template.hashes.len() == line.len()
        && template
            .hashes
            .iter()
            .zip(line)
            .enumerate()
            .all(|(j, (&t, &l))| {
                t == l
                    || t == WILDCARD_HASH && {
                        let opened = template.opened.binary_search(&(j as u32)).is_ok();
                        opened || !(strict || punct.get(j).copied().unwrap_or(false))
                    }
            })
}

/// The punctuation-only flags of a line's tokens.
fn line_punctuation(line: &str, tokens: &[Token]) -> Vec<bool> {
    tokens
        .iter()
        .map(|t| {
            t.hash != WILDCARD_HASH
                && line
                    .as_bytes()
                    .get(t.start as usize..t.end as usize)
                    .is_some_and(is_punctuation)
        })
        .collect()
}

/// The punctuation-only flags of a shape's tokens (its display text; parameters are not).
fn shape_punctuation(c: &Cluster) -> Vec<bool> {
    c.hashes
        .iter()
        .zip(&c.tokens)
        .map(|(&h, t)| h != WILDCARD_HASH && is_punctuation(t.as_bytes()))
        .collect()
}

impl OnlineMiner {
    /// A miner with the given configuration.
    pub fn new(config: MinerConfig) -> Self {
        OnlineMiner {
            config,
            clusters: Vec::new(),
            leaves: FxHashMap::default(),
            cache: FxHashMap::default(),
            families: FxHashMap::default(),
            positions: FxHashMap::default(),
            skeletons: FxHashMap::default(),
            skeleton_families: FxHashMap::default(),
            seq: 0,
            buf: Vec::new(),
            hashes: Vec::new(),
        }
    }

    /// Its configuration.
    pub fn config(&self) -> &MinerConfig {
        &self.config
    }

    /// Number of lines ingested so far.
    pub fn lines_seen(&self) -> u64 {
        self.seq
    }

    /// Number of live templates.
    pub fn template_count(&self) -> usize {
        self.clusters.iter().filter(|c| is_root(c)).count()
    }

    /// The live id that `id` resolves to (itself unless it was merged).
    pub fn resolve(&self, id: TemplateId) -> Option<TemplateId> {
        let i = u32::try_from(id).ok()?;
        self.clusters.get(i as usize)?;
        Some(self.resolve_idx(i) as TemplateId)
    }

    /// The template a shape's lines count for: merge and join links followed to the end.
    fn resolve_idx(&self, mut i: u32) -> u32 {
        // Merge and join links always point to a lower index, so this terminates.
        while let Some(next) = self
            .clusters
            .get(i as usize)
            .and_then(|c| c.merged_into.or(c.joined_to))
        {
            if next >= i {
                break;
            }
            i = next;
        }
        i
    }

    /// The live shape that `i` was merged into (itself when it was not): merge links only.
    fn live_shape(&self, mut i: u32) -> u32 {
        while let Some(next) = self.clusters.get(i as usize).and_then(|c| c.merged_into) {
            if next >= i {
                break;
            }
            i = next;
        }
        i
    }

    /// Joins the templates of shapes `a` and `b` (no-op when they are one already): the
    /// higher one counts for the lower from now on, with its statistics.
    fn union(&mut self, a: u32, b: u32) {
        let (ra, rb) = (self.resolve_idx(a), self.resolve_idx(b));
        if ra == rb {
            return;
        }
        let (lo, hi) = (ra.min(rb), ra.max(rb));
        let Some(h) = self.clusters.get_mut(hi as usize) else {
            return;
        };
        h.joined_to = Some(lo);
        let (count, first, last) = (h.count, h.first_seen, h.last_seen);
        h.count = 0;
        let mut moved = std::mem::take(&mut h.members);
        moved.push(hi);
        if let Some(l) = self.clusters.get_mut(lo as usize) {
            if count > 0 {
                l.first_seen = if l.count > 0 {
                    l.first_seen.min(first)
                } else {
                    first
                };
                l.last_seen = l.last_seen.max(last);
            }
            l.count += count;
            l.members.extend(moved);
        }
    }

    /// The most specific live template of the leaf that `hashes` fits.
    fn find_fit(&self, hashes: &[u64], punct: &[bool]) -> Option<u32> {
        let leaf = self.leaves.get(&hashes.len())?;
        let mut best: Option<(u32, usize)> = None;
        for &ci in leaf {
            let Some(c) = self.clusters.get(ci as usize) else {
                continue;
            };
            if fits(c, hashes, punct, self.config.strict_fit) {
                let params = c.hashes.iter().filter(|&&h| h == WILDCARD_HASH).count();
                if best.is_none_or(|(_, bp)| params < bp) {
                    best = Some((ci, params));
                }
            }
        }
        best.map(|(ci, _)| ci)
    }

    /// Ingests one message body (the inherent form of [`TemplateMiner::ingest`]).
    pub fn ingest_line(&mut self, content: &str) -> TemplateMatch {
        let seq = self.seq;
        self.seq += 1;
        let mut buf = std::mem::take(&mut self.buf);
        let rules = self.config.mask_rules();
        tokenize_with(content, self.config.max_tokens, rules, &mut buf);
        let mut hashes = std::mem::take(&mut self.hashes);
        hashes.clear();
        hashes.extend(buf.iter().map(|t| t.hash));
        let key = sequence_key(&hashes);
        let (idx, is_new) = match self.cache.get(&key) {
            Some(&idx) => (idx, false),
            None => match self.find_fit(&hashes, &line_punctuation(content, &buf)) {
                Some(ci) => (ci, false),
                None => {
                    let ci = self.create(Cluster {
                        hashes: hashes.clone(),
                        tokens: buf
                            .iter()
                            .map(|t| masked_text_with(content, t, rules))
                            .collect(),
                        count: 0,
                        first_seen: seq,
                        last_seen: seq,
                        merged_into: None,
                        opened: Vec::new(),
                        joined_to: None,
                        members: Vec::new(),
                    });
                    (ci, true)
                }
            },
        };
        let idx = self.resolve_idx(idx);
        if let Some(c) = self.clusters.get_mut(idx as usize) {
            c.count += 1;
            c.last_seen = seq;
        }
        if self.cache.len() >= self.config.cache_capacity {
            self.cache.clear();
        }
        self.cache.insert(key, idx);
        self.buf = buf;
        self.hashes = hashes;
        TemplateMatch {
            template_id: idx as TemplateId,
            is_new,
        }
    }

    /// Adds a cluster, registers its families and merges any family that became large
    /// enough; returns the live index the new cluster ends up in.
    fn create(&mut self, cluster: Cluster) -> u32 {
        let idx = self.clusters.len() as u32;
        let len = cluster.hashes.len();
        self.clusters.push(cluster);
        self.leaves.entry(len).or_default().push(idx);
        self.register(idx);
        self.resolve_idx(idx)
    }

    /// Adds live cluster `ci` to the family of each of its constant positions; a family that
    /// reaches the threshold is merged.
    fn register(&mut self, ci: u32) {
        if self.subsume(ci) {
            return;
        }
        let Some(hashes) = self.clusters.get(ci as usize).map(|c| c.hashes.clone()) else {
            return;
        };
        let constants = hashes.iter().filter(|&&h| h != WILDCARD_HASH).count();
        // A position is judged against its context: at least MIN_CONTEXT other constants.
        if constants <= MIN_CONTEXT {
            self.join_by_skeleton(ci);
            return;
        }
        for k in 0..hashes.len() {
            if hashes[k] == WILDCARD_HASH {
                continue;
            }
            let fk = family_key(&hashes, k);
            let members = self.families.entry(fk).or_default();
            if !members.contains(&ci) {
                members.push(ci);
            }
            let seen_in = self
                .positions
                .entry(position_key(k, hashes[k]))
                .or_default();
            if !seen_in.contains(&fk) {
                seen_in.push(fk);
            }
            let mut live: Vec<u32> = members.clone();
            live.iter_mut().for_each(|m| *m = self.live_shape(*m));
            live.sort_unstable();
            live.dedup();
            let value_like = live.iter().all(|&m| {
                self.clusters
                    .get(m as usize)
                    .and_then(|c| c.tokens.get(k))
                    .is_some_and(|t| is_value_like(t))
            });
            let threshold = if value_like {
                self.config.value_threshold
            } else {
                self.config.variable_threshold
            };
            let shared = live.len() >= self.config.value_threshold.max(2)
                && live.len() < threshold
                && self.shares_values(fk, k, &live);
            if shared || live.len() >= threshold.max(2) {
                self.families.insert(fk, live.clone());
                self.merge_all(&live);
                // The keeper changed shape: register its new families (it is live and
                // has one more parameter, so this recursion ends).
                if let Some(&keeper) = live.first() {
                    self.register(keeper);
                }
                return;
            }
        }
        if self.group_by_anchors(ci) {
            return;
        }
        self.join_by_skeleton(ci);
    }

    /// Brain's evidence within one length: the words of `ci` seen in the most contexts
    /// (its longest common pattern: the largest set of places seen equally often, at least
    /// twice, and the places seen more often) are its anchors; the live shapes of its length
    /// with the same anchors form a group. A place where the group holds fewer different
    /// words than the family rule asks for is a constant too (the group narrows to the
    /// shapes sharing it); when every other place varies that much, the group merges.
    fn group_by_anchors(&mut self, ci: u32) -> bool {
        if !self.config.anchor_groups {
            return false;
        }
        let Some(c) = self.clusters.get(ci as usize) else {
            return false;
        };
        let n = c.hashes.len();
        let counts: Vec<usize> = (0..n)
            .map(|k| {
                let h = c.hashes[k];
                if h == WILDCARD_HASH {
                    0
                } else {
                    self.positions.get(&position_key(k, h)).map_or(0, Vec::len)
                }
            })
            .collect();
        // The longest common pattern: the count shared by the most places (ties: the higher).
        let mut tally: Vec<(usize, usize)> = Vec::new();
        for &x in counts.iter().filter(|&&x| x >= 2) {
            match tally.iter_mut().find(|(v, _)| *v == x) {
                Some((_, m)) => *m += 1,
                None => tally.push((x, 1)),
            }
        }
        let Some(&(lcp, _)) = tally.iter().max_by_key(|&&(v, m)| (m, v)) else {
            return false;
        };
        let mut anchor: Vec<bool> = counts.iter().map(|&x| x >= lcp).collect();
        if anchor.iter().filter(|&&a| a).count() <= MIN_CONTEXT {
            return false;
        }
        let Some(leaf) = self.leaves.get(&n) else {
            return false;
        };
        loop {
            let group: Vec<u32> = leaf
                .iter()
                .copied()
                .filter(|&o| {
                    self.clusters.get(o as usize).is_some_and(|t| {
                        t.merged_into.is_none()
                            && (0..n).all(|k| !anchor[k] || t.hashes[k] == c.hashes[k])
                    })
                })
                .collect();
            if group.len() < 2 {
                return false;
            }
            let mut narrowed = false;
            let mut open = 0;
            for (k, is_anchor) in anchor.iter_mut().enumerate() {
                if *is_anchor || c.hashes.get(k).is_none_or(|&h| h == WILDCARD_HASH) {
                    continue;
                }
                let mut words: Vec<u64> = Vec::new();
                let mut value_like = true;
                for &m in &group {
                    if let Some(t) = self.clusters.get(m as usize)
                        && let Some(&h) = t.hashes.get(k)
                    {
                        words.push(h);
                        value_like &= t.tokens.get(k).is_some_and(|x| is_value_like(x));
                    }
                }
                words.sort_unstable();
                words.dedup();
                let threshold = if value_like {
                    self.config.value_threshold
                } else {
                    self.config.variable_threshold
                };
                if words.len() < threshold.max(2) {
                    *is_anchor = true;
                    narrowed = true;
                } else {
                    open += 1;
                }
            }
            if narrowed {
                continue;
            }
            // Places that vary together need more evidence than one place alone: at least
            // the family threshold of different shapes for each of them (a few events that
            // differ in two closed words give few combinations; independent values, many).
            if open == 0 || group.len() < self.config.variable_threshold.max(2) * open {
                return false;
            }
            let mut group = group;
            group.sort_unstable();
            self.merge_all(&group);
            if let Some(&keeper) = group.first() {
                self.register(keeper);
            }
            return true;
        }
    }

    /// Merges into live shape `ci` the live shapes of its length that it fits and that are
    /// more specific (a word where `ci` has a parameter): lines seen before a template was
    /// generalised go where the same lines seen after it go. Returns whether it merged (the
    /// survivor is registered again).
    fn subsume(&mut self, ci: u32) -> bool {
        let Some(c) = self.clusters.get(ci as usize) else {
            return false;
        };
        let Some(leaf) = self.leaves.get(&c.hashes.len()) else {
            return false;
        };
        let mut group: Vec<u32> = leaf
            .iter()
            .copied()
            .filter(|&o| {
                o != ci
                    && self.clusters.get(o as usize).is_some_and(|s| {
                        s.merged_into.is_none()
                            && s.hashes != c.hashes
                            && fits(c, &s.hashes, &shape_punctuation(s), self.config.strict_fit)
                    })
            })
            .collect();
        if group.is_empty() {
            return false;
        }
        group.push(ci);
        group.sort_unstable();
        self.merge_all(&group);
        if let Some(&keeper) = group.first() {
            self.register(keeper);
        }
        true
    }

    /// Joins live shape `ci` to the shapes of other lengths with its skeleton, and opens a
    /// skeleton word that its family found varying (see the module docs).
    fn join_by_skeleton(&mut self, ci: u32) {
        let anchors = self.config.join_anchors;
        if anchors == 0 {
            return;
        }
        let Some(c) = self.clusters.get(ci as usize) else {
            return;
        };
        if c.merged_into.is_some() {
            return;
        }
        let sk = skeleton(&c.hashes);
        if sk.words.len() < anchors {
            return;
        }
        let value_like_at: Vec<bool> = sk
            .at
            .iter()
            .map(|&t| c.tokens.get(t as usize).is_some_and(|t| is_value_like(t)))
            .collect();
        let key = skeleton_key(&sk.words);
        let same = self.skeletons.entry(key).or_default();
        if !same.contains(&ci) {
            same.push(ci);
        }
        if let Some(&first) = same.first()
            && first != ci
        {
            self.union(first, ci);
        }
        // Run families: the same skeleton but for one run of at most MAX_RUN words (or an
        // empty run). A run is judged against its context, as in the family rule.
        let s = sk.words.len();
        let context = anchors.max(MIN_CONTEXT);
        for i in 0..=s {
            for j in i..=(i + MAX_RUN).min(s) {
                if s - (j - i) < context {
                    continue;
                }
                let fk = run_key(&sk.words, i, j);
                let content = run_content(&sk.words[i..j]);
                let value_like = j == i + 1 && value_like_at.get(i).copied().unwrap_or(false);
                let family = self.skeleton_families.entry(fk).or_default();
                if family.iter().any(|e| e.content == content) {
                    continue;
                }
                family.push(RunEntry {
                    content,
                    shape: ci,
                    value_like,
                    words: sk.words[i..j].to_vec(),
                });
                let distinct = family.len();
                let threshold = if family.iter().all(|e| e.value_like) {
                    self.config.value_threshold
                } else {
                    self.config.variable_threshold
                };
                if distinct >= threshold.max(2)
                    && fewest_words_at_a_place(family) >= threshold.max(2)
                {
                    let members: Vec<u32> = family.iter().map(|e| e.shape).collect();
                    self.open_run(fk, i, s - j, &members);
                    return;
                }
            }
        }
    }

    /// Makes the run of run family `fk` (after `prefix` skeleton words, before `suffix`
    /// ones) a parameter in every member shape that still has that skeleton, and joins them.
    fn open_run(&mut self, fk: u64, prefix: usize, suffix: usize, members: &[u32]) {
        let mut joined: Vec<u32> = Vec::new();
        let mut opened: Vec<u32> = Vec::new();
        for &m in members {
            let m = self.live_shape(m);
            let Some(c) = self.clusters.get_mut(m as usize) else {
                continue;
            };
            let sk = skeleton(&c.hashes);
            let Some(end) = sk.words.len().checked_sub(suffix) else {
                continue;
            };
            if end < prefix || run_key(&sk.words, prefix, end) != fk {
                continue;
            }
            joined.push(m);
            if end == prefix {
                continue;
            }
            for &j in &sk.at[prefix..end] {
                c.hashes[j as usize] = WILDCARD_HASH;
                c.tokens[j as usize] = WILDCARD.to_string();
                if let Err(at) = c.opened.binary_search(&j) {
                    c.opened.insert(at, j);
                }
            }
            opened.push(m);
        }
        joined.sort_unstable();
        joined.dedup();
        opened.sort_unstable();
        opened.dedup();
        if let Some((&first, rest)) = joined.split_first() {
            for &o in rest {
                self.union(first, o);
            }
        }
        for m in opened {
            // A shape that became identical to another of its length merges with it; the
            // survivor registers its new families and skeleton.
            let m = self.live_shape(m);
            match self.twin_of(m) {
                Some(t) => {
                    let pair = [m.min(t), m.max(t)];
                    self.merge_all(&pair);
                    self.register(pair[0]);
                }
                None => self.register(m),
            }
        }
    }

    /// Another live shape of the same length identical to live shape `ci`.
    fn twin_of(&self, ci: u32) -> Option<u32> {
        let shape = &self.clusters.get(ci as usize)?.hashes;
        self.leaves.get(&shape.len())?.iter().copied().find(|&o| {
            o != ci
                && self
                    .clusters
                    .get(o as usize)
                    .is_some_and(|c| c.merged_into.is_none() && c.hashes == *shape)
        })
    }

    /// Whether another family saw at least [`SHARED_VALUES`] of the words that the live
    /// `members` of family `fk` hold at position `k`.
    fn shares_values(&self, fk: u64, k: usize, members: &[u32]) -> bool {
        let mut counts: Vec<(u64, usize)> = Vec::new();
        for &m in members {
            let Some(c) = self.clusters.get(m as usize) else {
                continue;
            };
            let Some(&word) = c.hashes.get(k) else {
                continue;
            };
            if word == WILDCARD_HASH {
                continue;
            }
            let Some(others) = self.positions.get(&position_key(k, word)) else {
                continue;
            };
            for &o in others {
                if o == fk {
                    continue;
                }
                match counts.iter_mut().find(|(f, _)| *f == o) {
                    Some((_, n)) => *n += 1,
                    None => counts.push((o, 1)),
                }
            }
        }
        counts.iter().any(|&(_, n)| n >= SHARED_VALUES)
    }

    /// Merges live clusters (sorted, deduplicated) into the first; every position where they
    /// differ becomes a parameter. A keeper identical to another live template merges too.
    fn merge_all(&mut self, members: &[u32]) {
        let Some((&keeper, rest)) = members.split_first() else {
            return;
        };
        for &other in rest {
            let Some(o) = self.clusters.get(other as usize).cloned() else {
                continue;
            };
            if o.merged_into.is_some() || other == keeper {
                continue;
            }
            // Their lines count for one template from now on (statistics move with it).
            self.union(keeper, other);
            if let Some(k) = self.clusters.get_mut(keeper as usize) {
                for j in 0..k.hashes.len().min(o.hashes.len()) {
                    if k.hashes[j] != o.hashes[j] {
                        k.hashes[j] = WILDCARD_HASH;
                        k.tokens[j] = WILDCARD.to_string();
                        k.opened.push(j as u32);
                    }
                }
                k.opened.extend_from_slice(&o.opened);
                k.opened.sort_unstable();
                k.opened.dedup();
            }
            if let Some(o) = self.clusters.get_mut(other as usize) {
                o.merged_into = Some(keeper);
                o.hashes = Vec::new();
                o.tokens = Vec::new();
            }
        }
        // Drop merged clusters from the leaf; fold in any live twin of the keeper.
        let Some(shape) = self.clusters.get(keeper as usize).map(|c| c.hashes.clone()) else {
            return;
        };
        let clusters = &self.clusters;
        if let Some(leaf) = self.leaves.get_mut(&shape.len()) {
            leaf.retain(|&x| {
                clusters
                    .get(x as usize)
                    .is_some_and(|c| c.merged_into.is_none())
            });
        }
        if let Some(t) = self.twin_of(keeper) {
            let mut pair = [keeper.min(t), keeper.max(t)];
            pair.sort_unstable();
            self.merge_all(&pair);
        }
    }

    /// Folds the templates of `other` into this miner (as if each were a line seen `count`
    /// times) and returns, for every id of `other`, the live id it maps to here. Used by the
    /// parallel mode; deterministic.
    pub fn absorb_miner(&mut self, other: &OnlineMiner) -> Vec<TemplateId> {
        let base = self.seq;
        let mut map = vec![0 as TemplateId; other.clusters.len()];
        for (i, c) in other.clusters.iter().enumerate() {
            if c.merged_into.is_some() {
                continue;
            }
            // A shape joined to another template carries no count: its lines were counted
            // on that template.
            let idx = match self.find_fit(&c.hashes, &shape_punctuation(c)) {
                Some(ci) => {
                    let root = self.resolve_idx(ci);
                    if let Some(t) = self.clusters.get_mut(root as usize)
                        && c.count > 0
                    {
                        t.count += c.count;
                        t.first_seen = t.first_seen.min(base + c.first_seen);
                        t.last_seen = t.last_seen.max(base + c.last_seen);
                    }
                    ci
                }
                None => {
                    let mut nc = c.clone();
                    nc.first_seen += base;
                    nc.last_seen += base;
                    nc.joined_to = None;
                    nc.members = Vec::new();
                    self.create(nc)
                }
            };
            map[i] = idx as TemplateId;
        }
        // Shapes joined there are joined here too.
        for (i, c) in other.clusters.iter().enumerate() {
            if c.merged_into.is_none()
                && let Some(j) = c.joined_to
            {
                let root = other.resolve_idx(j);
                if let (Some(&a), Some(&b)) = (map.get(i), map.get(root as usize)) {
                    self.union(a as u32, b as u32);
                }
            }
        }
        for i in 0..map.len() {
            if let Some(live) = other.resolve(i as TemplateId) {
                map[i] = map.get(live as usize).copied().unwrap_or(map[i]);
            }
        }
        for m in &mut map {
            *m = self.resolve_idx(*m as u32) as TemplateId;
        }
        self.seq += other.seq;
        self.cache.clear();
        map
    }

    /// The live templates only (renumbered from 0, with their statistics), without the
    /// cache and the family indexes: what a partial result of distributed mining carries.
    /// Absorbing it ([`OnlineMiner::absorb_miner`]) gives the same templates as absorbing
    /// `self`.
    #[cfg(feature = "sql")]
    pub(crate) fn compacted(&self) -> OnlineMiner {
        let mut m = OnlineMiner::new(self.config.clone());
        // Live shapes only, renumbered; join links renumbered with them (a join target is
        // a live shape too, and keeps its lower index).
        let mut renumber: Vec<Option<u32>> = vec![None; self.clusters.len()];
        let mut next = 0u32;
        for (i, c) in self.clusters.iter().enumerate() {
            if c.merged_into.is_none() {
                renumber[i] = Some(next);
                next += 1;
            }
        }
        let at = |j: u32| renumber.get(j as usize).copied().flatten();
        m.clusters = self
            .clusters
            .iter()
            .filter(|c| c.merged_into.is_none())
            .map(|c| {
                let mut c = c.clone();
                c.joined_to = c.joined_to.and_then(|j| at(self.live_shape(j)));
                c.members = c
                    .members
                    .iter()
                    .filter_map(|&j| at(self.live_shape(j)))
                    .collect();
                c
            })
            .collect();
        for (i, c) in m.clusters.iter().enumerate() {
            m.leaves.entry(c.hashes.len()).or_default().push(i as u32);
        }
        m.seq = self.seq;
        m
    }

    /// Each live template's index and line count.
    #[cfg(feature = "sql")]
    pub(crate) fn live_counts(&self) -> Vec<(TemplateId, u64)> {
        self.clusters
            .iter()
            .enumerate()
            .filter(|(_, c)| is_root(c))
            .map(|(i, c)| (i as TemplateId, c.count))
            .collect()
    }

    /// For every template index (live or merged), the live id it resolves to.
    pub(crate) fn live_table(&self) -> Vec<TemplateId> {
        (0..self.clusters.len())
            .map(|i| self.resolve_idx(i as u32) as TemplateId)
            .collect()
    }

    /// Serialises the state (templates, statistics, cache, families) as JSON with a format
    /// version.
    pub fn save(&self) -> Result<String, LogsError> {
        let cache = sorted_entries(&self.cache);
        let families = sorted_entries(&self.families);
        let positions = sorted_entries(&self.positions);
        let skeletons = sorted_entries(&self.skeletons);
        let skeleton_families = sorted_entries(&self.skeleton_families);
        let state = MinerState {
            version: STATE_VERSION,
            config: self.config.clone(),
            clusters: self.clusters.clone(),
            cache,
            families,
            positions,
            skeletons,
            skeleton_families,
            seq: self.seq,
        };
        serde_json::to_string(&state).map_err(|e| LogsError::State {
            message: e.to_string(),
        })
    }

    /// Restores a miner saved by [`OnlineMiner::save`]; it continues exactly where the saved
    /// one stopped.
    pub fn restore(json: &str) -> Result<OnlineMiner, LogsError> {
        let damaged = |e: serde_json::Error| LogsError::State {
            message: e.to_string(),
        };
        let version = serde_json::from_str::<serde_json::Value>(json)
            .map_err(damaged)?
            .get("version")
            .and_then(|v| v.as_u64());
        if version != Some(u64::from(STATE_VERSION)) {
            return Err(LogsError::StateVersion {
                found: version,
                expected: STATE_VERSION,
            });
        }
        let state: MinerState = serde_json::from_str(json).map_err(damaged)?;
        let n = state.clusters.len();
        let in_range = |v: u32| (v as usize) < n;
        for (i, c) in state.clusters.iter().enumerate() {
            let bad_link = c.merged_into.is_some_and(|m| m as usize >= i)
                || c.joined_to.is_some_and(|m| m as usize >= i)
                || c.members.iter().any(|&m| m as usize >= n);
            if bad_link || c.hashes.len() != c.tokens.len() {
                return Err(LogsError::State {
                    message: format!("template {i} is inconsistent"),
                });
            }
        }
        if !state.cache.iter().all(|&(_, v)| in_range(v))
            || !state
                .families
                .iter()
                .all(|(_, m)| m.iter().all(|&v| in_range(v)))
            || !state
                .skeletons
                .iter()
                .all(|(_, m)| m.iter().all(|&v| in_range(v)))
            || !state
                .skeleton_families
                .iter()
                .all(|(_, m)| m.iter().all(|e| in_range(e.shape)))
        {
            return Err(LogsError::State {
                message: "a reference points past the last template".into(),
            });
        }
        let mut m = OnlineMiner::new(state.config);
        m.clusters = state.clusters;
        m.seq = state.seq;
        m.cache = state.cache.into_iter().collect();
        m.families = state.families.into_iter().collect();
        m.positions = state.positions.into_iter().collect();
        m.skeletons = state.skeletons.into_iter().collect();
        m.skeleton_families = state.skeleton_families.into_iter().collect();
        for (i, c) in m.clusters.iter().enumerate() {
            if c.merged_into.is_none() {
                m.leaves.entry(c.hashes.len()).or_default().push(i as u32);
            }
        }
        Ok(m)
    }

    /// The live shapes whose lines count for template `root` (itself first, then in index
    /// order).
    fn shapes_of(&self, root: u32) -> Vec<u32> {
        let mut out = vec![root];
        if let Some(c) = self.clusters.get(root as usize) {
            let mut rest: Vec<u32> = c.members.iter().map(|&m| self.live_shape(m)).collect();
            rest.sort_unstable();
            rest.dedup();
            out.extend(rest.into_iter().filter(|&m| m != root));
        }
        out
    }

    fn to_template(&self, idx: usize) -> Option<Template> {
        let c = self.clusters.get(idx)?;
        let text = if c.members.is_empty() {
            c.tokens.join(" ")
        } else {
            // A template joined across token counts: the constants its shapes share, one
            // `<*>` where they differ.
            let mut text = c.tokens.clone();
            for m in self.shapes_of(idx as u32).into_iter().skip(1) {
                if let Some(o) = self.clusters.get(m as usize) {
                    text = merge_text(&text, &o.tokens);
                }
            }
            text.join(" ")
        };
        Some(Template {
            id: idx as TemplateId,
            text,
            count: c.count,
            first_seen: c.first_seen,
            last_seen: c.last_seen,
        })
    }
}

impl TemplateMiner for OnlineMiner {
    fn ingest(&mut self, content: &str) -> TemplateMatch {
        self.ingest_line(content)
    }

    fn template(&self, id: TemplateId) -> Option<Template> {
        self.to_template(self.resolve(id)? as usize)
    }

    fn templates(&self) -> Vec<Template> {
        (0..self.clusters.len())
            .filter(|&i| is_root(&self.clusters[i]))
            .filter_map(|i| self.to_template(i))
            .collect()
    }

    fn parameters(&self, id: TemplateId, content: &str) -> Vec<String> {
        let Some(root) = self.resolve(id) else {
            return Vec::new();
        };
        let mut toks = Vec::new();
        tokenize_with(
            content,
            self.config.max_tokens,
            self.config.mask_rules(),
            &mut toks,
        );
        // The shape of the template with the line's token count (one that fits it first).
        let hashes: Vec<u64> = toks.iter().map(|t| t.hash).collect();
        let shapes: Vec<&Cluster> = self
            .shapes_of(root as u32)
            .into_iter()
            .filter_map(|m| self.clusters.get(m as usize))
            .filter(|c| c.tokens.len() == toks.len())
            .collect();
        let Some(c) = shapes
            .iter()
            .find(|c| fits(c, &hashes, &[], false))
            .or(shapes.first())
        else {
            return Vec::new();
        };
        toks.iter()
            .zip(&c.tokens)
            .filter(|(_, tt)| tt.contains(WILDCARD))
            .map(|(t, _)| content[t.start as usize..t.end as usize].to_string())
            .collect()
    }
}

/// A map's entries ordered by key (keys are unique), so saved state does not depend on the
/// map's iteration order.
fn sorted_entries<V: Clone>(map: &FxHashMap<u64, V>) -> Vec<(u64, V)> {
    let mut entries: Vec<(u64, V)> = map.iter().map(|(&k, v)| (k, v.clone())).collect();
    entries.sort_unstable_by_key(|(k, _)| *k);
    entries
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_become_parameters_only_past_the_threshold() {
        let mut m = OnlineMiner::default();
        let a = m.ingest("session opened for user alice").template_id;
        let b = m.ingest("session closed for user alice").template_id;
        assert_ne!(m.resolve(a), m.resolve(b));
        let ids: Vec<_> = ["bob", "carol", "dave", "erin", "frank"]
            .iter()
            .map(|u| {
                m.ingest(&format!("session opened for user {u}"))
                    .template_id
            })
            .collect();
        let t = m.template(ids[4]).unwrap();
        assert_eq!(t.text, "session opened for user <*>");
        assert_eq!(t.count, 6);
        assert_eq!(m.resolve(a), m.resolve(ids[4]));
        assert_ne!(m.resolve(b), m.resolve(ids[4]));
    }

    #[test]
    fn a_small_value_set_recurring_in_another_context_is_a_parameter() {
        let mut m = OnlineMiner::default();
        let users = ["alice", "bob", "carol"];
        let closed: Vec<_> = users
            .iter()
            .map(|u| {
                m.ingest(&format!("session closed for user {u}"))
                    .template_id
            })
            .collect();
        // Three words in one context are not enough on their own.
        assert_ne!(m.resolve(closed[0]), m.resolve(closed[2]));
        let opened: Vec<_> = users
            .iter()
            .map(|u| {
                m.ingest(&format!("session opened for user {u} by uid 0"))
                    .template_id
            })
            .collect();
        // The same words recur after `opened`: both contexts generalise.
        let t = m.template(opened[2]).unwrap();
        assert_eq!(t.text, "session opened for user <*> by uid <*>");
        assert_eq!(m.resolve(opened[0]), m.resolve(opened[2]));
        let again = m.ingest("session closed for user dave").template_id;
        assert_eq!(
            m.template(again).unwrap().text,
            "session closed for user <*>"
        );
    }

    #[test]
    fn a_closed_set_of_state_words_in_one_context_stays_apart() {
        let mut m = OnlineMiner::default();
        let ids: Vec<_> = ["Started", "Stopped", "Paused", "Resumed"]
            .iter()
            .map(|w| {
                m.ingest(&format!("instance VM {w} lifecycle event"))
                    .template_id
            })
            .collect();
        m.ingest("instance VM Started by request");
        let mut live: Vec<_> = ids.iter().map(|&i| m.resolve(i)).collect();
        live.dedup();
        assert_eq!(live.len(), 4);
    }

    #[test]
    fn a_value_written_in_one_token_or_several_gives_one_template() {
        let mut m = OnlineMiner::default();
        let a = m.ingest("connection closed, lifetime 00:02").template_id;
        let b = m.ingest("connection closed, lifetime <1 sec").template_id;
        assert_eq!(m.resolve(a), m.resolve(b));
        assert_eq!(
            m.template(a).unwrap().text,
            "connection closed, lifetime <*>"
        );
        // Without collapsing, the two lines have different token counts: the join across
        // token counts (same constant words in order) still makes them one template.
        let base = MinerConfig {
            collapse_wildcards: false,
            ..MinerConfig::default()
        };
        let mut m = OnlineMiner::new(base.clone());
        let a = m.ingest("connection closed, lifetime 00:02").template_id;
        let b = m.ingest("connection closed, lifetime <1 sec").template_id;
        assert_eq!(m.resolve(a), m.resolve(b));
        let mut m = OnlineMiner::new(MinerConfig {
            join_anchors: 0,
            ..base
        });
        let a = m.ingest("connection closed, lifetime 00:02").template_id;
        let b = m.ingest("connection closed, lifetime <1 sec").template_id;
        assert_ne!(m.resolve(a), m.resolve(b));
    }

    #[test]
    fn a_template_without_context_does_not_swallow_words() {
        let mut m = OnlineMiner::default();
        let n = m.ingest("12345").template_id;
        let w = m.ingest("handleUpdate").template_id;
        assert_ne!(m.resolve(n), m.resolve(w));
        // With context, a masked parameter still takes a word in its place.
        let a = m
            .ingest("connection from 10.0.0.1 accepted on port 22")
            .template_id;
        let b = m
            .ingest("connection from localhost accepted on port 22")
            .template_id;
        assert_eq!(m.resolve(a), m.resolve(b));
        let loose = MinerConfig {
            strict_fit: false,
            ..MinerConfig::default()
        };
        let mut m = OnlineMiner::new(loose);
        let n = m.ingest("12345").template_id;
        let w = m.ingest("handleUpdate").template_id;
        assert_eq!(m.resolve(n), m.resolve(w));
    }

    #[test]
    fn numbered_names_are_constants_until_they_vary() {
        let mut m = OnlineMiner::default();
        let a = m.ingest("link up on interface eth0 at 10 Gb").template_id;
        let b = m.ingest("link up on interface wlan1 at 10 Gb").template_id;
        assert_ne!(m.resolve(a), m.resolve(b));
        assert_eq!(
            m.template(a).unwrap().text,
            "link up on interface eth0 at <*> Gb"
        );
        // Six different names at that place: a parameter after all.
        for name in ["ib0", "ib1", "bond0", "br0"] {
            m.ingest(&format!("link up on interface {name} at 10 Gb"));
        }
        assert_eq!(m.resolve(a), m.resolve(b));
        assert_eq!(
            m.template(a).unwrap().text,
            "link up on interface <*> at <*> Gb"
        );
    }

    fn same(m: &OnlineMiner, ids: &[TemplateId]) -> bool {
        ids.iter().all(|&i| m.resolve(i) == m.resolve(ids[0]))
    }

    #[test]
    fn templates_join_across_token_counts() {
        // A flag written next to a name in some lines only, and a value with and without a
        // converted unit: one event, lines of three token counts.
        let lines = [
            "worker a.bin - started task 5 with 12 bytes",
            "worker a.bin *64 - started task 7 with 12 bytes",
            "worker a.bin - started task 9 with 1,234 bytes (1.2 KiB) more",
            "worker a.bin *64 - started task 9 with 80 bytes more",
        ];
        let mut m = OnlineMiner::default();
        let ids: Vec<_> = lines.iter().map(|l| m.ingest(l).template_id).collect();
        assert!(same(&m, &ids[..2]));
        assert!(same(&m, &ids[2..]));
        assert_eq!(m.template_count(), 2);
        assert_eq!(
            m.template(ids[0]).unwrap().text,
            "worker a.bin <*> - started task <*> with <*> <*>"
        );
        assert_eq!(m.template(ids[1]).unwrap().count, 2);
        // Each line's parameters come from the shape of its own length.
        assert_eq!(m.parameters(ids[1], lines[1]), ["*64", "7", "12", "bytes"]);
        assert_eq!(m.parameters(ids[0], lines[0]), ["5", "12", "bytes"]);
        let off = MinerConfig {
            join_anchors: 0,
            ..MinerConfig::default()
        };
        let mut m = OnlineMiner::new(off);
        let ids: Vec<_> = lines.iter().map(|l| m.ingest(l).template_id).collect();
        assert!(!same(&m, &ids[..2]));
    }

    #[test]
    fn a_constant_word_more_keeps_events_apart() {
        let mut m = OnlineMiner::default();
        let mut done = Vec::new();
        let mut late = Vec::new();
        for i in 0..20 {
            done.push(
                m.ingest(&format!("backup of volume {i} finished"))
                    .template_id,
            );
            late.push(
                m.ingest(&format!("backup of volume {i} finished with 3 warnings"))
                    .template_id,
            );
        }
        assert!(same(&m, &done) && same(&m, &late));
        assert_ne!(m.resolve(done[0]), m.resolve(late[0]));
    }

    #[test]
    fn a_run_of_words_varying_across_lengths_is_one_parameter() {
        let reasons = [
            "connection refused",
            "peer closed the stream",
            "timeout",
            "no route to host",
            "certificate has expired",
            "disk full",
        ];
        let mut m = OnlineMiner::default();
        let ids: Vec<_> = reasons
            .iter()
            .enumerate()
            .map(|(i, r)| {
                m.ingest(&format!("request {i} to 10.0.0.{i} failed: {r}"))
                    .template_id
            })
            .collect();
        assert!(same(&m, &ids), "{:?}", m.templates());
        assert_eq!(
            m.template(ids[0]).unwrap().text,
            "request <*> to <*> failed: <*>"
        );
        // Fewer different runs than the family rule asks for stay apart.
        let mut m = OnlineMiner::default();
        let ids: Vec<_> = reasons[..3]
            .iter()
            .enumerate()
            .map(|(i, r)| {
                m.ingest(&format!("request {i} to 10.0.0.{i} failed: {r}"))
                    .template_id
            })
            .collect();
        assert!(!same(&m, &ids));
        // A word in every run is a constant: `from X to Y` with closed state names.
        let mut m = OnlineMiner::default();
        let states = [
            "NEW", "QUEUED", "RUNNING", "DONE", "FAILED", "KILLED", "LOST",
        ];
        let ids: Vec<_> = states
            .windows(2)
            .map(|w| {
                m.ingest(&format!("attempt 7 moved from {} to {} now", w[0], w[1]))
                    .template_id
            })
            .collect();
        assert!(!same(&m, &ids));
    }

    #[test]
    fn places_that_vary_together_merge_once_enough_shapes_show_it() {
        let names = [
            "audit", "backup", "index", "export", "sync", "render", "digest", "mailer",
        ];
        let users = [
            "ana", "bo", "cy", "di", "ed", "flo", "gus", "hal", "ivy", "jo", "kai", "lu",
        ];
        let mut m = OnlineMiner::default();
        let ids: Vec<_> = (0..12)
            .map(|i| {
                m.ingest(&format!(
                    "job {} queued by {} with priority {i}",
                    names[i % 8],
                    users[i]
                ))
                .template_id
            })
            .collect();
        assert!(same(&m, &ids), "{:?}", m.templates());
        assert_eq!(
            m.template(ids[0]).unwrap().text,
            "job <*> queued by <*> with priority <*>"
        );
        let off = MinerConfig {
            anchor_groups: false,
            ..MinerConfig::default()
        };
        let mut m = OnlineMiner::new(off);
        let ids: Vec<_> = (0..12)
            .map(|i| {
                m.ingest(&format!(
                    "job {} queued by {} with priority {i}",
                    names[i % 8],
                    users[i]
                ))
                .template_id
            })
            .collect();
        assert!(!same(&m, &ids));
        // Two closed words varying together over few combinations stay apart.
        let mut m = OnlineMiner::default();
        let pairs = [
            ("NEW", "QUEUED"),
            ("QUEUED", "RUNNING"),
            ("RUNNING", "DONE"),
            ("RUNNING", "FAILED"),
        ];
        let ids: Vec<_> = (0..24)
            .map(|i| {
                let (a, b) = pairs[i % 4];
                m.ingest(&format!("task {i} switched state {a} into {b} ok"))
                    .template_id
            })
            .collect();
        assert!(!same(&m, &ids));
        assert!(same(&m, &[ids[0], ids[4], ids[8]]));
    }

    #[test]
    fn a_punctuation_marker_is_not_a_value() {
        // A marker written in some lines of a list is a constant of their event, while a
        // word in a value's place is taken by the parameter there.
        let mut m = OnlineMiner::default();
        let plain = m
            .ingest("pump rates ( 1201 1187 1250 1190 1222 1199 )")
            .template_id;
        let marked = m
            .ingest("pump rates ( 1201 1187 1250 **** 1222 1199 )")
            .template_id;
        assert_ne!(m.resolve(plain), m.resolve(marked));
        let word = m
            .ingest("pump rates ( 1201 1187 1250 unknown 1222 1199 )")
            .template_id;
        assert_eq!(m.resolve(plain), m.resolve(word));
        // An empty bracket pair is an empty value.
        let a = m
            .ingest("connection from 10.0.0.1 (host.example.net) at 12:00:01")
            .template_id;
        let b = m
            .ingest("connection from 10.0.0.2 () at 12:00:02")
            .template_id;
        assert_eq!(m.resolve(a), m.resolve(b));
    }

    #[test]
    fn a_template_seen_before_its_generalisation_joins_it() {
        let mut m = OnlineMiner::default();
        let first = m
            .ingest("share archive_main_copy is not exported anymore by host h-1")
            .template_id;
        let later: Vec<_> = (0..5)
            .map(|i| {
                m.ingest(&format!(
                    "share disk{i}_share is not exported anymore by host h-{i}"
                ))
                .template_id
            })
            .collect();
        assert!(same(&m, &later));
        assert_eq!(m.resolve(first), m.resolve(later[0]));
        assert_eq!(m.template(first).unwrap().count, 6);
    }

    #[test]
    fn joined_templates_survive_save_restore_and_the_parallel_merge() {
        let lines: Vec<String> = (0..400)
            .map(|i| {
                let flag = if i % 3 == 0 { " *64" } else { "" };
                let size = if i % 2 == 0 {
                    format!("{i} bytes")
                } else {
                    format!("{},{:03} bytes ({i}.5 KiB)", i, i % 1000)
                };
                format!("client p{}.bin{flag} - sent {size} to host-{i}", i % 9)
            })
            .collect();
        let whole = mine_whole_and_restored_at(&lines, 200);
        assert_eq!(whole.template_count(), 1, "{:?}", whole.templates());
        let total: u64 = whole.templates().iter().map(|t| t.count).sum();
        assert_eq!(total, 400);
        let (merged, ids) = crate::logs::mine_parallel(&lines, &MinerConfig::default(), 3).unwrap();
        assert_eq!(merged.template_count(), 1);
        assert!(ids.iter().all(|&i| i == ids[0]));
        assert_eq!(merged.template(ids[0]).unwrap().count, 400);
    }

    #[test]
    fn save_and_restore_continue_identically() {
        let lines: Vec<String> = (0..200)
            .map(|i| {
                format!(
                    "worker w{} user u{} step {}",
                    i % 7,
                    ["a", "b", "c", "d", "e", "f"][i % 6],
                    i
                )
            })
            .collect();
        mine_whole_and_restored_at(&lines, 100);
    }

    /// Mines `lines` in one miner and, beside it, in a miner saved after `at` lines and
    /// restored; asserts both give every line the same template and end with the same
    /// templates, and returns the whole miner.
    fn mine_whole_and_restored_at(lines: &[String], at: usize) -> OnlineMiner {
        let mut whole = OnlineMiner::default();
        let mut first = OnlineMiner::default();
        let mut ids_whole = Vec::new();
        let mut ids_split = Vec::new();
        for l in &lines[..at] {
            ids_whole.push(whole.ingest(l).template_id);
            ids_split.push(first.ingest(l).template_id);
        }
        let mut restored = OnlineMiner::restore(&first.save().unwrap()).unwrap();
        for l in &lines[at..] {
            ids_whole.push(whole.ingest(l).template_id);
            ids_split.push(restored.ingest(l).template_id);
        }
        assert_eq!(ids_whole, ids_split);
        assert_eq!(whole.templates(), restored.templates());
        whole
    }

    #[test]
    fn restore_refuses_other_versions_and_damage() {
        let json = OnlineMiner::default().save().unwrap();
        let other = json.replace(&format!("\"version\":{STATE_VERSION}"), "\"version\":99");
        assert!(matches!(
            OnlineMiner::restore(&other),
            Err(LogsError::StateVersion {
                found: Some(99),
                ..
            })
        ));
        assert!(matches!(
            OnlineMiner::restore("{"),
            Err(LogsError::State { .. })
        ));
        assert!(matches!(
            OnlineMiner::restore(&format!("{{\"version\":{STATE_VERSION}}}")),
            Err(LogsError::State { .. })
        ));
    }
}
