//! Property and concurrency tests of TNR (the paper's Lemma 3.1, faithful undo, writer
//! exclusivity) and the agents driven by scripted models.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use proptest::prelude::*;
use rca_llm::ScriptedModel;
use tokio::sync::RwLock;

use super::agents::{ModelDetector, ModelDiagnoser, ModelMitigator};
use super::command::ResourceRef;
use super::confinement::{ReadCommand, WriteCommand, confine_write};
use super::environment::{Environment, ResourceSnapshot, ServiceGraph};
use super::error::EnvError;
use super::machine::Stratus;
use super::severity::{HealthReport, SeverityWeights};
use super::sim::SimEnvironment;
use super::sim::model::Cluster;
use super::sim::scenarios::{Scenario, builtin};

fn all() -> &'static [Scenario] {
    builtin().unwrap()
}
use super::transaction::{Outcome, Tnr, TnrConfig, UndoAgent, UndoEntry};

/// A command drawn from three random bytes, naming resources that exist in `c`.
fn command_from(c: &Cluster, kind: u8, a: u8, b: u8) -> String {
    let deps: Vec<&String> = c.deployments.keys().collect();
    let nodes: Vec<&String> = c.nodes.keys().collect();
    let svcs: Vec<&String> = c.services.keys().collect();
    let d = deps[a as usize % deps.len()];
    let n = nodes[a as usize % nodes.len()];
    let s = svcs[a as usize % svcs.len()];
    let pods: Vec<&String> = c
        .deployments
        .values()
        .flat_map(|d| d.pods.iter().map(|p| &p.name))
        .collect();
    match kind % 12 {
        0 => format!("scale deployment {d} --replicas={}", b % 5),
        1 => format!("set image deployment/{d} {d}=shop/none:{b}"),
        2 => format!("set env deployment/{d} K{}=v{b}", b % 3),
        3 => format!(
            "set resources deployment/{d} --limits=memory={}Mi",
            32 + u32::from(b) * 4
        ),
        4 => format!(
            "patch service {s} -p '{{\"targetPort\": {}}}'",
            3000 + u32::from(b)
        ),
        5 => match pods.get(b as usize % pods.len().max(1)) {
            Some(p) => format!("delete pod {p}"),
            None => format!("cordon {n}"),
        },
        6 => format!("cordon {n}"),
        7 => format!("uncordon {n}"),
        8 => format!("drain {n}"),
        9 => format!("rollout undo deployment/{d}"),
        10 => format!(
            "apply -f '{{\"kind\": \"ConfigMap\", \"name\": \"cm-{}\", \"data\": {{\"k\": \"{b}\"}}}}'",
            b % 3
        ),
        _ => format!(
            "patch service {s} -p '{{\"selector\": {{\"app\": \"x{}\"}}}}'",
            b % 2
        ),
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    /// Lemma 3.1: no visible state has mu above mu(s0), whatever the transactions do.
    #[test]
    fn visible_mu_never_exceeds_mu0(
        scenario in 0..13usize,
        txns in prop::collection::vec(prop::collection::vec((any::<u8>(), any::<u8>(), any::<u8>()), 1..4), 1..6),
    ) {
        rt().block_on(async {
            let env = Arc::new(RwLock::new(SimEnvironment::new(all()[scenario].build().unwrap())));
            let tnr = Tnr::new(Arc::clone(&env), TnrConfig::default()).await.unwrap();
            let w = SeverityWeights::default();
            let mu0 = w.mu(&env.read().await.cluster().health());
            for t in txns {
                let cmds: Vec<String> = {
                    let g = env.read().await;
                    t.iter().map(|(k, a, b)| command_from(g.cluster(), *k, *a, *b)).collect()
                };
                let rec = tnr.run_text(&cmds).await.unwrap();
                let visible = w.mu(&env.read().await.cluster().health());
                prop_assert!(visible <= mu0, "visible {visible} > mu0 {mu0} after {cmds:?} ({:?})", rec.outcome);
                prop_assert!(visible.is_finite());
            }
            for v in tnr.paths().visible {
                prop_assert!(v.is_some_and(|v| v <= mu0));
            }
            Ok(())
        })?;
    }

    /// Faithful undo: restoring the undo stack gives back exactly the prior state.
    #[test]
    fn undo_restores_the_exact_prior_state(
        scenario in 0..13usize,
        cmds in prop::collection::vec((any::<u8>(), any::<u8>(), any::<u8>()), 1..8),
    ) {
        rt().block_on(async {
            let mut env = SimEnvironment::new(all()[scenario].build().unwrap());
            let before = env.clone();
            let hash = env.state_hash().await.unwrap();
            let mut stack = Vec::new();
            for (k, a, b) in cmds {
                let text = command_from(env.cluster(), k, a, b);
                let cmd = confine_write(&text).unwrap();
                for r in env.footprint(&cmd).await.unwrap() {
                    stack.push(UndoEntry { command: text.clone(), snapshot: env.snapshot(&r).await.unwrap() });
                }
                let _ = env.write(&cmd).await;
            }
            UndoAgent.undo(&mut env, stack).await.unwrap();
            prop_assert_eq!(env.state_hash().await.unwrap(), hash);
            // The specs are back; pods are the controller's (a deleted pod is replaced, not
            // resurrected), and what a command destroyed stays destroyed.
            let specs = |c: &Cluster| c.deployments.values().map(|d| d.spec()).collect::<Vec<_>>();
            prop_assert_eq!(specs(env.cluster()), specs(before.cluster()));
            prop_assert_eq!(&env.cluster().services, &before.cluster().services);
            prop_assert_eq!(&env.cluster().config_maps, &before.cluster().config_maps);
            Ok(())
        })?;
    }
}

/// Wraps the simulator and counts writers inside `write`.
struct Probe {
    inner: SimEnvironment,
    active: Arc<AtomicUsize>,
    max: Arc<AtomicUsize>,
}

#[async_trait]
impl Environment for Probe {
    async fn observe(&self) -> Result<HealthReport, EnvError> {
        self.inner.observe().await
    }
    async fn read(&self, c: &ReadCommand) -> Result<String, EnvError> {
        self.inner.read(c).await
    }
    async fn write(&mut self, c: &WriteCommand) -> Result<String, EnvError> {
        let now = self.active.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(now, Ordering::SeqCst);
        tokio::task::yield_now().await;
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        let out = self.inner.write(c).await;
        self.active.fetch_sub(1, Ordering::SeqCst);
        out
    }
    async fn footprint(&self, c: &WriteCommand) -> Result<Vec<ResourceRef>, EnvError> {
        self.inner.footprint(c).await
    }
    async fn snapshot(&self, r: &ResourceRef) -> Result<ResourceSnapshot, EnvError> {
        self.inner.snapshot(r).await
    }
    async fn restore(&mut self, s: &ResourceSnapshot) -> Result<(), EnvError> {
        self.inner.restore(s).await
    }
    async fn state_hash(&self) -> Result<u64, EnvError> {
        self.inner.state_hash().await
    }
    async fn service_graph(&self) -> Result<ServiceGraph, EnvError> {
        self.inner.service_graph().await
    }
    async fn settle(&mut self, max_wait_s: u64) -> Result<(), EnvError> {
        self.inner.settle(max_wait_s).await
    }
    async fn irreversible(&self, c: &WriteCommand) -> Result<Option<String>, EnvError> {
        self.inner.irreversible(c).await
    }
    async fn irreversible_plan(
        &self,
        c: &[WriteCommand],
    ) -> Result<Vec<(String, String)>, EnvError> {
        self.inner.irreversible_plan(c).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writers_never_overlap_under_concurrent_agents() {
    let active = Arc::new(AtomicUsize::new(0));
    let max = Arc::new(AtomicUsize::new(0));
    let s = &all()[0];
    let env = Arc::new(RwLock::new(Probe {
        inner: SimEnvironment::new(s.build().unwrap()),
        active: Arc::clone(&active),
        max: Arc::clone(&max),
    }));
    let tnr = Arc::new(
        Tnr::new(Arc::clone(&env), TnrConfig::default())
            .await
            .unwrap(),
    );
    let mu0 = tnr.paths().visible[0].unwrap();
    let mut tasks = Vec::new();
    for i in 0..8u8 {
        let tnr = Arc::clone(&tnr);
        let env = Arc::clone(&env);
        tasks.push(tokio::spawn(async move {
            for j in 0..6u8 {
                let cmds: Vec<String> = {
                    let g = env.read().await;
                    (0..3)
                        .map(|k| command_from(g.inner.cluster(), i.wrapping_mul(7) + j + k, j, i))
                        .collect()
                };
                tnr.run_text(&cmds).await.unwrap();
            }
        }));
    }
    // Concurrent read-only observers only ever see visible states.
    for _ in 0..4 {
        let reader = tnr.reader();
        tasks.push(tokio::spawn(async move {
            use super::environment::ReadAccess;
            for _ in 0..30 {
                let h = reader.observe().await.unwrap();
                assert!(SeverityWeights::default().mu(&h) <= mu0);
                tokio::task::yield_now().await;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(max.load(Ordering::SeqCst), 1);
    assert_eq!(tnr.max_concurrent_writers(), 1);
    assert!(tnr.paths().visible.len() > 40);
}

#[tokio::test]
async fn k_bounds_transactions_and_reads_are_refused_inside_them() {
    let env = Arc::new(RwLock::new(SimEnvironment::new(all()[2].build().unwrap())));
    let tnr = Tnr::new(
        env,
        TnrConfig {
            max_commands: 2,
            ..TnrConfig::default()
        },
    )
    .await
    .unwrap();
    let three = vec![
        "cordon node-1".to_string(),
        "uncordon node-1".into(),
        "cordon node-1".into(),
    ];
    assert!(matches!(
        tnr.run_text(&three).await,
        Err(super::StratusError::TooManyCommands { count: 3, limit: 2 })
    ));
    assert!(matches!(
        tnr.run_text(&["get pods".to_string()]).await,
        Err(super::StratusError::Refused { .. })
    ));
    assert!(matches!(
        tnr.run_text(&["delete deployment cart".to_string()]).await,
        Err(super::StratusError::Refused { .. })
    ));
}

#[tokio::test]
async fn dry_run_rejects_crashing_transactions_without_touching_state() {
    let s = super::sim::scenarios::scenario("scaled-to-zero").unwrap();
    let env = Arc::new(RwLock::new(SimEnvironment::new(s.build().unwrap())));
    let before = env.read().await.cluster().state_hash();
    let tnr = Tnr::new(
        Arc::clone(&env),
        TnrConfig {
            dry_run: true,
            ..TnrConfig::default()
        },
    )
    .await
    .unwrap();
    let rec = tnr.run_text(&["drain node-3".to_string()]).await.unwrap();
    assert!(matches!(
        rec.outcome,
        Outcome::RejectedByDryRun { predicted_mu: None }
    ));
    assert!(rec.hidden_mu.is_empty());
    assert_eq!(env.read().await.cluster().state_hash(), before);
}

struct Approve(bool, AtomicUsize);

#[async_trait]
impl super::transaction::Approver for Approve {
    async fn approve(&self, p: &super::transaction::Proposal) -> bool {
        self.1.fetch_add(1, Ordering::SeqCst);
        assert!(!p.commands.is_empty());
        self.0
    }
}

#[tokio::test]
async fn approver_can_decline() {
    let s = super::sim::scenarios::scenario("scaled-to-zero").unwrap();
    let env = Arc::new(RwLock::new(SimEnvironment::new(s.build().unwrap())));
    let before = env.read().await.cluster().state_hash();
    let no = Arc::new(Approve(false, AtomicUsize::new(0)));
    let tnr = Tnr::new(Arc::clone(&env), TnrConfig::default())
        .await
        .unwrap()
        .with_approver(no.clone());
    let rec = tnr
        .run_text(&["scale deployment cart --replicas=2".to_string()])
        .await
        .unwrap();
    assert_eq!(rec.outcome, Outcome::Declined);
    assert_eq!(no.1.load(Ordering::SeqCst), 1);
    assert_eq!(env.read().await.cluster().state_hash(), before);
    let yes = Arc::new(Approve(true, AtomicUsize::new(0)));
    let tnr = Tnr::new(Arc::clone(&env), TnrConfig::default())
        .await
        .unwrap()
        .with_approver(yes);
    let rec = tnr
        .run_text(&["scale deployment cart --replicas=2".to_string()])
        .await
        .unwrap();
    assert_eq!(rec.outcome, Outcome::Committed);
}

#[tokio::test]
async fn harmful_transaction_aborts_with_hidden_path_and_restores() {
    let s = super::sim::scenarios::scenario("wrong-target-port").unwrap();
    let env = Arc::new(RwLock::new(SimEnvironment::new(s.build().unwrap())));
    let before = env.read().await.cluster().state_hash();
    let tnr = Tnr::new(Arc::clone(&env), TnrConfig::default())
        .await
        .unwrap();
    let rec = tnr
        .run_text(&[
            "scale deployment frontend --replicas=0".to_string(),
            "cordon node-1".into(),
        ])
        .await
        .unwrap();
    assert!(
        matches!(rec.outcome, Outcome::Aborted { .. }),
        "{:?}",
        rec.outcome
    );
    // Two commands, then the converged state.
    assert_eq!(rec.hidden_mu.len(), 3);
    assert!(rec.hidden_mu[0].unwrap() > rec.mu_pre.unwrap());
    assert_eq!(rec.visible_mu, rec.mu_pre);
    assert_eq!(env.read().await.cluster().state_hash(), before);
    let paths = tnr.paths();
    assert_eq!(paths.visible.len(), 2);
    assert!(paths.hidden.len() > paths.visible.len());
}

#[tokio::test]
async fn scripted_model_agents_retry_after_abort_with_the_verdict() {
    let s = super::sim::scenarios::scenario("scaled-to-zero").unwrap();
    let env = Arc::new(RwLock::new(SimEnvironment::new(s.build().unwrap())));
    let detector = ScriptedModel::from_texts(
        "scripted-retry-after-abort-detector",
        [r#"{"incident": true, "summary": "cart has no endpoints"}"#],
    );
    let diagnoser = ScriptedModel::from_texts(
        "scripted-retry-after-abort-diagnoser",
        [
            // A write from a read-only agent: confinement refuses it and the model sees why.
            r#"{"command": "scale deployment cart --replicas=2"}"#,
            r#"{"command": "get deployment cart -o json"}"#,
            r#"{"diagnosis": {"component": "deployment/cart", "fault": "scaled_to_zero", "reason": "0 replicas"}}"#,
            r#"{"diagnosis": {"component": "deployment/cart", "fault": "scaled_to_zero", "reason": "still 0 replicas"}}"#,
        ],
    );
    let mitigator = ScriptedModel::from_texts(
        "scripted-retry-after-abort-mitigator",
        [
            r#"{"commands": ["scale deployment frontend --replicas=0"], "rationale": "wrong on purpose"}"#,
            "Here you go: {\"commands\": [\"scale deployment cart --replicas=2\"], \"rationale\": \"restore replicas\"}",
        ],
    );
    let tnr = Tnr::new(Arc::clone(&env), TnrConfig::default())
        .await
        .unwrap();
    let machine = Stratus::new(
        Arc::new(ModelDetector::new(Arc::new(detector))),
        Arc::new(ModelDiagnoser::new(Arc::new(diagnoser.clone()), 4)),
        Arc::new(ModelMitigator::new(Arc::new(mitigator.clone()))),
    );
    let report = machine.run(&tnr).await.unwrap();
    assert!(report.resolved);
    assert_eq!(report.transactions.len(), 2);
    assert!(matches!(
        report.transactions[0].outcome,
        Outcome::Aborted { .. }
    ));
    assert!(report.transactions[1].committed());
    // The refused write reached the model as an error, and changed nothing.
    let reqs = diagnoser.requests();
    assert!(reqs[1].messages.last().unwrap().content.contains("refused"));
    // After the abort, the mitigator was told the verdict.
    let second = &mitigator.requests()[1];
    let prompt = &second.messages.last().unwrap().content;
    assert!(
        prompt.contains("aborted") && prompt.contains("alerts_cleared"),
        "{prompt}"
    );
    assert_eq!(mitigator.remaining(), 0);
}

#[tokio::test]
async fn malformed_model_output_is_an_error_not_a_panic() {
    let env = Arc::new(RwLock::new(SimEnvironment::new(all()[0].build().unwrap())));
    let tnr = Tnr::new(env, TnrConfig::default()).await.unwrap();
    let machine = Stratus::new(
        Arc::new(ModelDetector::new(Arc::new(ScriptedModel::from_texts(
            "scripted-malformed-detector",
            ["I think things are fine"],
        )))),
        Arc::new(super::agents::PolicyDiagnoser),
        Arc::new(super::agents::PolicyMitigator),
    );
    let err = machine.run(&tnr).await.unwrap_err();
    assert!(matches!(
        err,
        super::StratusError::MalformedModelOutput { .. }
    ));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, .. ProptestConfig::default() })]

    /// Several STRATUS state machines and a random writer share one environment: writers never
    /// overlap, and no visible state exceeds mu(s0).
    #[test]
    fn writers_never_overlap_when_machines_run_concurrently(
        scenario in 0..13usize,
        extra in prop::collection::vec((any::<u8>(), any::<u8>(), any::<u8>()), 1..6),
    ) {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let active = Arc::new(AtomicUsize::new(0));
            let max = Arc::new(AtomicUsize::new(0));
            let env = Arc::new(RwLock::new(Probe {
                inner: SimEnvironment::new(all()[scenario].build().unwrap()),
                active: Arc::clone(&active),
                max: Arc::clone(&max),
            }));
            let tnr = Arc::new(Tnr::new(Arc::clone(&env), TnrConfig::default()).await.unwrap());
            let mu0 = tnr.paths().visible[0].unwrap();
            let mut tasks = Vec::new();
            for _ in 0..3 {
                let tnr = Arc::clone(&tnr);
                tasks.push(tokio::spawn(async move {
                    Stratus::default().with_max_attempts(4).run(&*tnr).await.map(|_| ())
                }));
            }
            let writer = {
                let tnr = Arc::clone(&tnr);
                let env = Arc::clone(&env);
                tokio::spawn(async move {
                    for (k, a, b) in extra {
                        let cmd = command_from(env.read().await.inner.cluster(), k, a, b);
                        tnr.run_text(&[cmd]).await?;
                    }
                    Ok(())
                })
            };
            tasks.push(writer);
            for t in tasks {
                t.await.unwrap().unwrap();
            }
            prop_assert_eq!(max.load(Ordering::SeqCst), 1);
            prop_assert_eq!(tnr.max_concurrent_writers(), 1);
            for v in tnr.paths().visible {
                prop_assert!(v.is_some_and(|v| v <= mu0));
            }
            Ok(())
        })?;
    }
}

fn scenario_env(name: &str) -> Arc<RwLock<SimEnvironment>> {
    let s = super::sim::scenarios::scenario(name).unwrap();
    Arc::new(RwLock::new(SimEnvironment::new(s.build().unwrap())))
}

#[tokio::test]
async fn severity_rises_inside_a_transaction_that_commits_because_its_end_is_better() {
    // Raising the CPU limit replaces every frontend pod: while they start, the service has no
    // endpoints and severity rises; once they are ready it is below where it started.
    let env = scenario_env("cpu-throttling");
    let tnr = Tnr::new(Arc::clone(&env), TnrConfig::default())
        .await
        .unwrap();
    let rec = tnr
        .run_text(&["set resources deployment/frontend --limits=cpu=600m".to_string()])
        .await
        .unwrap();
    let pre = rec.mu_pre.unwrap();
    assert!(rec.hidden_mu[0].unwrap() > pre, "{:?}", rec.hidden_mu);
    assert!(rec.committed(), "{:?}", rec.outcome);
    assert!(rec.visible_mu.unwrap() < pre);
    assert_eq!(tnr.paths().visible.len(), 2);
}

#[tokio::test]
async fn a_transaction_whose_converged_end_is_worse_aborts() {
    // A memory limit below what the process needs: the pods restart (severity rises) and,
    // converged, crash-loop on OOM. Undone.
    let env = scenario_env("cpu-throttling");
    let before = env.read().await.cluster().state_hash();
    let tnr = Tnr::new(Arc::clone(&env), TnrConfig::default())
        .await
        .unwrap();
    let rec = tnr
        .run_text(&["set resources deployment/frontend --limits=memory=64Mi".to_string()])
        .await
        .unwrap();
    assert!(
        matches!(
            rec.outcome,
            Outcome::Aborted {
                reason: super::transaction::AbortReason::Regressed { .. }
            }
        ),
        "{:?}",
        rec.outcome
    );
    assert_eq!(rec.visible_mu, rec.mu_pre);
    assert_eq!(env.read().await.cluster().state_hash(), before);
}

#[test]
fn reversibility_is_declared_per_command() {
    use super::command::{Command, Reversibility};
    let r = |t: &str| Command::parse(t).unwrap().reversibility();
    assert_eq!(r("delete pod db-1"), Reversibility::DeletesPods);
    assert_eq!(r("drain node-1"), Reversibility::DeletesPods);
    assert_eq!(
        r("scale deployment db --replicas=0"),
        Reversibility::ReplacesPods
    );
    assert_eq!(
        r("set resources deployment/db --limits=memory=1Gi"),
        Reversibility::ReplacesPods
    );
    assert_eq!(r("cordon node-1"), Reversibility::Reversible);
    assert_eq!(
        r(r#"patch service db -p '{"targetPort": 1}'"#),
        Reversibility::Reversible
    );
}

#[tokio::test]
async fn irreversible_commands_are_refused_without_an_approver_and_crash_when_approved() {
    let env = scenario_env("stuck-pod");
    let db_pod = env.read().await.cluster().deployments["db"].pods[0]
        .name
        .clone();
    // The simulator says exactly which commands are irreversible: deleting the database's
    // pod is; deleting a stateless pod is not.
    let cmd = confine_write(&format!("delete pod {db_pod}")).unwrap();
    let why = env.read().await.irreversible(&cmd).await.unwrap();
    assert!(why.unwrap().contains("db"));
    let web = env.read().await.cluster().deployments["frontend"].pods[0]
        .name
        .clone();
    let ok = confine_write(&format!("delete pod {web}")).unwrap();
    assert_eq!(env.read().await.irreversible(&ok).await.unwrap(), None);

    let tnr = Tnr::new(Arc::clone(&env), TnrConfig::default())
        .await
        .unwrap();
    let rec = tnr
        .run_text(&[format!("delete pod {db_pod}")])
        .await
        .unwrap();
    assert!(
        matches!(
            rec.outcome,
            Outcome::Aborted {
                reason: super::transaction::AbortReason::Irreversible { .. }
            }
        ),
        "{:?}",
        rec.outcome
    );
    assert!(rec.outputs.is_empty(), "it never ran");
    assert!(!env.read().await.cluster().health().crashed);

    // An approver who says yes: it runs, the data is gone, and TNR counts a crash.
    let yes = Arc::new(Approve(true, AtomicUsize::new(0)));
    let tnr = Tnr::new(Arc::clone(&env), TnrConfig::default())
        .await
        .unwrap()
        .with_approver(yes.clone());
    let rec = tnr
        .run_text(&[format!("delete pod {db_pod}")])
        .await
        .unwrap();
    assert_eq!(rec.irreversible_executed.len(), 1);
    assert_eq!(rec.visible_mu, None, "counted as a crash");
    assert_eq!(tnr.paths().visible.last(), Some(&None));
    assert!(
        env.read().await.cluster().health().crashed,
        "undo cannot bring data back"
    );
    assert_eq!(
        yes.1.load(Ordering::SeqCst),
        2,
        "asked for the plan and for the command"
    );
}

#[tokio::test]
async fn without_undo_a_harmful_command_stays() {
    let env = scenario_env("wrong-target-port");
    let tnr = Tnr::new(
        Arc::clone(&env),
        TnrConfig {
            undo: false,
            ..TnrConfig::default()
        },
    )
    .await
    .unwrap();
    let mu0 = tnr.paths().visible[0].unwrap();
    let rec = tnr
        .run_text(&["scale deployment frontend --replicas=0".to_string()])
        .await
        .unwrap();
    assert!(rec.committed());
    assert!(rec.visible_mu.unwrap() > mu0);
}

#[tokio::test]
async fn observations_tell_no_answers() {
    // What agents can read names symptoms, never the simulator's knowledge: no memory need,
    // no CPU need, no revocation status.
    for name in [
        "oom-crash-loop",
        "cpu-throttling",
        "revoked-secret",
        "missing-config-map",
    ] {
        let env = scenario_env(name);
        let reader = super::environment::ReadHandle::new(Arc::clone(&env));
        use super::environment::ReadAccess;
        let mut seen = String::new();
        for cmd in [
            "get pods -o json",
            "get deployments -o json",
            "get services -o json",
            "get secrets -o json",
            "get nodes -o json",
        ] {
            seen.push_str(&reader.run_text(cmd).await.unwrap());
        }
        let deployments: Vec<String> = env
            .read()
            .await
            .cluster()
            .deployments
            .keys()
            .cloned()
            .collect();
        for d in deployments {
            seen.push_str(
                &reader
                    .run_text(&format!("describe deployment {d}"))
                    .await
                    .unwrap(),
            );
            if let Ok(l) = reader.run_text(&format!("logs deployment/{d}")).await {
                seen.push_str(&l);
            }
        }
        seen.push_str(&serde_json::to_string(&reader.observe().await.unwrap()).unwrap());
        let c = env.read().await.cluster().clone();
        for (image, p) in &c.registry {
            let _ = image;
            assert!(
                !seen.contains(&format!("{}Mi", p.memory_mi)),
                "{name}: memory need {} shown",
                p.memory_mi
            );
            assert!(!seen.contains(&format!("needs {}m", p.cpu_milli)), "{name}");
        }
        assert!(!seen.contains("revoked"), "{name}");
        assert!(
            !seen.contains("rps_per_pod") && !seen.contains("capacity_rps"),
            "{name}"
        );
    }
}

#[tokio::test]
async fn a_failed_diagnosis_costs_the_attempt_not_the_run() {
    let env = scenario_env("scaled-to-zero");
    let diagnoser = ScriptedModel::from_texts("scripted-unshaped-diagnoser", ["no idea, sorry"]);
    let mitigator = ScriptedModel::from_texts(
        "scripted-blind-mitigator",
        [
            r#"{"commands": ["scale deployment cart --replicas=2"], "rationale": "cart has no endpoints"}"#,
        ],
    );
    let tnr = Tnr::new(Arc::clone(&env), TnrConfig::default())
        .await
        .unwrap();
    let machine = Stratus::new(
        Arc::new(super::agents::PolicyDetector),
        Arc::new(ModelDiagnoser::new(Arc::new(diagnoser), 0)),
        Arc::new(ModelMitigator::new(Arc::new(mitigator))),
    );
    let report = machine.run(&tnr).await.unwrap();
    assert_eq!(report.diagnoses[0].fault, super::agents::FaultKind::Unknown);
    assert!(report.diagnoses[0].reason.starts_with("no diagnosis"));
    assert!(report.resolved);
}

/// A model's bare diagnosis (a component and a fault, no hypotheses) is mitigated by the
/// deterministic policy from the hypotheses the state supports, those about the named
/// component first; here with no change history to put back.
#[tokio::test]
async fn a_models_bare_diagnosis_is_mitigated_from_the_state() {
    let s = super::sim::scenarios::scenario("wrong-target-port").unwrap();
    let mut c = s.build().unwrap();
    c.changes.clear();
    let env = Arc::new(RwLock::new(SimEnvironment::new(c)));
    let diagnoser = ScriptedModel::from_texts(
        "scripted-bare-diagnosis",
        [
            r#"{"diagnosis": {"component": "service/catalog", "fault": "wrong_target_port", "reason": "503s"}}"#,
        ],
    );
    let tnr = Tnr::new(Arc::clone(&env), TnrConfig::default())
        .await
        .unwrap();
    let machine = Stratus::new(
        Arc::new(super::agents::PolicyDetector),
        Arc::new(ModelDiagnoser::new(Arc::new(diagnoser), 0)),
        Arc::new(super::agents::PolicyMitigator),
    )
    .with_max_attempts(1);
    let report = machine.run(&tnr).await.unwrap();
    assert!(report.resolved, "{:#?}", report.transactions);
    assert_eq!(
        report.transactions[0].commands,
        vec![r#"patch service catalog -p '{"targetPort":3550}'"#.to_string()]
    );
}
