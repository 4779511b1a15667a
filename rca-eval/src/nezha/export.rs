//! Exporting one case into the incident-directory format (`docs/guides/incident-format.md`).

use std::path::Path;

use rca_tools::analyze::traces::ServiceGraph;
use rca_tools::sources::incident::{
    FORMAT_VERSION, Manifest, RangeText, TelemetryFiles, write_logs_jsonl, write_manifest,
    write_metrics_csv, write_spans_csv,
};

use super::NezhaError;
use super::loader::{CaseData, NezhaCase};

/// The licence notice shipped with every export (the data is MIT-licensed).
pub const NOTICE: &str = "Telemetry from the Nezha TrainTicket dataset\n\
(https://github.com/IntelligentDDS/Nezha, commit d814010), trimmed and converted.\n\n\
MIT License\n\nCopyright (c) 2023 IntelligentDDS\n\n\
Permission is hereby granted, free of charge, to any person obtaining a copy\n\
of this software and associated documentation files (the \"Software\"), to deal\n\
in the Software without restriction, including without limitation the rights\n\
to use, copy, modify, merge, publish, distribute, sublicense, and/or sell\n\
copies of the Software, and to permit persons to whom the Software is\n\
furnished to do so, subject to the following conditions:\n\n\
The above copyright notice and this permission notice shall be included in all\n\
copies or substantial portions of the Software.\n\n\
THE SOFTWARE IS PROVIDED \"AS IS\", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR\n\
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,\n\
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE\n\
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER\n\
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,\n\
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE\n\
SOFTWARE.\n";

/// Writes a case as an incident directory: `incident.json`, `logs.jsonl.gz`,
/// `metrics.csv.gz`, `spans.csv.gz` and `NOTICE`, holding the case's incident window (under
/// the alert protocol it ends at the alert and its onset is not stated). The manifest holds no
/// ground truth: the fault's pod, type and (under the alert protocol) time stay out of it.
pub fn export_case(case: &NezhaCase, data: &CaseData, dir: &Path) -> Result<(), NezhaError> {
    let write = |e: std::io::Error| NezhaError::Write {
        path: dir.display().to_string(),
        message: e.to_string(),
    };
    std::fs::create_dir_all(dir).map_err(write)?;
    let incident = &data.incident;
    write_logs_jsonl(&dir.join("logs.jsonl.gz"), &data.logs)?;
    write_metrics_csv(&dir.join("metrics.csv.gz"), &data.metrics)?;
    write_spans_csv(&dir.join("spans.csv.gz"), &data.spans)?;
    std::fs::write(dir.join("NOTICE"), NOTICE).map_err(write)?;
    let graph = ServiceGraph::from_spans(&data.spans);
    let manifest = Manifest {
        format_version: FORMAT_VERSION,
        id: format!("nezha-{}", case.id.replace('/', "-")),
        title: match incident.onset {
            Some(at) => format!("TrainTicket: a fault at {at}"),
            None => format!("TrainTicket: an alert fired at {}", incident.detected_at),
        },
        description: match incident.onset {
            Some(_) => "A fault was injected into one pod at the onset; which pod and what kind \
                        is for the diagnosis to find."
                .into(),
            None => "An alert fired some time after a fault was injected into one pod; when, \
                     which pod and what kind is for the diagnosis to find."
                .into(),
        },
        detected_at: incident.detected_at.to_string(),
        window: RangeText::from_range(incident.window),
        baseline: None,
        system: "TrainTicket, a train-ticket booking system of about 40 Java microservices \
                 on Kubernetes behind a gateway. Components are pods; a pod's service is its \
                 name without the two trailing dash-separated parts. Metrics: per-pod resource \
                 and request KPIs, one sample a minute. Logs: application lines per pod. \
                 Spans: distributed traces across the pods."
            .into(),
        topology: graph.edges().into_iter().map(|(a, b, _)| (a, b)).collect(),
        telemetry: TelemetryFiles {
            logs: vec!["logs.jsonl.gz".into()],
            metrics: vec!["metrics.csv.gz".into()],
            spans: vec!["spans.csv.gz".into()],
        },
        onset: incident.onset.map(|t| t.to_string()),
    };
    write_manifest(dir, &manifest)?;
    Ok(())
}
