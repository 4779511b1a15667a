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
//!
//! Everything is deterministic: hashes are unseeded, leaves and families keep insertion order.

use std::hash::Hasher;

use rca_core::logs::{Template, TemplateId, TemplateMatch, TemplateMiner};
use rustc_hash::{FxHashMap, FxHasher};
use serde::{Deserialize, Serialize};

use super::error::LogsError;
use super::mask::{
    MaskRules, Token, WILDCARD, WILDCARD_HASH, is_value_like, masked_text_with, tokenize_with,
};

/// Constant tokens a template must keep besides a position before that position may become
/// a parameter (a one-word message is never generalised into `<*>`).
const MIN_CONTEXT: usize = 2;

/// How many words of a family's position must recur at the same position of another family
/// for cross-context evidence (see the module docs).
const SHARED_VALUES: usize = 2;

/// Version of the serialised miner state; restoring another version is refused.
pub const STATE_VERSION: u32 = 3;

/// The one configuration of the miner. The defaults serve every log; nothing in it names a
/// system. They are the configuration that leave-one-system-out cross-validation chooses on
/// the twelve Loghub-2k development systems (`rca eval loghub --leave-one-out`; the grid is
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
            variable_threshold: 6,
            value_threshold: 3,
            max_tokens: 256,
            cache_capacity: 1 << 16,
            collapse_wildcards: true,
            key_values: false,
            endpoints: false,
            numbered_names: true,
            strict_fit: true,
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
/// // `12 ms` is one value written in two tokens: adjacent parameters read as one.
/// assert_eq!(m.template(a.template_id).unwrap().text, "Connected to <*> in <*>");
/// assert_eq!(m.parameters(a.template_id, "Connected to 10.0.0.9:80 in 5 ms"), ["10.0.0.9:80", "5 ms"]);
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
    seq: u64,
    buf: Vec<Token>,
    hashes: Vec<u64>,
}

impl Default for OnlineMiner {
    fn default() -> Self {
        OnlineMiner::new(MinerConfig::default())
    }
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

/// Whether a line (or a template) fits `template` exactly: equal at every constant position.
/// With `strict`, a parameter that masking made accepts only a masked token; one the family
/// rule opened accepts anything.
fn fits(template: &Cluster, line: &[u64], strict: bool) -> bool {
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
                    || t == WILDCARD_HASH
                        && (!strict || template.opened.binary_search(&(j as u32)).is_ok())
            })
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
        self.clusters
            .iter()
            .filter(|c| c.merged_into.is_none())
            .count()
    }

    /// The live id that `id` resolves to (itself unless it was merged).
    pub fn resolve(&self, id: TemplateId) -> Option<TemplateId> {
        let i = u32::try_from(id).ok()?;
        self.clusters.get(i as usize)?;
        Some(self.resolve_idx(i) as TemplateId)
    }

    fn resolve_idx(&self, mut i: u32) -> u32 {
        // Merge links always point to a lower index, so this terminates.
        while let Some(next) = self.clusters.get(i as usize).and_then(|c| c.merged_into) {
            if next >= i {
                break;
            }
            i = next;
        }
        i
    }

    /// The most specific live template of the leaf that `hashes` fits.
    fn find_fit(&self, hashes: &[u64]) -> Option<u32> {
        let leaf = self.leaves.get(&hashes.len())?;
        let mut best: Option<(u32, usize)> = None;
        for &ci in leaf {
            let Some(c) = self.clusters.get(ci as usize) else {
                continue;
            };
            if fits(c, hashes, self.config.strict_fit) {
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
            Some(&idx) => (self.resolve_idx(idx), false),
            None => match self.find_fit(&hashes) {
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
                    });
                    (ci, true)
                }
            },
        };
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
        let Some(hashes) = self.clusters.get(ci as usize).map(|c| c.hashes.clone()) else {
            return;
        };
        let constants = hashes.iter().filter(|&&h| h != WILDCARD_HASH).count();
        // A position is judged against its context: at least MIN_CONTEXT other constants.
        if constants <= MIN_CONTEXT {
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
            live.iter_mut().for_each(|m| *m = self.resolve_idx(*m));
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
                k.count += o.count;
                k.first_seen = k.first_seen.min(o.first_seen);
                k.last_seen = k.last_seen.max(o.last_seen);
            }
            if let Some(o) = self.clusters.get_mut(other as usize) {
                o.merged_into = Some(keeper);
                o.hashes = Vec::new();
                o.tokens = Vec::new();
                o.count = 0;
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
        let twin = self.leaves.get(&shape.len()).and_then(|leaf| {
            leaf.iter().copied().find(|&o| {
                o != keeper
                    && self
                        .clusters
                        .get(o as usize)
                        .is_some_and(|c| c.hashes == shape)
            })
        });
        if let Some(t) = twin {
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
            let idx = match self.find_fit(&c.hashes) {
                Some(ci) => {
                    if let Some(t) = self.clusters.get_mut(ci as usize) {
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
                    self.create(nc)
                }
            };
            map[i] = idx as TemplateId;
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
        m.clusters = self
            .clusters
            .iter()
            .filter(|c| c.merged_into.is_none())
            .cloned()
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
            .filter(|(_, c)| c.merged_into.is_none())
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
        let mut cache: Vec<(u64, u32)> = self.cache.iter().map(|(&k, &v)| (k, v)).collect();
        cache.sort_unstable();
        let mut families: Vec<(u64, Vec<u32>)> =
            self.families.iter().map(|(&k, v)| (k, v.clone())).collect();
        families.sort_unstable();
        let mut positions: Vec<(u64, Vec<u64>)> = self
            .positions
            .iter()
            .map(|(&k, v)| (k, v.clone()))
            .collect();
        positions.sort_unstable();
        let state = MinerState {
            version: STATE_VERSION,
            config: self.config.clone(),
            clusters: self.clusters.clone(),
            cache,
            families,
            positions,
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
            let bad_link = c.merged_into.is_some_and(|m| m as usize >= i);
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
        for (i, c) in m.clusters.iter().enumerate() {
            if c.merged_into.is_none() {
                m.leaves.entry(c.hashes.len()).or_default().push(i as u32);
            }
        }
        Ok(m)
    }

    fn to_template(&self, idx: usize) -> Option<Template> {
        let c = self.clusters.get(idx)?;
        Some(Template {
            id: idx as TemplateId,
            text: c.tokens.join(" "),
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
            .filter(|&i| self.clusters[i].merged_into.is_none())
            .filter_map(|i| self.to_template(i))
            .collect()
    }

    fn parameters(&self, id: TemplateId, content: &str) -> Vec<String> {
        let Some(c) = self.resolve(id).and_then(|i| self.clusters.get(i as usize)) else {
            return Vec::new();
        };
        let mut toks = Vec::new();
        tokenize_with(
            content,
            self.config.max_tokens,
            self.config.mask_rules(),
            &mut toks,
        );
        if toks.len() != c.tokens.len() {
            return Vec::new();
        }
        toks.iter()
            .zip(&c.tokens)
            .filter(|(_, tt)| tt.contains(WILDCARD))
            .map(|(t, _)| content[t.start as usize..t.end as usize].to_string())
            .collect()
    }
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
        let base = MinerConfig {
            collapse_wildcards: false,
            ..MinerConfig::default()
        };
        let mut m = OnlineMiner::new(base);
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
        let mut whole = OnlineMiner::default();
        let mut first = OnlineMiner::default();
        let mut ids_whole = Vec::new();
        let mut ids_split = Vec::new();
        for l in &lines[..100] {
            ids_whole.push(whole.ingest(l).template_id);
            ids_split.push(first.ingest(l).template_id);
        }
        let mut restored = OnlineMiner::restore(&first.save().unwrap()).unwrap();
        for l in &lines[100..] {
            ids_whole.push(whole.ingest(l).template_id);
            ids_split.push(restored.ingest(l).template_id);
        }
        assert_eq!(ids_whole, ids_split);
        assert_eq!(whole.templates(), restored.templates());
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
