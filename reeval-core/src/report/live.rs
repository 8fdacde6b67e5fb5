//! The live progress display of an interactive terminal: cells, attempts
//! done, running and queued, elapsed time, and passes, fails and infra
//! errors so far, then a line per running attempt (its trial, its current
//! phase and how long it has run), redrawn in place on stderr. The console's
//! lines are printed around it ([`super::Lines`]), so they are never garbled.
//! It is used only on a terminal and never under nextest, which has its own.

use std::io;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::Reporter;
use crate::outcome::{Outcome, Retry};
use crate::phase::Phase;
use crate::report::events::{AttemptId, RunEvent};
use crate::report::summary::RunReport;

/// The progress display.
#[derive(Debug)]
pub struct Progress {
    bar: ProgressBar,
    counts: Counts,
    running: Running,
}

/// How many running attempts the display names; the rest are counted.
const SHOWN_RUNNING: usize = 6;

/// `fix_parser#2 shell` (and `(try 2)` after an infra error): an attempt as the display and
/// the slow notice name it, as `-v` does.
pub(crate) fn attempt_label(id: &AttemptId) -> String {
    let mut label =
        format!("{}#{} {}", id.eval, id.trial, super::arm_label(&id.harness, id.arm.as_deref()));
    if id.try_ > 1 {
        label.push_str(&format!(" (try {})", id.try_));
    }
    label
}

/// The attempts running now, in the order they started: what each is doing.
#[derive(Debug, Default)]
pub(crate) struct Running {
    attempts: Vec<(AttemptId, Doing)>,
}

/// What a running attempt is doing.
#[derive(Debug, Clone)]
struct Doing {
    started: Instant,
    /// The phase it is in (`None` before its first).
    phase: Option<Phase>,
    /// Its latest turn.
    turn: u32,
}

impl Running {
    /// Follows `event`.
    pub(crate) fn follow(&mut self, event: &RunEvent) {
        match event {
            RunEvent::AttemptStarted(id) => self
                .attempts
                .push((id.clone(), Doing { started: Instant::now(), phase: None, turn: 0 })),
            RunEvent::PhaseStarted { attempt, phase } => {
                if let Some(doing) = self.get(attempt) {
                    doing.phase = Some(*phase);
                }
            }
            RunEvent::TurnStarted { attempt, index, .. } => {
                if let Some(doing) = self.get(attempt) {
                    doing.turn = *index;
                }
            }
            RunEvent::AttemptEnded { record, .. } => self.attempts.retain(|(id, _)| {
                !(id.eval == record.eval
                    && id.harness == record.harness
                    && id.arm == record.arm
                    && id.trial == record.trial
                    && id.try_ == record.try_)
            }),
            _ => {}
        }
    }

    fn get(&mut self, id: &AttemptId) -> Option<&mut Doing> {
        self.attempts.iter_mut().find(|(a, _)| a == id).map(|(_, doing)| doing)
    }

    /// What `id` is doing: `turn 2`, `check`, `starting`.
    pub(crate) fn phase_of(&self, id: &AttemptId) -> Option<String> {
        let (_, doing) = self.attempts.iter().find(|(a, _)| a == id)?;
        Some(match doing.phase {
            None => "starting".to_string(),
            Some(Phase::Turn) => format!("turn {}", doing.turn),
            Some(phase) => phase.to_string(),
        })
    }

    /// A line per running attempt, the longest running first, at most
    /// [`SHOWN_RUNNING`] of them, then how many more: `  fix_parser#2 shell   turn 1   1m05s`.
    pub(crate) fn lines(&self, now: Instant) -> Vec<String> {
        let mut attempts: Vec<&(AttemptId, Doing)> = self.attempts.iter().collect();
        attempts.sort_by_key(|(_, doing)| doing.started);
        let shown: Vec<(String, String, String)> = attempts
            .iter()
            .take(SHOWN_RUNNING)
            .map(|(id, doing)| {
                let took = now.saturating_duration_since(doing.started).as_secs();
                let took = if took < 60 {
                    format!("{took}s")
                } else {
                    format!("{}m{:02}s", took / 60, took % 60)
                };
                (attempt_label(id), self.phase_of(id).unwrap_or_default(), took)
            })
            .collect();
        let width =
            |f: &dyn Fn(&(String, String, String)) -> usize| shown.iter().map(f).max().unwrap_or(0);
        let (w0, w1) = (width(&|l| l.0.chars().count()), width(&|l| l.1.chars().count()));
        let mut lines: Vec<String> = shown
            .iter()
            .map(|(label, phase, took)| format!("  {label:w0$}  {phase:w1$}  {took}"))
            .collect();
        if attempts.len() > SHOWN_RUNNING {
            lines.push(format!("  … and {} more", attempts.len() - SHOWN_RUNNING));
        }
        lines
    }
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
    /// A display on the real stderr, not on descriptor 2, where the evals' output is captured.
    pub fn new() -> Self {
        let target = match (super::lines::real_stderr_file(), super::lines::real_stderr_file()) {
            (Ok(read), Ok(write)) => {
                ProgressDrawTarget::term(console::Term::read_write_pair(read, write), 20)
            }
            _ => ProgressDrawTarget::hidden(),
        };
        let bar = ProgressBar::with_draw_target(None, target);
        bar.set_style(
            ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.enable_steady_tick(Duration::from_millis(250));
        Self { bar, counts: Counts::default(), running: Running::default() }
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
        self.running.follow(event);
        // Redrawn on every event, and on the clock's ticks for the times.
        let mut message = self.counts.line();
        for line in self.running.lines(Instant::now()) {
            message.push('\n');
            message.push_str(&line);
        }
        self.bar.set_message(message);
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
    use crate::report::events::AttemptId;

    #[test]
    fn counts_follow_the_run() {
        let mut c = Counts::default();
        let id =
            AttemptId { eval: "e".into(), harness: "shell".into(), arm: None, trial: 1, try_: 1 };
        c.count(&RunEvent::Planned {
            run_id: "r".into(),
            run_dir: "/r".into(),
            evals: vec!["e".into()],
            cannot_run: Vec::new(),
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

    fn id(eval: &str, trial: u32, try_: u32) -> AttemptId {
        AttemptId { eval: eval.into(), harness: "shell".into(), arm: None, trial, try_ }
    }

    #[test]
    fn the_running_attempts_are_named_with_their_trial_and_phase() {
        let mut running = Running::default();
        let (parser, readme) = (id("fix_parser", 2, 1), id("add_readme", 1, 2));
        let mut compared = id("fix_parser", 3, 1);
        compared.arm = Some("treatment".into());
        for a in [&parser, &readme, &compared] {
            running.follow(&RunEvent::AttemptStarted(a.clone()));
        }
        running.follow(&RunEvent::PhaseStarted { attempt: parser.clone(), phase: Phase::Setup });
        running.follow(&RunEvent::TurnStarted {
            attempt: parser.clone(),
            index: 2,
            prompt: "".into(),
        });
        running.follow(&RunEvent::PhaseStarted { attempt: parser.clone(), phase: Phase::Turn });
        running.follow(&RunEvent::PhaseStarted { attempt: readme.clone(), phase: Phase::Check });
        // Started 65, 3 and 1 seconds before `now`.
        let now = Instant::now() + Duration::from_secs(100);
        for (i, secs) in [65, 3, 1].into_iter().enumerate() {
            running.attempts[i].1.started = now - Duration::from_secs(secs);
        }
        assert_eq!(
            running.lines(now),
            [
                "  fix_parser#2 shell             turn 2    1m05s",
                "  add_readme#1 shell (try 2)     check     3s",
                "  fix_parser#3 shell, treatment  starting  1s",
            ]
        );
        let mut ended = Record::new("r", "fix_parser", "shell", 2, 1);
        ended.outcome = Outcome::Pass;
        running.follow(&RunEvent::AttemptEnded { record: Box::new(ended), retry: Retry::Final });
        assert_eq!(running.lines(now).len(), 2, "an attempt that ended is gone");
        assert_eq!(running.phase_of(&readme).as_deref(), Some("check"));
    }

    #[test]
    fn past_six_running_attempts_the_rest_are_counted() {
        let mut running = Running::default();
        for trial in 1..=9 {
            running.follow(&RunEvent::AttemptStarted(id("e", trial, 1)));
        }
        let lines = running.lines(Instant::now());
        assert_eq!(lines.len(), 7, "{lines:?}");
        assert_eq!(lines[6], "  … and 3 more");
    }
}
