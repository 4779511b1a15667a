//! Picking the guide. An alert names a symptom at an entry point, not the component at fault
//! nor the kind of incident: a triage guide runs first (its steps find the component and take
//! its first readings, its `Fact:` lines keep what they found), then the guide whose triggers
//! match the alert and those observations (and none of whose `Unless:` lines do) runs with
//! the facts the triage found.

use std::collections::BTreeMap;

use rca_core::Incident;
use regex::Regex;
use serde::{Deserialize, Serialize};

use super::FlashError;
use super::agent::{FlashAgent, FlashRun};
use super::tsg::{DiagnosisPlan, parse_tsg};

/// One guide of a catalogue.
#[derive(Debug, Clone)]
pub struct CatalogGuide {
    /// Its name (the incident type it is for).
    pub name: String,
    /// The guide's Markdown.
    pub markdown: String,
    /// The guide, parsed.
    pub plan: DiagnosisPlan,
}

/// The guides an agent can choose from.
#[derive(Debug, Clone, Default)]
pub struct GuideCatalog {
    guides: Vec<CatalogGuide>,
}

/// A guide whose triggers matched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuideMatch {
    /// The guide's name.
    pub guide: String,
    /// Its triggers that matched.
    pub triggers: Vec<String>,
}

fn matches_any(pattern: &str, texts: &[String]) -> bool {
    Regex::new(&format!("(?i){pattern}")).is_ok_and(|re| texts.iter().any(|t| re.is_match(t)))
}

impl GuideCatalog {
    /// A catalogue of `(name, markdown)` guides. An error names the guide that cannot be read.
    pub fn new(
        guides: impl IntoIterator<Item = (String, String)>,
    ) -> Result<GuideCatalog, FlashError> {
        let guides = guides
            .into_iter()
            .map(|(name, markdown)| {
                let plan = parse_tsg(&markdown)
                    .map_err(|e| FlashError::Guide(format!("guide `{name}`: {e}")))?;
                Ok(CatalogGuide {
                    name,
                    markdown,
                    plan,
                })
            })
            .collect::<Result<Vec<_>, FlashError>>()?;
        Ok(GuideCatalog { guides })
    }

    /// The guides, in the catalogue's order.
    pub fn guides(&self) -> &[CatalogGuide] {
        &self.guides
    }

    /// The guide named `name`.
    pub fn get(&self, name: &str) -> Option<&CatalogGuide> {
        self.guides.iter().find(|g| g.name == name)
    }

    /// The guides whose triggers match any of `texts` and whose `Unless:` lines match none,
    /// the one with most matching triggers first (the catalogue's order breaks ties).
    pub fn matches(&self, texts: &[String]) -> Vec<GuideMatch> {
        let mut found: Vec<GuideMatch> = self
            .guides
            .iter()
            .filter(|g| !g.plan.unless.iter().any(|u| matches_any(u, texts)))
            .map(|g| GuideMatch {
                guide: g.name.clone(),
                triggers: g
                    .plan
                    .triggers
                    .iter()
                    .filter(|t| matches_any(t, texts))
                    .cloned()
                    .collect(),
            })
            .filter(|m| !m.triggers.is_empty())
            .collect();
        found.sort_by_key(|m| std::cmp::Reverse(m.triggers.len()));
        found
    }
}

/// A run that triaged the incident, then followed the guide it picked.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TriagedRun {
    /// The triage guide's run.
    pub triage: FlashRun,
    /// The guides whose triggers matched, best first.
    pub matches: Vec<GuideMatch>,
    /// The run of the guide picked (the first match), when one matched.
    pub diagnosis: Option<FlashRun>,
}

impl TriagedRun {
    /// The guide picked, if any.
    pub fn guide(&self) -> Option<&str> {
        self.matches.first().map(|m| m.guide.as_str())
    }

    /// The final answer of the picked guide's run.
    pub fn answer(&self) -> Option<&str> {
        self.diagnosis.as_ref().and_then(|d| d.answer.as_deref())
    }
}

/// Runs `triage` (a guide) on `incident`, picks the guide of `catalog` whose triggers match
/// `alert`, the incident's title and description and every observation of the triage, and
/// runs it with the facts the triage ended with. `facts` seed the triage (the alert's entry
/// point, when it fired).
pub async fn run_triaged(
    agent: &FlashAgent,
    incident: &Incident,
    alert: &str,
    triage: &str,
    catalog: &GuideCatalog,
    facts: BTreeMap<String, serde_json::Value>,
) -> Result<TriagedRun, FlashError> {
    let triage_run = agent.run(incident, triage, facts).await?;
    let mut texts = vec![
        alert.to_string(),
        incident.title.clone(),
        incident.description.clone(),
    ];
    texts.extend(
        triage_run
            .memory
            .results
            .iter()
            .flat_map(|r| r.observations.iter().cloned()),
    );
    let matches = catalog.matches(&texts);
    let diagnosis = match matches.first().and_then(|m| catalog.get(&m.guide)) {
        Some(guide) => Some(
            agent
                .run(incident, &guide.markdown, triage_run.memory.facts.clone())
                .await?,
        ),
        None => None,
    };
    Ok(TriagedRun {
        triage: triage_run,
        matches,
        diagnosis,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalog() -> GuideCatalog {
        GuideCatalog::new([
            (
                "errors".to_string(),
                "Trigger: `[1-9][0-9]* errors`\nUnless: `exception`\n## a\n".to_string(),
            ),
            (
                "exception".to_string(),
                "Trigger: `exception`\nTrigger: `[1-9][0-9]* errors`\n## a\n".to_string(),
            ),
            ("cpu".to_string(), "Trigger: `cpu`\n## a\n".to_string()),
        ])
        .unwrap()
    }

    #[test]
    fn triggers_pick_and_unless_excludes() {
        let c = catalog();
        let m = c.matches(&["3 errors".into()]);
        let names: Vec<&str> = m.iter().map(|m| m.guide.as_str()).collect();
        assert_eq!(
            names,
            ["errors", "exception"],
            "a tie keeps the catalogue's order"
        );
        let m = c.matches(&["3 errors".into(), "NullPointerException".into()]);
        assert_eq!(m[0].guide, "exception");
        assert_eq!(m.len(), 1, "unless excludes the errors guide");
        assert!(c.matches(&["all quiet".into()]).is_empty());
        assert!(GuideCatalog::new([("bad".to_string(), "no steps".to_string())]).is_err());
    }
}
