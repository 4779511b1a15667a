//! Integration tests of rca-eval on the shared data: the OpenRCA scorer against the archived
//! scores, the Nezha development-day accuracy, Loghub grouping accuracy (`loghub`), and a scan
//! of library sources for dataset literals. Data-dependent tests skip (saying why) only when
//! `RCA_REQUIRE_ALL` is unset. One test binary for the crate (each binary links the whole
//! dependency graph once more).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "eval/loghub.rs"]
mod loghub;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use rca_eval::nezha;
use rca_eval::openrca::{Task, Truth, score};

fn shared_dir() -> PathBuf {
    match std::env::var_os("RCA_SHARED_DIR") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared"),
    }
}

/// The data folder, or `None` (after printing why) when it is missing and skipping is allowed.
fn data(name: &str) -> Option<PathBuf> {
    let dir = shared_dir().join("data").join(name);
    if dir.is_dir() {
        return Some(dir);
    }
    if rca_core::testing::require_all() {
        panic!("{} is missing and RCA_REQUIRE_ALL is set", dir.display());
    }
    eprintln!("skipping: {} not found (set RCA_SHARED_DIR)", dir.display());
    None
}

fn lines(cell: &str) -> BTreeSet<String> {
    cell.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

#[test]
fn openrca_scorer_reproduces_the_archive() {
    let Some(dir) = data("openrca-archive") else {
        return;
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "csv"))
        .collect();
    files.sort();
    let (mut single, mut strict, mut all_rows) = (0, 0, 0);
    for f in files {
        let mut rdr = csv::Reader::from_path(&f).unwrap();
        let headers = rdr.headers().unwrap().clone();
        let col = |n: &str| headers.iter().position(|h| h == n).unwrap();
        let (pred, truth, passed, failed, sc, task) = (
            col("prediction"),
            col("groundtruth"),
            col("passed"),
            col("failed"),
            col("score"),
            col("task_index"),
        );
        for row in rdr.records() {
            let row = row.unwrap();
            all_rows += 1;
            let task_def = Task::from_id(&row[task]).unwrap();
            let (want_passed, want_failed) = (lines(&row[passed]), lines(&row[failed]));
            let points: BTreeSet<_> = want_passed.union(&want_failed).cloned().collect();
            if points.len() > task_def.points() {
                continue; // a multi-fault row: its ground-truth cell lists only one fault
            }
            single += 1;
            // Computed only from prediction, groundtruth and task_index.
            let got = score(&row[pred], &[Truth::parse(&row[truth])], task_def);
            let want_score: f64 = row[sc].parse().unwrap();
            assert!(
                (got.score - want_score).abs() < 1e-9,
                "{} row {}: score {} != {want_score}",
                f.display(),
                &row[col("row_id")],
                got.score
            );
            let got_passed: BTreeSet<_> = got.passed.iter().cloned().collect();
            let got_failed: BTreeSet<_> = got.failed.iter().cloned().collect();
            assert_eq!(got_passed, want_passed, "{} passed", f.display());
            assert_eq!(got_failed, want_failed, "{} failed", f.display());
            if got.score == 1.0 {
                strict += 1;
            }
        }
    }
    assert_eq!(all_rows, 335);
    assert_eq!(single, 262);
    assert_eq!(strict, 37);
}

/// The development day through the diagnosis pipeline, under both protocols: the figures this
/// build reaches (`rca eval nezha ... --protocol P`, in docs/benchmarks.md), minus a margin.
#[test]
fn nezha_development_day_accuracy() {
    let Some(dir) = data("nezha-trainticket") else {
        return;
    };
    for (protocol, floors) in [
        (nezha::Protocol::Alert, ALERT_FLOORS),
        (nezha::Protocol::FaultTime, FAULT_TIME_FLOORS),
    ] {
        let mut options = nezha::EvalOptions {
            days: vec!["2023-01-29".into()],
            ..nezha::EvalOptions::new().unwrap()
        };
        options.case.protocol = protocol;
        let report = nezha::evaluate(&dir, &options, &mut |_, _, _| {}).unwrap();
        let s = &report.summary;
        eprintln!("{protocol}\n{}", nezha::markdown_table(&report));
        assert_eq!(s.cases, 28);
        let [as1, as3, as5, types] = floors;
        assert!(s.as1 >= as1, "{protocol}: AS@1 {} < {as1}", s.as1);
        assert!(s.as3 >= as3, "{protocol}: AS@3 {} < {as3}", s.as3);
        assert!(s.as5 >= as5, "{protocol}: AS@5 {} < {as5}", s.as5);
        assert!(
            s.fault_type_accuracy >= types,
            "{protocol}: fault-type accuracy {} < {types}",
            s.fault_type_accuracy
        );
        let onset = s.median_onset_error_secs.unwrap();
        match protocol {
            // The fault time is stated: no error.
            nezha::Protocol::FaultTime => assert_eq!(onset, 0.0),
            // Estimated from the telemetry: within two minutes (median).
            nezha::Protocol::Alert => assert!(onset <= 120.0, "median onset error {onset} s"),
        }
    }
}

/// AS@1, AS@3, AS@5 and fault-type accuracy floors under the alert protocol.
const ALERT_FLOORS: [f64; 4] = [0.46, 0.57, 0.57, 0.42];
/// ... and under the fault-time protocol.
const FAULT_TIME_FLOORS: [f64; 4] = [0.60, 0.78, 0.78, 0.50];

#[test]
fn nezha_cases_follow_their_protocol_and_hold_nothing_after_detection() {
    let Some(dir) = data("nezha-trainticket") else {
        return;
    };
    let days = nezha::discover(&dir).unwrap();
    let day = &days[0];
    let metrics = nezha::DayMetrics::load(day).unwrap();
    let alert = nezha::CaseOptions::default();
    let known = nezha::CaseOptions {
        protocol: nezha::Protocol::FaultTime,
        ..alert
    };
    let mut lags = BTreeSet::new();
    for case in day.cases.iter().take(4) {
        let t0 = case.inject_time;
        let a = nezha::load_case(day, &metrics, case, &alert).unwrap();
        let f = nezha::load_case(day, &metrics, case, &known).unwrap();
        // Fault-time: the onset is the fault, detection 180 s later.
        assert_eq!(f.incident.onset, Some(t0));
        assert_eq!(f.detected_at, t0.offset_millis(180_000));
        // Alert: a lag of 60-300 s, no onset, and a window that does not begin at the fault.
        let lag = (a.detected_at.millis() - t0.millis()) / 1000;
        assert!((60..=300).contains(&lag), "{}: lag {lag}", case.id);
        assert_eq!(lag, alert.alert_lag(&case.id));
        lags.insert(lag);
        assert_eq!(a.incident.onset, None);
        assert!(a.incident.window.start < t0 && a.incident.window.end == a.detected_at);
        for d in [&a, &f] {
            assert!(
                d.logs
                    .iter()
                    .all(|r| d.incident.window.contains(r.timestamp))
            );
            assert!(d.spans.iter().all(|s| d.incident.window.contains(s.start)));
            assert!(
                d.metrics
                    .iter()
                    .all(|m| d.incident.window.contains(m.timestamp))
            );
            assert!(!d.spans.is_empty() && !d.metrics.is_empty(), "{}", case.id);
        }
    }
    // Withholding telemetry removes exactly what it names.
    let case = &day.cases[0];
    let d = nezha::load_case(day, &metrics, case, &alert).unwrap();
    let t = nezha::case_telemetry(&d, Some(nezha::Withheld::LogSpanJoin));
    assert_eq!(t.logs.records().len(), d.logs.len());
    assert!(
        t.logs.records().iter().all(
            |r| !r.attributes.contains_key("trace_id") && !r.attributes.contains_key("span_id")
        )
    );
    assert!(d.logs.iter().any(|r| r.attributes.contains_key("trace_id")));
    let t = nezha::case_telemetry(&d, Some(nezha::Withheld::Metrics));
    assert!(t.metrics.samples_all().is_empty() && !t.traces.spans_all().is_empty());
    let t = nezha::case_telemetry(&d, Some(nezha::Withheld::Traces));
    assert!(t.traces.spans_all().is_empty() && !t.logs.records().is_empty());
    let t = nezha::case_telemetry(&d, Some(nezha::Withheld::Logs));
    assert!(t.logs.records().is_empty() && !t.metrics.samples_all().is_empty());
    // The lags differ between cases, and another seed draws others.
    assert!(lags.len() > 1);
    let other = nezha::CaseOptions { seed: 8, ..alert };
    assert!(
        day.cases
            .iter()
            .any(|c| other.alert_lag(&c.id) != alert.alert_lag(&c.id))
    );
}

/// The data keep about three minutes around each fault, so the trivial rule (the first event
/// of the last unbroken stretch, plus 60 s) knows the fault time within seconds; with normal
/// minutes spliced before each run it no longer does, while the spliced cases still hold
/// nothing after detection and as many real records as before.
#[test]
fn the_trivial_onset_rule_loses_its_edge_on_spliced_cases() {
    let Some(dir) = data("nezha-trainticket") else {
        return;
    };
    let days = nezha::discover(&dir).unwrap();
    let day = &days[0];
    let metrics = nezha::DayMetrics::load(day).unwrap();
    let plain = nezha::CaseOptions::default();
    let spliced = nezha::CaseOptions {
        splice_minutes: Some((2, 6)),
        ..plain
    };
    let mut errors = [Vec::new(), Vec::new()];
    for case in &day.cases {
        for (k, options) in [plain, spliced].iter().enumerate() {
            let d = nezha::load_case(day, &metrics, case, options).unwrap();
            assert!(d.spans.iter().all(|s| s.start < d.detected_at));
            assert!(d.logs.iter().all(|r| r.timestamp < d.detected_at));
            let onset = nezha::trivial_onset(&d).unwrap();
            errors[k].push((onset.millis() - case.inject_time.millis()).abs() as f64 / 1000.0);
        }
    }
    let median = |v: &[f64]| rca_tools::analyze::stats::median(v);
    let (without, with) = (median(&errors[0]), median(&errors[1]));
    eprintln!("trivial rule, median onset error: {without} s without splice, {with} s with");
    assert!(without <= 40.0, "{without}");
    assert!(with >= 120.0, "{with}");
}

/// The same incident at three times the traffic (every trace and its log lines copied with
/// fresh trace and span ids, the same times; metrics unchanged) names the same top candidate
/// with the same score within 10%: scores measure how much things changed, not how many
/// records show it. (Lower ranks may still move: a weak change that is not significant in one
/// copy can be in three, and then enters with its effect.)
#[test]
fn replicated_traffic_gives_the_same_ranking() {
    use rca_eval::scale::{Telemetry, measure, replicate};
    use rca_tools::sources::incident::IncidentDir;

    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/incidents/trainticket-cpu");
    let inc = IncidentDir::open(&dir).unwrap();
    let t = Telemetry {
        incident: inc.incident.clone(),
        logs: inc.logs.records().to_vec(),
        spans: inc.traces.spans_all().to_vec(),
        metrics: inc.metrics.samples_all().to_vec(),
    };
    let once = measure("bundled x1", replicate(&t, 1)).unwrap();
    let thrice = measure("bundled x3", replicate(&t, 3)).unwrap();
    eprintln!("{once:?}\n{thrice:?}");
    assert_eq!(once.top[0].0, thrice.top[0].0);
    let (a, b) = (once.top[0].1, thrice.top[0].1);
    assert!(
        (a - b).abs() <= 0.1 * a.abs(),
        "{}: {a} once, {b} at three times the traffic",
        once.top[0].0
    );
}

/// Library code must not know the benchmark systems: no service names, no `ts-` prefix, no
/// phrases from their logs.
/// The banned literals found in one file's library part (before its first `#[cfg(test)]`).
fn literal_offences<'a>(text: &str, banned: &'a BTreeSet<String>) -> Vec<&'a str> {
    let library = text.split("#[cfg(test)]").next().unwrap_or("");
    banned
        .iter()
        .filter(|b| library.contains(b.as_str()))
        .map(String::as_str)
        .collect()
}

#[test]
fn no_dataset_literals_in_library_sources() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    // The Nezha service prefix, phrases of its logs, and its fault labels (the labels the
    // benchmark's taxonomy file supplies; library code names generic types).
    let mut banned: BTreeSet<String> = [
        "\"ts-",
        "'ts-",
        "dispatcherServlet",
        "ServiceImpl",
        "cpu_contention",
        "cpu_consumed",
        "network_delay",
    ]
    .into_iter()
    .map(str::to_string)
    .collect();
    // Loghub system names as string literals (a branch keyed on one system), from the
    // formats table that ships with the crate.
    let formats = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("data/loghub-formats.tsv"),
    )
    .unwrap();
    let systems = rca_eval::loghub::parse_formats(&formats).unwrap();
    assert_eq!(systems.len(), 12);
    banned.extend(systems.iter().map(|f| format!("\"{}\"", f.system)));
    let fixed = banned.len();
    // Service names of the Nezha data (`ts-contacts-service-...` -> `contacts-service`):
    // required under RCA_REQUIRE_ALL, so the scan cannot quietly check only the fixed list.
    if let Some(nezha_dir) = data("nezha-trainticket") {
        let metric_dir = nezha_dir.join("rca_data/2023-01-29/metric");
        for e in std::fs::read_dir(&metric_dir).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(pod) = name.strip_suffix("_metric.csv.gz") {
                let service = nezha::service_of(pod);
                if let Some((_, rest)) = service.split_once('-') {
                    banned.insert(rest.to_string());
                }
            }
        }
        assert!(
            banned.len() >= fixed + 10,
            "only {} service names read from {}",
            banned.len() - fixed,
            metric_dir.display()
        );
    }
    // The scanner finds what it bans, and only in library code.
    let planted =
        "fn f() { let s = \"ts-x\"; }\n#[cfg(test)]\nmod t { const N: &str = \"network_delay\"; }";
    assert_eq!(literal_offences(planted, &banned), ["\"ts-"]);
    let mut offences = Vec::new();
    let mut scanned = 0usize;
    // Every library crate of the workspace.
    let crates: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("rca-") && root.join(n).join("src").is_dir())
        .collect();
    assert!(crates.len() >= 6, "{crates:?}");
    for krate in &crates {
        let mut stack = vec![root.join(krate).join("src")];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == "rs") && !p.ends_with("tests.rs") {
                    // Library code only: test modules may name what they ban.
                    scanned += 1;
                    let text = std::fs::read_to_string(&p).unwrap();
                    for b in literal_offences(&text, &banned) {
                        offences.push(format!("{}: {b}", p.display()));
                    }
                }
            }
        }
    }
    assert!(scanned >= 100, "only {scanned} library files scanned");
    assert!(
        offences.is_empty(),
        "dataset literals in library code: {offences:?}"
    );
}

/// The bundled incident opens through the documented format, reads without bad rows, states
/// no onset, and the diagnosis pipeline estimates one near the fault and ranks the true root
/// cause first with evidence from before detection. (It is still the earlier export, whose
/// window begins at the fault: the real-model recordings replay against its text.)
#[test]
fn bundled_incident_opens_and_the_pipeline_finds_its_onset_and_cause() {
    use rca_agents::orchestra::{DiagnosisPipeline, Onset, PipelineConfig, RoleModels};
    use rca_tools::sources::incident::IncidentDir;

    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/incidents/trainticket-cpu");
    let inc = IncidentDir::open(&dir).unwrap();
    assert_eq!(inc.logs.report().bad_rows, 0);
    assert_eq!(inc.metrics.report().bad_rows, 0);
    assert_eq!(inc.traces.report().bad_rows, 0);
    assert!(!inc.logs.records().is_empty() && !inc.traces.spans_all().is_empty());
    assert!(
        std::fs::read_to_string(dir.join("NOTICE"))
            .unwrap()
            .contains("MIT License")
    );
    assert_eq!(inc.incident.onset, None);
    let pipeline =
        DiagnosisPipeline::new(&inc, RoleModels::default(), PipelineConfig::default()).unwrap();
    let run = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
        .block_on(pipeline.run(&inc.incident))
        .unwrap();
    let Some(Onset::Estimated(onset)) = run.onset else {
        panic!("no estimated onset: {:?}", run.onset);
    };
    let top = &run.report.candidates[0];
    // Short-term memory is read: a later explorer looked again at what an earlier one
    // published, and its step says so.
    let steps: Vec<&rca_agents::orchestra::Exploration> = run
        .events
        .iter()
        .filter_map(|e| match e {
            rca_agents::orchestra::RunEvent::Explored { exploration, .. } => Some(exploration),
            _ => None,
        })
        .collect();
    assert!(
        steps[1..].iter().any(|x| x
            .actions
            .iter()
            .any(|a| a.contains("looked harder at the published"))),
        "{steps:?}"
    );
    assert!(
        run.report
            .evidence
            .iter()
            .all(|e| e.observed_at < inc.incident.detected_at)
    );
    // The bundled incident is case 2023-01-29/24: the estimated onset lies within two minutes
    // of the fault, and the true root cause ranks first.
    if let Some(root) = data("nezha-trainticket") {
        let days = nezha::discover(&root).unwrap();
        let case = days
            .iter()
            .flat_map(|d| &d.cases)
            .find(|c| c.id == "2023-01-29/24")
            .unwrap();
        let error = (onset.at.millis() - case.inject_time.millis()).abs();
        assert!(error <= 120_000, "onset {onset:?} is {error} ms off");
        assert_eq!(top.component, case.truth_pod);
    }
}

/// The tool-lifecycle benchmark on real Nezha cases: every template applies to the tables,
/// warm runs reuse tools and spend fewer role calls.
#[cfg(feature = "sql")]
mod lifecycle_on_nezha {
    use super::data;
    use rca_eval::lifecycle_bench::{IncidentSet, LifecycleBenchConfig, run};

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn nezha_cases_warm_and_cold() {
        let Some(root) = data("nezha-trainticket") else {
            return;
        };
        let report = rt()
            .block_on(run(LifecycleBenchConfig {
                set: IncidentSet::Nezha {
                    root,
                    day: None,
                    warm_up_incidents: 1,
                    limit: Some(3),
                },
                seed: 5,
            }))
            .unwrap();
        assert_eq!(report.warm_up.generated + report.warm_up.reused, 3);
        assert_eq!(report.cold.incidents, 2);
        assert_eq!(report.cold.acquisitions, 6);
        assert_eq!(report.cold.reused, 0);
        assert_eq!(
            report.cold.escalated, 0,
            "every template applies to Nezha tables"
        );
        assert!(report.warm.reuse_rate() > 0.0);
        assert!(report.warm.calls_per_incident() < report.cold.calls_per_incident());
        assert!(report.markdown().contains("Nezha day"));
    }
}

/// Cross-validation over the development day's cases (two settings, to stay short): four
/// folds that partition the cases, each scored with the setting chosen without it.
#[test]
fn nezha_cross_validation_partitions_the_cases() {
    let Some(dir) = data("nezha-trainticket") else {
        return;
    };
    let options = nezha::EvalOptions {
        days: vec!["2023-01-29".into()],
        ..nezha::EvalOptions::new().unwrap()
    };
    let grid: Vec<_> = nezha::default_grid(&options.pipeline, true)
        .into_iter()
        .take(2)
        .collect();
    let cv = nezha::cross_validate(&dir, &options, &grid, 4, &mut |_, _, _| {}).unwrap();
    assert_eq!(cv.folds.len(), 4);
    let mut ids: Vec<&String> = cv.folds.iter().flat_map(|f| &f.cases).collect();
    assert_eq!(ids.len(), 28);
    ids.dedup();
    assert_eq!(ids.len(), 28);
    assert!(cv.default_as1 >= ALERT_FLOORS[0]);
    assert!(cv.in_sample_best.1 >= cv.default_as1);
    assert!(
        cv.folds
            .iter()
            .all(|f| grid.iter().any(|g| g.name == f.chosen))
    );
    assert!(cv.to_markdown().contains("cross-validated"));
    // Too many folds is an error, not a panic.
    assert!(nezha::cross_validate(&dir, &options, &grid[..1], 29, &mut |_, _, _| {}).is_err());
}

/// Network delay injected into the real minute before each fault: the delayed pod's service
/// is found first far more often than by chance (the 0 ms control row).
#[test]
fn injected_network_delay_is_found() {
    let Some(dir) = data("nezha-trainticket") else {
        return;
    };
    let options = nezha::EvalOptions::new().unwrap();
    let rows = nezha::delay_benchmark(
        &dir,
        &["2023-01-29".into()],
        &[200],
        7,
        &options.pipeline,
        &mut |_, _, _| {},
    )
    .unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].delay_ms, 0);
    assert!(rows[0].windows >= 20, "{rows:?}");
    assert_eq!(rows[0].windows, rows[1].windows);
    assert!(rows[1].as1 >= DELAY_200MS_AS1, "{rows:?}");
    assert!(rows[1].as1 > rows[0].as1 + 0.1, "{rows:?}");
    // The trace analyzer names the delayed pod in a call-gap finding in most windows.
    assert!(rows[1].gap_found >= 0.5, "{rows:?}");
    // Without a delay a call gap at the drawn pod is rare (the real minutes may hold one by
    // chance: one window in 28 on the development day).
    assert!(rows[0].gap_found <= 0.1, "{rows:?}");
    assert!(rows[1].gap_found >= rows[0].gap_found + 0.4, "{rows:?}");
}

/// What the 200 ms row reaches (`rca eval nezha ... --network-delay`), minus a margin.
const DELAY_200MS_AS1: f64 = 0.14;

/// Sections written before the rule whose commands need a model server (the real-model
/// stability run of 30 episodes takes about two hours of this 2-core machine) or a nightly
/// fuzzing build; each is brought under the rule by rerunning its command, and then leaves
/// this list (the test fails while a listed section already complies). The list may only
/// shrink.
const NOT_YET_RERUN: &[&str] = &["flash-suite-hindsight-model"];

/// docs/benchmarks.md's rule, checked on the committed file: every section says whether it
/// measures or demonstrates and names the baseline it beats (or why none applies), as
/// `write_section` now requires of every new body.
#[test]
fn every_benchmark_section_states_its_standing() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/benchmarks.md");
    let text = std::fs::read_to_string(&path).expect("docs/benchmarks.md");
    let mut sections = 0;
    let mut unstated = Vec::new();
    let mut rest = text.as_str();
    while let Some(b) = rest.find("<!-- BEGIN ") {
        let after = &rest[b + "<!-- BEGIN ".len()..];
        let Some(name_end) = after.find(" -->") else {
            break;
        };
        let name = &after[..name_end];
        let end = format!("<!-- END {name} -->");
        let Some(e) = after.find(&end) else {
            panic!("section {name} has no END marker");
        };
        sections += 1;
        match (
            rca_eval::docs::standing_of(&after[..e]),
            NOT_YET_RERUN.contains(&name),
        ) {
            (Err(missing), false) => unstated.push(format!("{name}: {missing}")),
            (Ok(()), true) => unstated.push(format!(
                "{name} states its standing now: take it off NOT_YET_RERUN"
            )),
            _ => {}
        }
        rest = &after[e + end.len()..];
    }
    assert!(
        sections >= 30,
        "only {sections} sections found in {}",
        path.display()
    );
    assert!(
        unstated.is_empty(),
        "sections that do not state their standing:\n{}",
        unstated.join("\n")
    );
}
