//! The errors of the STRATUS module, sorted by what the caller should do.

use rca_core::LlmError;

/// What went wrong talking to an [`crate::stratus::Environment`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum EnvError {
    /// The command names a resource that does not exist: pick an existing one.
    #[error("not found: {what}")]
    NotFound {
        /// The resource that was asked for.
        what: String,
    },
    /// The command is well formed but the environment rejects it (a bad field, a bad value).
    #[error("invalid: {message}")]
    Invalid {
        /// Why.
        message: String,
    },
    /// The environment could not be reached or failed; retrying may succeed.
    #[error("environment unavailable: {message}")]
    Unavailable {
        /// What happened.
        message: String,
    },
}

/// What went wrong in detection, diagnosis or mitigation.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum StratusError {
    /// A command did not parse: fix its syntax.
    #[error("cannot parse command `{input}`: {message}")]
    Parse {
        /// The command text.
        input: String,
        /// What is wrong.
        message: String,
    },
    /// Confinement refused a command (it is neither a known read nor an allowed write, or a
    /// read-only agent asked for a write): do something else.
    #[error("command `{command}` refused: {reason}")]
    Refused {
        /// The command text.
        command: String,
        /// Why.
        reason: String,
    },
    /// A transaction has more commands than the bounded risk window allows: split it.
    #[error("transaction has {count} commands; at most {limit} are allowed")]
    TooManyCommands {
        /// How many it had.
        count: usize,
        /// The limit K.
        limit: usize,
    },
    /// A transaction had no write command.
    #[error("transaction has no write command")]
    EmptyTransaction,
    /// A model answered with output that could not be understood.
    #[error("model output not understood: {message} (raw: {raw})")]
    MalformedModelOutput {
        /// Why.
        message: String,
        /// The text the model wrote.
        raw: String,
    },
    /// The model backend failed.
    #[error(transparent)]
    Model(#[from] LlmError),
    /// The environment failed.
    #[error(transparent)]
    Env(#[from] EnvError),
    /// No scenario of that name exists.
    #[error("unknown scenario `{name}`; known: {known}")]
    UnknownScenario {
        /// The name asked for.
        name: String,
        /// The names that exist, comma separated.
        known: String,
    },
    /// A scenario file is malformed or does not build: fix the file.
    #[error("scenario {name} is invalid: {message}")]
    InvalidScenario {
        /// The scenario's name or file.
        name: String,
        /// What is wrong.
        message: String,
    },
    /// A command would destroy what no snapshot can bring back, and no approver allowed it:
    /// find a reversible way, or ask a human.
    #[error("command `{command}` is irreversible: {reason}")]
    Irreversible {
        /// The command.
        command: String,
        /// What it would destroy.
        reason: String,
    },
    /// Internal state was poisoned by a panicking thread: stop.
    #[error("internal error: {message}")]
    Internal {
        /// What happened.
        message: String,
    },
    /// Undo did not restore the checkpointed state (assumption A2 is broken by the
    /// environment): stop and hand over to a human.
    #[error(
        "undo did not restore the checkpoint: state hash {found:016x}, expected {expected:016x}"
    )]
    UnfaithfulUndo {
        /// The checkpoint's hash.
        expected: u64,
        /// The hash after undo.
        found: u64,
    },
}
