//! Criterion benchmarks of log clustering: miner throughput (lines/s and MB/s, one and two
//! threads) on Loghub message bodies, and segmentation time for 10,000 lines with rca-llm's
//! `HashingEmbedder`.
//!
//! Data: `$RCA_SHARED_DIR/data/loghub-2k` (default `<workspace>/../shared`) with the formats
//! of `rca-eval/data/loghub-formats.tsv`; without it a synthetic corpus is used (printed).
//! Run: `RCA_SHARED_DIR=/work/shared cargo bench -p rca-tools --bench logs`.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::path::PathBuf;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rca_llm::{HashingConfig, HashingEmbedder};
use rca_tools::logs::{
    LogFormat, MineOptions, MinerConfig, OnlineMiner, SegmentConfig, mine_bytes, mine_parallel,
    read_lines, segment_lines,
};

fn shared_dir() -> PathBuf {
    std::env::var_os("RCA_SHARED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared"))
}

/// Message bodies of the Loghub samples, repeated to `n` lines (digits varied per copy so the
/// masked shapes, not the raw strings, repeat).
fn corpus(n: usize) -> Vec<String> {
    let formats =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../rca-eval/data/loghub-formats.tsv");
    let data = shared_dir().join("data/loghub-2k");
    let mut bodies = Vec::new();
    if let Ok(table) = std::fs::read_to_string(&formats) {
        for row in table.lines().filter(|l| !l.starts_with('#')) {
            let Some((system, pattern)) = row.split_once('\t') else {
                continue;
            };
            let Ok(bytes) = std::fs::read(data.join(system).join(format!("{system}_2k.log")))
            else {
                continue;
            };
            let f = LogFormat::parse(pattern).unwrap();
            let (lines, _) = read_lines(&bytes, 1 << 16);
            bodies.extend(lines.iter().map(|l| {
                f.parse_line(l)
                    .map_or(l.as_str(), |p| p.content)
                    .to_string()
            }));
        }
    }
    if bodies.is_empty() {
        eprintln!(
            "loghub-2k not found under {}: using a synthetic corpus",
            data.display()
        );
        bodies = (0..2000)
            .map(|i| {
                format!(
                    "worker {} finished task {} in {} ms status {}",
                    i % 13,
                    i * 7,
                    i % 97,
                    ["ok", "retry", "fail"][i % 3]
                )
            })
            .collect();
    }
    (0..n)
        .map(|i| {
            let b = &bodies[i % bodies.len()];
            let copy = i / bodies.len();
            b.chars()
                .map(|c| {
                    c.to_digit(10)
                        .map_or(c, |d| char::from_digit((d + copy as u32) % 10, 10).unwrap())
                })
                .collect()
        })
        .collect()
}

fn miner(c: &mut Criterion) {
    let lines = corpus(200_000);
    let bytes: u64 = lines.iter().map(|l| l.len() as u64 + 1).sum();
    let mut g = c.benchmark_group("miner");
    g.sample_size(10);
    g.throughput(Throughput::Elements(lines.len() as u64));
    g.bench_function("lines/1-thread", |b| {
        b.iter(|| {
            let mut m = OnlineMiner::default();
            for l in &lines {
                black_box(m.ingest_line(l));
            }
            m.template_count()
        })
    });
    g.bench_function("lines/2-threads", |b| {
        b.iter(|| {
            mine_parallel(&lines, &MinerConfig::default(), 2)
                .unwrap()
                .1
                .len()
        })
    });
    g.throughput(Throughput::Bytes(bytes));
    g.bench_function("bytes/1-thread", |b| {
        b.iter(|| {
            let mut m = OnlineMiner::default();
            for l in &lines {
                black_box(m.ingest_line(l));
            }
            m.template_count()
        })
    });
    // From raw bytes: every worker reads, repairs and mines its own chunk (as the CLI does).
    let raw: Vec<u8> = lines
        .iter()
        .flat_map(|l| l.bytes().chain([b'\n']))
        .collect();
    for threads in [1, 2] {
        g.bench_function(format!("raw-bytes/{threads}-thread"), |b| {
            let opts = MineOptions {
                threads,
                ..MineOptions::default()
            };
            b.iter(|| mine_bytes(&raw, &opts).unwrap().miner.template_count())
        });
    }
    g.finish();
}

fn segmentation(c: &mut Criterion) {
    let lines = corpus(10_000);
    let embedder = HashingEmbedder::new(HashingConfig::default());
    let mut g = c.benchmark_group("segment");
    g.sample_size(10);
    g.bench_function("10k-lines", |b| {
        b.iter(|| {
            futures::executor::block_on(segment_lines(&lines, &embedder, &SegmentConfig::default()))
                .unwrap()
                .len()
        })
    });
    g.finish();
}

criterion_group!(benches, miner, segmentation);
criterion_main!(benches);
