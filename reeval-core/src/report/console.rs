//! The console: libtest's lines (`running N tests`, `test X ... ok`, the
//! failures and the `test result:` line, so cargo and nextest read them),
//! libtest's `has been running for over 60 seconds` for long attempts (naming
//! the trial, the harness and the phase), with
//! `-v` one line per phase and turn as it happens, with `--stream` the
//! agent's events, and reeval's closing summary.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::time::{Duration, Instant};

use super::lines::Lines;
use super::{Reporter, arm_label};
use crate::harness::AgentEvent;
use crate::outcome::Outcome;
use crate::record::{CellSummary, Record};
use crate::report::events::{AttemptId, RunEvent};
use crate::report::summary::RunReport;

/// Prints the run for a person or for cargo/nextest.
#[derive(Debug)]
pub struct Console {
    /// Print every phase of every attempt.
    verbose: bool,
    /// Print libtest's lines and the summary (off when embedding with `-v` only).
    lines: bool,
    /// Print the agent's events as they arrive.
    stream: bool,
    ignored: Vec<String>,
    filtered_out: usize,
    began: Instant,
    /// After how long a running attempt is announced, and again after each further period.
    slow_after: Duration,
    /// Running attempts: when each started and how many periods were announced.
    running: HashMap<AttemptId, (Instant, u32)>,
    /// What each running attempt is doing, for the notice.
    doing: super::live::Running,
    out: Lines,
}

impl Console {
    /// A console printing libtest's lines when `lines`, and every phase when `verbose`.
    pub fn new(lines: bool, verbose: bool) -> Self {
        Self {
            verbose,
            lines,
            stream: false,
            ignored: Vec::new(),
            filtered_out: 0,
            began: Instant::now(),
            slow_after: Duration::from_secs(60),
            running: HashMap::new(),
            doing: Default::default(),
            out: Lines::default(),
        }
    }

    /// Evals listed as ignored, and how many the filters left out (libtest's counts).
    pub fn selection(mut self, ignored: Vec<String>, filtered_out: usize) -> Self {
        self.ignored = ignored;
        self.filtered_out = filtered_out;
        self
    }

    /// Announces attempts running longer than `after` (and again after each further `after`).
    pub fn slow_after(mut self, after: Duration) -> Self {
        self.slow_after = after.max(Duration::from_millis(1));
        self
    }

    /// Prints the agent's events as they arrive (`--stream`).
    pub fn stream(mut self, stream: bool) -> Self {
        self.stream = stream;
        self
    }

    /// Prints through `out` (around a progress display).
    pub fn printing_to(mut self, out: Lines) -> Self {
        self.out = out;
        self
    }

    fn prefix(id: &AttemptId) -> String {
        format!(
            "[{}#{} {}] {}",
            id.eval,
            id.trial,
            arm_label(&id.harness, id.arm.as_deref()),
            clock()
        )
    }

    fn slow_attempts(&mut self) -> io::Result<()> {
        let mut lines = Vec::new();
        for (id, (started, announced)) in &mut self.running {
            let periods = (started.elapsed().as_secs_f64() / self.slow_after.as_secs_f64()) as u32;
            if periods > *announced {
                *announced = periods;
                let secs = (self.slow_after * periods).as_secs();
                lines.push(slow_notice(id, secs, self.doing.phase_of(id).as_deref()));
            }
        }
        lines.sort();
        for line in lines {
            self.out.out(&line)?;
        }
        Ok(())
    }
}

/// The evals that cannot run, each with why, said when the run starts.
pub(crate) fn cannot_run_listing(cannot_run: &[(String, String)]) -> String {
    let n = cannot_run.len();
    let mut text = format!(
        "{n} {} cannot run (config outcomes, not retried; the rest of the run goes on):\n",
        plural(n, "eval")
    );
    for (eval, why) in cannot_run {
        text.push_str(&format!("  {eval}: {why}\n"));
    }
    text
}

/// `test fix_parser#2 shell has been running for over 60 seconds (in turn 1)`: libtest's
/// notice, naming the trial and the harness, and the phase when known.
pub(crate) fn slow_notice(id: &AttemptId, secs: u64, phase: Option<&str>) -> String {
    let label = super::live::attempt_label(id);
    let phase = phase.map(|p| format!(" (in {p})")).unwrap_or_default();
    format!("test {label} has been running for over {secs} seconds{phase}\n")
}

impl Reporter for Console {
    fn event(&mut self, event: &RunEvent) -> io::Result<()> {
        self.doing.follow(event);
        match event {
            RunEvent::Planned { evals, cannot_run, .. } => {
                if self.lines {
                    let mut text =
                        format!("\nrunning {} {}\n", evals.len(), plural(evals.len(), "test"));
                    for name in &self.ignored {
                        text.push_str(&format!("test {name} ... ignored\n"));
                    }
                    self.out.out(&text)?;
                }
                if !cannot_run.is_empty() {
                    self.out.err(&cannot_run_listing(cannot_run));
                }
            }
            RunEvent::AttemptStarted(id) => {
                self.running.insert(id.clone(), (Instant::now(), 0));
            }
            RunEvent::AttemptEnded { record, .. } => {
                self.running.retain(|id, _| {
                    !(id.eval == record.eval
                        && id.harness == record.harness
                        && id.arm == record.arm
                        && id.trial == record.trial
                        && id.try_ == record.try_)
                });
            }
            RunEvent::Tick if self.lines => self.slow_attempts()?,
            RunEvent::PhaseEnded { attempt, phase } if self.verbose => {
                let line = format!("{} {}", phase.phase, phase.detail);
                self.out.err(&format!("{} {}\n", Self::prefix(attempt), line.trim_end()));
            }
            RunEvent::AttemptNote { attempt, event } if self.verbose => {
                self.out.err(&format!("{} event {}\n", Self::prefix(attempt), event.message));
            }
            RunEvent::TurnStarted { attempt, index, prompt } if self.verbose || self.stream => {
                self.out
                    .err(&format!("{} turn {index} started: {prompt:?}\n", Self::prefix(attempt)));
            }
            RunEvent::AgentActed { attempt, event } if self.stream => {
                let what = match event {
                    AgentEvent::ToolCall { name, input } => format!("tool {name} {input}"),
                    AgentEvent::Edit { path } => format!("edit {path}"),
                    AgentEvent::Message { text } => format!("says {text}"),
                };
                self.out.err(&format!("{} {what}\n", Self::prefix(attempt)));
            }
            RunEvent::EvalEnded { eval, finals } if self.lines => {
                let status = match eval_status(finals) {
                    EvalStatus::Ok => "ok",
                    EvalStatus::Failed => "FAILED",
                    EvalStatus::Infra => "FAILED (infra error)",
                };
                self.out.out(&format!("test {eval} ... {status}\n"))?;
            }
            _ => {}
        }
        Ok(())
    }

    fn finish(&mut self, report: &RunReport) -> io::Result<()> {
        if self.lines {
            let text =
                summary_text(report, self.ignored.len(), self.filtered_out, self.began.elapsed());
            self.out.out(&text)?;
        }
        Ok(())
    }
}

/// How an eval ended, over its cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EvalStatus {
    /// Every cell passed (by its min pass rate where it has one), no infra error.
    Ok,
    /// A cell failed.
    Failed,
    /// Only infra errors kept it from passing.
    Infra,
}

/// The status of an eval from the final tries of its trials.
pub(crate) fn eval_status(finals: &[Record]) -> EvalStatus {
    // (harness, arm) → passed, failed, min pass rate.
    type Counts = (u32, u32, Option<f64>);
    let mut cells: BTreeMap<(&str, Option<&str>), Counts> = BTreeMap::new();
    let mut infra = false;
    for r in finals {
        let cell = cells.entry((r.harness.as_str(), r.arm.as_deref())).or_default();
        cell.2 = cell.2.or(r.min_pass_rate);
        match r.outcome {
            Outcome::Pass => cell.0 += 1,
            Outcome::Fail(_) => cell.1 += 1,
            Outcome::InfraError | Outcome::Config => infra = true,
        }
    }
    if cells.values().any(|&(p, f, min)| !crate::stats::cell_passes(p, f, min)) {
        EvalStatus::Failed
    } else if infra {
        EvalStatus::Infra
    } else {
        EvalStatus::Ok
    }
}

/// `1 attempt`, `2 attempts`.
fn plural(n: usize, word: &str) -> String {
    if n == 1 { word.to_string() } else { format!("{word}s") }
}

/// `HH:MM:SS` of now, UTC.
pub(super) fn clock() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
        % 86_400;
    format!("{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60)
}

/// A cell's figures on one line: passes, rate with its interval, threshold, pass@k and pass^k by k, cost.
pub(crate) fn cell_line(c: &CellSummary) -> String {
    let graded = c.passed + c.failed;
    let rate = match (c.pass_rate, c.pass_rate_interval) {
        (Some(r), Some([lo, hi])) => {
            format!("{:.0}% [95% CI {:.0}–{:.0}%]", r * 100.0, lo * 100.0, hi * 100.0)
        }
        _ => "n/a".into(),
    };
    let infra = match (c.infra, c.ok) {
        (0, _) => String::new(),
        (n, None) => format!(", {n} infra: no graded attempt, neither passed nor failed"),
        (n, Some(_)) => format!(", {n} infra"),
    };
    let threshold = c
        .min_pass_rate
        .map(|m| {
            format!(
                ", min {:.0}%: {}",
                m * 100.0,
                if c.ok == Some(true) { "met" } else { "not met" }
            )
        })
        .unwrap_or_default();
    let by_k = if c.by_k.is_empty() {
        "pass@k n/a (nothing graded)".to_string()
    } else {
        let at = c.by_k.iter().map(|a| format!("@{} {:.2}", a.k, a.pass_at_k));
        let pow = c.by_k.iter().map(|a| format!("^{} {:.2}", a.k, a.pass_pow_k));
        format!(
            "pass{}; pass{}",
            at.collect::<Vec<_>>().join(" "),
            pow.collect::<Vec<_>>().join(" ")
        )
    };
    // Priced from partial usage, it is a lower bound.
    let least = if c.usage.partial { "at least " } else { "" };
    let cost = c.cost_usd.map(|usd| format!("; {least}${usd:.4}")).unwrap_or_default();
    let reward = c.reward.as_ref().map(reward_text).unwrap_or_default();
    format!(
        "  {} [{}]: {}/{graded} passed, {rate}{infra}{threshold}{reward}; {by_k}{cost}\n",
        c.eval,
        arm_label(&c.harness, c.arm.as_deref()),
        c.passed
    )
}

/// `, mean reward 0.62 [95% CI 0.31–0.85]` (with the attempts that left none, and a threshold other than 1).
pub(crate) fn reward_text(r: &crate::stats::reward::RewardSummary) -> String {
    let interval = match r.interval {
        Some([lo, hi]) => format!(" [95% CI {lo:.2}–{hi:.2}]"),
        None => " [no interval: one reward]".to_string(),
    };
    let unrewarded = match r.unrewarded {
        0 => String::new(),
        n => format!(", {n} graded without a reward"),
    };
    let threshold = match r.threshold {
        Some(t) if t != 1.0 => format!(", passing at {t}"),
        _ => String::new(),
    };
    format!(", mean reward {:.2}{interval}{unrewarded}{threshold}", r.mean)
}

/// The closing part of a run: failures, libtest's `test result:` line, reeval's summary.
fn summary_text(
    report: &RunReport,
    ignored: usize,
    filtered_out: usize,
    elapsed: Duration,
) -> String {
    let mut out = String::new();
    let finals = report.final_records();
    let failing: Vec<&&Record> = finals.iter().filter(|r| r.outcome != Outcome::Pass).collect();
    if !failing.is_empty() {
        out.push_str("\nfailures:\n\n");
        for r in &failing {
            let kind = r.outcome.kind().map(|k| k.as_str()).unwrap_or("");
            let outcome = r.outcome.as_str();
            let source = r.source.as_deref().map(|s| format!(" ({s})")).unwrap_or_default();
            out.push_str(&format!(
                "---- {} #{} [{}] {outcome}/{kind}{source} ----\n",
                r.eval,
                r.trial,
                arm_label(&r.harness, r.arm.as_deref())
            ));
            // Tries that failed alike are one failure, said once.
            let tries: Vec<&Record> = report
                .records
                .iter()
                .filter(|t| t.cell() == r.cell() && t.trial == r.trial)
                .collect();
            out.push_str(r.message.as_deref().unwrap_or(""));
            out.push('\n');
            if tries.len() > 1 {
                let alike = tries.iter().all(|t| t.message == r.message && t.outcome == r.outcome);
                out.push_str(&if alike {
                    format!("(the same on all {} tries)\n", tries.len())
                } else {
                    format!("({} tries; this is the last)\n", tries.len())
                });
            }
            if let Some(at) = &r.location {
                out.push_str(&format!("at: {at}\n"));
            }
            // The eval's own output, as libtest shows a failed test's.
            if let Some(printed) = &r.output {
                out.push_str(&format!("---- {} #{} output ----\n{printed}", r.eval, r.trial));
                if !printed.ends_with('\n') {
                    out.push('\n');
                }
            }
            out.push_str(&format!("record: {}\n\n", report.run_dir.join(r.file_name()).display()));
        }
        out.push_str("failures:\n");
        let mut names: Vec<&str> = failing.iter().map(|r| r.eval.as_str()).collect();
        names.dedup();
        for n in names {
            out.push_str(&format!("    {n}\n"));
        }
    }
    let mut evals: BTreeMap<&str, Vec<Record>> = BTreeMap::new();
    for r in &finals {
        evals.entry(r.eval.as_str()).or_default().push((*r).clone());
    }
    let passed = evals.values().filter(|f| eval_status(f) == EvalStatus::Ok).count();
    let failed = evals.len() - passed;
    out.push_str(&format!(
        "\ntest result: {}. {passed} passed; {failed} failed; {ignored} ignored; 0 measured; {filtered_out} filtered out; finished in {:.2}s\n\n",
        if failed == 0 { "ok" } else { "FAILED" },
        elapsed.as_secs_f64()
    ));
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
    let least = if s.usage.partial { "at least " } else { "" };
    let cost = s.cost_usd.map(|usd| format!("; cost {least}${usd:.4}")).unwrap_or_default();
    out.push_str(&format!(
        "reeval: {} {} passed, {fails} failed{by_kind}, {} infra {}{cost}; {} (exit {}); records in {}\n",
        s.passed,
        plural(s.passed as usize, "attempt"),
        s.infra,
        plural(s.infra as usize, "error"),
        s.exit_reason,
        s.exit_code,
        report.run_dir.display()
    ));
    for c in &s.cells {
        out.push_str(&cell_line(c));
    }
    for eval in &s.broken_evals {
        out.push_str(&format!(
            "reeval: BROKEN EVAL {eval}: its oracle (reference solution) does not pass, so the eval or its environment is broken\n"
        ));
    }
    if let Some(comparison) = &s.comparison {
        out.push_str(&super::compare::table(comparison));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::FailKind;

    fn rec(eval: &str, trial: u32, try_: u32, outcome: Outcome) -> Record {
        let mut r = Record::new("run", eval, "shell", trial, try_);
        r.outcome = outcome;
        r
    }

    fn report(records: Vec<Record>) -> RunReport {
        let summary = crate::report::summary::summarize("run", &records);
        RunReport { run_id: "run".into(), run_dir: "/runs/run".into(), records, summary }
    }

    #[test]
    fn the_summary_counts_words_right_and_says_why() {
        let text = summary_text(
            &report(vec![rec("a", 1, 1, Outcome::Pass), rec("b", 1, 1, Outcome::InfraError)]),
            0,
            0,
            Duration::from_secs(1),
        );
        assert!(text.contains("reeval: 1 attempt passed, 0 failed, 1 infra error;"), "{text}");
        assert!(
            text.contains(
                "1 infra errors and no failing cell (1 cell with no graded attempt) (exit 3)"
            ),
            "{text}"
        );
        // An infra-only cell has nothing graded: no empty `pass@k ;`.
        assert!(
            text.contains("  b [shell]: 0/0 passed, n/a, 1 infra: no graded attempt, neither passed nor failed; pass@k n/a (nothing graded)"),
            "{text}"
        );
        assert!(
            text.contains(
                "  a [shell]: 1/1 passed, 100% [95% CI 21–100%]; pass@1 1.00; pass^1 1.00"
            ),
            "{text}"
        );
    }

    #[test]
    fn a_cell_with_rewards_says_its_mean_reward_beside_its_pass_rate() {
        let mut records = Vec::new();
        for (trial, reward) in [(1, Some(1.0)), (2, Some(0.0)), (3, None)] {
            let outcome = if reward == Some(1.0) {
                Outcome::Pass
            } else {
                Outcome::Fail(FailKind::Assertion)
            };
            let mut r = rec("task", trial, 1, outcome);
            r.reward = reward.map(|x| [("reward".to_string(), x)].into());
            r.reward_threshold = Some(0.5);
            records.push(r);
        }
        let text = summary_text(&report(records), 0, 0, Duration::from_secs(1));
        assert!(
            text.contains(
                "  task [shell]: 1/3 passed, 33% [95% CI 6–79%], mean reward 0.50 [95% CI 0.09–0.91], \
                 1 graded without a reward, passing at 0.5; pass@1"
            ),
            "{text}"
        );
    }

    #[test]
    fn tries_that_failed_alike_are_said_once() {
        let mut tries: Vec<Record> =
            (1..=3).map(|t| rec("setup", 1, t, Outcome::InfraError)).collect();
        for t in &mut tries {
            t.message = Some("failed to run setup step 1: exit 7".into());
        }
        let text = summary_text(&report(tries), 0, 0, Duration::from_secs(1));
        assert_eq!(text.matches("failed to run setup step 1").count(), 1, "{text}");
        assert!(text.contains("(the same on all 3 tries)"), "{text}");
    }

    #[test]
    fn a_min_pass_rate_makes_an_eval_ok() {
        let mut finals = vec![
            rec("flaky", 1, 1, Outcome::Pass),
            rec("flaky", 2, 1, Outcome::Pass),
            rec("flaky", 3, 1, Outcome::Fail(FailKind::Assertion)),
        ];
        assert_eq!(eval_status(&finals), EvalStatus::Failed);
        for r in &mut finals {
            r.min_pass_rate = Some(0.66);
        }
        assert_eq!(eval_status(&finals), EvalStatus::Ok);
    }

    #[test]
    fn long_attempts_are_announced_every_period() {
        let mut console = Console::new(true, false).slow_after(Duration::from_secs(100));
        let id = AttemptId {
            eval: "slow".into(),
            harness: "shell".into(),
            arm: None,
            trial: 1,
            try_: 1,
        };
        console.event(&RunEvent::AttemptStarted(id.clone())).unwrap();
        // Started 2.5 periods ago, whatever the machine's load (no sleeping).
        let started = &mut console.running.get_mut(&id).unwrap().0;
        *started = started.checked_sub(Duration::from_secs(250)).expect("the clock is past 250 s");
        console.slow_attempts().unwrap();
        assert_eq!(console.running[&id].1, 2, "two periods passed, both announced");
        console.slow_attempts().unwrap();
        assert_eq!(console.running[&id].1, 2, "nothing new to announce");
    }

    #[test]
    fn the_slow_notice_names_the_trial_and_the_phase() {
        let mut id = AttemptId {
            eval: "fix_parser".into(),
            harness: "shell".into(),
            arm: None,
            trial: 2,
            try_: 1,
        };
        assert_eq!(
            slow_notice(&id, 60, Some("turn 1")),
            "test fix_parser#2 shell has been running for over 60 seconds (in turn 1)\n"
        );
        id.try_ = 2;
        assert_eq!(
            slow_notice(&id, 120, None),
            "test fix_parser#2 shell (try 2) has been running for over 120 seconds\n"
        );
        // The console knows the phase from the event stream.
        let mut console = Console::new(true, false);
        console.event(&RunEvent::AttemptStarted(id.clone())).unwrap();
        console
            .event(&RunEvent::PhaseStarted { attempt: id.clone(), phase: crate::Phase::Setup })
            .unwrap();
        assert_eq!(console.doing.phase_of(&id).as_deref(), Some("setup"));
    }
}
