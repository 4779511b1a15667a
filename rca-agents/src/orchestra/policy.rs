//! Deterministic policies for every orchestration role: no model, same inputs give the same
//! plan, decisions and report.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use async_trait::async_trait;
use rca_core::trajectory::RootCauseCandidate;
use rca_core::{DiagnosisReport, Evidence, Incident, Modality, Responsibility};
use rca_tools::analyze::classify;
use rca_tools::analyze::rank::Ranker;

use super::roles::{
    Controller, Decision, InvestigationView, OrchestraError, PastIncident, Plan, Planner, Reasoner,
    ReplanRequest, Subgoal,
};

/// Plans the modalities in a preference order (by default metrics, traces, logs: cheap and
/// broad first, then narrower), keeping only those available; a modality whose cue words the
/// alert's title or description contains comes first (a latency alert starts with traces, an
/// error alert with logs). Without such a word, long-term memory decides what comes first: the
/// modality that first settled the most similar past incidents (see
/// [`Planner::plan_with_memory`]). A re-plan moves failing modalities to the end and focuses
/// every subgoal on the current suspects.
#[derive(Debug, Clone)]
pub struct OrderedPlanner {
    order: Vec<Modality>,
    /// Per modality, words in an alert that point at it (matched case-insensitively as
    /// substrings of the title and description).
    pub cues: Vec<(Modality, Vec<String>)>,
    /// A past incident counts toward the first modality only when its alert is at least this
    /// similar to the current one (cosine, 0.5 by default).
    pub memory_min_similarity: f32,
}

impl Default for OrderedPlanner {
    fn default() -> Self {
        let words = |w: &[&str]| w.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        OrderedPlanner {
            order: vec![Modality::Metrics, Modality::Traces, Modality::Logs],
            cues: vec![
                (
                    Modality::Traces,
                    words(&[
                        "latency",
                        "slow",
                        "timeout",
                        "timed out",
                        "response time",
                        "delay",
                    ]),
                ),
                (
                    Modality::Logs,
                    words(&["error", "exception", "fail", "crash", "panic", "5xx"]),
                ),
                (
                    Modality::Metrics,
                    words(&["cpu", "memory", "disk", "saturat", "throttl", "utili"]),
                ),
            ],
            memory_min_similarity: 0.5,
        }
    }
}

impl OrderedPlanner {
    /// A planner with this preference order; modalities not in it come after, in the order
    /// they are available. The default cues apply.
    pub fn new(order: Vec<Modality>) -> Self {
        OrderedPlanner {
            order,
            ..OrderedPlanner::default()
        }
    }

    /// The modality the alert's words point at, with the word, when one does (the first
    /// modality in `cues` order with a match).
    pub fn cued(&self, incident: &Incident) -> Option<(Modality, String)> {
        let text = format!("{} {}", incident.title, incident.description).to_lowercase();
        self.cues.iter().find_map(|(m, words)| {
            words
                .iter()
                .find(|w| !w.is_empty() && text.contains(&w.to_lowercase()))
                .map(|w| (m.clone(), w.clone()))
        })
    }

    /// The modality that first settled the past incidents at least
    /// [`memory_min_similarity`](Self::memory_min_similarity) similar (votes weighted by
    /// similarity; ties go to the earlier modality in `ordered`), with the incidents that
    /// voted for it.
    pub fn remembered(
        &self,
        past: &[PastIncident],
        ordered: &[Modality],
    ) -> Option<(Modality, Vec<String>)> {
        let mut votes: Vec<(Modality, f32, Vec<String>)> = Vec::new();
        for p in past
            .iter()
            .filter(|p| p.similarity >= self.memory_min_similarity)
        {
            let Some(first) = p.settled_by.iter().find(|m| ordered.contains(m)) else {
                continue;
            };
            match votes.iter_mut().find(|(m, _, _)| m == first) {
                Some((_, w, ids)) => {
                    *w += p.similarity;
                    ids.push(p.incident.clone());
                }
                None => votes.push((first.clone(), p.similarity, vec![p.incident.clone()])),
            }
        }
        let position = |m: &Modality| ordered.iter().position(|x| x == m).unwrap_or(usize::MAX);
        votes.sort_by(|a, b| {
            b.1.total_cmp(&a.1)
                .then_with(|| position(&a.0).cmp(&position(&b.0)))
        });
        votes.into_iter().next().map(|(m, _, ids)| (m, ids))
    }

    fn ordered_plan(
        &self,
        incident: &Incident,
        available: &[Modality],
        replan: Option<&ReplanRequest>,
        past: &[PastIncident],
    ) -> Result<Plan, OrchestraError> {
        let mut ordered: Vec<Modality> = self
            .order
            .iter()
            .filter(|m| available.contains(m))
            .cloned()
            .collect();
        for m in available {
            if !ordered.contains(m) {
                ordered.push(m.clone());
            }
        }
        if ordered.is_empty() {
            return Err(OrchestraError::Invalid(
                "no modality is available to investigate".into(),
            ));
        }
        let cued = self.cued(incident).filter(|(m, _)| ordered.contains(m));
        let remembered = match cued {
            Some(_) => None,
            None => self.remembered(past, &ordered),
        };
        if let Some(m) = cued
            .as_ref()
            .map(|(m, _)| m)
            .or(remembered.as_ref().map(|(m, _)| m))
        {
            let m = m.clone();
            ordered.sort_by_key(|x| *x != m);
        }
        let (focus, revision, rationale) = match replan {
            None => (
                Vec::new(),
                0,
                match (&cued, &remembered) {
                    (Some((m, word)), _) => format!(
                        "the alert mentions \"{word}\": {m} first, then the other modalities"
                    ),
                    (None, Some((m, ids))) => format!(
                        "long-term memory: {} similar past incident(s) ({}) were settled first \
                         by {m}: {m} first, then the other modalities",
                        ids.len(),
                        ids.join(", ")
                    ),
                    (None, None) => {
                        "broad signals first (metrics), then where they point (traces, logs)"
                            .to_string()
                    }
                },
            ),
            Some(r) => {
                // Failing modalities go last, so the others get a chance to converge first.
                ordered.sort_by_key(|m| r.failed.contains(m));
                (
                    r.suspects.iter().take(3).cloned().collect(),
                    r.previous.revision + 1,
                    format!("re-plan: {}", r.reason),
                )
            }
        };
        Ok(Plan {
            subgoals: ordered
                .into_iter()
                .map(|m| Subgoal {
                    goal: goal_for(&m, &focus),
                    modality: m,
                    focus: focus.clone(),
                })
                .collect(),
            revision,
            rationale,
        })
    }
}

fn goal_for(modality: &Modality, focus: &[String]) -> String {
    let what = match modality {
        Modality::Metrics => "find metrics that deviate from their baseline",
        Modality::Traces => {
            "find operations whose latency or errors deviate, and the callee that explains them"
        }
        Modality::Logs => "find new log templates, template frequency shifts and error bursts",
        Modality::Code => "find the code paths behind the failing operations",
        Modality::Records => "find records (events, configuration changes) near the detection time",
        Modality::Other(_) => "find anomalies",
    };
    if focus.is_empty() {
        format!("{modality}: {what} before detection")
    } else {
        format!(
            "{modality}: {what} before detection, focusing on {}",
            focus.join(", ")
        )
    }
}

#[async_trait]
impl Planner for OrderedPlanner {
    async fn plan(
        &self,
        incident: &Incident,
        available: &[Modality],
        replan: Option<&ReplanRequest>,
    ) -> Result<Plan, OrchestraError> {
        self.ordered_plan(incident, available, replan, &[])
    }

    async fn plan_with_memory(
        &self,
        incident: &Incident,
        available: &[Modality],
        replan: Option<&ReplanRequest>,
        past: &[PastIncident],
    ) -> Result<Plan, OrchestraError> {
        self.ordered_plan(incident, available, replan, past)
    }
}

/// Per component, the strongest evidence score of each modality.
pub fn modality_scores(evidence: &[Evidence]) -> BTreeMap<String, BTreeMap<Modality, f64>> {
    let mut out: BTreeMap<String, BTreeMap<Modality, f64>> = BTreeMap::new();
    for e in evidence {
        let slot = out
            .entry(e.component.clone())
            .or_default()
            .entry(e.modality.clone())
            .or_insert(f64::MIN);
        if e.score > *slot {
            *slot = e.score;
        }
    }
    out
}

/// Concludes as soon as evidence from at least `min_modalities` modalities, each with a score
/// of at least `min_score`, converges on one component; otherwise continues through the plan,
/// and escalates when the plan is done (or explorers fail) without convergence.
#[derive(Debug, Clone)]
pub struct ConvergenceController {
    /// How many modalities must agree (2 by default, as the paper requires).
    pub min_modalities: usize,
    /// The smallest evidence score that counts as a modality agreeing.
    pub min_score: f64,
    /// How evidence is combined to choose among the components several modalities agree on
    /// ([`Ranker::multimodal`] by default, the reasoner's).
    pub ranker: Ranker,
}

impl Default for ConvergenceController {
    fn default() -> Self {
        ConvergenceController {
            min_modalities: 2,
            min_score: 0.0,
            ranker: Ranker::multimodal(),
        }
    }
}

impl ConvergenceController {
    /// The converging component with its agreeing modalities: of the components with evidence
    /// from at least `min_modalities` modalities (each at least `min_score` and above its
    /// modality's calibrated `significance`), the one `ranker` ranks highest.
    pub fn converged(
        &self,
        evidence: &[Evidence],
        significance: &BTreeMap<Modality, f64>,
    ) -> Option<(String, Vec<Modality>)> {
        let per = modality_scores(evidence);
        self.ranker
            .rank_evidence(evidence)
            .into_iter()
            .find_map(|r| {
                let agreeing: Vec<Modality> = per
                    .get(&r.component)?
                    .iter()
                    .filter(|(m, s)| {
                        **s >= self.min_score
                            && significance.get(*m).is_none_or(|level| **s > *level)
                    })
                    .map(|(m, _)| m.clone())
                    .collect();
                (agreeing.len() >= self.min_modalities.max(1)).then_some((r.component, agreeing))
            })
    }
}

#[async_trait]
impl Controller for ConvergenceController {
    async fn decide(&self, view: &InvestigationView<'_>) -> Result<Decision, OrchestraError> {
        if let Some((component, modalities)) = self.converged(view.evidence, view.significance) {
            return Ok(Decision::Conclude {
                component,
                modalities,
            });
        }
        if !view.failing.is_empty() && view.done >= view.plan.subgoals.len() {
            let names: Vec<String> = view.failing.iter().map(|m| m.to_string()).collect();
            return Ok(Decision::Escalate {
                reason: format!("explorers failed: {}", names.join(", ")),
            });
        }
        if view.done < view.plan.subgoals.len() {
            return Ok(Decision::Continue);
        }
        Ok(Decision::Escalate {
            reason: format!(
                "the plan is done and no component has evidence from {} modalities",
                self.min_modalities
            ),
        })
    }
}

/// Names the fault type of a component from its evidence, when it can.
pub type FaultClassifier = Arc<dyn Fn(&str, &[&Evidence]) -> Option<String> + Send + Sync>;

/// The classifier that names fault types with `taxonomy`.
pub fn classifier_of(taxonomy: classify::FaultTaxonomy) -> FaultClassifier {
    Arc::new(move |_, evidence: &[&Evidence]| taxonomy.classify(evidence).map(str::to_string))
}

/// Ranks components by their evidence with the shared [`Ranker`] of `rca_tools::analyze`
/// (the one `rca eval nezha` scores), names fault types with the shared classifier, and writes
/// the report from the top candidate's evidence chain.
#[derive(Clone)]
pub struct EvidenceReasoner {
    /// How evidence is combined ([`Ranker::multimodal`] by default).
    pub ranker: Ranker,
    /// How many candidates to list.
    pub max_candidates: usize,
    /// Optional fault-type classifier (the default [`classify::FaultTaxonomy`] by default).
    pub classifier: Option<FaultClassifier>,
}

impl std::fmt::Debug for EvidenceReasoner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EvidenceReasoner")
            .field("ranker", &self.ranker)
            .field("max_candidates", &self.max_candidates)
            .field("classifier", &self.classifier.is_some())
            .finish()
    }
}

impl Default for EvidenceReasoner {
    fn default() -> Self {
        EvidenceReasoner {
            ranker: Ranker::multimodal(),
            max_candidates: 5,
            classifier: Some(classifier_of(classify::FaultTaxonomy::default())),
        }
    }
}

impl EvidenceReasoner {
    /// Ranked candidates (best first; ties broken by name).
    pub fn rank(&self, evidence: &[Evidence]) -> Vec<RootCauseCandidate> {
        self.ranker
            .rank_evidence(evidence)
            .into_iter()
            .map(|r| {
                let own: Vec<&Evidence> = evidence
                    .iter()
                    .filter(|e| e.component == r.component)
                    .collect();
                let time = own
                    .iter()
                    .filter(|e| e.score > 0.0)
                    .map(|e| e.observed_at)
                    .min();
                let fault_type = self.classifier.as_ref().and_then(|c| c(&r.component, &own));
                RootCauseCandidate {
                    component: r.component,
                    fault_type,
                    time,
                    score: r.score,
                }
            })
            .collect()
    }
}

#[async_trait]
impl Reasoner for EvidenceReasoner {
    async fn reason(
        &self,
        _incident: &Incident,
        evidence: &[Evidence],
        concluded: Option<&Decision>,
    ) -> Result<DiagnosisReport, OrchestraError> {
        let mut candidates = self.rank(evidence);
        // The controller's converged component leads when it named one.
        if let Some(Decision::Conclude { component, .. }) = concluded
            && let Some(pos) = candidates.iter().position(|c| &c.component == component)
        {
            let c = candidates.remove(pos);
            candidates.insert(0, c);
        }
        candidates.truncate(self.max_candidates.max(1));
        let Some(top) = candidates.first() else {
            return Ok(DiagnosisReport {
                root_cause: "no anomaly was found in the available telemetry".into(),
                solution: "widen the window or add data sources; nothing points at a component"
                    .into(),
                evidence: Vec::new(),
                responsibility: Responsibility::Platform,
                confidence: 0.0,
                candidates,
                usage: Default::default(),
                elapsed_ms: 0,
            });
        };
        let mut chain: Vec<Evidence> = evidence
            .iter()
            .filter(|e| e.component == top.component && e.score > 0.0)
            .cloned()
            .collect();
        chain.sort_by(|a, b| {
            a.observed_at
                .cmp(&b.observed_at)
                .then_with(|| b.score.total_cmp(&a.score))
        });
        let modalities: BTreeSet<String> = chain.iter().map(|e| e.modality.to_string()).collect();
        let mut strongest = chain.clone();
        strongest.sort_by(|a, b| b.score.total_cmp(&a.score));
        let findings: Vec<String> = strongest
            .iter()
            .take(3)
            .map(|e| e.finding.clone())
            .collect();
        let kind = top
            .fault_type
            .as_ref()
            .map(|f| format!(" ({f})"))
            .unwrap_or_default();
        let root_cause = format!(
            "{}{kind} is the most likely root cause: {}",
            top.component,
            findings.join("; ")
        );
        let solution = format!(
            "Check {} first: compare its recent changes (deployments, configuration) with the \
             onset at {}, and roll back or restart it if the anomaly persists; then confirm the \
             {} signals return to baseline.",
            top.component,
            top.time
                .map(|t| t.to_string())
                .unwrap_or_else(|| "the detection time".into()),
            modalities.into_iter().collect::<Vec<_>>().join(" and ")
        );
        let second = candidates.get(1).map(|c| c.score).unwrap_or(0.0);
        let margin = if top.score > 0.0 {
            (top.score - second.max(0.0)) / top.score
        } else {
            0.0
        };
        let converged = matches!(concluded, Some(Decision::Conclude { .. }));
        let confidence = (0.5 * margin + if converged { 0.5 } else { 0.2 }).clamp(0.0, 1.0);
        Ok(DiagnosisReport {
            root_cause,
            solution,
            evidence: chain,
            responsibility: Responsibility::Platform,
            confidence,
            candidates,
            usage: Default::default(),
            elapsed_ms: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rca_core::{TimeRange, Timestamp};

    fn ev(m: Modality, c: &str, s: f64, t: i64) -> Evidence {
        Evidence::new(m, Timestamp(t), c, format!("{c} anomalous")).with_score(s)
    }

    fn incident() -> Incident {
        Incident {
            id: "i".into(),
            title: "t".into(),
            description: String::new(),
            detected_at: Timestamp(100),
            window: TimeRange::new(Timestamp(0), Timestamp(100)),
            system: String::new(),
            topology: Vec::new(),
            onset: None,
        }
    }

    #[tokio::test]
    async fn the_alert_words_choose_the_first_modality() {
        let p = OrderedPlanner::default();
        let all = [Modality::Metrics, Modality::Traces, Modality::Logs];
        let mut inc = incident();
        inc.title = "p99 Latency above 2 s on checkout".into();
        let plan = p.plan(&inc, &all, None).await.unwrap();
        assert_eq!(plan.subgoals[0].modality, Modality::Traces);
        assert!(plan.rationale.contains("latency"), "{}", plan.rationale);
        inc.title = "checkout".into();
        inc.description = "HTTP 5xx ratio rising".into();
        let plan = p.plan(&inc, &all, None).await.unwrap();
        assert_eq!(plan.subgoals[0].modality, Modality::Logs);
        // No cue: the preference order.
        let plan = p.plan(&incident(), &all, None).await.unwrap();
        assert_eq!(plan.subgoals[0].modality, Modality::Metrics);
        // A cued modality that is not available changes nothing.
        inc.title = "slow checkout".into();
        inc.description = String::new();
        let plan = p
            .plan(&inc, &[Modality::Metrics, Modality::Logs], None)
            .await
            .unwrap();
        assert_eq!(plan.subgoals[0].modality, Modality::Metrics);
    }

    #[tokio::test]
    async fn planner_orders_and_replans() {
        let p = OrderedPlanner::default();
        let plan = p
            .plan(&incident(), &[Modality::Logs, Modality::Metrics], None)
            .await
            .unwrap();
        let mods: Vec<_> = plan.subgoals.iter().map(|s| s.modality.clone()).collect();
        assert_eq!(mods, vec![Modality::Metrics, Modality::Logs]);
        let re = ReplanRequest {
            previous: plan,
            reason: "metrics explorer failed".into(),
            failed: vec![Modality::Metrics],
            suspects: vec!["db".into()],
        };
        let plan2 = p
            .plan(&incident(), &[Modality::Logs, Modality::Metrics], Some(&re))
            .await
            .unwrap();
        assert_eq!(plan2.revision, 1);
        assert_eq!(plan2.subgoals[0].modality, Modality::Logs);
        assert!(plan2.subgoals[0].goal.contains("db"));
        assert!(p.plan(&incident(), &[], None).await.is_err());
    }

    #[test]
    fn convergence_needs_two_modalities() {
        let c = ConvergenceController::default();
        let one = vec![
            ev(Modality::Metrics, "a", 5.0, 1),
            ev(Modality::Metrics, "a", 6.0, 2),
        ];
        assert_eq!(c.converged(&one, &BTreeMap::new()), None);
        let two = vec![
            ev(Modality::Metrics, "a", 5.0, 1),
            ev(Modality::Logs, "a", 1.0, 2),
            ev(Modality::Metrics, "b", 9.0, 1),
        ];
        assert_eq!(
            c.converged(&two, &BTreeMap::new()),
            Some(("a".into(), vec![Modality::Metrics, Modality::Logs]))
        );
    }

    #[tokio::test]
    async fn reasoner_ranks_by_the_strongest_weighted_evidence_and_writes_chain() {
        let r = EvidenceReasoner::default();
        let evidence = vec![
            ev(Modality::Logs, "a", 6.0, 20),
            ev(Modality::Traces, "a", 2.0, 10),
            ev(Modality::Metrics, "b", 6.5, 5),
        ];
        let ranked = r.rank(&evidence);
        // Logs weigh 1 and metrics 1/2: ln(7) > ln(7.5) / 2.
        assert_eq!(ranked[0].component, "a");
        assert_eq!(ranked[0].time, Some(Timestamp(10)));
        let report = r.reason(&incident(), &evidence, None).await.unwrap();
        assert!(report.root_cause.starts_with("a "));
        assert_eq!(report.evidence.len(), 2);
        assert!(report.evidence[0].observed_at <= report.evidence[1].observed_at);
        assert!(report.confidence > 0.0 && report.confidence <= 1.0);
        let empty = r.reason(&incident(), &[], None).await.unwrap();
        assert_eq!(empty.confidence, 0.0);
    }

    fn past(id: &str, settled: Vec<Modality>, similarity: f32) -> PastIncident {
        PastIncident {
            incident: id.into(),
            alert: "checkout alert".into(),
            root_cause: Some("db".into()),
            settled_by: settled,
            similarity,
        }
    }

    #[tokio::test]
    async fn memory_leads_the_plan_unless_the_alert_names_a_modality() {
        let planner = OrderedPlanner::default();
        let available = [Modality::Metrics, Modality::Traces, Modality::Logs];
        let quiet = Incident {
            title: "checkout alert".into(),
            ..incident()
        };
        let memory = [
            past("a", vec![Modality::Logs, Modality::Traces], 0.9),
            past("b", vec![Modality::Traces], 0.8),
            past("c", vec![Modality::Logs], 0.7),
            // Too dissimilar to count.
            past("d", vec![Modality::Traces], 0.2),
            past("e", vec![Modality::Traces], 0.2),
        ];
        let plan = planner
            .plan_with_memory(&quiet, &available, None, &memory)
            .await
            .unwrap();
        assert_eq!(plan.subgoals[0].modality, Modality::Logs);
        assert!(plan.rationale.contains("(a, c)"), "{}", plan.rationale);
        // Without memory, the preference order.
        let plan = planner.plan(&quiet, &available, None).await.unwrap();
        assert_eq!(plan.subgoals[0].modality, Modality::Metrics);
        // The alert's own words win over memory.
        let slow = Incident {
            title: "checkout latency alert".into(),
            ..incident()
        };
        let plan = planner
            .plan_with_memory(&slow, &available, None, &memory)
            .await
            .unwrap();
        assert_eq!(plan.subgoals[0].modality, Modality::Traces);
        // A remembered modality that is not available here is passed over.
        let plan = planner
            .plan_with_memory(
                &quiet,
                &[Modality::Metrics, Modality::Traces],
                None,
                &memory,
            )
            .await
            .unwrap();
        assert_eq!(plan.subgoals[0].modality, Modality::Traces);
    }
}
