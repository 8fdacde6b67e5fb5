//! The context an eval is written against. The sandbox starts lazily on the
//! first call that needs it, so the eval's own code runs first.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::budget::Budget;
use crate::diff::{Diff, Snapshot};
use crate::environment::Environment;
use crate::error::{Error, Result};
use crate::exec::{Command, ExecOutput};
use crate::harness::{Harness, TurnContext};
use crate::progress::PhaseLog;
use crate::record::{CheckRecord, Record};
use crate::sandbox::{DockerBackend, SandboxHandle};
use crate::turn::{Turn, TurnReport, TurnStatus};

/// How long a turn gets to stop once its time is up, before its processes are killed.
pub const TURN_GRACE: Duration = Duration::from_secs(3);
/// How much of a check's output the record keeps.
pub const CHECK_TAIL: usize = 4096;

/// Options of one turn (`Ctx::send_with`).
#[derive(Debug, Clone, Default)]
pub struct TurnOptions {
    /// Ends only this turn, as `timed_out`, when it runs out; the attempt goes on.
    pub timeout: Option<Duration>,
}

pub(crate) use crate::secrets::SecretScope;
use crate::secrets::{ExposeSecret, Redactor};

/// A secret resolved on the host in preflight.
pub(crate) type ResolvedSecret = crate::secrets::Secret;

/// The eval's handle on its attempt: agent turns, checks, files, diffs.
#[derive(Debug)]
pub struct Ctx {
    pub(crate) env: Environment,
    pub(crate) backend: Option<Arc<DockerBackend>>,
    pub(crate) harness: Option<Box<dyn Harness>>,
    pub(crate) budget: Budget,
    pub(crate) deadline: Option<Instant>,
    pub(crate) log: PhaseLog,
    pub(crate) record: Record,
    pub(crate) artifacts_dir: PathBuf,
    pub(crate) secrets: Vec<ResolvedSecret>,
    /// The run's redactor: the only way to anything written or printed.
    pub(crate) redactor: Redactor,
    pub(crate) sandbox: Option<SandboxHandle>,
    /// Where the lazy start is: not yet (or interrupted, when `sandbox` is set), ready, or failed.
    pub(crate) start: StartState,
    pub(crate) baseline: Option<Snapshot>,
    pub(crate) last_snapshot: Option<Snapshot>,
    pub(crate) harness_started: bool,
    /// Whether the unprivileged agent user is set up in the sandbox.
    pub(crate) agent_user_ready: bool,
    /// Failures that do not stop the eval (a verdict under its threshold).
    pub(crate) soft_failures: Vec<Error>,
    /// The judge model spec of the eval (`anthropic:claude-sonnet-4-5`), if set.
    pub(crate) judge_spec: Option<String>,
    /// Artifacts kept with `capture`, visible to the judge by name.
    pub(crate) captures: Vec<Capture>,
    /// OOM kills already reported.
    pub(crate) oom_kills_seen: u64,
    /// Set from a turn's start until it reports on its own: a turn still running
    /// gets its grace when the budget runs out, and teardown first kills what an
    /// unsettled turn may have left running.
    pub(crate) turn_unsettled: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Ports forwarded with `serve`, closed at teardown.
    pub(crate) forwards: Vec<crate::serve::Forward>,
}

/// An artifact kept with [`Ctx::capture`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capture {
    /// The name it was captured under.
    pub name: String,
    /// The artifact's file, relative to the attempt's artifact directory.
    pub file: String,
    /// Its text (or a note saying it is binary or an archive), for the judge.
    pub text: String,
}

impl Ctx {
    /// A token that fires when the attempt's budget runs out.
    pub fn signal(&self) -> CancellationToken {
        self.budget.signal()
    }

    /// The attempt's record so far.
    pub fn record(&self) -> &Record {
        &self.record
    }

    /// The attempt's artifact directory on the host.
    pub fn artifacts_dir(&self) -> &std::path::Path {
        &self.artifacts_dir
    }

    /// Runs `fut` unless the budget runs out first.
    pub(crate) async fn within_budget<T>(&self, fut: impl std::future::Future<Output = Result<T>>) -> Result<T> {
        let signal = self.budget.signal();
        tokio::select! {
            biased;
            _ = signal.cancelled() => Err(Error::Timeout { elapsed: self.budget.spent() }),
            r = fut => r,
        }
    }

    /// The sandbox, started on first use.
    pub(crate) async fn sandbox(&mut self) -> Result<SandboxHandle> {
        match (&self.start, &self.sandbox) {
            (StartState::Ready, Some(handle)) => return Ok(handle.clone()),
            (StartState::Failed(message), _) => return Err(Error::infra("start the sandbox", message)),
            _ => {}
        }
        // Starting the sandbox is not the eval's own work: it does not spend the budget.
        // The guard resumes the clock even if this future is dropped mid-start.
        let _paused = PausedBudget::new(self.budget.clone());
        let started = match self.deadline {
            Some(deadline) => match tokio::time::timeout_at(deadline.into(), crate::lifecycle::start(self)).await {
                Ok(r) => r,
                Err(_) => Err(Error::infra("start the sandbox", "the attempt's deadline passed during setup")),
            },
            None => crate::lifecycle::start(self).await,
        };
        self.start = match &started {
            Ok(_) => StartState::Ready,
            Err(e) => StartState::Failed(e.to_string()),
        };
        started
    }

    /// Sends one prompt to the agent: one turn, followed by a diff.
    ///
    /// # Errors
    /// [`Error::Timeout`] when the budget runs out during the turn (the turn is
    /// recorded `aborted`); [`Error::Agent`] when the agent failed on its own;
    /// an infra or config error when the harness could not run.
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped turn leaves its processes running until teardown.
    pub async fn send(&mut self, prompt: impl Into<String>) -> Result<Turn> {
        self.send_with(prompt, TurnOptions::default()).await
    }

    /// Sends one prompt with per-turn options. A turn that hits its own
    /// `timeout` is recorded `timed_out` and returned, so checks can grade partial work.
    ///
    /// # Errors
    /// As [`Ctx::send`].
    ///
    /// # Cancel safety
    /// As [`Ctx::send`].
    pub async fn send_with(&mut self, prompt: impl Into<String>, options: TurnOptions) -> Result<Turn> {
        let prompt = prompt.into();
        let handle = self.sandbox().await?;
        if self.harness.is_none() {
            return Err(Error::Config("failed to send a prompt: no harness is selected for this eval".into()));
        }
        if !self.harness_started {
            // The session starts on the first turn; like the sandbox, not on the budget.
            let _paused = PausedBudget::new(self.budget.clone());
            crate::lifecycle::start_harness(self, &handle).await?;
        }
        let index = self.record.turns.len() as u32 + 1;
        let reads_summary = self.harness.as_ref().is_some_and(|h| h.reads_context_summary());
        let sent = if reads_summary { prompt_with_context(&prompt, index, &self.env) } else { prompt.clone() };
        let turn_ctx = TurnContext { index, artifacts_dir: Some(self.artifacts_dir.clone()) };
        let signal = self.budget.signal();
        let began = Instant::now();
        self.turn_unsettled.store(true, std::sync::atomic::Ordering::SeqCst);
        let (ended, status) = {
            let harness = self.harness.as_mut().expect("checked above");
            // The agent runs unprivileged: nothing it starts can read a check's environment.
            let agent = handle.as_agent();
            let fut = harness.turn(&agent, &sent, &turn_ctx);
            tokio::pin!(fut);
            let limit = options.timeout.unwrap_or(Duration::MAX);
            let stopped = tokio::select! {
                r = &mut fut => Ok(r),
                _ = signal.cancelled() => Err(TurnStatus::Aborted),
                _ = sleep_for(limit) => Err(TurnStatus::TimedOut),
            };
            match stopped {
                Ok(Ok(report)) => {
                    let status = report.status;
                    (TurnEnd::Report(report), status)
                }
                Ok(Err(e)) => (TurnEnd::HarnessFailed(e), TurnStatus::Failed),
                Err(status) => {
                    // Ask the turn to stop, give it the grace, then kill its process tree.
                    let _ = handle.sandbox().kill("TERM").await;
                    let report = match tokio::time::timeout(TURN_GRACE, &mut fut).await {
                        Ok(r) => r.ok(),
                        Err(_) => {
                            let _ = handle.sandbox().kill("KILL").await;
                            tokio::time::timeout(Duration::from_secs(1), &mut fut).await.ok().and_then(|r| r.ok())
                        }
                    };
                    (report.map(TurnEnd::Report).unwrap_or(TurnEnd::NoReport), status)
                }
            }
        };
        if matches!(ended, TurnEnd::Report(_)) && matches!(status, TurnStatus::Completed | TurnStatus::Failed) {
            self.turn_unsettled.store(false, std::sync::atomic::Ordering::SeqCst);
        }
        let elapsed = began.elapsed();
        let agent_ms = elapsed.as_millis() as u64;
        self.record.timings.agent_ms += agent_ms;

        // The turn's diff, even after an abort: the record must show the agent's work.
        let diff_began = Instant::now();
        let before = self.last_snapshot.take().or_else(|| self.baseline.clone()).unwrap_or_default();
        let diff = match before.refresh(&handle).await {
            Ok(now) => {
                let d = before.diff(&now);
                self.last_snapshot = Some(now);
                d
            }
            Err(e) => {
                self.log.event(format!("failed to diff the workspace after turn {}: {e}", index));
                self.last_snapshot = Some(before);
                Diff::default()
            }
        };
        self.record.timings.diff_ms += diff_began.elapsed().as_millis() as u64;

        let harness_name = self.record.harness.clone();
        let (report, error) = match ended {
            TurnEnd::Report(report) => {
                let error = crate::outcome::turn_error(&harness_name, status, Some(&report), elapsed, self.budget.spent());
                (report, error)
            }
            TurnEnd::NoReport => (TurnReport::default(), crate::outcome::turn_error(&harness_name, status, None, elapsed, self.budget.spent())),
            TurnEnd::HarnessFailed(e) => (TurnReport { status: TurnStatus::Failed, error: Some(e.to_string()), ..TurnReport::default() }, Some(Error::from(e))),
        };
        let turn = Turn {
            prompt: prompt.clone(),
            status,
            final_message: report.final_message,
            model: report.model,
            usage: report.usage,
            tool_calls: report.tool_calls,
            file_edits: report.file_edits,
            error: report.error,
            duration_ms: agent_ms,
            diff,
        };
        if status != TurnStatus::Completed {
            self.saw_oom_kill(&handle, &format!("turn {}", index)).await;
        }
        self.record.usage.add(&turn.usage);
        self.record.turns.push(turn.clone());
        self.log.phase(crate::phase::Phase::Turn, began, format!("{} {} in {:.1}s, {} files changed", index, status_name(status), elapsed.as_secs_f64(), turn.diff.files.len()));
        match error {
            None => Ok(turn),
            Some(e) => Err(e),
        }
    }

    /// Runs a check in the sandbox: a `&str` under `sh -c`, or a [`Command`] argv.
    /// Secrets marked for checks are in its environment with their real values.
    ///
    /// # Errors
    /// [`Error::Timeout`] when the budget runs out; a sandbox error. A non-zero
    /// exit is not an error: match it with `expect(..)`.
    ///
    /// # Cancel safety
    /// A dropped check may keep running in the sandbox until teardown.
    pub async fn exec(&mut self, cmd: impl Into<Command>) -> Result<ExecOutput> {
        let cmd = cmd.into();
        let handle = self.sandbox().await?;
        let began = Instant::now();
        let extra: Vec<(String, String)> =
            self.secrets.iter().filter(|s| s.scope == SecretScope::Checks).map(|s| (s.name.clone(), s.value.expose_secret().to_string())).collect();
        // The eval's own code is trusted: it gets the output as it is. A check may
        // print a secret it was given; the record's copy is redacted when written.
        let out = self.within_budget(async { Ok(handle.exec_with_env(cmd, &extra).await?) }).await?;
        let oom_killed = out.exit_code == 137 && self.saw_oom_kill(&handle, &format!("check `{}`", one_line(&out.command))).await;
        self.record.timings.checks_ms += began.elapsed().as_millis() as u64;
        self.record.checks.push(CheckRecord {
            oom_killed,
            command: out.command.clone(),
            exit_code: out.exit_code,
            duration_ms: out.duration_ms,
            stdout_tail: out.stdout_tail(CHECK_TAIL).to_string(),
            stderr_tail: out.stderr_tail(CHECK_TAIL).to_string(),
        });
        self.log.phase(crate::phase::Phase::Check, began, format!("{} exited {} in {}ms", one_line(&out.command), out.exit_code, out.duration_ms));
        Ok(out)
    }

    /// Reads a text file (relative paths are in the workspace).
    ///
    /// # Errors
    /// [`crate::SandboxError::NotFound`] (an `assertion` failure) when it does not exist;
    /// an error when it is not UTF-8.
    ///
    /// # Cancel safety
    /// Safe.
    pub async fn read_file(&mut self, path: &str) -> Result<String> {
        let bytes = self.read_bytes(path).await?;
        String::from_utf8(bytes).map_err(|_| Error::other(format!("failed to read {path} as text: it is not UTF-8 (use read_bytes)")))
    }

    /// Reads a file's bytes.
    ///
    /// # Errors
    /// As [`Ctx::read_file`], without the UTF-8 check.
    ///
    /// # Cancel safety
    /// Safe.
    pub async fn read_bytes(&mut self, path: &str) -> Result<Vec<u8>> {
        let handle = self.sandbox().await?;
        self.within_budget(async { Ok(handle.read_file(path).await?) }).await
    }

    /// Writes a file byte for byte (mode 0644), creating its directories.
    ///
    /// # Errors
    /// A sandbox error, or [`Error::Timeout`].
    ///
    /// # Cancel safety
    /// A cancelled write may leave the file absent.
    pub async fn write_file(&mut self, path: &str, content: impl AsRef<[u8]>) -> Result<()> {
        let handle = self.sandbox().await?;
        // Owned by the agent user once it is set up (until then, its setup hands the workspace over).
        let writer = if self.agent_user_ready { handle.as_agent() } else { handle };
        self.within_budget(async { Ok(writer.write_file(path, content.as_ref(), 0o644).await?) }).await
    }

    /// The workspace diff since the snapshot (files, rules and setup excluded).
    ///
    /// # Errors
    /// A sandbox error, or [`Error::Timeout`].
    ///
    /// # Cancel safety
    /// Safe.
    pub async fn diff(&mut self) -> Result<Diff> {
        let handle = self.sandbox().await?;
        let began = Instant::now();
        let before = self.last_snapshot.as_ref().or(self.baseline.as_ref()).cloned().unwrap_or_default();
        let now = self.within_budget(async { Ok(before.refresh(&handle).await?) }).await?;
        let diff = self.baseline.clone().unwrap_or_default().diff(&now);
        self.last_snapshot = Some(now);
        self.record.timings.diff_ms += began.elapsed().as_millis() as u64;
        Ok(diff)
    }

    /// Whether the OOM killer struck since it was last looked at; if so, says so as an event.
    async fn saw_oom_kill(&mut self, handle: &SandboxHandle, during: &str) -> bool {
        let Ok(Some(kills)) = handle.oom_kills().await else { return false };
        if kills <= self.oom_kills_seen {
            return false;
        }
        self.oom_kills_seen = kills;
        let limit = self.env.limits.memory_bytes;
        self.log.event(format!("OOM kill: the sandbox ran out of memory (limit {} MiB) during {during}", limit >> 20));
        true
    }

    /// The sandbox handle, for code that needs to act in the sandbox directly
    /// (an in-process agent, a custom check). Starts the sandbox if needed.
    ///
    /// # Errors
    /// An infra error when the sandbox cannot start.
    ///
    /// # Cancel safety
    /// A cancelled start leaves the sandbox to teardown, which destroys it; later calls fail.
    pub async fn sandbox_handle(&mut self) -> Result<SandboxHandle> {
        self.sandbox().await
    }
}

async fn sleep_for(limit: Duration) {
    if limit == Duration::MAX { std::future::pending::<()>().await } else { tokio::time::sleep(limit).await }
}

fn status_name(s: TurnStatus) -> &'static str {
    match s {
        TurnStatus::Completed => "completed",
        TurnStatus::Failed => "failed",
        TurnStatus::Aborted => "aborted",
        TurnStatus::TimedOut => "timed_out",
    }
}

fn one_line(s: &str) -> String {
    let first = s.lines().next().unwrap_or("");
    if first.len() > 80 || s.lines().count() > 1 { format!("{}…", crate::exec::tail(first, 80)) } else { first.to_string() }
}

/// The first prompt carries the context summary when the environment asks for one.
fn prompt_with_context(prompt: &str, turn: u32, env: &Environment) -> String {
    if turn == 1 && env.context_summary { format!("{prompt}\n\n{}", crate::lifecycle::context_summary(env)) } else { prompt.to_string() }
}

/// The lazy start's progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StartState {
    /// Not started, or interrupted part way (then the context already holds the sandbox).
    NotYet,
    /// Every start phase ran.
    Ready,
    /// A start phase failed; later calls fail the same way.
    Failed(String),
}

/// Keeps the budget paused while alive.
struct PausedBudget(Budget);

impl PausedBudget {
    fn new(budget: Budget) -> Self {
        budget.pause();
        Self(budget)
    }
}

impl Drop for PausedBudget {
    fn drop(&mut self) {
        self.0.resume();
    }
}

/// How a turn's future ended.
enum TurnEnd {
    /// The harness reported, on its own or within the grace.
    Report(TurnReport),
    /// The harness could not run the turn at all.
    HarnessFailed(crate::harness::HarnessError),
    /// Stopped, and the harness never reported (an in-process agent that ignored the stop).
    NoReport,
}

/// Keeps stdout chunks for a harness that parses its CLI's stream.
pub type StdoutSink = mpsc::UnboundedSender<Bytes>;
