//! The console: libtest's lines (`running N tests`, `test X ... ok`, the
//! failures and the `test result:` line, so cargo and nextest read them),
//! with `-v` one line per phase as it happens, and reeval's closing summary.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::time::{Duration, Instant};

use super::Reporter;
use crate::outcome::Outcome;
use crate::record::Record;
use crate::runner::RunReport;
use crate::runner::events::{AttemptId, RunEvent};

/// Prints the run for a person or for cargo/nextest.
#[derive(Debug)]
pub struct Console {
    /// Print every phase of every attempt.
    verbose: bool,
    /// Print libtest's lines and the summary (off when embedding with `-v` only).
    lines: bool,
    ignored: Vec<String>,
    filtered_out: usize,
    began: Instant,
}

impl Console {
    /// A console printing libtest's lines when `lines`, and every phase when `verbose`.
    pub fn new(lines: bool, verbose: bool) -> Self {
        Self { verbose, lines, ignored: Vec::new(), filtered_out: 0, began: Instant::now() }
    }

    /// Evals listed as ignored, and how many the filters left out (libtest's counts).
    pub fn selection(mut self, ignored: Vec<String>, filtered_out: usize) -> Self {
        self.ignored = ignored;
        self.filtered_out = filtered_out;
        self
    }

    fn prefix(id: &AttemptId) -> String {
        format!("[{}#{} {}] {}", id.eval, id.trial, id.harness, clock())
    }
}

impl Reporter for Console {
    fn event(&mut self, event: &RunEvent) -> io::Result<()> {
        match event {
            RunEvent::Planned { evals, .. } if self.lines => {
                let mut out = io::stdout().lock();
                writeln!(
                    out,
                    "\nrunning {} test{}",
                    evals.len(),
                    if evals.len() == 1 { "" } else { "s" }
                )?;
                for name in &self.ignored {
                    writeln!(out, "test {name} ... ignored")?;
                }
            }
            RunEvent::PhaseEnded { attempt, phase } if self.verbose => {
                eprintln!(
                    "{} {}",
                    Self::prefix(attempt),
                    format!("{} {}", phase.phase, phase.detail).trim_end()
                );
            }
            RunEvent::AttemptNote { attempt, event } if self.verbose => {
                eprintln!("{} event {}", Self::prefix(attempt), event.message);
            }
            RunEvent::EvalEnded { eval, finals } if self.lines => {
                let status = if finals.iter().all(|r| r.outcome == Outcome::Pass) {
                    "ok"
                } else if finals.iter().any(|r| r.outcome.is_fail()) {
                    "FAILED"
                } else {
                    "FAILED (infra error)"
                };
                writeln!(io::stdout().lock(), "test {eval} ... {status}")?;
            }
            _ => {}
        }
        Ok(())
    }

    fn finish(&mut self, report: &RunReport) -> io::Result<()> {
        if self.lines {
            print_summary(report, self.ignored.len(), self.filtered_out, self.began.elapsed())?;
        }
        Ok(())
    }
}

/// `HH:MM:SS` of now, UTC.
pub fn clock() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
        % 86_400;
    format!("{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60)
}

/// Prints the closing part of a run: failures, libtest's `test result:` line, reeval's summary.
fn print_summary(
    report: &RunReport,
    ignored: usize,
    filtered_out: usize,
    elapsed: Duration,
) -> io::Result<()> {
    let mut out = io::stdout().lock();
    let finals = report.final_records();
    let failing: Vec<&&Record> = finals.iter().filter(|r| r.outcome != Outcome::Pass).collect();
    if !failing.is_empty() {
        writeln!(out, "\nfailures:\n")?;
        for r in &failing {
            let kind = r.outcome.kind().map(|k| k.as_str()).unwrap_or("");
            let outcome = r.outcome.as_str();
            let source = r.source.as_deref().map(|s| format!(" ({s})")).unwrap_or_default();
            writeln!(
                out,
                "---- {} #{} [{}] {outcome}/{kind}{source} ----",
                r.eval, r.trial, r.harness
            )?;
            writeln!(out, "{}", r.message.as_deref().unwrap_or(""))?;
            writeln!(out, "record: {}\n", report.run_dir.join(r.file_name()).display())?;
        }
        writeln!(out, "failures:")?;
        let mut names: Vec<&str> = failing.iter().map(|r| r.eval.as_str()).collect();
        names.dedup();
        for n in names {
            writeln!(out, "    {n}")?;
        }
    }
    let mut evals: BTreeMap<&str, bool> = BTreeMap::new();
    for r in &finals {
        *evals.entry(r.eval.as_str()).or_insert(true) &= r.outcome == Outcome::Pass;
    }
    let passed = evals.values().filter(|ok| **ok).count();
    let failed = evals.len() - passed;
    writeln!(
        out,
        "\ntest result: {}. {passed} passed; {failed} failed; {ignored} ignored; 0 measured; {filtered_out} filtered out; finished in {:.2}s\n",
        if failed == 0 { "ok" } else { "FAILED" },
        elapsed.as_secs_f64()
    )?;
    let s = &report.summary;
    let fails: u32 = s.failed.values().sum();
    let by_kind = if s.failed.is_empty() {
        String::new()
    } else {
        format!(
            " ({})",
            s.failed.iter().map(|(k, n)| format!("{k}: {n}")).collect::<Vec<_>>().join(", ")
        )
    };
    writeln!(
        out,
        "reeval: {} attempts passed, {fails} failed{by_kind}, {} infra errors; records in {}",
        s.passed,
        s.infra,
        report.run_dir.display()
    )?;
    for c in &s.cells {
        let rate =
            c.pass_rate.map(|r| format!("{:.0}%", r * 100.0)).unwrap_or_else(|| "n/a".into());
        let at = |v: &[f64]| v.iter().map(|x| format!("{x:.2}")).collect::<Vec<_>>().join("/");
        let infra = if c.infra > 0 { format!(", {} infra", c.infra) } else { String::new() };
        writeln!(
            out,
            "  {} [{}]: {}/{} passed ({rate}){infra}; pass@k {}; pass^k {}",
            c.eval,
            c.harness,
            c.passed,
            c.passed + c.failed,
            at(&c.pass_at_k),
            at(&c.pass_pow_k)
        )?;
    }
    Ok(())
}
