//! Transactional No-Regression (TNR).
//!
//! A mitigation plan runs as a transaction: the writer takes the environment's write lock
//! (A1, writer exclusivity), checkpoints `s_pre`, runs at most K commands (A3), snapshotting
//! each command's footprint onto an undo stack first, and commits only if the system did not
//! crash and `mu(s_post) <= mu(s_pre)` (R3). Otherwise the [`UndoAgent`] pops the stack and
//! the state hash is checked against the checkpoint (A2). Readers take the read lock, so they
//! only ever see states between transactions: the visible mu path. Every intermediate state is
//! recorded on the hidden mu path.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde::Serialize;
use tokio::sync::RwLock;

use super::confinement::{WriteCommand, confine_write};
use super::environment::{Environment, ReadHandle, ResourceSnapshot};
use super::error::StratusError;
use super::severity::{HealthReport, SeverityWeights, mu_json};

/// K, the default bound on commands per transaction.
pub const DEFAULT_MAX_COMMANDS: usize = 20;

/// TNR settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TnrConfig {
    /// At most this many commands per transaction (K).
    pub max_commands: usize,
    /// Severity weights.
    pub weights: SeverityWeights,
    /// Dry-run each transaction against a copy of the state first, and reject it without
    /// touching the system when the copy crashes or regresses.
    pub dry_run: bool,
    /// After its last command (and after an undo), a transaction waits at most this many
    /// seconds for the system to converge before severity is judged.
    pub settle_s: u64,
    /// Transactional No-Regression on (the default). Off, for the ablation only: commands
    /// run and stay, with no undo, no abort and no irreversibility check.
    pub undo: bool,
}

/// The default convergence wait, seconds.
pub const DEFAULT_SETTLE_S: u64 = 300;

impl Default for TnrConfig {
    fn default() -> Self {
        TnrConfig {
            max_commands: DEFAULT_MAX_COMMANDS,
            weights: SeverityWeights::default(),
            dry_run: false,
            settle_s: DEFAULT_SETTLE_S,
            undo: true,
        }
    }
}

/// What an approver is asked to approve.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Proposal {
    /// The transaction's number.
    pub id: usize,
    /// Its commands.
    pub commands: Vec<String>,
    /// Severity before it runs.
    pub mu_pre: Option<f64>,
    /// Severity the dry run predicts, when one ran.
    pub dry_run_mu: Option<f64>,
    /// When set, the approver is asked about this one irreversible command of the
    /// transaction (before the transaction takes the write lock): what it would destroy.
    pub irreversible: Option<String>,
}

/// A host or a human who says yes or no to a transaction before it runs.
#[async_trait]
pub trait Approver: Send + Sync {
    /// Whether the transaction may run.
    async fn approve(&self, proposal: &Proposal) -> bool;
}

fn _object_safe(_: &dyn Approver) {}

/// Why a transaction was aborted.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AbortReason {
    /// The system crashed (mu = infinity).
    Crashed,
    /// Severity rose.
    Regressed {
        /// Before.
        pre: f64,
        /// After.
        post: f64,
    },
    /// A command would destroy what no snapshot brings back, and no approver allowed it;
    /// it did not run.
    Irreversible {
        /// The command.
        command: String,
        /// What it would destroy.
        reason: String,
    },
    /// An approver allowed an irreversible command, and it ran: counted as a crash, since
    /// undo cannot bring back what it destroyed.
    IrreversibleExecuted {
        /// The command.
        command: String,
    },
    /// A command failed.
    CommandFailed {
        /// The command.
        command: String,
        /// The error.
        error: String,
    },
}

/// How a transaction ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// Committed: `s_post` is the new visible state.
    Committed,
    /// Aborted and undone: the visible state is still `s_pre`.
    Aborted {
        /// Why.
        reason: AbortReason,
    },
    /// The dry run predicted a crash or a regression; nothing ran.
    RejectedByDryRun {
        /// Predicted severity (`None`: crash).
        predicted_mu: Option<f64>,
    },
    /// The approver said no; nothing ran.
    Declined,
}

/// The record of one transaction.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TransactionRecord {
    /// Its number (1-based, per [`Tnr`]).
    pub id: usize,
    /// The commands, as written.
    pub commands: Vec<String>,
    /// What each command printed.
    pub outputs: Vec<String>,
    /// mu(s_pre) (`None`: crash).
    pub mu_pre: Option<f64>,
    /// mu after each command that ran: the hidden path of this transaction.
    pub hidden_mu: Vec<Option<f64>>,
    /// mu(s_post), if commands ran.
    pub mu_post: Option<f64>,
    /// The visible mu after the transaction.
    pub visible_mu: Option<f64>,
    /// How it ended.
    pub outcome: Outcome,
    /// Undo steps run.
    pub undo_steps: usize,
    /// Irreversible commands an approver allowed and that ran.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub irreversible_executed: Vec<String>,
    /// Health after the transaction (the visible state).
    #[serde(skip)]
    pub health_after: HealthReport,
}

impl TransactionRecord {
    /// Whether it committed.
    pub fn committed(&self) -> bool {
        self.outcome == Outcome::Committed
    }
}

/// One entry of the undo stack: a resource's state before a command ran.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UndoEntry {
    /// The command whose effect this entry undoes.
    pub command: String,
    /// The saved state.
    pub snapshot: ResourceSnapshot,
}

/// The undo agent: pops the undo stack in reverse order, re-applying each saved manifest
/// (faithful undo, A2). It is deterministic by design: a model may propose mitigations, but
/// restoring the checkpoint must not depend on one.
#[derive(Debug, Clone, Copy, Default)]
pub struct UndoAgent;

impl UndoAgent {
    /// Restores every entry, last first; returns how many ran.
    pub async fn undo<E: Environment + ?Sized>(
        &self,
        env: &mut E,
        mut stack: Vec<UndoEntry>,
    ) -> Result<usize, StratusError> {
        let mut n = 0;
        while let Some(entry) = stack.pop() {
            env.restore(&entry.snapshot).await?;
            n += 1;
        }
        Ok(n)
    }
}

/// The visible and hidden mu paths.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MuPaths {
    /// mu of each visible state: s0, then the state after each transaction.
    pub visible: Vec<Option<f64>>,
    /// mu of every state, including those inside transactions and undo.
    pub hidden: Vec<Option<f64>>,
}

/// The TNR executor over a shared environment.
pub struct Tnr<E: Environment> {
    env: Arc<RwLock<E>>,
    config: TnrConfig,
    approver: Option<Arc<dyn Approver>>,
    undo: UndoAgent,
    paths: Mutex<MuPaths>,
    next_id: AtomicUsize,
    active_writers: AtomicUsize,
    max_writers: AtomicUsize,
}

impl<E: Environment> Tnr<E> {
    /// A TNR executor; records mu(s0) as the first visible state.
    pub async fn new(env: Arc<RwLock<E>>, config: TnrConfig) -> Result<Self, StratusError> {
        let mu0 = {
            let guard = env.read().await;
            config.weights.mu(&guard.observe().await?)
        };
        Ok(Tnr {
            env,
            config,
            approver: None,
            undo: UndoAgent,
            paths: Mutex::new(MuPaths {
                visible: vec![mu_json(mu0)],
                hidden: vec![mu_json(mu0)],
            }),
            next_id: AtomicUsize::new(1),
            active_writers: AtomicUsize::new(0),
            max_writers: AtomicUsize::new(0),
        })
    }

    /// Asks `approver` before every transaction.
    pub fn with_approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.approver = Some(approver);
        self
    }

    /// The settings.
    pub fn config(&self) -> &TnrConfig {
        &self.config
    }

    /// A read-only handle on the same environment.
    pub fn reader(&self) -> ReadHandle<E> {
        ReadHandle::new(Arc::clone(&self.env))
    }

    /// The mu paths so far.
    pub fn paths(&self) -> MuPaths {
        self.paths.lock().map(|p| p.clone()).unwrap_or_default()
    }

    /// The most writers ever active at once (1 when writer exclusivity holds).
    pub fn max_concurrent_writers(&self) -> usize {
        self.max_writers.load(Ordering::SeqCst)
    }

    /// Asks the approver, if there is one, whether an irreversible command may run.
    async fn approve_irreversible(
        &self,
        record: &TransactionRecord,
        command: &str,
        reason: &str,
    ) -> bool {
        let Some(a) = &self.approver else {
            return false;
        };
        a.approve(&Proposal {
            id: record.id,
            commands: vec![command.to_string()],
            mu_pre: record.mu_pre,
            dry_run_mu: None,
            irreversible: Some(reason.to_string()),
        })
        .await
    }

    fn push_hidden(&self, mu: f64) {
        if let Ok(mut p) = self.paths.lock() {
            p.hidden.push(mu_json(mu));
        }
    }

    /// Parses, confines and runs `commands` as one transaction.
    pub async fn run_text(&self, commands: &[String]) -> Result<TransactionRecord, StratusError> {
        if commands.len() > self.config.max_commands {
            return Err(StratusError::TooManyCommands {
                count: commands.len(),
                limit: self.config.max_commands,
            });
        }
        let cmds = commands
            .iter()
            .map(|c| confine_write(c))
            .collect::<Result<Vec<_>, _>>()?;
        self.run(&cmds).await
    }

    /// Runs confined write commands as one transaction.
    pub async fn run(&self, cmds: &[WriteCommand]) -> Result<TransactionRecord, StratusError> {
        if cmds.is_empty() {
            return Err(StratusError::EmptyTransaction);
        }
        if cmds.len() > self.config.max_commands {
            return Err(StratusError::TooManyCommands {
                count: cmds.len(),
                limit: self.config.max_commands,
            });
        }
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let w = self.config.weights;
        let texts: Vec<String> = cmds.iter().map(|c| c.text().to_string()).collect();
        let mut record = TransactionRecord {
            id,
            commands: texts.clone(),
            outputs: Vec::new(),
            mu_pre: None,
            hidden_mu: Vec::new(),
            mu_post: None,
            visible_mu: None,
            outcome: Outcome::Declined,
            undo_steps: 0,
            irreversible_executed: Vec::new(),
            health_after: HealthReport::default(),
        };
        // Dry run and approval happen before the write lock is taken.
        let mut dry_mu = None;
        if self.config.dry_run || self.approver.is_some() {
            let guard = self.env.read().await;
            let pre = guard.observe().await?;
            record.mu_pre = mu_json(w.mu(&pre));
            if self.config.dry_run
                && let Some(predicted) = guard.dry_run(cmds).await?
            {
                let m = w.mu(&predicted);
                dry_mu = Some(m);
                if predicted.crashed || m > w.mu(&pre) {
                    record.outcome = Outcome::RejectedByDryRun {
                        predicted_mu: mu_json(m),
                    };
                    record.visible_mu = record.mu_pre;
                    record.health_after = pre;
                    return Ok(record);
                }
            }
            if let Some(a) = &self.approver {
                let proposal = Proposal {
                    id,
                    commands: texts.clone(),
                    mu_pre: record.mu_pre,
                    dry_run_mu: dry_mu.and_then(mu_json),
                    irreversible: None,
                };
                drop(guard);
                if !a.approve(&proposal).await {
                    record.outcome = Outcome::Declined;
                    record.visible_mu = record.mu_pre;
                    return Ok(record);
                }
            }
        }
        // Irreversible commands go to the approver before the write lock is taken (an
        // approver may read the environment, and a human may take their time). A command
        // that becomes irreversible only inside the transaction is refused there.
        let mut approved: Vec<String> = Vec::new();
        if self.config.undo {
            let irreversible = self.env.read().await.irreversible_plan(cmds).await?;
            if record.mu_pre.is_none() && !irreversible.is_empty() {
                let guard = self.env.read().await;
                record.mu_pre = mu_json(w.mu(&guard.observe().await?));
            }
            for (text, reason) in irreversible {
                if self.approve_irreversible(&record, &text, &reason).await {
                    approved.push(text);
                } else {
                    // Refused before anything runs: the state after it is s_pre.
                    record.outcome = Outcome::Aborted {
                        reason: AbortReason::Irreversible {
                            command: text,
                            reason,
                        },
                    };
                    record.visible_mu = record.mu_pre;
                    if let Ok(mut p) = self.paths.lock() {
                        p.visible.push(record.visible_mu);
                    }
                    return Ok(record);
                }
            }
        }
        let mut env = self.env.write().await;
        let active = self.active_writers.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_writers.fetch_max(active, Ordering::SeqCst);
        let result = self.execute(&mut *env, cmds, &approved, &mut record).await;
        self.active_writers.fetch_sub(1, Ordering::SeqCst);
        result?;
        if let Ok(mut p) = self.paths.lock() {
            p.visible.push(record.visible_mu);
        }
        Ok(record)
    }

    async fn execute(
        &self,
        env: &mut E,
        cmds: &[WriteCommand],
        approved: &[String],
        record: &mut TransactionRecord,
    ) -> Result<(), StratusError> {
        let w = self.config.weights;
        let checkpoint = env.state_hash().await?;
        let pre = env.observe().await?;
        let mu_pre = w.mu(&pre);
        record.mu_pre = mu_json(mu_pre);
        let mut stack: Vec<UndoEntry> = Vec::new();
        let mut abort: Option<AbortReason> = None;
        let mut post = pre.clone();
        for cmd in cmds {
            let mut irreversible = false;
            if self.config.undo
                && let Some(reason) = env.irreversible(cmd).await?
            {
                if !approved.iter().any(|a| a == cmd.text()) {
                    abort = Some(AbortReason::Irreversible {
                        command: cmd.text().to_string(),
                        reason,
                    });
                    break;
                }
                irreversible = true;
            }
            if self.config.undo {
                for r in env.footprint(cmd).await? {
                    stack.push(UndoEntry {
                        command: cmd.text().to_string(),
                        snapshot: env.snapshot(&r).await?,
                    });
                }
            }
            match env.write(cmd).await {
                Ok(out) => {
                    record.outputs.push(out);
                    if irreversible {
                        record.irreversible_executed.push(cmd.text().to_string());
                    }
                }
                Err(e) => {
                    record.outputs.push(format!("error: {e}"));
                    abort = Some(AbortReason::CommandFailed {
                        command: cmd.text().to_string(),
                        error: e.to_string(),
                    });
                    break;
                }
            }
            post = env.observe().await?;
            let m = w.mu(&post);
            record.hidden_mu.push(mu_json(m));
            self.push_hidden(m);
            if post.crashed {
                abort = Some(AbortReason::Crashed);
                break;
            }
            if let Some(c) = record.irreversible_executed.last()
                && c == cmd.text()
            {
                abort = Some(AbortReason::IrreversibleExecuted { command: c.clone() });
                break;
            }
        }
        if abort.is_none() || !self.config.undo {
            // Let rollouts and restarts finish: severity is judged on the converged state.
            env.settle(self.config.settle_s).await?;
            post = env.observe().await?;
            let m = w.mu(&post);
            record.hidden_mu.push(mu_json(m));
            self.push_hidden(m);
            if post.crashed && abort.is_none() {
                abort = Some(AbortReason::Crashed);
            }
        }
        if !self.config.undo {
            record.mu_post = mu_json(w.mu(&post));
            record.visible_mu = record.mu_post;
            record.health_after = post;
            // Without undo an abort only stops the transaction: its changes stay.
            record.outcome = match abort {
                None => Outcome::Committed,
                Some(reason) => Outcome::Aborted { reason },
            };
            return Ok(());
        }
        let mu_post = w.mu(&post);
        record.mu_post = mu_json(mu_post);
        if abort.is_none() && mu_post > mu_pre {
            abort = Some(AbortReason::Regressed {
                pre: mu_pre,
                post: mu_post,
            });
        }
        match abort {
            None => {
                tracing::info!(id = record.id, mu_pre, mu_post, commands = ?record.commands, "TNR commit");
                record.outcome = Outcome::Committed;
                record.visible_mu = mu_json(mu_post);
                record.health_after = post;
            }
            Some(reason) => {
                tracing::info!(id = record.id, mu_pre, mu_post, ?reason, commands = ?record.commands, "TNR abort; undoing");
                record.undo_steps = self.undo.undo(env, stack).await?;
                let found = env.state_hash().await?;
                if found != checkpoint {
                    return Err(StratusError::UnfaithfulUndo {
                        expected: checkpoint,
                        found,
                    });
                }
                env.settle(self.config.settle_s).await?;
                let back = env.observe().await?;
                self.push_hidden(w.mu(&back));
                // What an executed irreversible command destroyed stays destroyed: the
                // visible state counts as crashed whatever the environment reports.
                record.visible_mu = if record.irreversible_executed.is_empty() {
                    mu_json(w.mu(&back))
                } else {
                    None
                };
                record.health_after = back;
                record.outcome = Outcome::Aborted { reason };
            }
        }
        Ok(())
    }
}
