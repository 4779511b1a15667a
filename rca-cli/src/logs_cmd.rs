//! `rca logs templates FILE` and `rca logs segment FILE`.

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use rca_core::logs::TemplateMiner;
use rca_tools::logs::{
    DEFAULT_MAX_LINE_BYTES, LineReader, LogFormat, MineOptions, MinedLog, MinerConfig,
    SegmentConfig, SegmentStream, mine_file,
};

use rca_llm::{HashingConfig, HashingEmbedder};

/// Log clustering: templates and segments.
#[derive(Debug, Args)]
pub struct LogsArgs {
    #[command(subcommand)]
    command: LogsCommand,
}

#[derive(Debug, Subcommand)]
enum LogsCommand {
    /// Mine templates: a table of templates with counts (or JSON).
    Templates(TemplatesArgs),
    /// Split a log into contiguous blocks of related lines (RCAgent Algorithm 1).
    Segment(SegmentArgs),
}

#[derive(Debug, Args)]
struct InputArgs {
    /// The log file.
    file: PathBuf,
    /// Log-format pattern, e.g. `<Date> <Time> <Level> <Component>: <Content>`; the
    /// `<Content>` field is mined. Without it the whole line is mined.
    #[arg(long)]
    format: Option<String>,
    /// Lines longer than this many bytes are truncated (and reported).
    #[arg(long, default_value_t = DEFAULT_MAX_LINE_BYTES, value_parser = crate::numbers::at_least_one())]
    max_line_bytes: usize,
}

#[derive(Debug, Args)]
struct TemplatesArgs {
    #[command(flatten)]
    input: InputArgs,
    /// Mining threads (the parallel mode is deterministic for a given count).
    #[arg(long, default_value_t = 1, value_parser = crate::numbers::at_least_one())]
    threads: usize,
    /// Print the templates as JSON.
    #[arg(long, conflicts_with = "per_line")]
    json: bool,
    /// Print one JSON object per input line: {"line", "template_id", "template"}.
    #[arg(long)]
    per_line: bool,
}

#[derive(Debug, Args)]
struct SegmentArgs {
    #[command(flatten)]
    input: InputArgs,
    /// Lines further apart are not connected.
    #[arg(long, default_value_t = 200, value_parser = crate::numbers::at_least_one())]
    window: usize,
    /// Distance decay exp(-d / tau).
    #[arg(long, default_value_t = 1.0, value_parser = crate::numbers::positive)]
    tau: f64,
    /// Lines segmented together; memory grows with this times the window, not with the log.
    #[arg(long, default_value_t = SegmentConfig::default().chunk_lines, value_parser = crate::numbers::at_least_one())]
    chunk_lines: usize,
    /// Print the blocks as JSON.
    #[arg(long)]
    json: bool,
}

/// Runs `rca logs ...`. A closed output pipe (`| head`) ends the command quietly.
pub async fn run(args: LogsArgs) -> Result<()> {
    let result = match args.command {
        LogsCommand::Templates(a) => templates(a),
        LogsCommand::Segment(a) => segment(a).await,
    };
    match result {
        Err(e)
            if e.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe) =>
        {
            Ok(())
        }
        other => other,
    }
}

/// The repaired message bodies of the input file, one at a time (memory bounded by one line).
struct BodyReader {
    reader: LineReader<std::io::BufReader<std::fs::File>>,
    format: Option<LogFormat>,
    path: PathBuf,
    lines: usize,
    unmatched: usize,
}

impl BodyReader {
    fn open(input: &InputArgs) -> Result<Self> {
        let file = std::fs::File::open(&input.file)
            .with_context(|| format!("cannot read {}", input.file.display()))?;
        Ok(BodyReader {
            reader: LineReader::new(
                std::io::BufReader::with_capacity(1 << 16, file),
                input.max_line_bytes.max(1),
            ),
            format: input.format.as_deref().map(LogFormat::parse).transpose()?,
            path: input.file.clone(),
            lines: 0,
            unmatched: 0,
        })
    }

    /// The next body (the `<Content>` field, or the whole line when there is no format or
    /// the line does not match it).
    fn next_body(&mut self) -> Result<Option<String>> {
        let Some(line) = self
            .reader
            .next_line()
            .with_context(|| format!("cannot read {}", self.path.display()))?
        else {
            return Ok(None);
        };
        self.lines += 1;
        let body = match self.format.as_ref().map(|f| f.parse_line(&line)) {
            Some(Some(p)) => p.content.to_string(),
            Some(None) => {
                self.unmatched += 1;
                line.into_owned()
            }
            None => line.into_owned(),
        };
        Ok(Some(body))
    }

    /// Reports repairs and unmatched lines on stderr; returns the number of lines.
    fn finish(self) -> usize {
        let notes = self.reader.into_notes();
        if !notes.is_clean() || notes.lines == 0 {
            eprintln!("{notes}");
        }
        if self.unmatched > 0 {
            eprintln!(
                "note: {} of {} lines did not match the format; their whole line was mined",
                self.unmatched, self.lines
            );
        }
        self.lines
    }
}

/// Peak resident memory of this process in MiB (Linux `VmHWM`), when the system reports it.
fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib / 1024.0)
}

fn templates(a: TemplatesArgs) -> Result<()> {
    let threads = a.threads;
    let format = a
        .input
        .format
        .as_deref()
        .map(LogFormat::parse)
        .transpose()?;
    let options = MineOptions {
        config: MinerConfig::default(),
        format,
        max_line_bytes: a.input.max_line_bytes.max(1),
        threads,
        keep_ids: a.per_line,
    };
    let mined = mine_file(&a.input.file, &options)?;
    if !mined.notes.is_clean() || mined.notes.lines == 0 {
        eprintln!("{}", mined.notes);
    }
    if mined.unmatched > 0 {
        eprintln!(
            "note: {} of {} lines did not match the format; their whole line was mined",
            mined.unmatched, mined.notes.lines
        );
    }
    eprintln!("{}", stats_line(&mined, threads));
    let MinedLog { miner, ids, .. } = mined;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    if a.per_line {
        let texts: std::collections::HashMap<u64, String> = miner
            .templates()
            .into_iter()
            .map(|t| (t.id, t.text))
            .collect();
        for (i, id) in ids.iter().enumerate() {
            let row = serde_json::json!({
                "line": i + 1,
                "template_id": id,
                "template": texts.get(id).map(String::as_str).unwrap_or_default(),
            });
            writeln!(out, "{row}")?;
        }
        return Ok(out.flush()?);
    }
    let mut templates = miner.templates();
    templates.sort_by(|x, y| y.count.cmp(&x.count).then(x.id.cmp(&y.id)));
    if a.json {
        serde_json::to_writer_pretty(&mut out, &templates)?;
        writeln!(out)?;
    } else {
        writeln!(out, "{:>8}  {:>10}  template", "id", "count")?;
        for t in &templates {
            writeln!(out, "{:>8}  {:>10}  {}", t.id, t.count, t.text)?;
        }
    }
    Ok(out.flush()?)
}

/// The `stats:` line: `key=value` pairs for scripts (benches/compare/compare.sh reads
/// `lines_per_second` and `cpus_used`). The timed region is the whole run from file bytes to
/// merged templates: reading, repairing, header parsing, masking, mining and merging.
/// `cpus_used` is the workers' CPU time over the parallel phase's wall time: the cores the
/// run actually got (on a busy machine it can stay near 1 whatever `--threads` says).
fn stats_line(mined: &MinedLog, threads: usize) -> String {
    let t = &mined.timings;
    let lines = mined.notes.lines;
    let cpu: Option<f64> = t.worker_cpu_seconds.iter().copied().sum();
    let list = |v: Vec<String>| v.join(",");
    format!(
        "stats: lines={lines} seconds={:.6} lines_per_second={:.0} threads={threads} templates={} \
         split_seconds={:.6} workers_seconds={:.6} merge_seconds={:.6} worker_seconds={} \
         worker_cpu_seconds={} cpus_used={} peak_rss_mib={}",
        t.total_seconds,
        lines as f64 / t.total_seconds.max(1e-9),
        mined.miner.template_count(),
        t.split_seconds,
        t.workers_seconds,
        t.merge_seconds,
        list(t.worker_seconds.iter().map(|s| format!("{s:.6}")).collect()),
        list(
            t.worker_cpu_seconds
                .iter()
                .map(|s| s.map_or("na".to_string(), |s| format!("{s:.6}")))
                .collect()
        ),
        cpu.map_or("na".to_string(), |c| format!(
            "{:.2}",
            c / t.workers_seconds.max(1e-9)
        )),
        peak_rss_mib().map_or("na".to_string(), |m| format!("{m:.1}")),
    )
}

async fn segment(a: SegmentArgs) -> Result<()> {
    let config = SegmentConfig {
        window: a.window,
        tau: a.tau,
        chunk_lines: a.chunk_lines,
        ..SegmentConfig::default()
    };
    let embedder = HashingEmbedder::new(HashingConfig::default());
    let started = std::time::Instant::now();
    // Lines are pushed as they are read; the stream segments each full chunk, so memory is
    // bounded by the chunk, the window and the templates, not by the log.
    let mut stream = SegmentStream::new(&embedder, config);
    let mut reader = BodyReader::open(&a.input)?;
    while let Some(body) = reader.next_body()? {
        stream.push(&body).await?;
    }
    let lines = reader.finish();
    let templates = stream.templates();
    let blocks = stream.finish().await?;
    eprintln!(
        "stats: lines={lines} blocks={} templates={templates} seconds={:.3} peak_rss_mib={}",
        blocks.len(),
        started.elapsed().as_secs_f64(),
        peak_rss_mib().map_or("na".to_string(), |m| format!("{m:.1}"))
    );
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    if a.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&blocks)?)?;
        return Ok(out.flush()?);
    }
    writeln!(out, "{} blocks over {lines} lines", blocks.len())?;
    // A second pass over the file prints the first line of each block.
    let mut reader = BodyReader::open(&a.input)?;
    let mut index = 0usize;
    let mut next = blocks.iter().peekable();
    while let Some(body) = reader.next_body()? {
        if let Some(b) = next.peek()
            && b.start == index
        {
            let first: String = body.chars().take(100).collect();
            writeln!(
                out,
                "lines {}-{} ({} lines, community {}): {first}",
                b.start + 1,
                b.end,
                b.len(),
                b.community
            )?;
            next.next();
        }
        index += 1;
    }
    Ok(out.flush()?)
}
