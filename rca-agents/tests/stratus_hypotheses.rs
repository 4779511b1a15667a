//! The hypothesis families of the deterministic STRATUS diagnosis, each on a small scenario:
//! with the change history erased (only relations can find the fault), and with it (putting
//! back what changed cures the faults made by writes), and with log lines in words the
//! agents have never seen.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use rca_agents::stratus::agents::FaultKind;
use rca_agents::stratus::agents::hypotheses::{Family, Hypothesis, hypotheses, worth_reading};
use rca_agents::stratus::agents::observed::Observed;
use rca_agents::stratus::command::Command;
use rca_agents::stratus::sim::audit::AGENT_USER;
use rca_agents::stratus::sim::model::Cluster;
use rca_agents::stratus::{
    ReadHandle, Scenario, SimEnvironment, Stratus, Tnr, TnrConfig, scenario,
};
use tokio::sync::RwLock;

fn file(dir: &str, name: &str) -> Scenario {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join(dir)
        .join(format!("{name}.yaml"));
    Scenario::from_file(&p).unwrap()
}

/// The faulty cluster of a scenario, with its change history erased: an environment
/// that keeps none, so only the relation families can find the fault.
fn without_history(s: &Scenario) -> Cluster {
    let mut c = s.build().unwrap();
    c.changes.clear();
    c
}

async fn ranked(c: &Cluster) -> Vec<Hypothesis> {
    let env = Arc::new(RwLock::new(SimEnvironment::new(c.clone())));
    let reader = ReadHandle::new(env);
    let mut o = Observed::read(&reader).await.unwrap();
    let deps = worth_reading(&o);
    o.read_logs(&reader, &deps).await;
    hypotheses(&o, 20)
}

/// Runs the deterministic agents under TNR; whether the scenario's oracle passes after,
/// with the diagnoses made.
async fn mitigate(s: &Scenario, c: Cluster) -> (bool, Vec<FaultKind>) {
    let env = Arc::new(RwLock::new(SimEnvironment::new(c)));
    let tnr = Tnr::new(Arc::clone(&env), TnrConfig::default())
        .await
        .unwrap();
    let report = Stratus::default().run(&tnr).await.unwrap();
    let faults = report.diagnoses.iter().map(|d| d.fault).collect();
    let passed = s.verdict(env.read().await.cluster()).passed();
    (passed, faults)
}

/// One small scenario per family, with no history to undo: the family's hypothesis is
/// among the diagnoses and the agents mitigate.
#[tokio::test]
async fn each_family_finds_and_fixes_its_fault_without_a_history() {
    let cases: Vec<(Scenario, Family, FaultKind)> = vec![
        (
            scenario("node-not-ready").unwrap().clone(),
            Family::Node,
            FaultKind::NodeNotReady,
        ),
        (
            scenario("cordoned-nodes").unwrap().clone(),
            Family::Placement,
            FaultKind::NodeCordoned,
        ),
        (
            file("heldout", "risk-pinned-to-full-node"),
            Family::Placement,
            FaultKind::NodeSelector,
        ),
        (
            scenario("wrong-target-port").unwrap().clone(),
            Family::Reference,
            FaultKind::WrongTargetPort,
        ),
        (
            scenario("selector-mismatch").unwrap().clone(),
            Family::Reference,
            FaultKind::SelectorMismatch,
        ),
        (
            scenario("wrong-env-value").unwrap().clone(),
            Family::Reference,
            FaultKind::WrongEnv,
        ),
        (
            scenario("missing-config-map").unwrap().clone(),
            Family::Reference,
            FaultKind::MissingConfig,
        ),
        (
            scenario("scaled-to-zero").unwrap().clone(),
            Family::Reference,
            FaultKind::ScaledToZero,
        ),
        (
            scenario("bad-image").unwrap().clone(),
            Family::Reference,
            FaultKind::BadImage,
        ),
        (
            scenario("oom-crash-loop").unwrap().clone(),
            Family::Resources,
            FaultKind::MemoryLimit,
        ),
        (
            scenario("cpu-throttling").unwrap().clone(),
            Family::Resources,
            FaultKind::CpuThrottling,
        ),
        (
            scenario("stuck-pod").unwrap().clone(),
            Family::Liveness,
            FaultKind::StuckPod,
        ),
        (
            scenario("revoked-secret").unwrap().clone(),
            Family::Credential,
            FaultKind::RevokedSecret,
        ),
        (
            file("heldout", "risk-threshold-invalid"),
            Family::Config,
            FaultKind::InvalidConfigValue,
        ),
        (
            file("heldout", "web-bff-rightsizing"),
            Family::Capacity,
            FaultKind::Overload,
        ),
    ];
    for (s, family, fault) in cases {
        let c = without_history(&s);
        let hs = ranked(&c).await;
        assert!(
            hs.iter().any(|h| h.family == family && h.fault == fault),
            "{}: {hs:#?}",
            s.name
        );
        assert!(
            hs.iter().all(|h| h.fault != FaultKind::RecentChange),
            "{}",
            s.name
        );
        let (passed, faults) = mitigate(&s, c).await;
        assert!(passed, "{}: {faults:?}", s.name);
        assert!(faults.contains(&fault), "{}: {faults:?}", s.name);
    }
}

/// Requests that fit no node: the placement family lowers them to the roomiest node's free
/// room (no history to put back).
#[tokio::test]
async fn requests_that_fit_no_node_are_lowered_to_fit() {
    let mut s = scenario("cpu-throttling").unwrap().clone();
    s.name = "requests-fit-nowhere".into();
    s.fault = vec!["set resources deployment/catalog --limits=cpu=6000m".into()];
    s.fix = vec!["set resources deployment/catalog --limits=cpu=300m".into()];
    let s = Scenario::from_yaml(&s.to_yaml().unwrap(), "test").unwrap();
    let c = without_history(&s);
    let hs = ranked(&c).await;
    assert!(
        hs.iter()
            .any(|h| h.family == Family::Placement && h.fix[0].contains("--limits=cpu=")),
        "{hs:#?}"
    );
    let (passed, faults) = mitigate(&s, c).await;
    assert!(passed, "{faults:?}");
}

/// With a history, the change the fault made is a hypothesis whose fix alone cures
/// every built-in scenario whose fault lines are all writes.
#[tokio::test]
async fn putting_back_what_changed_cures_faults_made_by_writes() {
    let (mut cured, mut writes) = (Vec::new(), 0);
    for s in rca_agents::stratus::builtin_scenarios().unwrap() {
        if s.fault.iter().any(|f| f.starts_with("sim ")) {
            continue;
        }
        writes += 1;
        let c = s.build().unwrap();
        let hs = ranked(&c).await;
        // A deleted object's recreation from its history is the same fix as the
        // reference family's, which ranks first (one hypothesis per fix).
        let from_history =
            |h: &&Hypothesis| h.family == Family::Changed || h.fault == FaultKind::MissingConfig;
        let Some(h) = hs.iter().find(from_history) else {
            panic!("{}: no change to put back: {hs:#?}", s.name);
        };
        let mut fixed = c.clone();
        for line in &h.fix {
            let cmd = Command::parse(line).unwrap();
            fixed.apply_write(&cmd).unwrap();
        }
        fixed.settle(600);
        if s.verdict(&fixed).passed() {
            cured.push(s.name.clone());
        }
    }
    assert!(writes >= 9, "{writes}");
    assert_eq!(cured.len(), writes, "{cured:?}");
}

/// The agents' own writes are never proposed for undoing.
#[tokio::test]
async fn the_agents_own_changes_are_not_reverted() {
    let s = scenario("wrong-target-port").unwrap();
    let mut c = s.healthy().unwrap();
    let cmd = Command::parse("patch service catalog -p '{\"targetPort\": 3551}'").unwrap();
    c.apply_write_by(&cmd, AGENT_USER).unwrap();
    let hs = ranked(&c).await;
    assert!(hs.iter().all(|h| h.family != Family::Changed), "{hs:#?}");
    assert!(hs.iter().any(|h| h.fault == FaultKind::WrongTargetPort));
}

/// Open vocabulary: every image of every shipped scenario words its log lines in random
/// words around the placeholders; with the change history and without it, the agents
/// diagnose and mitigate as they do with the simulator's own wording.
#[tokio::test]
async fn faults_are_diagnosed_whatever_the_wording_of_their_logs() {
    use rca_agents::stratus::sim::generate::unfamiliar_wording;
    use rca_core::seeded::SeededRng;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut rng = SeededRng::new(11);
    let mut missed: Vec<String> = Vec::new();
    let mut total = 0;
    for dir in ["builtin", "heldout", "unseen"] {
        for mut s in Scenario::from_dir(&root.join(dir)).unwrap() {
            for p in s.images.values_mut() {
                p.logs = unfamiliar_wording(&mut rng);
            }
            let reworded = Scenario::from_yaml(&s.to_yaml().unwrap(), &s.name).unwrap();
            let c = reworded.build().unwrap();
            let logs = SimEnvironment::new(c.clone());
            for d in c.deployments.keys() {
                let text = logs
                    .cluster()
                    .apply_read(&Command::parse(&format!("logs deployment/{d}")).unwrap())
                    .unwrap_or_default();
                assert!(!text.contains("listening on"), "{}: {text}", s.name);
            }
            for (label, cluster) in [
                ("history", c.clone()),
                ("no history", {
                    let mut c = c;
                    c.changes.clear();
                    c
                }),
            ] {
                total += 1;
                let (passed, faults) = mitigate(&reworded, cluster).await;
                if !passed {
                    missed.push(format!("{dir}/{} ({label}): {faults:?}", s.name));
                }
            }
        }
    }
    assert!(
        missed.is_empty(),
        "{} of {total} missed: {missed:#?}",
        missed.len()
    );
}
