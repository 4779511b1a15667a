//! Progress bars for long CLI work (loading large telemetry, clustering big log files,
//! evaluations). They draw on stderr only when stderr is a terminal, so piped output, CI logs
//! and tests stay clean; counting works the same either way.
//!
//! ```ignore
//! let progress = Progress::bar(cases.len() as u64, "evaluating");
//! for case in cases {
//!     progress.set_message(&case.id);
//!     run(case)?;
//!     progress.inc(1);
//! }
//! progress.finish();
//! ```

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A progress bar on stderr, hidden when stderr is not a terminal.
#[derive(Debug, Clone)]
pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// A bar of `len` steps, labelled `prefix`; visible only when stderr is a terminal.
    pub fn bar(len: u64, prefix: &str) -> Self {
        Self::with_visibility(len, prefix, std::io::stderr().is_terminal())
    }

    /// A bar that draws on stderr when `visible`, and nowhere otherwise.
    pub fn with_visibility(len: u64, prefix: &str, visible: bool) -> Self {
        let target = if visible {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        let bar = ProgressBar::with_draw_target(Some(len), target);
        if let Ok(style) = ProgressStyle::with_template(
            "{spinner} {prefix} [{bar:30}] {pos}/{len} {elapsed} {wide_msg}",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(prefix.to_string());
        if visible {
            // Keep the spinner moving while one long step (a big file) runs.
            bar.enable_steady_tick(Duration::from_millis(120));
        }
        Progress { bar }
    }

    /// Says what the current step is.
    pub fn set_message(&self, message: &str) {
        self.bar.set_message(message.to_string());
    }

    /// Marks `n` steps done.
    pub fn inc(&self, n: u64) {
        self.bar.inc(n);
    }

    /// Sets where the work stands when the caller counts it itself: `done` of `total` steps.
    pub fn set_position(&self, done: u64, total: u64) {
        self.bar.set_length(total);
        self.bar.set_position(done);
    }

    /// Removes the bar from the terminal.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_bars_still_count() {
        let p = Progress::with_visibility(3, "test", false);
        assert!(p.bar.is_hidden());
        p.set_message("step");
        p.inc(2);
        assert_eq!(p.bar.position(), 2);
        p.set_position(5, 9);
        assert_eq!((p.bar.position(), p.bar.length()), (5, Some(9)));
        p.finish();
    }

    #[test]
    fn quiet_when_stderr_is_not_a_terminal() {
        // Under `cargo test` stderr is captured, so the bar must not draw.
        if !std::io::stderr().is_terminal() {
            assert!(Progress::bar(1, "test").bar.is_hidden());
        }
    }
}
