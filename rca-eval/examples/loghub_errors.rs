//! Dev-only: lists the grouping errors of the default miner on a Loghub folder.
//!
//! `cargo run --release -p rca-eval --example loghub_errors -- DIR FORMATS [SYSTEM]`
//! (the generated set: `DIR` = rca-eval/data/grammar-2k, `FORMATS` = its `formats.tsv`).
//! `MINER_CONFIG='{"join_anchors":0}'` changes fields of the default configuration.
//!
//! For every true group that is not recovered exactly, prints the true template, and the
//! predicted templates its lines went to (with counts and the true labels sharing them).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::PathBuf;

use rca_core::logs::TemplateMiner;
use rca_eval::loghub::{default_config, parse_formats};
use rca_tools::logs::{DEFAULT_MAX_LINE_BYTES, LogFormat, OnlineMiner, read_lines};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = PathBuf::from(&args[1]);
    let formats = parse_formats(&std::fs::read_to_string(&args[2]).unwrap()).unwrap();
    let only = args.get(3);
    for f in formats {
        if only.is_some_and(|o| *o != f.system) {
            continue;
        }
        let log = dir.join(&f.system).join(format!("{}_2k.log", f.system));
        let Ok(bytes) = std::fs::read(&log) else {
            continue;
        };
        let (lines, _) = read_lines(&bytes, DEFAULT_MAX_LINE_BYTES);
        let format = LogFormat::parse(&f.pattern).unwrap();
        let contents: Vec<&str> = lines
            .iter()
            .map(|l| format.parse_line(l).map(|p| p.content).unwrap_or(l.trim()))
            .collect();
        let mut rdr = csv::Reader::from_path(format!("{}_structured.csv", log.display())).unwrap();
        let truth: Vec<(String, String)> = rdr
            .records()
            .map(|r| {
                let r = r.unwrap();
                (
                    r.get(r.len() - 2).unwrap().to_string(),
                    r.get(r.len() - 1).unwrap().to_string(),
                )
            })
            .collect();
        let mut config = serde_json::to_value(default_config()).unwrap();
        if let Ok(patch) = std::env::var("MINER_CONFIG") {
            let patch: serde_json::Value = serde_json::from_str(&patch).unwrap();
            for (k, v) in patch.as_object().unwrap() {
                config[k] = v.clone();
            }
        }
        let mut m = OnlineMiner::new(serde_json::from_value(config).unwrap());
        let ids: Vec<u64> = contents.iter().map(|l| m.ingest(l).template_id).collect();
        let ids: Vec<u64> = ids.iter().map(|&i| m.resolve(i).unwrap()).collect();
        // true label -> predicted id -> count
        let mut by_true: BTreeMap<&str, BTreeMap<u64, usize>> = BTreeMap::new();
        let mut by_pred: BTreeMap<u64, BTreeMap<&str, usize>> = BTreeMap::new();
        let mut example: BTreeMap<&str, (&str, &str)> = BTreeMap::new();
        for (i, (&p, (t, tt))) in ids.iter().zip(&truth).enumerate() {
            *by_true.entry(t).or_default().entry(p).or_default() += 1;
            *by_pred.entry(p).or_default().entry(t).or_default() += 1;
            example.entry(t).or_insert((tt, contents[i]));
        }
        println!("=== {} ({} templates)", f.system, m.template_count());
        for (t, preds) in &by_true {
            let bad = preds.len() > 1 || preds.keys().any(|p| by_pred[p].len() > 1);
            if !bad {
                continue;
            }
            let n: usize = preds.values().sum();
            println!("-- {t} x{n}: {}\n   e.g. {}", example[t].0, example[t].1);
            for (p, c) in preds {
                let others: Vec<String> = by_pred[p]
                    .iter()
                    .filter(|(o, _)| *o != t)
                    .map(|(o, c)| format!("{o}x{c}"))
                    .collect();
                println!(
                    "   -> x{c} [{}] also {:?}",
                    m.template(*p).unwrap().text,
                    others
                );
            }
        }
    }
}
