//! The live progress display of an interactive terminal: cells, attempts
//! done, running and queued, elapsed time, and passes, fails and infra
//! errors so far, redrawn in place on stderr. The console's lines are
//! printed around it ([`super::Lines`]), so they are never garbled. It is
//! used only on a terminal and never under nextest, which has its own.

use std::io;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use super::Reporter;
use crate::outcome::{Outcome, Retry};
use crate::runner::RunReport;
use crate::runner::events::RunEvent;

/// The progress display.
#[derive(Debug)]
pub struct Progress {
    bar: ProgressBar,
    counts: Counts,
}

/// What the display shows.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Counts {
    pub(crate) cells: usize,
    pub(crate) total: usize,
    pub(crate) done: usize,
    pub(crate) running: usize,
    pub(crate) passed: usize,
    pub(crate) failed: usize,
    pub(crate) infra: usize,
}

impl Counts {
    /// Counts `event` in.
    pub(crate) fn count(&mut self, event: &RunEvent) {
        match event {
            RunEvent::Planned { attempts, cells, .. } => {
                self.total = *attempts;
                self.cells = *cells;
            }
            RunEvent::AttemptStarted(_) => self.running += 1,
            RunEvent::AttemptEnded { record, retry } => {
                self.running = self.running.saturating_sub(1);
                if *retry == Retry::Again {
                    // The trial is queued again with a fresh sandbox.
                    self.total += 1;
                }
                self.done += 1;
                if *retry != Retry::Again {
                    match record.outcome {
                        Outcome::Pass => self.passed += 1,
                        Outcome::Fail(_) => self.failed += 1,
                        Outcome::InfraError | Outcome::Config => self.infra += 1,
                    }
                }
            }
            _ => {}
        }
    }

    /// `6 cells · 4/18 attempts · 2 running · 12 queued · 3 passed, 1 failed, 0 infra`.
    pub(crate) fn line(&self) -> String {
        let queued = self.total.saturating_sub(self.done + self.running);
        format!(
            "{} cells · {}/{} attempts · {} running · {} queued · {} passed, {} failed, {} infra",
            self.cells,
            self.done,
            self.total,
            self.running,
            queued,
            self.passed,
            self.failed,
            self.infra
        )
    }
}

impl Progress {
    /// A display on stderr.
    pub fn new() -> Self {
        let bar = ProgressBar::new_spinner();
        bar.set_style(
            ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.enable_steady_tick(Duration::from_millis(250));
        Self { bar, counts: Counts::default() }
    }

    /// The bar, for the console to print around.
    pub fn bar(&self) -> ProgressBar {
        self.bar.clone()
    }
}

impl Default for Progress {
    fn default() -> Self {
        Self::new()
    }
}

impl Reporter for Progress {
    fn event(&mut self, event: &RunEvent) -> io::Result<()> {
        self.counts.count(event);
        if !matches!(event, RunEvent::Tick) {
            self.bar.set_message(self.counts.line());
        }
        Ok(())
    }

    fn finish(&mut self, _report: &RunReport) -> io::Result<()> {
        self.bar.finish_and_clear();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Record;
    use crate::runner::events::AttemptId;

    #[test]
    fn counts_follow_the_run() {
        let mut c = Counts::default();
        let id =
            AttemptId { eval: "e".into(), harness: "shell".into(), arm: None, trial: 1, try_: 1 };
        c.count(&RunEvent::Planned {
            run_id: "r".into(),
            run_dir: "/r".into(),
            evals: vec!["e".into()],
            cells: 1,
            attempts: 2,
        });
        c.count(&RunEvent::AttemptStarted(id.clone()));
        let mut infra = Record::new("r", "e", "shell", 1, 1);
        infra.outcome = Outcome::InfraError;
        c.count(&RunEvent::AttemptEnded { record: Box::new(infra), retry: Retry::Again });
        assert_eq!(
            c.line(),
            "1 cells · 1/3 attempts · 0 running · 2 queued · 0 passed, 0 failed, 0 infra"
        );
        c.count(&RunEvent::AttemptStarted(id));
        c.count(&RunEvent::AttemptEnded {
            record: Box::new(Record::new("r", "e", "shell", 1, 2)),
            retry: Retry::Final,
        });
        assert_eq!(
            c.line(),
            "1 cells · 2/3 attempts · 0 running · 1 queued · 1 passed, 0 failed, 0 infra"
        );
    }
}
