//! `--format json`: libtest's JSON event stream on stdout, one object a line,
//! in the shape `cargo test -- -Z unstable-options --format json` prints and
//! IDEs and `cargo2junit` read. A test is an eval; reeval adds its outcome,
//! kind and record paths as extra fields of the test's result:
//!
//! ```text
//! { "type": "suite", "event": "started", "test_count": 2 }
//! { "type": "test", "event": "started", "name": "greet" }
//! { "type": "test", "name": "greet", "event": "failed", "exec_time": 3.1, "stdout": "…",
//!   "outcome": "fail", "kind": "assertion", "record": "/…/greet.shell.t1.try1.json",
//!   "attempts": [ { "harness": "shell", "trial": 1, "try": 1, "outcome": "fail",
//!                   "kind": "assertion", "record": "/…" } ] }
//! { "type": "suite", "event": "failed", "passed": 0, "failed": 1, "ignored": 0,
//!   "measured": 0, "filtered_out": 0, "exec_time": 3.2 }
//! ```

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::PathBuf;
use std::time::Instant;

use serde_json::{Value, json};

use super::Reporter;
use super::console::{EvalStatus, eval_status};
use super::lines::Lines;
use crate::outcome::Outcome;
use crate::record::Record;
use crate::report::events::RunEvent;
use crate::report::summary::RunReport;

/// Prints libtest's JSON events.
#[derive(Debug)]
pub struct LibtestJson {
    ignored: Vec<String>,
    filtered_out: usize,
    began: Instant,
    run_dir: PathBuf,
    /// When each eval's first attempt started.
    started: HashMap<String, Instant>,
    /// Every try of each eval, for the attempts field.
    tries: BTreeMap<String, Vec<Record>>,
    passed: usize,
    failed: usize,
    out: Lines,
}

impl LibtestJson {
    /// A stream on stdout; `ignored` evals are listed as ignored, `filtered_out` counted.
    pub fn new(ignored: Vec<String>, filtered_out: usize) -> Self {
        Self {
            ignored,
            filtered_out,
            began: Instant::now(),
            run_dir: PathBuf::new(),
            started: HashMap::new(),
            tries: BTreeMap::new(),
            passed: 0,
            failed: 0,
            out: Lines::default(),
        }
    }

    fn line(&self, value: Value) -> io::Result<()> {
        self.out.out(&format!("{value}\n"))
    }

    fn attempt(&self, r: &Record) -> Value {
        json!({
            "harness": r.harness,
            "arm": r.arm,
            "trial": r.trial,
            "try": r.try_,
            "outcome": r.outcome.as_str(),
            "kind": r.outcome.kind().map(|k| k.as_str()),
            "record": self.run_dir.join(r.file_name()),
        })
    }
}

impl Reporter for LibtestJson {
    fn event(&mut self, event: &RunEvent) -> io::Result<()> {
        match event {
            RunEvent::Planned { evals, run_dir, .. } => {
                self.run_dir = run_dir.clone();
                self.line(
                    json!({ "type": "suite", "event": "started", "test_count": evals.len() }),
                )?;
                for name in &self.ignored {
                    self.line(json!({ "type": "test", "event": "started", "name": name }))?;
                    self.line(json!({ "type": "test", "event": "ignored", "name": name }))?;
                }
            }
            RunEvent::AttemptStarted(id) if !self.started.contains_key(&id.eval) => {
                self.started.insert(id.eval.clone(), Instant::now());
                self.line(json!({ "type": "test", "event": "started", "name": id.eval }))?;
            }
            RunEvent::AttemptEnded { record, .. } => {
                self.tries.entry(record.eval.clone()).or_default().push((**record).clone());
            }
            RunEvent::EvalEnded { eval, finals } => {
                let ok = eval_status(finals) == EvalStatus::Ok;
                if !self.started.contains_key(eval) {
                    // A resumed run's eval whose every trial was kept.
                    self.line(json!({ "type": "test", "event": "started", "name": eval }))?;
                }
                let exec_time =
                    self.started.get(eval).map(|t| t.elapsed().as_secs_f64()).unwrap_or(0.0);
                // The eval's outcome: its worst final try (a fail over an infra error over a pass).
                let worst = finals
                    .iter()
                    .max_by_key(|r| match r.outcome {
                        Outcome::Pass => 0,
                        Outcome::InfraError => 1,
                        Outcome::Config => 2,
                        Outcome::Fail(_) => 3,
                    })
                    .cloned();
                let tries = self.tries.get(eval).cloned().unwrap_or_else(|| finals.clone());
                // Infra and config errors only: the eval was neither passed nor failed.
                let graded =
                    finals.iter().any(|r| matches!(r.outcome, Outcome::Pass | Outcome::Fail(_)));
                let status = match (graded, ok) {
                    (false, _) => "no_graded_attempts",
                    (true, true) => "passed",
                    (true, false) => "failed",
                };
                let mut line = json!({
                    "type": "test",
                    "name": eval,
                    "event": if ok { "ok" } else { "failed" },
                    "exec_time": exec_time,
                    "status": status,
                    "outcome": worst.as_ref().map(|r| r.outcome.as_str()),
                    "kind": worst.as_ref().and_then(|r| r.outcome.kind()).map(|k| k.as_str()),
                    "record": worst.as_ref().map(|r| self.run_dir.join(r.file_name())),
                    "attempts": tries.iter().map(|r| self.attempt(r)).collect::<Vec<_>>(),
                });
                if !ok {
                    let messages: Vec<String> = finals
                        .iter()
                        .filter(|r| r.outcome != Outcome::Pass)
                        .map(|r| {
                            let printed = r
                                .output
                                .as_deref()
                                .map(|o| format!("\n---- #{} output ----\n{o}", r.trial))
                                .unwrap_or_default();
                            format!(
                                "#{} [{}] {}: {}{printed}",
                                r.trial,
                                super::arm_label(&r.harness, r.arm.as_deref()),
                                r.outcome.kind().map(|k| k.as_str()).unwrap_or(""),
                                r.message.as_deref().unwrap_or("")
                            )
                        })
                        .collect();
                    line["stdout"] = Value::from(messages.join("\n"));
                }
                if ok {
                    self.passed += 1;
                } else {
                    self.failed += 1;
                }
                self.line(line)?;
            }
            _ => {}
        }
        Ok(())
    }

    fn finish(&mut self, report: &RunReport) -> io::Result<()> {
        self.line(json!({
            "type": "suite",
            "event": if self.failed == 0 { "ok" } else { "failed" },
            "passed": self.passed,
            "failed": self.failed,
            "ignored": self.ignored.len(),
            "measured": 0,
            "filtered_out": self.filtered_out,
            "exec_time": self.began.elapsed().as_secs_f64(),
            "exit_code": report.exit_code(),
        }))
    }
}
