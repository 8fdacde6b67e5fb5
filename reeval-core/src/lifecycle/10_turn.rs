//! The turn phase: one `send` is one agent turn, then the turn's diff. A turn
//! the budget (or its own limit) stops gets a grace to end, then its process
//! tree is killed; its diff is taken either way, so the record shows the
//! agent's work.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::TurnUnsettled;
use crate::diff::{Diff, Snapshot};
use crate::error::Error;
use crate::harness::{Harness, HarnessError, TurnContext};
use crate::sandbox::{SandboxHandle, Signal};
use crate::turn::{Turn, TurnReport, TurnStatus};

/// How long a turn gets to stop once its time is up, before its processes are killed.
pub(crate) const TURN_GRACE: Duration = Duration::from_secs(3);

/// How a turn's future ended.
pub(crate) enum TurnEnd {
    /// The harness reported, on its own or within the grace.
    Report(TurnReport),
    /// The harness could not run the turn at all.
    HarnessFailed(HarnessError),
    /// Stopped, and the harness never reported (an in-process agent that ignored the stop).
    NoReport,
}

/// What one turn did, before its diff.
pub(crate) struct Ran {
    pub(crate) end: TurnEnd,
    pub(crate) status: TurnStatus,
    pub(crate) elapsed: Duration,
}

/// Runs one turn as the agent user until it reports, the budget's `signal`
/// fires (aborted), the run is interrupted (interrupted) or its own `limit`
/// passes (timed out).
#[expect(clippy::too_many_arguments, reason = "one turn's inputs, each from its own place")]
pub(crate) async fn run(
    harness: &mut dyn Harness,
    agent: &SandboxHandle,
    prompt: &str,
    turn: &TurnContext,
    signal: &CancellationToken,
    interrupt: &CancellationToken,
    limit: Option<Duration>,
    unsettled: &TurnUnsettled,
) -> Ran {
    let began = Instant::now();
    unsettled.store(true, Ordering::SeqCst);
    let fut = harness.turn(agent, prompt, turn);
    tokio::pin!(fut);
    let stopped = tokio::select! {
        r = &mut fut => Ok(r),
        _ = signal.cancelled() => Err(TurnStatus::Aborted),
        _ = interrupt.cancelled() => Err(TurnStatus::Interrupted),
        _ = sleep_for(limit) => Err(TurnStatus::TimedOut),
    };
    let (end, status) = match stopped {
        Ok(Ok(report)) => {
            let status = report.status;
            (TurnEnd::Report(report), status)
        }
        Ok(Err(e)) => (TurnEnd::HarnessFailed(e), TurnStatus::Failed),
        Err(status) => {
            // Ask the turn to stop, give it the grace, then kill its process tree.
            let _ = agent.sandbox().kill(Signal::Term).await;
            let report = match tokio::time::timeout(TURN_GRACE, &mut fut).await {
                Ok(r) => r.ok(),
                Err(_) => {
                    let _ = agent.sandbox().kill(Signal::Kill).await;
                    tokio::time::timeout(Duration::from_secs(1), &mut fut)
                        .await
                        .ok()
                        .and_then(|r| r.ok())
                }
            };
            (report.map(TurnEnd::Report).unwrap_or(TurnEnd::NoReport), status)
        }
    };
    if matches!(end, TurnEnd::Report(_))
        && matches!(status, TurnStatus::Completed | TurnStatus::Failed)
    {
        unsettled.store(false, Ordering::SeqCst);
    }
    Ran { end, status, elapsed: began.elapsed() }
}

/// The workspace now, and the diff from `before`; a workspace that cannot be
/// read gives an empty diff and the reason, and keeps `before`.
pub(crate) async fn diff(
    handle: &SandboxHandle,
    before: Snapshot,
) -> (Diff, Snapshot, Option<String>) {
    match before.refresh(handle).await {
        Ok(now) => (before.diff(&now), now, None),
        Err(e) => (Diff::default(), before, Some(e.to_string())),
    }
}

/// A turn that started and has not concluded: what the record holds if
/// nothing more is learned (the attempt ends while it runs).
pub(crate) fn started(prompt: String) -> Turn {
    Turn {
        prompt,
        status: TurnStatus::Aborted,
        final_message: None,
        model: None,
        usage: Default::default(),
        tool_calls: Vec::new(),
        file_edits: Vec::new(),
        error: None,
        duration_ms: 0,
        diff: Diff::default(),
    }
}

/// The end of what the agent printed in the last turn of `turns` that printed
/// anything (its final message, else its last tool result or error), on one line.
pub(crate) fn output_tail(turns: &[Turn]) -> Option<String> {
    let said = |t: &Turn| {
        t.final_message
            .clone()
            .or_else(|| t.tool_calls.last().and_then(|c| c.result.clone().or(c.error.clone())))
            .or_else(|| t.error.clone())
            .filter(|s| !s.trim().is_empty())
    };
    let text = turns.iter().rev().find_map(said)?;
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let start = line.char_indices().rev().nth(299).map_or(0, |(i, _)| i);
    Some(if start > 0 { format!("…{}", &line[start..]) } else { line })
}

/// The prompt's first 60 characters on one line, for `turn N started: "…"`.
pub(crate) fn prompt_head(prompt: &str) -> String {
    let line = prompt.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(60) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line,
    }
}

/// The turn as recorded, and the error it ends the attempt with, if any.
pub(crate) fn conclude(
    prompt: String,
    ran: Ran,
    diff: Diff,
    harness: &str,
    spent: Duration,
) -> (Turn, Option<Error>) {
    let Ran { end, status, elapsed } = ran;
    let (report, error) = match end {
        TurnEnd::Report(report) => {
            let error = crate::outcome::turn_error(harness, status, Some(&report), elapsed, spent);
            (report, error)
        }
        TurnEnd::NoReport => (
            TurnReport::default(),
            crate::outcome::turn_error(harness, status, None, elapsed, spent),
        ),
        TurnEnd::HarnessFailed(e) => (
            TurnReport {
                status: TurnStatus::Failed,
                error: Some(e.to_string()),
                ..TurnReport::default()
            },
            Some(Error::from(e)),
        ),
    };
    let turn = Turn {
        prompt,
        status,
        final_message: report.final_message,
        model: report.model,
        usage: report.usage,
        tool_calls: report.tool_calls,
        file_edits: report.file_edits,
        error: report.error,
        duration_ms: elapsed.as_millis() as u64,
        diff,
    };
    (turn, error)
}

/// The phase's detail: `1 completed in 0.2s, 1 files changed`.
pub(crate) fn detail(index: usize, turn: &Turn) -> String {
    format!(
        "{index} {} in {:.1}s, {} files changed",
        status_name(turn.status),
        turn.duration_ms as f64 / 1000.0,
        turn.diff.files.len()
    )
}

/// The first prompt carries the context summary when the environment asks for one.
pub(crate) fn with_context(
    prompt: &str,
    index: u32,
    env: &crate::environment::Environment,
) -> String {
    if index == 1 && env.context_summary {
        format!("{prompt}\n\n{}", super::files::context_summary(env))
    } else {
        prompt.to_string()
    }
}

async fn sleep_for(limit: Option<Duration>) {
    match limit {
        Some(limit) => tokio::time::sleep(limit).await,
        None => std::future::pending::<()>().await,
    }
}

fn status_name(s: TurnStatus) -> &'static str {
    match s {
        TurnStatus::Completed => "completed",
        TurnStatus::Failed => "failed",
        TurnStatus::Aborted => "aborted",
        TurnStatus::TimedOut => "timed_out",
        TurnStatus::Interrupted => "interrupted",
    }
}
