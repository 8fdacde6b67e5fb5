//! An attempt's turns, checks and judge calls as one list, in the order
//! they ran. The record keeps them in three lists; its phase records (each
//! with its start) say in which order they ran: the n-th `turn` phase is the
//! n-th turn, a `check` phase is the next check when its detail names that
//! check's exit code and time (a check that failed to run has a phase and no
//! check record), and the `judge` phases are the verdicts in order (one that
//! ran out of budget gave none). What no phase accounts for (a turn cut by
//! an interruption) follows at the end.

use crate::phase::Phase;
use crate::record::{CheckRecord, PhaseRecord, Record, Verdict};
use crate::turn::{Turn, TurnStatus};

/// One step of an attempt, as the page shows it.
pub(super) struct StepView {
    /// `turn`, `check`, `judge`.
    pub(super) kind: &'static str,
    /// When it began, from the attempt's start (`+1.25s`); empty when unknown.
    pub(super) at: String,
    /// Whether it went wrong (a failed or stopped turn, a check that exited non-zero, …).
    pub(super) bad: bool,
    /// The one-line title.
    pub(super) title: String,
    /// What it did, when opened: one of these.
    pub(super) turn: Option<TurnView>,
    pub(super) check: Option<CheckView>,
    pub(super) verdict: Option<VerdictView>,
    /// A step that ended in an error and left no record of its own (the phase's detail).
    pub(super) error: String,
}

pub(super) struct DiffLine {
    pub(super) class: &'static str,
    pub(super) text: String,
}

pub(super) struct ToolView {
    pub(super) name: String,
    pub(super) input: String,
    pub(super) result: String,
}

pub(super) struct TurnView {
    pub(super) prompt: String,
    pub(super) final_message: String,
    /// What the harness said when the turn failed (not for a turn that was stopped).
    pub(super) error: String,
    pub(super) tools: Vec<ToolView>,
    pub(super) files: Vec<String>,
    pub(super) diff: Vec<DiffLine>,
}

pub(super) struct CheckView {
    pub(super) stdout: String,
    pub(super) stderr: String,
}

pub(super) struct VerdictView {
    pub(super) reasoning: String,
    pub(super) error: String,
}

/// The steps of `r`, in the order they ran; every text through `redact`.
pub(super) fn steps(r: &Record, redact: &dyn Fn(&str) -> String) -> Vec<StepView> {
    let mut ran: Vec<&PhaseRecord> = r
        .phases
        .iter()
        .filter(|p| matches!(p.phase, Phase::Turn | Phase::Check | Phase::Judge))
        .collect();
    ran.sort_by_key(|p| p.start_ms);
    let (mut turns, mut checks, mut verdicts) =
        (r.turns.iter().enumerate().peekable(), r.checks.iter().peekable(), r.verdicts.iter());
    let mut steps = Vec::new();
    for p in ran {
        let at = at(p.start_ms);
        let step = match p.phase {
            Phase::Turn => turns.next().map(|(i, t)| turn_step(i + 1, t, at.clone(), redact)),
            Phase::Check => checks
                .next_if(|c| {
                    p.detail.ends_with(&format!("exited {} in {}ms", c.exit_code, c.duration_ms))
                })
                .map(|c| check_step(c, at.clone(), redact)),
            _ => verdicts.next().map(|v| verdict_step(v, at.clone(), redact)),
        };
        steps.push(step.unwrap_or_else(|| StepView {
            kind: p.phase.as_str(),
            at,
            bad: true,
            title: format!("{} did not finish", p.phase),
            turn: None,
            check: None,
            verdict: None,
            error: redact(&p.detail),
        }));
    }
    steps.extend(turns.map(|(i, t)| turn_step(i + 1, t, String::new(), redact)));
    steps.extend(checks.map(|c| check_step(c, String::new(), redact)));
    steps.extend(verdicts.map(|v| verdict_step(v, String::new(), redact)));
    steps
}

fn at(ms: u64) -> String {
    format!("+{:.2}s", ms as f64 / 1000.0)
}

fn secs(ms: u64) -> String {
    format!("{:.1}s", ms as f64 / 1000.0)
}

/// `completed in 1.2s`, `timed out after 30.0s`: how a turn ended.
pub(super) fn turn_status(t: &Turn) -> String {
    let took = secs(t.duration_ms);
    match t.status {
        TurnStatus::Completed => format!("completed in {took}"),
        TurnStatus::Failed => format!("failed after {took}"),
        TurnStatus::TimedOut => format!("timed out after {took}"),
        TurnStatus::Aborted => format!("stopped after {took}: the attempt's budget ran out"),
        TurnStatus::Interrupted => format!("interrupted after {took}"),
    }
}

fn turn_step(index: usize, t: &Turn, at: String, redact: &dyn Fn(&str) -> String) -> StepView {
    let stopped =
        matches!(t.status, TurnStatus::TimedOut | TurnStatus::Aborted | TurnStatus::Interrupted);
    let mut title = format!("turn {index} {}", turn_status(t));
    if let Some(model) = &t.model {
        title.push_str(&format!(" · {model}"));
    }
    if !t.diff.files.is_empty() {
        let n = t.diff.files.len();
        title.push_str(&format!(" · {n} {}", if n == 1 { "file" } else { "files" }));
    }
    StepView {
        kind: "turn",
        at,
        bad: t.status != TurnStatus::Completed,
        title,
        turn: Some(TurnView {
            prompt: redact(&t.prompt),
            final_message: super::message_end(redact(t.final_message.as_deref().unwrap_or(""))),
            // A stopped turn's harness only reports the signal that stopped it (`exited 143`).
            error: if stopped { String::new() } else { redact(t.error.as_deref().unwrap_or("")) },
            tools: t
                .tool_calls
                .iter()
                .map(|c| ToolView {
                    name: c.name.clone(),
                    input: redact(&c.input.to_string()),
                    result: redact(c.error.as_deref().or(c.result.as_deref()).unwrap_or_default()),
                })
                .collect(),
            // Paths byte for byte; only the change's name is lowercase.
            files: t
                .diff
                .files
                .iter()
                .map(|f| format!("{} ({})", f.path, format!("{:?}", f.change).to_lowercase()))
                .collect(),
            diff: diff_lines(&redact(&t.diff.patch)),
        }),
        check: None,
        verdict: None,
        error: String::new(),
    }
}

fn check_step(c: &CheckRecord, at: String, redact: &dyn Fn(&str) -> String) -> StepView {
    let command = redact(&c.command);
    let line = command.lines().next().unwrap_or_default();
    let more = if command.lines().count() > 1 { " …" } else { "" };
    let oom = if c.oom_killed { " (killed: out of memory)" } else { "" };
    let wrote = c.changes.as_ref().map_or(String::new(), |d| {
        format!(" · changed {} (the check's own, not in the agent's diff)", files(d.files.len()))
    });
    // A step of the eval's own machinery is shown by what it does, as a step, not a check.
    let (kind, title) = match &c.step {
        Some(name) => (
            "step",
            format!("step {}: exited {} in {}ms{oom}", redact(name), c.exit_code, c.duration_ms),
        ),
        None => (
            "check",
            format!(
                "check `{line}{more}` exited {} in {}ms{oom}{wrote}",
                c.exit_code, c.duration_ms
            ),
        ),
    };
    StepView {
        kind,
        at,
        bad: c.exit_code != 0,
        title,
        turn: None,
        check: Some(CheckView { stdout: redact(&c.stdout_tail), stderr: redact(&c.stderr_tail) }),
        verdict: None,
        error: String::new(),
    }
}

fn verdict_step(v: &Verdict, at: String, redact: &dyn Fn(&str) -> String) -> StepView {
    let model = v.model.as_deref().map(|m| format!(" · {m}")).unwrap_or_default();
    let result = if v.error.is_some() {
        "could not judge".to_string()
    } else {
        format!(
            "{} with {:.2} (threshold {:.2})",
            if v.pass { "passed" } else { "did not pass" },
            v.score,
            v.threshold
        )
    };
    StepView {
        kind: "judge",
        at,
        bad: !v.pass,
        title: format!("judge {:?} {result}{model}", redact(&v.criterion)),
        turn: None,
        check: None,
        verdict: Some(VerdictView {
            reasoning: redact(&v.reasoning),
            error: redact(v.error.as_deref().unwrap_or("")),
        }),
        error: String::new(),
    }
}

fn diff_lines(patch: &str) -> Vec<DiffLine> {
    patch
        .lines()
        .map(|l| DiffLine {
            class: if l.starts_with("+++") || l.starts_with("---") || l.starts_with("diff ") {
                "d-file"
            } else if l.starts_with("@@") {
                "d-hunk"
            } else if l.starts_with('+') {
                "d-add"
            } else if l.starts_with('-') {
                "d-del"
            } else {
                "d-ctx"
            },
            text: l.to_string(),
        })
        .collect()
}

fn files(n: usize) -> String {
    if n == 1 { "1 file".into() } else { format!("{n} files") }
}
