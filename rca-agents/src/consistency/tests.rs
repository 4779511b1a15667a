//! Self-consistency tests with scripted models (canned turns written for each test, served by
//! seed so concurrent sampling stays deterministic) and a bag-of-words test embedder.

use std::collections::BTreeMap;

use rca_core::EmbedError;
use rca_core::ToolError;
use rca_core::llm::CompletionResponse;
use rca_core::time::{TimeRange, Timestamp};
use rca_core::tool::{ToolContext, ToolOutput, ToolRegistry, TypedTool};
use rca_llm::ScriptedModel;
use schemars::JsonSchema;
use serde::Deserialize;

use super::*;
use crate::react::{ErrorRules, ReactConfig};

/// Routes sampled requests (temperature > 0) to a scripted model per base seed (the low 32
/// bits of the request seed), and everything else to the greedy script.
struct ScriptedBySeed {
    greedy: ScriptedModel,
    by_seed: BTreeMap<u64, ScriptedModel>,
}

#[async_trait]
impl ChatModel for ScriptedBySeed {
    fn model_id(&self) -> &str {
        "scripted-by-seed"
    }
    async fn complete(&self, req: CompletionRequest) -> Result<CompletionResponse, LlmError> {
        match (req.temperature, req.seed) {
            (Some(t), Some(seed)) if t > 0.0 => match self.by_seed.get(&(seed & 0xffff_ffff)) {
                Some(m) => m.complete(req).await,
                None => Err(LlmError::permanent(format!("no script for seed {seed}"))),
            },
            _ => self.greedy.complete(req).await,
        }
    }
}

/// Bag-of-words embedding hashed into 32 dimensions.
struct Words;

#[async_trait]
impl Embedder for Words {
    fn dimension(&self) -> usize {
        32
    }
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = vec![0f32; 32];
                for w in t.split_whitespace() {
                    let h = w
                        .bytes()
                        .fold(7u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
                    v[(h % 32) as usize] += 1.0;
                }
                v
            })
            .collect())
    }
}

#[derive(Deserialize, JsonSchema)]
struct ProbeArgs {
    target: String,
}

struct Probe;

#[async_trait]
impl TypedTool for Probe {
    type Args = ProbeArgs;
    fn name(&self) -> &str {
        "probe"
    }
    fn description(&self) -> &str {
        "Checks a component."
    }
    async fn run(&self, args: ProbeArgs, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(format!("{} looks unhealthy", args.target)))
    }
}

fn probe(target: &str) -> String {
    serde_json::json!({"thought": "probe", "action": {"name": "probe", "args": {"target": target}}})
        .to_string()
}

fn finalize(root: &str, responsibility: &str) -> String {
    serde_json::json!({"thought": "done", "action": {"name": "finalize", "args": {
        "root_cause": root, "solution": format!("fix: {root}"), "responsibility": responsibility,
        "confidence": 0.5}}})
    .to_string()
}

fn incident() -> Incident {
    Incident {
        id: "tsc".into(),
        title: "errors".into(),
        description: String::new(),
        detected_at: Timestamp(10),
        window: TimeRange::new(Timestamp(0), Timestamp(10)),
        system: String::new(),
        topology: vec![],
        onset: None,
    }
}

fn model() -> ScriptedBySeed {
    let s = |name: &str, turns: Vec<String>| ScriptedModel::from_texts(name, turns);
    ScriptedBySeed {
        greedy: s(
            "scripted-tsc-greedy",
            vec![probe("db"), finalize("db disk full", "platform")],
        ),
        by_seed: BTreeMap::from([
            (
                10,
                s(
                    "scripted-tsc-seed-10",
                    vec![finalize("db disk full", "platform")],
                ),
            ),
            (
                11,
                s(
                    "scripted-tsc-seed-11",
                    vec![finalize("db disk is full", "user")],
                ),
            ),
            (
                12,
                s(
                    "scripted-tsc-seed-12",
                    vec![finalize("db volume full", "platform")],
                ),
            ),
            (
                13,
                s(
                    "scripted-tsc-seed-13",
                    vec![probe("net"), finalize("network loss", "infrastructure")],
                ),
            ),
        ]),
    }
}

fn agent(m: ScriptedBySeed) -> ReactAgent {
    let mut tools = ToolRegistry::new();
    tools.register_typed(Probe).unwrap();
    let cfg = ReactConfig {
        rules: ErrorRules {
            min_observations: 1,
            ..ErrorRules::default()
        },
        ..ReactConfig::default()
    };
    ReactAgent::new(Arc::new(m), tools, "", cfg)
}

fn tsc(stepwise: bool) -> TrajectoryConsistency {
    TrajectoryConsistency {
        sampling: SamplingConfig {
            k: 4,
            temperature: 0.7,
            base_seed: 10,
            concurrency: 3,
        },
        stepwise,
        aggregator: Arc::new(EmbeddingVote::new(Arc::new(Words))),
    }
}

#[tokio::test]
async fn tsc_samples_from_the_greedy_prefix_and_filters_by_step() {
    let out = tsc(true)
        .run(&agent(model()), &incident(), &Cancellation::new())
        .await;
    assert_eq!(out.prefix_steps, 1);
    assert_eq!(out.greedy.trajectory.steps.len(), 2);
    assert_eq!(out.samples.len(), 4);
    // Every sample shares the greedy prefix.
    for s in &out.samples {
        assert_eq!(
            s.trajectory.steps[0].action,
            out.greedy.trajectory.steps[0].action
        );
    }
    // Sample 3 finalized one step later than the greedy run: the step-wise filter drops it.
    assert_eq!(out.kept, vec![0, 1, 2]);
    let report = out.report.clone().unwrap();
    assert_eq!(report.root_cause, "db disk full");
    assert_eq!(report.responsibility, Responsibility::Platform);
    assert!(out.aggregation_error.is_none());
    assert!(out.usage.total() > out.greedy.trajectory.usage.total());

    let all = tsc(false)
        .run(&agent(model()), &incident(), &Cancellation::new())
        .await;
    assert_eq!(all.kept, vec![0, 1, 2, 3]);
}

#[tokio::test]
async fn tsc_is_deterministic_and_seeds_samples() {
    let m = model();
    let seed13 = m.by_seed[&13].clone();
    let seed10 = m.by_seed[&10].clone();
    let a = tsc(true)
        .run(&agent(m), &incident(), &Cancellation::new())
        .await;
    let b = tsc(true)
        .run(&agent(model()), &incident(), &Cancellation::new())
        .await;
    assert_eq!(a.kept, b.kept);
    assert_eq!(
        a.report.map(|r| r.root_cause),
        b.report.map(|r| r.root_cause)
    );
    let reqs = seed10.requests();
    assert_eq!(reqs[0].seed, Some(10));
    assert_eq!(reqs[0].temperature, Some(0.7));
    // Step-wise: sample 13 would call a tool where the greedy run finalized, so it is
    // discarded after its one turn, before the tool runs or a second turn is asked for.
    let reqs = seed13.requests();
    assert_eq!(reqs.len(), 1);
    let discarded = &a.samples[3];
    assert!(
        matches!(&discarded.trajectory.outcome, Outcome::Discarded(why) if why.contains("would call")),
        "{:?}",
        discarded.trajectory.outcome
    );
    assert!(
        discarded
            .trajectory
            .steps
            .last()
            .unwrap()
            .observation
            .is_none()
    );
    // Without the filter it goes on, its later turns seeded by step.
    let m = model();
    let seed13 = m.by_seed[&13].clone();
    tsc(false)
        .run(&agent(m), &incident(), &Cancellation::new())
        .await;
    assert_eq!(seed13.requests()[1].seed, Some(13 + (1 << 32)));
}

#[tokio::test]
async fn tsc_without_finalize_returns_the_greedy_run() {
    let m = ScriptedBySeed {
        greedy: ScriptedModel::from_texts("scripted-tsc-no-finalize", [probe("a"), probe("b")]),
        by_seed: BTreeMap::new(),
    };
    let out = tsc(true)
        .run(&agent(m), &incident(), &Cancellation::new())
        .await;
    assert!(out.samples.is_empty() && out.report.is_none());
    assert!(matches!(out.greedy.trajectory.outcome, Outcome::Failed(_)));
}

#[tokio::test]
async fn text_sc_votes_and_merges() {
    let m = ScriptedBySeed {
        greedy: ScriptedModel::from_texts("scripted-text-sc-unused", Vec::<String>::new()),
        by_seed: BTreeMap::from([
            (
                0,
                ScriptedModel::from_texts("scripted-text-sc-0", ["disk full on db"]),
            ),
            (
                1,
                ScriptedModel::from_texts("scripted-text-sc-1", ["network partition"]),
            ),
            (
                2,
                ScriptedModel::from_texts("scripted-text-sc-2", ["db disk full"]),
            ),
        ]),
    };
    let sampling = SamplingConfig {
        k: 3,
        temperature: 0.8,
        base_seed: 0,
        concurrency: 2,
    };
    let req = CompletionRequest::new(vec![Message::user("why?")]);
    let vote = EmbeddingVote::new(Arc::new(Words));
    let out = text_self_consistency(&m, &req, &sampling, &vote)
        .await
        .unwrap();
    assert_eq!(out.candidates.len(), 3);
    // The vote picks the sample closest to the mean of the unit embeddings: the shortest
    // phrasing of the majority answer, never the outlier.
    assert_eq!(out.chosen, Some(2));
    assert_eq!(out.answer, "db disk full");

    let merger = ScriptedModel::from_texts("scripted-llm-merge", ["db disk is full"]);
    let merge = LlmMerge::new(Arc::new(merger.clone()));
    let agg = merge.aggregate(&out.candidates).await.unwrap();
    assert_eq!(
        agg,
        Aggregated {
            text: "db disk is full".into(),
            chosen: None
        }
    );
    let prompt = &merger.requests()[0].messages[1].content;
    assert!(prompt.contains("Candidate 3:\ndb disk full"));
    assert!(matches!(
        vote.aggregate(&[]).await,
        Err(AggregateError::Empty)
    ));
}

fn configured(m: ScriptedBySeed, sc: SelfConsistency) -> ReactAgent {
    let mut tools = ToolRegistry::new();
    tools.register_typed(Probe).unwrap();
    let cfg = ReactConfig {
        rules: ErrorRules {
            min_observations: 1,
            ..ErrorRules::default()
        },
        self_consistency: sc,
        ..ReactConfig::default()
    };
    ReactAgent::new(Arc::new(m), tools, "", cfg).with_embedder(Arc::new(Words))
}

#[tokio::test]
async fn self_consistency_is_part_of_the_controller_configuration() {
    let sampling = tsc(true).sampling;
    let agent = configured(
        model(),
        SelfConsistency::Trajectory {
            sampling,
            stepwise: true,
            aggregation: Aggregation::EmbeddingVote,
        },
    );
    let run = agent.run(&incident(), &Cancellation::new()).await;
    let direct = tsc(true)
        .run(&self::agent(model()), &incident(), &Cancellation::new())
        .await;
    let summary = run.consistency.clone().unwrap();
    assert_eq!(summary.kind, "trajectory-stepwise");
    assert_eq!((summary.samples, summary.kept), (4, 3));
    assert_eq!(
        run.report.as_ref().map(|r| &r.root_cause),
        direct.report.as_ref().map(|r| &r.root_cause)
    );
    assert!(summary.extra_usage.total() > 0);
    // The configuration round-trips through serde (a host's config file).
    let json = serde_json::to_value(agent.config()).unwrap();
    assert_eq!(json["self_consistency"]["kind"], "trajectory");
    let back: ReactConfig = serde_json::from_value(json).unwrap();
    assert_eq!(&back, agent.config());
}

#[tokio::test]
async fn text_consistency_samples_the_finalizing_turn_and_can_change_the_answer() {
    // The greedy run finalizes with a minority answer; three of four samples of the same
    // finalizing prompt agree on another.
    let s = |name: &str, turns: Vec<String>| ScriptedModel::from_texts(name, turns);
    let m = ScriptedBySeed {
        greedy: s(
            "scripted-text-sc-greedy",
            vec![probe("db"), finalize("network loss", "infrastructure")],
        ),
        by_seed: BTreeMap::from([
            (
                10,
                s(
                    "scripted-text-sc-10",
                    vec![finalize("db disk full", "platform")],
                ),
            ),
            (
                11,
                s(
                    "scripted-text-sc-11",
                    vec![finalize("db disk is full", "platform")],
                ),
            ),
            (12, s("scripted-text-sc-12", vec![probe("x")])),
            (
                13,
                s(
                    "scripted-text-sc-13",
                    vec![finalize("disk full on db", "platform")],
                ),
            ),
        ]),
    };
    let agent = configured(
        m,
        SelfConsistency::Text {
            sampling: tsc(true).sampling,
            aggregation: Aggregation::EmbeddingVote,
        },
    );
    let run = agent.run(&incident(), &Cancellation::new()).await;
    let summary = run.consistency.clone().unwrap();
    assert_eq!(summary.kind, "text");
    assert_eq!(summary.kept, 3, "the probe sample is not a finalize");
    assert!(summary.changed);
    assert_eq!(summary.greedy_root_cause.as_deref(), Some("network loss"));
    let report = run.report.unwrap();
    assert!(report.root_cause.contains("disk"), "{}", report.root_cause);
    assert_eq!(report.responsibility, Responsibility::Platform);
    assert!(report.usage.total() > run.trajectory.usage.total());
}

#[test]
fn a_merge_may_write_about_twice_the_longest_candidate() {
    use crate::consistency::merge_budget;
    assert_eq!(merge_budget(&["abcd".repeat(10), "ab".into()]), 36);
    assert_eq!(merge_budget(&[]), 16);
}
