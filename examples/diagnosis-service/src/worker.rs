//! The workers: each claims an accepted alert group from the queue, diagnoses it, and
//! completes the claim with the report (stored before the group leaves the queue).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::diagnosis::{Diagnoser, DiagnosisError};
use crate::inbox::now_ms;
use crate::queue::{Claim, Outcome, SharedQueue};
use crate::store::ReportStore;

/// How often a diagnosis that failed (a data source did not answer) is tried in all.
pub const DIAGNOSIS_ATTEMPTS: u32 = 3;

/// The running workers.
#[derive(Debug)]
pub struct Workers {
    handles: Vec<JoinHandle<()>>,
    stop: watch::Sender<bool>,
}

/// What a worker needs.
#[derive(Debug, Clone)]
pub struct WorkerContext {
    /// Turns an alert into a report.
    pub diagnoser: Arc<Diagnoser>,
    /// Where reports go.
    pub store: ReportStore,
    /// Where accepted alerts wait.
    pub queue: SharedQueue,
    /// The wait before a failed diagnosis is tried again.
    pub retry_pause: Duration,
    /// Testing only: how long a worker waits, holding its claim, between a finished diagnosis
    /// and its completion (`test_delay_ms`; zero otherwise).
    pub test_delay: Duration,
}

impl Workers {
    /// Starts `n` workers (at least one) on `context.queue`. Needs a Tokio runtime.
    pub fn spawn(n: usize, context: WorkerContext) -> Workers {
        let (stop, stopped) = watch::channel(false);
        let handles = (0..n.max(1))
            .map(|_| {
                let context = context.clone();
                let mut stopped = stopped.clone();
                tokio::spawn(async move {
                    loop {
                        // A closed stop channel (the `Workers` dropped without `stop`)
                        // disables that branch: the workers go on serving the queue.
                        let next = tokio::select! {
                            biased;
                            Ok(_) = stopped.wait_for(|s| *s) => None,
                            claim = context.queue.next() => claim,
                        };
                        let Some(claim) = next else { break };
                        handle(&context, claim).await;
                    }
                })
            })
            .collect();
        Workers { handles, stop }
    }

    /// Stops taking alerts and waits up to `grace` for the diagnoses in progress; what is
    /// still running then is abandoned (its alert stays in the inbox for the next start).
    pub async fn stop(self, grace: Duration) {
        let _ = self.stop.send(true);
        let deadline = tokio::time::Instant::now() + grace;
        for mut handle in self.handles {
            if tokio::time::timeout_at(deadline, &mut handle)
                .await
                .is_err()
            {
                handle.abort();
            }
        }
    }

    /// Ends every worker at once, as a crash would (tests use it to restart mid-run).
    pub fn abort(self) {
        for handle in &self.handles {
            handle.abort();
        }
    }
}

/// Diagnoses one claimed group (trying a failed diagnosis again, up to
/// [`DIAGNOSIS_ATTEMPTS`]) and completes the claim with the report. A report that cannot be
/// stored leaves the group queued, to be diagnosed again.
async fn handle(context: &WorkerContext, claim: Claim) {
    let id = claim.entry.id.clone();
    let outcome = if claim.entry.alert().is_none() {
        // Queues only hold entries with their alerts.
        Outcome::Failed("the entry carries no alert".into())
    } else if context.store.exists(&id).await {
        // Stored by an earlier run that stopped before completing: done already.
        Outcome::AlreadyReported
    } else {
        diagnose(context, &claim).await
    };
    if let Err(e) = context.queue.complete(claim, outcome, &context.store).await {
        tracing::error!(%id, error = %e, "the alert was not completed; it is diagnosed again");
    }
}

async fn diagnose(context: &WorkerContext, claim: &Claim) -> Outcome {
    let entry = &claim.entry;
    let mut attempt = 1;
    let outcome = loop {
        match context
            .diagnoser
            .diagnose_as(&entry.payload, Some(&entry.id))
            .await
        {
            Err(DiagnosisError::Failed { message, .. }) if attempt < DIAGNOSIS_ATTEMPTS => {
                tracing::warn!(id = %entry.id, attempt, %message, "diagnosis failed; trying again");
                attempt += 1;
                tokio::time::sleep(context.retry_pause).await;
            }
            other => break other,
        }
    };
    match outcome {
        Ok(mut report) => {
            // The id the queue, the grouping and the waiters know (computed before redaction,
            // which could change the group key it hashes).
            report.id = entry.id.clone();
            report.incident.id = entry.id.clone();
            report.received_at_ms = Some(entry.received_at_ms);
            report.reported_at_ms = Some(now_ms());
            if !context.test_delay.is_zero() {
                tokio::time::sleep(context.test_delay).await;
            }
            Outcome::Reported(Box::new(report))
        }
        Err(e) => {
            tracing::error!(id = %entry.id, error = %e, "diagnosis failed");
            Outcome::Failed(e.to_string())
        }
    }
}
