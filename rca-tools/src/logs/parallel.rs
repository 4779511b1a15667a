//! The parallel mode: the input is cut into one contiguous chunk per thread, each chunk is
//! mined by its own [`OnlineMiner`], and the per-thread templates are folded into the first
//! miner in chunk order. Deterministic for a fixed thread count (the chunking and the merge
//! order depend only on it); memory stays bounded by the templates of each chunk.
//!
//! [`mine_parallel`] takes lines already in memory. [`mine_file`] and [`mine_bytes`] take the
//! raw log and cut it at line boundaries, so every worker also reads, repairs and
//! header-parses its own chunk: nothing but the final merge runs on one thread, and no line
//! is kept once it has been mined (unless the per-line ids are asked for).

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;
use std::time::Instant;

use rca_core::logs::TemplateId;

use super::error::LogsError;
use super::format::LogFormat;
use super::input::{DEFAULT_MAX_LINE_BYTES, InputNotes, LineReader};
use super::miner::{MinerConfig, OnlineMiner};

/// Mines `lines` with `threads` worker threads (1 runs inline) and returns the merged miner
/// and each line's final template id.
///
/// ```
/// use rca_core::logs::TemplateMiner;
/// use rca_tools::logs::{MinerConfig, mine_parallel};
/// let lines: Vec<String> = (0..100).map(|i| format!("job {i} done in {}ms", i * 3)).collect();
/// let (miner, ids) = mine_parallel(&lines, &MinerConfig::default(), 2).unwrap();
/// assert!(ids.iter().all(|&id| id == ids[0]));
/// assert_eq!(miner.template(ids[0]).unwrap().count, 100);
/// ```
pub fn mine_parallel<S: AsRef<str> + Sync>(
    lines: &[S],
    config: &MinerConfig,
    threads: usize,
) -> Result<(OnlineMiner, Vec<TemplateId>), LogsError> {
    let threads = threads.max(1).min(lines.len().max(1));
    let size = lines.len().div_ceil(threads).max(1);
    let chunks: Vec<&[S]> = lines.chunks(size).collect();
    let mine = |chunk: &&[S]| {
        let mut m = OnlineMiner::new(config.clone());
        let ids: Vec<TemplateId> = chunk
            .iter()
            .map(|l| m.ingest_line(l.as_ref()).template_id)
            .collect();
        Ok((m, ids))
    };
    let (results, pool) = run_workers(&chunks, threads, mine)?;
    let (miners, ids): (Vec<_>, Vec<_>) = results.into_iter().unzip();
    let merged = merge(miners, ids, pool.as_ref(), config);
    Ok((merged.miner, merged.ids))
}

/// How [`mine_file`] and [`mine_bytes`] read and mine a log.
#[derive(Debug, Clone)]
pub struct MineOptions {
    /// The miner configuration.
    pub config: MinerConfig,
    /// A log-format pattern: its `<Content>` field is mined; a line that does not match is
    /// mined whole and counted. `None` mines whole lines.
    pub format: Option<LogFormat>,
    /// Lines longer than this are truncated (and counted).
    pub max_line_bytes: usize,
    /// Worker threads (at least 1).
    pub threads: usize,
    /// Whether to keep every line's template id (memory grows with the lines).
    pub keep_ids: bool,
}

impl Default for MineOptions {
    fn default() -> Self {
        MineOptions {
            config: MinerConfig::default(),
            format: None,
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            threads: 1,
            keep_ids: false,
        }
    }
}

/// Where the time of a [`mine_file`] / [`mine_bytes`] run went.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct MineTimings {
    /// Finding the chunk boundaries (wall seconds, one thread).
    pub split_seconds: f64,
    /// The parallel phase: every worker reading, repairing, parsing and mining its chunk
    /// (wall seconds from the first worker's start to the last one's end).
    pub workers_seconds: f64,
    /// Folding the workers' templates together and renumbering the line ids (wall seconds).
    pub merge_seconds: f64,
    /// The whole run (wall seconds).
    pub total_seconds: f64,
    /// Each worker's own wall time, in chunk order.
    pub worker_seconds: Vec<f64>,
    /// Each worker's CPU time where the platform reports it (through `/proc`), in chunk order. A
    /// worker whose CPU time is well below its wall time was waiting for a core.
    pub worker_cpu_seconds: Vec<Option<f64>>,
    /// Lines each worker mined, in chunk order.
    pub worker_lines: Vec<usize>,
}

/// The result of [`mine_file`] / [`mine_bytes`].
#[derive(Debug, Clone)]
pub struct MinedLog {
    /// The merged miner.
    pub miner: OnlineMiner,
    /// Each line's final template id, when [`MineOptions::keep_ids`] was set (else empty).
    pub ids: Vec<TemplateId>,
    /// What had to be repaired while reading (line numbers count over the whole input).
    pub notes: InputNotes,
    /// Lines that did not match the format (mined whole).
    pub unmatched: usize,
    /// Where the time went.
    pub timings: MineTimings,
}

/// Mines the log file at `path`: the file is cut into `options.threads` byte ranges at line
/// boundaries and every worker reads, repairs, header-parses and mines its own range through
/// a bounded buffer, so memory is bounded by the templates (plus the ids, if kept).
/// Deterministic for a given file and thread count.
pub fn mine_file(path: &Path, options: &MineOptions) -> Result<MinedLog, LogsError> {
    let started = Instant::now();
    let io = |e: std::io::Error| LogsError::Io {
        message: format!("{}: {e}", path.display()),
    };
    let mut file = File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    let threads = options.threads.max(1);
    let mut bounds = vec![0u64];
    for i in 1..threads as u64 {
        let nominal = (u128::from(len) * u128::from(i) / threads as u128) as u64;
        let prev = bounds.last().copied().unwrap_or(0);
        let b = line_start_at_or_after(&mut file, nominal.max(prev), len).map_err(io)?;
        bounds.push(b.max(prev));
    }
    bounds.push(len);
    let ranges: Vec<(u64, u64)> = bounds.windows(2).map(|w| (w[0], w[1])).collect();
    let split_seconds = started.elapsed().as_secs_f64();
    let work = |&(from, to): &(u64, u64)| {
        let mut f = File::open(path).map_err(io)?;
        f.seek(SeekFrom::Start(from)).map_err(io)?;
        let reader = BufReader::with_capacity(1 << 16, f.take(to - from));
        mine_chunk(reader, options).map_err(io)
    };
    finish_log(&ranges, options, work, started, split_seconds)
}

/// Mines a log held in memory, exactly as [`mine_file`] mines a file with the same bytes.
///
/// ```
/// use rca_core::logs::TemplateMiner;
/// use rca_tools::logs::{MineOptions, mine_bytes};
/// let log: String = (0..100).map(|i| format!("job {i} done in {}ms\n", i * 3)).collect();
/// let opts = MineOptions { threads: 2, keep_ids: true, ..MineOptions::default() };
/// let mined = mine_bytes(log.as_bytes(), &opts).unwrap();
/// assert_eq!(mined.ids.len(), 100);
/// assert_eq!(mined.miner.template(mined.ids[0]).unwrap().count, 100);
/// ```
pub fn mine_bytes(bytes: &[u8], options: &MineOptions) -> Result<MinedLog, LogsError> {
    let started = Instant::now();
    let threads = options.threads.max(1);
    let len = bytes.len();
    let mut bounds = vec![0usize];
    for i in 1..threads {
        let nominal = (len as u128 * i as u128 / threads as u128) as usize;
        let prev = bounds.last().copied().unwrap_or(0);
        let from = nominal.max(prev);
        let b = bytes
            .get(from..)
            .and_then(|rest| memchr::memchr(b'\n', rest))
            .map_or(len, |i| from + i + 1);
        bounds.push(b);
    }
    bounds.push(len);
    let ranges: Vec<(usize, usize)> = bounds.windows(2).map(|w| (w[0], w[1])).collect();
    let split_seconds = started.elapsed().as_secs_f64();
    let work = |&(from, to): &(usize, usize)| {
        let chunk = bytes.get(from..to).unwrap_or_default();
        mine_chunk(chunk, options).map_err(|e| LogsError::Io {
            message: e.to_string(),
        })
    };
    finish_log(&ranges, options, work, started, split_seconds)
}

/// The first line start at or after byte `at` (a line starts at 0 or right after a `\n`):
/// reads forward from `at - 1` to the next newline.
fn line_start_at_or_after(file: &mut File, at: u64, len: u64) -> std::io::Result<u64> {
    if at == 0 || at >= len {
        return Ok(at.min(len));
    }
    file.seek(SeekFrom::Start(at - 1))?;
    let mut reader = BufReader::with_capacity(1 << 14, &mut *file);
    let mut pos = at - 1;
    loop {
        let avail = reader.fill_buf()?;
        if avail.is_empty() {
            return Ok(len);
        }
        if let Some(i) = memchr::memchr(b'\n', avail) {
            return Ok(pos + i as u64 + 1);
        }
        let n = avail.len();
        pos += n as u64;
        reader.consume(n);
    }
}

/// What one worker produced.
struct Chunk {
    miner: OnlineMiner,
    ids: Vec<TemplateId>,
    notes: InputNotes,
    unmatched: usize,
    seconds: f64,
    cpu_seconds: Option<f64>,
}

/// One worker: read, repair, parse and mine every line of `reader`.
fn mine_chunk<R: BufRead>(reader: R, options: &MineOptions) -> std::io::Result<Chunk> {
    let started = Instant::now();
    let cpu_start = thread_cpu_seconds();
    let mut miner = OnlineMiner::new(options.config.clone());
    let mut lines = LineReader::new(reader, options.max_line_bytes.max(1));
    let mut ids = Vec::new();
    let mut unmatched = 0usize;
    while let Some(line) = lines.next_line()? {
        let whole: &str = &line;
        let body = match options.format.as_ref().map(|f| f.body(whole)) {
            None => whole,
            Some(Some(body)) => body,
            Some(None) => {
                unmatched += 1;
                whole
            }
        };
        let id = miner.ingest_line(body).template_id;
        if options.keep_ids {
            ids.push(id);
        }
    }
    let cpu_seconds = cpu_start.zip(thread_cpu_seconds()).map(|(a, b)| b - a);
    Ok(Chunk {
        miner,
        ids,
        notes: lines.into_notes(),
        unmatched,
        seconds: started.elapsed().as_secs_f64(),
        cpu_seconds,
    })
}

/// Runs the workers over `ranges`, merges them and assembles the result.
fn finish_log<T: Sync>(
    ranges: &[T],
    options: &MineOptions,
    work: impl Fn(&T) -> Result<Chunk, LogsError> + Sync,
    started: Instant,
    split_seconds: f64,
) -> Result<MinedLog, LogsError> {
    let workers_started = Instant::now();
    let (chunks, pool) = run_workers(ranges, options.threads.max(1), work)?;
    let workers_seconds = workers_started.elapsed().as_secs_f64();
    let merge_started = Instant::now();
    let mut timings = MineTimings {
        split_seconds,
        workers_seconds,
        ..MineTimings::default()
    };
    let mut notes = InputNotes::default();
    let mut unmatched = 0;
    let mut miners = Vec::with_capacity(chunks.len());
    let mut ids = Vec::with_capacity(chunks.len());
    for c in chunks {
        timings.worker_seconds.push(c.seconds);
        timings.worker_cpu_seconds.push(c.cpu_seconds);
        timings.worker_lines.push(c.notes.lines);
        add_notes(&mut notes, c.notes);
        unmatched += c.unmatched;
        miners.push(c.miner);
        ids.push(c.ids);
    }
    let merged = merge(miners, ids, pool.as_ref(), &options.config);
    timings.merge_seconds = merge_started.elapsed().as_secs_f64();
    timings.total_seconds = started.elapsed().as_secs_f64();
    Ok(MinedLog {
        miner: merged.miner,
        ids: merged.ids,
        notes,
        unmatched,
        timings,
    })
}

/// Adds the notes of the next chunk (its line numbers shifted past the lines before it).
fn add_notes(total: &mut InputNotes, chunk: InputNotes) {
    let offset = total.lines;
    for n in chunk.truncated_lines {
        if total.truncated_lines.len() < 5 {
            total.truncated_lines.push(n + offset);
        }
    }
    total.lines += chunk.lines;
    total.invalid_utf8 += chunk.invalid_utf8;
    total.truncated += chunk.truncated;
    total.nul += chunk.nul;
    total.crlf += chunk.crlf;
}

/// Runs `work` over every item, on `threads` threads when there is more than one item (the
/// pool is returned for the merge), inline otherwise. Results keep the items' order.
fn run_workers<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    work: impl Fn(&T) -> Result<R, LogsError> + Sync,
) -> Result<(Vec<R>, Option<rayon::ThreadPool>), LogsError> {
    if threads <= 1 || items.len() <= 1 {
        let results = items.iter().map(&work).collect::<Result<Vec<R>, _>>()?;
        return Ok((results, None));
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| LogsError::Io {
            message: format!("cannot start {threads} threads: {e}"),
        })?;
    let results = pool.install(|| {
        use rayon::prelude::*;
        items.par_iter().map(&work).collect::<Result<Vec<R>, _>>()
    })?;
    Ok((results, Some(pool)))
}

struct Merged {
    miner: OnlineMiner,
    ids: Vec<TemplateId>,
}

/// Folds the miners into the first in chunk order, then renumbers every chunk's line ids to
/// the merged miner's live ids (one table lookup per line, the chunks in parallel).
fn merge(
    miners: Vec<OnlineMiner>,
    chunk_ids: Vec<Vec<TemplateId>>,
    pool: Option<&rayon::ThreadPool>,
    config: &MinerConfig,
) -> Merged {
    let mut miners = miners.into_iter();
    let Some(mut first) = miners.next() else {
        return Merged {
            miner: OnlineMiner::new(config.clone()),
            ids: Vec::new(),
        };
    };
    // tables[k][local id] = the id in `first` (before the final resolution).
    let mut tables: Vec<Option<Vec<TemplateId>>> = vec![None];
    for m in miners {
        tables.push(Some(first.absorb_miner(&m)));
    }
    let live = first.live_table();
    let renumber = |(ids, table): (&mut Vec<TemplateId>, &Option<Vec<TemplateId>>)| {
        for id in ids.iter_mut() {
            let here = match table {
                Some(t) => t.get(*id as usize).copied().unwrap_or(*id),
                None => *id,
            };
            *id = live.get(here as usize).copied().unwrap_or(here);
        }
    };
    let mut chunk_ids = chunk_ids;
    match pool {
        Some(pool) if chunk_ids.iter().map(Vec::len).sum::<usize>() > 0 => pool.install(|| {
            use rayon::prelude::*;
            chunk_ids
                .par_iter_mut()
                .zip(tables.par_iter())
                .for_each(renumber);
        }),
        _ => chunk_ids.iter_mut().zip(tables.iter()).for_each(renumber),
    }
    let mut ids = Vec::with_capacity(chunk_ids.iter().map(Vec::len).sum());
    for c in chunk_ids {
        ids.extend(c);
    }
    Merged { miner: first, ids }
}

/// CPU time of the calling thread in seconds, where the platform reports it
/// `/proc/thread-self/schedstat`, whose first field is nanoseconds on a CPU).
fn thread_cpu_seconds() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = s.split_whitespace().next()?.parse().ok()?;
    Some(ns as f64 / 1e9)
}

#[cfg(test)]
mod tests {
    use rca_core::logs::TemplateMiner;

    use super::*;

    fn log(n: usize) -> String {
        (0..n)
            .map(|i| {
                format!(
                    "2024-01-0{} 10:00:{:02} INFO svc{}: request {} took {} ms status {}\n",
                    1 + i % 9,
                    i % 60,
                    i % 4,
                    i * 7,
                    i % 97,
                    ["ok", "retry", "fail"][i % 3]
                )
            })
            .collect()
    }

    fn opts(threads: usize) -> MineOptions {
        MineOptions {
            format: Some(LogFormat::parse("<Date> <Time> <Level> <Component>: <Content>").unwrap()),
            threads,
            keep_ids: true,
            ..MineOptions::default()
        }
    }

    #[test]
    fn bytes_and_file_agree_and_match_the_line_path() {
        let text = log(3000);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.log");
        std::fs::write(&path, &text).unwrap();
        let (lines, _) = super::super::input::read_lines(text.as_bytes(), DEFAULT_MAX_LINE_BYTES);
        let f = LogFormat::parse("<Date> <Time> <Level> <Component>: <Content>").unwrap();
        let bodies: Vec<&str> = lines
            .iter()
            .map(|l| f.parse_line(l).unwrap().content)
            .collect();
        let (single, single_ids) = mine_parallel(&bodies, &MinerConfig::default(), 1).unwrap();
        for threads in 1..=4 {
            let b = mine_bytes(text.as_bytes(), &opts(threads)).unwrap();
            let fl = mine_file(&path, &opts(threads)).unwrap();
            assert_eq!(b.ids, fl.ids, "{threads} threads");
            assert_eq!(b.miner.templates(), fl.miner.templates());
            assert_eq!(b.notes, fl.notes);
            assert_eq!(b.notes.lines, 3000);
            assert_eq!(b.timings.worker_lines.iter().sum::<usize>(), 3000);
            assert_eq!(b.timings.worker_lines.len(), threads);
            assert_eq!(b.unmatched, 0);
            let total: u64 = b.miner.templates().iter().map(|t| t.count).sum();
            assert_eq!(total, 3000);
            if threads == 1 {
                assert_eq!(b.ids, single_ids);
                assert_eq!(b.miner.templates(), single.templates());
            }
            // Every line's id is a live template.
            for id in &b.ids {
                assert_eq!(b.miner.template(*id).unwrap().id, *id);
            }
        }
    }

    #[test]
    fn chunk_edges_repairs_and_line_numbers() {
        // Long, CRLF, NUL and invalid lines spread over the chunks; no final newline.
        let mut bytes = Vec::new();
        for i in 0..50 {
            match i % 5 {
                0 => bytes.extend_from_slice(b"alpha beta gamma 1\r\n"),
                1 => bytes.extend(std::iter::repeat_n(b'x', 300).chain([b'\n'])),
                2 => bytes.extend_from_slice(b"nul\0byte here\n"),
                3 => bytes.extend_from_slice(b"bad \xff utf8\n"),
                _ => bytes.extend_from_slice(b"\n"),
            }
        }
        bytes.extend_from_slice(b"tail");
        let (lines, want) = super::super::input::read_lines(&bytes, 100);
        for threads in 1..=7 {
            let o = MineOptions {
                max_line_bytes: 100,
                threads,
                keep_ids: true,
                ..MineOptions::default()
            };
            let got = mine_bytes(&bytes, &o).unwrap();
            assert_eq!(got.notes, want, "{threads} threads");
            assert_eq!(got.ids.len(), lines.len());
            assert_eq!(got.notes.truncated_lines, vec![2, 7, 12, 17, 22]);
        }
        let empty = mine_bytes(b"", &opts(3)).unwrap();
        assert!(empty.ids.is_empty());
        assert_eq!(empty.notes.lines, 0);
        assert_eq!(empty.miner.template_count(), 0);
    }

    #[test]
    fn unmatched_lines_are_mined_whole_and_counted() {
        let text = "2024-01-01 10:00:00 INFO a: x y z 1\nno header here at all\n";
        let got = mine_bytes(text.as_bytes(), &opts(2)).unwrap();
        assert_eq!(got.unmatched, 1);
        assert_eq!(got.miner.templates().len(), 2);
        assert!(
            got.miner
                .templates()
                .iter()
                .any(|t| t.text == "no header here at all")
        );
    }

    #[test]
    fn missing_file_is_an_error() {
        let err = mine_file(Path::new("/nonexistent/rca.log"), &opts(2)).unwrap_err();
        assert!(err.to_string().contains("/nonexistent/rca.log"));
    }
}
