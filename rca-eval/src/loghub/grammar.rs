//! Labelled logs generated from message grammars: a development set for parameters whose
//! values span a varying number of tokens.
//!
//! Written for this project (licence: the project's own); nothing here is taken from a
//! Loghub system. Each system is a list of events; an event is a message pattern whose
//! placeholders draw values that take a varying number of tokens (a host with or without a
//! port, a chain of hops, a list of nodes or tags, a duration or a size in several
//! notations, a quoted multi-word name, a program name with an optional architecture
//! marker, a free-text reason), and optional parts that some lines carry and others do not.
//! Events that differ in one constant word (`attached` / `detached`) are separate events.
//! Every line is labelled with its event, so the folder is scored like a Loghub folder
//! (`<DIR>/<S>/<S>_2k.log`, `<S>_2k.log_structured.csv`, and a `formats.tsv`).
//!
//! Generation is deterministic: a SplitMix64 stream per system from a fixed seed, so
//! `rca eval loghub-grammar --out DIR` writes the same bytes on every machine.
//!
//! Pattern syntax: literal text, `{kind}` placeholders (see [`Kind`]), and `[...]` optional
//! parts (written in a line with probability 1/3; they may hold placeholders, not other
//! optional parts).

use std::fmt::Write as _;
use std::path::Path;

use super::{LoghubError, SystemData, SystemFormat, data_err};

/// The header every generated line carries before its message.
pub const LOG_FORMAT: &str = "<Date> <Time> <Level> <Component>: <Content>";

/// Lines per generated system.
pub const LINES: usize = 2000;

/// The seed of the set as written in `rca-eval/data/grammar-2k`.
pub const SEED: u64 = 0x6c6f_6767_7261_6d31;

/// A deterministic random stream (SplitMix64): the same numbers on every platform and with
/// every version of any dependency.
#[derive(Debug, Clone)]
pub struct Stream(u64);

impl Stream {
    /// A stream from `seed`.
    pub fn new(seed: u64) -> Self {
        Stream(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `lo..=hi` (`lo` when the range is empty).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        lo + self.next_u64() % (hi - lo + 1)
    }

    /// True with probability `num / den`.
    pub fn chance(&mut self, num: u64, den: u64) -> bool {
        self.next_u64() % den.max(1) < num
    }

    /// One element of a non-empty slice (`None` when empty).
    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> Option<&'a T> {
        if xs.is_empty() {
            return None;
        }
        xs.get((self.next_u64() % xs.len() as u64) as usize)
    }
}

/// What a placeholder draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A count (0..=99999).
    Int,
    /// A small count (0..=12).
    Small,
    /// A session or request id (`s-` and six hex digits).
    Id,
    /// An IPv4 address.
    Ip,
    /// A host: a bare word, a dotted name with or without a public suffix, or an address.
    Host,
    /// A host, with a port in most lines.
    Endpoint,
    /// One to four endpoints joined by ` -> `.
    Chain,
    /// One to four addresses joined by `, `.
    Addresses,
    /// A duration in one of several notations (`350 ms`, `1.2 s`, `2 min 5 s`, `00:01:02`,
    /// `3h12m`, `1.5 hours`).
    Duration,
    /// A size: bytes, bytes with a converted unit in parentheses, or a decimal with a unit.
    Size,
    /// A user name (a word).
    User,
    /// One to four user names joined by `, `.
    Users,
    /// A program: a name with `.bin`, and an architecture marker in some lines.
    Program,
    /// A quoted name of one to three words.
    Quoted,
    /// A free-text reason of two to five words.
    Reason,
    /// A file path.
    Path,
    /// A worker node (`r3-n12`).
    Node,
    /// One to five worker nodes separated by spaces.
    Nodes,
    /// One to five tags joined by `,`.
    Tags,
    /// A volume id.
    Volume,
    /// A block device name (`sdb`, `nvme1n1`).
    Device,
    /// One to four mount options joined by `,`.
    Options,
    /// A configuration value: a number, a word, or a quoted phrase.
    Setting,
    /// A configuration key (dotted words).
    Key,
}

impl Kind {
    fn parse(name: &str) -> Option<Kind> {
        Some(match name {
            "int" => Kind::Int,
            "small" => Kind::Small,
            "id" => Kind::Id,
            "ip" => Kind::Ip,
            "host" => Kind::Host,
            "ep" => Kind::Endpoint,
            "chain" => Kind::Chain,
            "addrs" => Kind::Addresses,
            "dur" => Kind::Duration,
            "size" => Kind::Size,
            "user" => Kind::User,
            "users" => Kind::Users,
            "prog" => Kind::Program,
            "quoted" => Kind::Quoted,
            "reason" => Kind::Reason,
            "path" => Kind::Path,
            "node" => Kind::Node,
            "nodes" => Kind::Nodes,
            "tags" => Kind::Tags,
            "vol" => Kind::Volume,
            "dev" => Kind::Device,
            "opts" => Kind::Options,
            "setting" => Kind::Setting,
            "key" => Kind::Key,
            _ => return None,
        })
    }
}

/// Syllables of generated names (user names, program names, tags).
const SYLLABLES: [&str; 24] = [
    "ka", "lo", "mi", "ner", "ta", "vi", "sor", "ul", "den", "pa", "ri", "zo", "fen", "gar", "hu",
    "ja", "be", "cor", "dal", "es", "tin", "wo", "yel", "qua",
];

/// Words of generated quoted names and tags.
const NOUNS: [&str; 20] = [
    "index",
    "report",
    "backup",
    "archive",
    "ledger",
    "digest",
    "export",
    "thumbnail",
    "mailer",
    "billing",
    "search",
    "metrics",
    "audit",
    "cleanup",
    "import",
    "render",
    "sync",
    "warmup",
    "compaction",
    "rollup",
];
const ADJECTIVES: [&str; 8] = [
    "nightly", "weekly", "hourly", "full", "partial", "legacy", "daily", "urgent",
];
/// Free-text reasons (two to five words).
const REASONS: [&str; 14] = [
    "connection refused",
    "peer closed the stream",
    "certificate has expired",
    "no route to host",
    "quota exceeded for tenant",
    "handshake timed out",
    "invalid credentials supplied",
    "resource temporarily unavailable",
    "checksum mismatch",
    "disk full",
    "operation cancelled by operator",
    "upstream returned an empty reply",
    "lease lost",
    "too many open files",
];
const DOMAIN_WORDS: [&str; 10] = [
    "edge", "mirror", "relay", "cache", "gateway", "vault", "depot", "beacon", "harbor", "atlas",
];
const SUFFIXES: [&str; 6] = [
    "example.net",
    "example.org",
    "corp",
    "lan",
    "svc.cluster",
    "example.com",
];
const OPTIONS: [&str; 8] = [
    "noatime",
    "nodiratime",
    "discard",
    "ro",
    "rw",
    "sync",
    "nosuid",
    "relatime",
];
const KEY_WORDS: [&str; 10] = [
    "pool", "limits", "timeout", "retry", "cache", "policy", "mode", "window", "backoff", "log",
];
const SETTING_WORDS: [&str; 8] = [
    "strict", "lenient", "auto", "off", "on", "adaptive", "fixed", "burst",
];

fn name(r: &mut Stream) -> String {
    let n = r.range(2, 3);
    (0..n).filter_map(|_| r.pick(&SYLLABLES).copied()).collect()
}

/// A host: a bare word (1 in 6), a dotted name (2 in 6: with a public suffix or an
/// internal one), a numbered name (1 in 6) or an address (2 in 6).
fn host(r: &mut Stream) -> String {
    let w = r.pick(&DOMAIN_WORDS).copied().unwrap_or("edge");
    match r.range(0, 5) {
        0 => w.to_string(),
        1 => format!("{w}.{}", r.pick(&SUFFIXES).copied().unwrap_or("lan")),
        2 => format!(
            "{}.{w}.{}",
            name(r),
            r.pick(&SUFFIXES).copied().unwrap_or("lan")
        ),
        3 => format!(
            "{w}-{}.{}",
            r.range(1, 40),
            r.pick(&SUFFIXES).copied().unwrap_or("lan")
        ),
        _ => ip(r),
    }
}

fn ip(r: &mut Stream) -> String {
    format!(
        "{}.{}.{}.{}",
        r.pick(&[10, 172, 192]).copied().unwrap_or(10),
        r.range(0, 255),
        r.range(0, 255),
        r.range(1, 254)
    )
}

fn endpoint(r: &mut Stream) -> String {
    let h = host(r);
    if r.chance(3, 4) {
        let port = *r
            .pick(&[80, 443, 8080, 5432, 6379, 9092, 3128])
            .unwrap_or(&443);
        format!("{h}:{port}")
    } else {
        h
    }
}

fn list(r: &mut Stream, lo: u64, hi: u64, sep: &str, f: fn(&mut Stream) -> String) -> String {
    let n = r.range(lo, hi);
    (0..n).map(|_| f(r)).collect::<Vec<_>>().join(sep)
}

fn duration(r: &mut Stream) -> String {
    match r.range(0, 5) {
        0 => format!("{} ms", r.range(1, 999)),
        1 => format!("{}.{} s", r.range(1, 59), r.range(0, 9)),
        2 => format!("{} min {} s", r.range(1, 59), r.range(0, 59)),
        3 => format!(
            "{:02}:{:02}:{:02}",
            r.range(0, 23),
            r.range(0, 59),
            r.range(0, 59)
        ),
        4 => format!("{}.{} hours", r.range(1, 9), r.range(0, 9)),
        _ => format!("{}h{}m", r.range(1, 30), r.range(0, 59)),
    }
}

fn size(r: &mut Stream) -> String {
    match r.range(0, 3) {
        0 => format!("{} bytes", r.range(0, 999)),
        1 => {
            let b = r.range(1024, 9_999_999);
            let grouped = b
                .to_string()
                .as_bytes()
                .rchunks(3)
                .rev()
                .map(|c| String::from_utf8_lossy(c).into_owned())
                .collect::<Vec<_>>()
                .join(",");
            let (v, unit) = if b >= 1 << 20 {
                (b as f64 / f64::from(1u32 << 20), "MiB")
            } else {
                (b as f64 / 1024.0, "KiB")
            };
            format!("{grouped} bytes ({v:.1} {unit})")
        }
        2 => format!("{}.{} MB", r.range(1, 900), r.range(0, 9)),
        _ => format!("{} KB", r.range(1, 900)),
    }
}

fn draw(kind: Kind, r: &mut Stream) -> String {
    match kind {
        Kind::Int => r.range(0, 99_999).to_string(),
        Kind::Small => r.range(0, 12).to_string(),
        Kind::Id => format!("s-{:06x}", r.range(0, 0xff_ffff)),
        Kind::Ip => ip(r),
        Kind::Host => host(r),
        Kind::Endpoint => endpoint(r),
        Kind::Chain => list(r, 1, 4, " -> ", endpoint),
        Kind::Addresses => list(r, 1, 4, ", ", ip),
        Kind::Duration => duration(r),
        Kind::Size => size(r),
        Kind::User => name(r),
        Kind::Users => list(r, 1, 4, ", ", name),
        Kind::Program => {
            let p = format!("{}.bin", name(r));
            if r.chance(1, 3) {
                let arch = r
                    .pick(&["[x64]", "[arm64]", "[x86]"])
                    .copied()
                    .unwrap_or("[x64]");
                format!("{p} {arch}")
            } else {
                p
            }
        }
        Kind::Quoted => {
            let mut words = Vec::new();
            if r.chance(1, 2) {
                words.push(r.pick(&ADJECTIVES).copied().unwrap_or("full"));
            }
            words.push(r.pick(&NOUNS).copied().unwrap_or("index"));
            if r.chance(1, 3) {
                words.push(r.pick(&NOUNS).copied().unwrap_or("index"));
            }
            format!("\"{}\"", words.join(" "))
        }
        Kind::Reason => r
            .pick(&REASONS)
            .copied()
            .unwrap_or("lease lost")
            .to_string(),
        Kind::Path => {
            let depth = r.range(1, 4);
            let mut p = String::new();
            for _ in 0..depth {
                p.push('/');
                p.push_str(r.pick(&NOUNS).copied().unwrap_or("data"));
            }
            if r.chance(1, 2) {
                let _ = write!(p, "/part-{:04}", r.range(0, 9999));
            }
            p
        }
        Kind::Node => format!("r{}-n{}", r.range(1, 9), r.range(1, 48)),
        Kind::Nodes => list(r, 1, 5, " ", |r| {
            format!("r{}-n{}", r.range(1, 9), r.range(1, 48))
        }),
        Kind::Tags => list(r, 1, 5, ",", |r| {
            r.pick(&NOUNS).copied().unwrap_or("sync").to_string()
        }),
        Kind::Volume => format!("vol-{:08x}", r.range(0, 0xffff_ffff)),
        Kind::Device => match r.range(0, 2) {
            0 => format!("sd{}", (b'a' + r.range(0, 7) as u8) as char),
            1 => format!("nvme{}n1", r.range(0, 3)),
            _ => format!("xvd{}", (b'a' + r.range(0, 7) as u8) as char),
        },
        Kind::Options => {
            let n = r.range(1, 4);
            (0..n)
                .filter_map(|_| r.pick(&OPTIONS).copied())
                .collect::<Vec<_>>()
                .join(",")
        }
        Kind::Setting => match r.range(0, 2) {
            0 => r.range(1, 5000).to_string(),
            1 => r
                .pick(&SETTING_WORDS)
                .copied()
                .unwrap_or("auto")
                .to_string(),
            _ => format!(
                "\"{} {}\"",
                r.pick(&SETTING_WORDS).copied().unwrap_or("auto"),
                r.pick(&NOUNS).copied().unwrap_or("sync")
            ),
        },
        Kind::Key => format!(
            "{}.{}",
            r.pick(&KEY_WORDS).copied().unwrap_or("pool"),
            r.pick(&KEY_WORDS).copied().unwrap_or("mode")
        ),
    }
}

/// One event of a generated system: its component, weight and message pattern.
#[derive(Debug, Clone, Copy)]
pub struct Event {
    /// The component written in the header.
    pub component: &'static str,
    /// Relative frequency.
    pub weight: u32,
    /// The message pattern (see the module docs).
    pub pattern: &'static str,
}

/// A generated system: its name and events.
#[derive(Debug, Clone, Copy)]
pub struct Grammar {
    /// The system (folder) name.
    pub system: &'static str,
    /// Its events; the event id is `E` and the 1-based index.
    pub events: &'static [Event],
}

const fn ev(component: &'static str, weight: u32, pattern: &'static str) -> Event {
    Event {
        component,
        weight,
        pattern,
    }
}

/// A relay that forwards client sessions through chains of hops.
const RELAY: &[Event] = &[
    ev(
        "session",
        30,
        "session {id} of {prog} to {ep} opened via {chain}",
    ),
    ev(
        "session",
        28,
        "session {id} of {prog} to {ep} closed, {size} sent, {size} received, lasted {dur}",
    ),
    ev(
        "session",
        6,
        "session {id} of {prog} to {ep} refused by {chain}: {reason}",
    ),
    ev(
        "session",
        4,
        "session {id} of {prog} to {ep} reset[ after {dur}]",
    ),
    ev("resolver", 10, "resolved {host} to {addrs}[ ({dur})]"),
    ev("resolver", 3, "cannot resolve {host}: {reason}"),
    ev("tunnel", 6, "tunnel {ep} idle for {dur}, closing"),
    ev("tunnel", 4, "tunnel {ep} reopened"),
    ev("tunnel", 3, "tunnel {ep} reset by peer"),
    ev("auth", 8, "user {user} authenticated from {ep}"),
    ev("auth", 4, "user {user} rejected from {ep}: {reason}"),
    ev(
        "routes",
        2,
        "route table loaded: {int} routes, {small} stale",
    ),
    ev(
        "routes",
        3,
        "hop {ep} unreachable, {small} of {small} hops left",
    ),
    ev(
        "quota",
        3,
        "client {prog} over quota: {size} of {size} used",
    ),
    ev("stats", 5, "throughput over {dur}: {size} in, {size} out"),
    ev(
        "config",
        2,
        "setting {key} changed from {setting} to {setting}",
    ),
];

/// A batch scheduler that runs named jobs on worker nodes.
const BATCH: &[Event] = &[
    ev(
        "queue",
        20,
        "job {quoted} queued by {user} with priority {small}",
    ),
    ev("runner", 22, "job {quoted} started on {nodes}"),
    ev(
        "runner",
        18,
        "job {quoted} finished in {dur}[, exit code {small}]",
    ),
    ev("runner", 6, "job {quoted} failed on {node}: {reason}"),
    ev("runner", 3, "job {quoted} retried {small} times, giving up"),
    ev("queue", 3, "job {quoted} cancelled by {user}"),
    ev("workers", 8, "worker {node} heartbeat late by {dur}"),
    ev("workers", 4, "worker {node} joined pool {user}"),
    ev("workers", 4, "worker {node} left pool {user}"),
    ev(
        "deps",
        4,
        "dependency {quoted} of {quoted} not met, waiting",
    ),
    ev(
        "artifacts",
        8,
        "artifact {path} uploaded ({size})[ as {id}]",
    ),
    ev("queue", 5, "queue depth {int}, oldest waiting {dur}"),
    ev("runner", 4, "tags for {quoted}: {tags}"),
    ev("acl", 3, "owners of {quoted} set to {users}"),
    ev("runner", 3, "job {quoted} preempted on {nodes} by {quoted}"),
];

/// A block-storage service with volumes, snapshots and replicas.
const VOLUMES: &[Event] = &[
    ev("attach", 12, "volume {vol} attached to {host} as {dev}"),
    ev("attach", 10, "volume {vol} detached from {host}"),
    ev(
        "snap",
        12,
        "snapshot {id} of {vol} completed, {size} written in {dur}",
    ),
    ev("snap", 3, "snapshot {id} of {vol} aborted: {reason}"),
    ev(
        "replica",
        5,
        "replica set of {vol} degraded, missing {chain}",
    ),
    ev(
        "replica",
        4,
        "replica set of {vol} healthy again after {dur}",
    ),
    ev("scrub", 4, "scrub of {vol} found {small} errors in {path}"),
    ev("mount", 6, "mount options for {vol} on {host}: {opts}"),
    ev("disk", 6, "write latency on {dev} above limit: {dur}"),
    ev("disk", 4, "disk {dev} temperature {small}0 C"),
    ev("acl", 4, "user {user} granted read on {path}[ for {dur}]"),
    ev("acl", 3, "user {user} granted write on {path}[ ({id})]"),
    ev(
        "balance",
        5,
        "rebalance moved {int} objects ({size}) from {host} to {host}",
    ),
    ev("io", 8, "io error on {dev} at sector {int}, retry {small}"),
    ev("mount", 2, "volume {vol} remounted read-only by {users}"),
];

/// The generated systems.
pub const GRAMMARS: &[Grammar] = &[
    Grammar {
        system: "Relay",
        events: RELAY,
    },
    Grammar {
        system: "Batch",
        events: BATCH,
    },
    Grammar {
        system: "Volumes",
        events: VOLUMES,
    },
];

/// One piece of a parsed pattern.
#[derive(Debug, Clone, PartialEq)]
enum Piece {
    Text(String),
    Slot(Kind),
    Optional(Vec<Piece>),
}

/// Parses a pattern; an unknown placeholder or an unbalanced bracket is an error.
fn parse_pattern(p: &str) -> Result<Vec<Piece>, String> {
    fn pieces(s: &str) -> Result<Vec<Piece>, String> {
        let mut out = Vec::new();
        let mut rest = s;
        while !rest.is_empty() {
            match rest.find('{') {
                None => {
                    out.push(Piece::Text(rest.to_string()));
                    break;
                }
                Some(i) => {
                    if i > 0 {
                        out.push(Piece::Text(rest[..i].to_string()));
                    }
                    let close = rest[i..]
                        .find('}')
                        .ok_or_else(|| format!("unclosed placeholder in {s:?}"))?;
                    let name = &rest[i + 1..i + close];
                    let kind =
                        Kind::parse(name).ok_or_else(|| format!("unknown placeholder {name:?}"))?;
                    out.push(Piece::Slot(kind));
                    rest = &rest[i + close + 1..];
                }
            }
        }
        Ok(out)
    }
    let mut out = Vec::new();
    let mut rest = p;
    while let Some(i) = rest.find('[') {
        out.extend(pieces(&rest[..i])?);
        let close = rest[i..]
            .find(']')
            .ok_or_else(|| format!("unclosed optional part in {p:?}"))?;
        out.push(Piece::Optional(pieces(&rest[i + 1..i + close])?));
        rest = &rest[i + close + 1..];
    }
    out.extend(pieces(rest)?);
    Ok(out)
}

/// The template of a pattern: placeholders as `<*>`, an optional part as its text in
/// brackets.
fn template_text(pieces: &[Piece]) -> String {
    let mut out = String::new();
    for p in pieces {
        match p {
            Piece::Text(t) => out.push_str(t),
            Piece::Slot(_) => out.push_str("<*>"),
            Piece::Optional(inner) => {
                out.push('[');
                out.push_str(&template_text(inner));
                out.push(']');
            }
        }
    }
    out
}

fn render(pieces: &[Piece], r: &mut Stream, out: &mut String) {
    for p in pieces {
        match p {
            Piece::Text(t) => out.push_str(t),
            Piece::Slot(k) => out.push_str(&draw(*k, r)),
            Piece::Optional(inner) => {
                if r.chance(1, 3) {
                    render(inner, r, out);
                }
            }
        }
    }
}

/// One generated line: the whole log line, its message and its event.
#[derive(Debug, Clone, PartialEq)]
pub struct GeneratedLine {
    /// The log line with its header.
    pub line: String,
    /// The message (the `<Content>` field).
    pub content: String,
    /// The event id (`E1`, ...).
    pub event: String,
    /// The event's template.
    pub template: String,
}

/// Generates `lines` lines of `grammar` from `seed`.
pub fn generate(
    grammar: &Grammar,
    seed: u64,
    lines: usize,
) -> Result<Vec<GeneratedLine>, LoghubError> {
    let parsed = grammar
        .events
        .iter()
        .map(|e| parse_pattern(e.pattern))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|m| LoghubError::Data {
            path: grammar.system.to_string(),
            message: m,
        })?;
    let total: u64 = grammar.events.iter().map(|e| u64::from(e.weight)).sum();
    // One stream per system, derived from the seed and the system name.
    let mut r = Stream::new(grammar.system.bytes().fold(seed, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    }));
    let mut out = Vec::with_capacity(lines);
    let mut clock: u64 = 8 * 3600 * 1000;
    for _ in 0..lines {
        let mut pick = r.range(0, total.saturating_sub(1));
        let mut index = 0;
        for (i, e) in grammar.events.iter().enumerate() {
            if pick < u64::from(e.weight) {
                index = i;
                break;
            }
            pick -= u64::from(e.weight);
        }
        let (Some(event), Some(pieces)) = (grammar.events.get(index), parsed.get(index)) else {
            continue;
        };
        let mut content = String::new();
        render(pieces, &mut r, &mut content);
        clock += r.range(1, 4000);
        let ms = clock % 1000;
        let s = clock / 1000;
        let level = if event.pattern.contains("{reason}") {
            "WARN"
        } else {
            "INFO"
        };
        let line = format!(
            "2024-03-{:02} {:02}:{:02}:{:02}.{ms:03} {level} {}: {content}",
            1 + s / 86400 % 28,
            s / 3600 % 24,
            s / 60 % 60,
            s % 60,
            event.component
        );
        out.push(GeneratedLine {
            line,
            content,
            event: format!("E{}", index + 1),
            template: template_text(pieces),
        });
    }
    Ok(out)
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Writes every grammar in the Loghub layout under `dir`: `<S>/<S>_2k.log`,
/// `<S>/<S>_2k.log_structured.csv` (`LineId,Content,EventId,EventTemplate`) and
/// `formats.tsv`. Returns the systems written.
pub fn write_folder(dir: &Path, seed: u64) -> Result<Vec<String>, LoghubError> {
    let mut formats = String::from(
        "# Generated by `rca eval loghub-grammar` (rca_eval::loghub::grammar); licence: the project's.\n",
    );
    let mut written = Vec::new();
    for g in GRAMMARS {
        let lines = generate(g, seed, LINES)?;
        let sdir = dir.join(g.system);
        std::fs::create_dir_all(&sdir).map_err(|e| data_err(&sdir, e.to_string()))?;
        let mut log = String::new();
        let mut csv = String::from("LineId,Content,EventId,EventTemplate\n");
        for (i, l) in lines.iter().enumerate() {
            log.push_str(&l.line);
            log.push('\n');
            let _ = writeln!(
                csv,
                "{},{},{},{}",
                i + 1,
                csv_field(&l.content),
                l.event,
                csv_field(&l.template)
            );
        }
        let log_path = sdir.join(format!("{}_2k.log", g.system));
        std::fs::write(&log_path, log).map_err(|e| data_err(&log_path, e.to_string()))?;
        let csv_path = sdir.join(format!("{}_2k.log_structured.csv", g.system));
        std::fs::write(&csv_path, csv).map_err(|e| data_err(&csv_path, e.to_string()))?;
        let _ = writeln!(formats, "{}\t{LOG_FORMAT}", g.system);
        written.push(g.system.to_string());
    }
    let f = dir.join("formats.tsv");
    std::fs::write(&f, formats).map_err(|e| data_err(&f, e.to_string()))?;
    let readme = dir.join("README.md");
    std::fs::write(&readme, readme_text(seed)).map_err(|e| data_err(&readme, e.to_string()))?;
    Ok(written)
}

/// The README of a written folder: what it is, how it was made, its licence, its events.
fn readme_text(seed: u64) -> String {
    let mut out = format!(
        "# Generated development set for log clustering\n\n\
         Written by `rca eval loghub-grammar --out DIR --seed {seed}` from the message grammars \
         of `rca-eval/src/loghub/grammar.rs` (SplitMix64, seed {seed}): the same bytes on every \
         machine. Licence: the project's own; no line is taken from any other log collection.\n\n\
         Each system has {LINES} lines in the Loghub layout (`<S>/<S>_2k.log`, \
         `<S>/<S>_2k.log_structured.csv` with `LineId,Content,EventId,EventTemplate`; row *i* is \
         line *i*), and `formats.tsv` gives the header format. Parameters take a varying number \
         of tokens (hosts with or without ports, chains of hops, lists, durations and sizes in \
         several notations, quoted multi-word names, free-text reasons); a part in brackets in \
         a template is written in some lines of the event only. Scored next to Loghub-2k by \
         `rca eval loghub ... --extra DIR`.\n"
    );
    for g in GRAMMARS {
        let _ = write!(
            out,
            "\n## {}\n\n| Event | Weight | Pattern |\n|---|---|---|\n",
            g.system
        );
        for (i, e) in g.events.iter().enumerate() {
            let _ = writeln!(out, "| E{} | {} | `{}` |", i + 1, e.weight, e.pattern);
        }
    }
    out
}

/// The generated systems in memory, as [`SystemData`] (what [`write_folder`] writes, loaded).
pub fn systems(seed: u64) -> Result<Vec<SystemData>, LoghubError> {
    GRAMMARS
        .iter()
        .map(|g| {
            let lines = generate(g, seed, LINES)?;
            Ok(SystemData {
                system: g.system.to_string(),
                contents: lines.iter().map(|l| l.content.clone()).collect(),
                unmatched: 0,
                original: super::Labels::from_rows(
                    lines
                        .iter()
                        .map(|l| (l.event.as_str(), l.template.as_str())),
                ),
                corrected: None,
            })
        })
        .collect()
}

/// The formats table of the generated folder.
pub fn formats() -> Vec<SystemFormat> {
    GRAMMARS
        .iter()
        .map(|g| SystemFormat {
            system: g.system.to_string(),
            pattern: LOG_FORMAT.to_string(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_parse_and_generation_is_deterministic() {
        for g in GRAMMARS {
            for e in g.events {
                assert!(parse_pattern(e.pattern).is_ok(), "{}", e.pattern);
            }
            let a = generate(g, SEED, 300).unwrap();
            let b = generate(g, SEED, 300).unwrap();
            assert_eq!(a, b);
            let c = generate(g, SEED + 1, 300).unwrap();
            assert_ne!(a, c);
            // Every event occurs, and values vary in token count within one event.
            let all = generate(g, SEED, LINES).unwrap();
            for (i, _) in g.events.iter().enumerate() {
                let id = format!("E{}", i + 1);
                let counts: std::collections::BTreeSet<usize> = all
                    .iter()
                    .filter(|l| l.event == id)
                    .map(|l| l.content.split_whitespace().count())
                    .collect();
                assert!(!counts.is_empty(), "{}: {id} never drawn", g.system);
            }
        }
        assert!(parse_pattern("a {nope}").is_err());
        assert!(parse_pattern("a [b").is_err());
    }

    #[test]
    fn template_text_marks_slots_and_optional_parts() {
        let p = parse_pattern("job {quoted} done[ in {dur}]").unwrap();
        assert_eq!(template_text(&p), "job <*> done[ in <*>]");
        let mut r = Stream::new(1);
        let mut s = String::new();
        render(&p, &mut r, &mut s);
        assert!(s.starts_with("job \""), "{s}");
    }

    #[test]
    fn a_written_folder_loads_as_the_systems_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        let written = write_folder(dir.path(), SEED).unwrap();
        assert_eq!(written.len(), GRAMMARS.len());
        let table = std::fs::read_to_string(dir.path().join("formats.tsv")).unwrap();
        let formats = super::super::parse_formats(&table).unwrap();
        assert_eq!(formats, super::formats());
        let (loaded, missing) = super::super::load_folder(dir.path(), &formats).unwrap();
        assert!(missing.is_empty());
        let memory = systems(SEED).unwrap();
        for (a, b) in loaded.iter().zip(&memory) {
            assert_eq!(a.system, b.system);
            assert_eq!(a.unmatched, 0);
            assert_eq!(a.contents, b.contents);
            assert_eq!(a.original, b.original);
        }
        assert!(
            std::fs::read_to_string(dir.path().join("README.md"))
                .unwrap()
                .contains("Licence")
        );
    }

    #[test]
    fn the_stream_is_fixed() {
        // SplitMix64's published first output for seed 0.
        assert_eq!(Stream::new(0).next_u64(), 0xe220_a839_7b1d_cdaf);
    }
}
