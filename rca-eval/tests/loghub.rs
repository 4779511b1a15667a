//! Grouping accuracy over the twelve shared Loghub-2k systems, with the one configuration and
//! the shipped formats table. Needs the shared data (`RCA_SHARED_DIR`, default
//! `<workspace>/../shared`); skips with a message when it is absent, unless `RCA_REQUIRE_ALL`
//! is set. The floors are the figures measured by `rca eval loghub` minus a small margin.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

use rca_eval::loghub::{default_config, evaluate, parse_formats};

fn shared_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("RCA_SHARED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared"));
    let data = dir.join("data/loghub-2k");
    if data.is_dir() {
        return Some(data);
    }
    if std::env::var_os("RCA_REQUIRE_ALL").is_some() {
        panic!("RCA_REQUIRE_ALL is set but {} is missing", data.display());
    }
    eprintln!(
        "skipping: {} not found (set RCA_SHARED_DIR)",
        data.display()
    );
    None
}

/// Measured GA per system minus 0.005.
const FLOORS: &[(&str, f64)] = &[
    ("HDFS", 0.993),
    ("Hadoop", 0.983),
    ("Spark", 0.995),
    ("Zookeeper", 0.986),
    ("BGL", 0.977),
    ("HPC", 0.927),
    ("Windows", 0.995),
    ("Linux", 0.988),
    ("Android", 0.941),
    ("HealthApp", 0.994),
    ("Apache", 0.995),
    ("OpenStack", 0.995),
];
const MEAN_FLOOR: f64 = 0.981;

#[test]
fn loghub_grouping_accuracy() {
    let Some(data) = shared_dir() else { return };
    let table = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/loghub-formats.tsv"),
    )
    .unwrap();
    let formats = parse_formats(&table).unwrap();
    assert_eq!(formats.len(), 12);
    let single = evaluate(&data, &formats, &default_config(), 1).unwrap();
    assert!(single.missing.is_empty(), "missing: {:?}", single.missing);
    eprintln!("{}", single.to_markdown());
    for (system, floor) in FLOORS {
        let s = single.systems.iter().find(|s| s.system == *system).unwrap();
        assert!(s.ga >= *floor, "{system}: GA {} < {floor}", s.ga);
        assert_eq!(
            s.unmatched, 0,
            "{system}: header lines not matching the format"
        );
    }
    assert!(
        single.mean_ga() >= MEAN_FLOOR,
        "mean GA {}",
        single.mean_ga()
    );

    // The parallel mode stays within 0.005 GA of the single-threaded result.
    let parallel = evaluate(&data, &formats, &default_config(), 2).unwrap();
    for (a, b) in single.systems.iter().zip(&parallel.systems) {
        assert!(
            (a.ga - b.ga).abs() <= 0.005,
            "{}: 1 thread {} vs 2 threads {}",
            a.system,
            a.ga,
            b.ga
        );
    }
}
