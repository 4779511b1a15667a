//! The workers: each takes an accepted alert group from the inbox, diagnoses it, stores the
//! report and only then removes the group from the inbox.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::diagnosis::{Diagnoser, DiagnosisError};
use crate::inbox::{Entry, Inbox, Queue, now_ms};
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
    pub inbox: Inbox,
    /// The wait before a failed diagnosis is tried again.
    pub retry_pause: Duration,
}

impl Workers {
    /// Starts `n` workers (at least one) on `queue`. Needs a Tokio runtime.
    pub fn spawn(n: usize, queue: Queue, context: WorkerContext) -> Workers {
        let (stop, stopped) = watch::channel(false);
        let handles = (0..n.max(1))
            .map(|_| {
                let queue = Arc::clone(&queue);
                let context = context.clone();
                let mut stopped = stopped.clone();
                tokio::spawn(async move {
                    loop {
                        let next = {
                            let mut rx = queue.lock().await;
                            // A closed stop channel (the `Workers` dropped without `stop`)
                            // disables that branch: the workers go on serving the inbox.
                            tokio::select! {
                                biased;
                                Ok(_) = stopped.wait_for(|s| *s) => None,
                                entry = rx.recv() => entry,
                            }
                        };
                        let Some(entry) = next else { break };
                        handle(&context, entry).await;
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

/// Diagnoses one entry (trying a failed diagnosis again, up to [`DIAGNOSIS_ATTEMPTS`]), stores
/// the report, then removes the entry from the inbox. A report that cannot be stored leaves
/// the entry in the inbox for the next start.
async fn handle(context: &WorkerContext, entry: Entry) {
    if entry.alert().is_none() {
        // `Inbox` only queues entries with their alerts.
        let _ = context
            .inbox
            .finish(&entry, Some("the entry carries no alert".into()))
            .await;
        return;
    }
    // Stored by an earlier run that stopped before removing the entry: done already.
    if context.store.exists(&entry.id).await {
        if let Err(e) = context.inbox.finish(&entry, None).await {
            tracing::error!(id = %entry.id, error = %e, "inbox entry not removed");
        }
        return;
    }
    let mut attempt = 1;
    let outcome = loop {
        match context.diagnoser.diagnose(&entry.payload).await {
            Err(DiagnosisError::Failed { message, .. }) if attempt < DIAGNOSIS_ATTEMPTS => {
                tracing::warn!(id = %entry.id, attempt, %message, "diagnosis failed; trying again");
                attempt += 1;
                tokio::time::sleep(context.retry_pause).await;
            }
            other => break other,
        }
    };
    let failure = match outcome {
        Ok(mut report) => {
            // The id the inbox, the grouping and the waiters know (computed before redaction,
            // which could change the group key it hashes).
            report.id = entry.id.clone();
            report.incident.id = entry.id.clone();
            report.received_at_ms = Some(entry.received_at_ms);
            report.reported_at_ms = Some(now_ms());
            match context.store.put(&report).await {
                Ok(_) => None,
                Err(e) => {
                    tracing::error!(id = %entry.id, error = %e, "report not stored; the alert stays in the inbox");
                    context.inbox.set_aside(&entry.id, e.to_string()).await;
                    return;
                }
            }
        }
        Err(e) => {
            tracing::error!(id = %entry.id, error = %e, "diagnosis failed");
            Some(e.to_string())
        }
    };
    if let Err(e) = context.inbox.finish(&entry, failure).await {
        tracing::error!(id = %entry.id, error = %e, "inbox entry not removed; it is diagnosed again after a restart");
    }
}
