//! The context an eval is written against: a thin facade over its [`Attempt`].
//! The sandbox starts lazily on the first call that needs it, so the eval's
//! own code runs first.

use std::future::Future;
use std::panic::Location;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::Attempt;
use crate::capture::{Artifact, Capture};
use crate::diff::Diff;
use crate::error::{Error, Result};
use crate::exec::{Command, ExecOutput};
use crate::judge::{Judge, JudgeResult};
use crate::record::Record;
use crate::sandbox::SandboxHandle;
use crate::turn::{Turn, TurnOptions};

/// The function an eval runs. A plain `fn` pointer or a closure returning a boxed future.
pub type EvalFn = std::sync::Arc<
    dyn for<'a> Fn(&'a mut Ctx) -> futures_util::future::BoxFuture<'a, Result<()>> + Send + Sync,
>;

/// How long `serve` waits for the port to accept connections.
pub(super) const SERVE_READY_TIMEOUT: Duration = Duration::from_secs(30);

/// The eval's handle on its attempt: agent turns, checks, files, diffs, verdicts.
///
/// Every call that acts in the sandbox records the eval's line that made it
/// (`#[track_caller]`): a failure, a timeout or an interruption names it.
#[derive(Debug)]
pub struct Ctx {
    pub(super) attempt: Attempt,
}

impl Ctx {
    /// A token that fires when the attempt's budget runs out.
    pub fn signal(&self) -> CancellationToken {
        self.attempt.signal()
    }

    /// The attempt's record so far.
    pub fn record(&self) -> &Record {
        self.attempt.record()
    }

    /// The attempt's artifact directory on the host.
    pub fn artifacts_dir(&self) -> &std::path::Path {
        self.attempt.artifacts_dir()
    }

    /// Whether this attempt's harness runs the eval's reference solution in
    /// place of an agent (`Harness::runs_reference_solution`: the oracle).
    pub fn runs_reference_solution(&self) -> bool {
        !matches!(self.attempt.solution, super::Solution::None)
    }

    /// Artifacts captured so far.
    pub fn captures(&self) -> &[Capture] {
        self.attempt.captures()
    }

    /// Records the attempt's reward (a Harbor task's `reward.json` keys, or
    /// `{"reward": x}`) in its record's `reward`; a later call replaces it.
    /// It does not decide the outcome: the eval passes or fails as it returns.
    pub fn set_reward(&mut self, reward: std::collections::BTreeMap<String, f64>) {
        self.attempt.record.reward = Some(reward);
    }

    /// Records the threshold the eval holds its reward to (the record's
    /// `rewardThreshold`, which reports show beside the mean reward). Like
    /// [`Ctx::set_reward`], it does not decide the outcome.
    pub fn set_reward_threshold(&mut self, threshold: f64) {
        self.attempt.record.reward_threshold = Some(threshold);
    }

    /// Records each step's reward of a multi-step eval, in the order the
    /// steps ran (the record's `stepRewards`); a later call replaces them.
    pub fn set_step_rewards(&mut self, steps: Vec<crate::record::StepReward>) {
        self.attempt.record.step_rewards = steps;
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
    #[track_caller]
    pub fn send(&mut self, prompt: impl Into<String>) -> impl Future<Output = Result<Turn>> {
        let at = Location::caller();
        let prompt: String = prompt.into();
        async move {
            if let Err(e) = self.run_solution().await {
                return self.attempt.calls.ended(Err(e));
            }
            self.attempt.calls.began("send", at);
            let result = self.attempt.send(prompt, TurnOptions::default()).await;
            self.attempt.calls.ended(result)
        }
    }

    /// Under `--harness oracle`, the first `send` runs the eval's reference
    /// solution first, so that the turn's diff is the solution's work.
    async fn run_solution(&mut self) -> Result<()> {
        use super::Solution;
        match std::mem::replace(&mut self.attempt.solution, Solution::Ran) {
            Solution::Pending(solve) => {
                // What a check wrote before it is the check's; the solution's
                // own checks are its work, not a check's (`checks.rs`).
                self.attempt.list_after_check_if_started().await;
                self.attempt.solution = Solution::Solving;
                // The solution's first call starts the sandbox for this turn:
                // the diff helper's session starts beside the snapshot, and
                // the turn's diff asks it (no listing exec after the solution).
                self.attempt.prepare.session_beside_snapshot =
                    matches!(self.attempt.sandbox, super::SandboxState::NotStarted);
                let solved = solve(self).await;
                self.attempt.prepare.session_beside_snapshot = false;
                self.attempt.solution = Solution::Ran;
                solved
            }
            Solution::Missing => Err(crate::Error::Config(format!(
                "failed to run the oracle: eval {} names no reference solution (add oracle = solve to #[reeval::eval])",
                self.attempt.record().eval
            ))),
            Solution::None | Solution::Solving | Solution::Ran => Ok(()),
        }
    }

    /// Sends one prompt with per-turn options. A turn that hits its own
    /// `timeout` is recorded `timed_out` and returned, so checks can grade partial work.
    ///
    /// # Errors
    /// As [`Ctx::send`].
    ///
    /// # Cancel safety
    /// As [`Ctx::send`].
    #[track_caller]
    pub fn send_with(
        &mut self,
        prompt: impl Into<String>,
        options: TurnOptions,
    ) -> impl Future<Output = Result<Turn>> {
        let at = Location::caller();
        let prompt: String = prompt.into();
        async move {
            if let Err(e) = self.run_solution().await {
                return self.attempt.calls.ended(Err(e));
            }
            self.attempt.calls.began("send_with", at);
            let result = self.attempt.send(prompt, options).await;
            self.attempt.calls.ended(result)
        }
    }

    /// Runs a check in the sandbox: a `&str` under `sh -c`, or a [`Command`] argv.
    /// Secrets marked for checks are in its environment with their real values.
    /// Its output comes back as it is (the eval's code is trusted); the record's
    /// copy is redacted when written.
    ///
    /// # Errors
    /// [`Error::Timeout`] when the budget runs out; a sandbox error. A non-zero
    /// exit is not an error: match it with `expect(..)`.
    ///
    /// # Cancel safety
    /// A dropped check may keep running in the sandbox until teardown.
    #[track_caller]
    pub fn exec(&mut self, cmd: impl Into<Command>) -> impl Future<Output = Result<ExecOutput>> {
        let at = Location::caller();
        let cmd: Command = cmd.into();
        async move {
            self.attempt.calls.began("exec", at);
            let result = self.attempt.exec(cmd).await;
            self.attempt.calls.ended(result)
        }
    }

    /// Runs a command in the service `service` started beside the sandbox
    /// (see [`Environment::service`](crate::Environment::service)): its argv
    /// in the service's container, with the command's variables, directory
    /// and user over the service's own; recorded as a check naming the
    /// service. Its timeout ends the wait (the process may go on until the
    /// service is removed). A Harbor task's `[[verifier.collect]]` hook in a
    /// sidecar is one.
    ///
    /// # Errors
    /// [`Error::Timeout`] when the budget runs out; a sandbox error, also
    /// when there is no such service. A non-zero exit is not an error.
    ///
    /// # Cancel safety
    /// A dropped command may keep running in the service until teardown.
    #[track_caller]
    pub fn exec_in_service(
        &mut self,
        service: &str,
        cmd: impl Into<Command>,
    ) -> impl Future<Output = Result<ExecOutput>> {
        let at = Location::caller();
        let (service, cmd): (String, Command) = (service.to_string(), cmd.into());
        async move {
            self.attempt.calls.began("exec_in_service", at);
            let result = self.attempt.exec_in_service(&service, cmd).await;
            self.attempt.calls.ended(result)
        }
    }

    /// Reads a text file (relative paths are in the workspace).
    ///
    /// # Errors
    /// [`crate::SandboxError::NotFound`] (an `assertion` failure) when it does not exist;
    /// an error when it is not UTF-8.
    ///
    /// # Cancel safety
    /// Safe.
    #[track_caller]
    pub fn read_file(&mut self, path: &str) -> impl Future<Output = Result<String>> {
        let at = Location::caller();
        async move {
            self.attempt.calls.began("read_file", at);
            let result = async {
                let bytes = self.attempt.read_bytes(path).await?;
                String::from_utf8(bytes).map_err(|_| {
                    Error::assertion(format!(
                        "failed to read {path} as text: it is not UTF-8 (use read_bytes)"
                    ))
                })
            }
            .await;
            self.attempt.calls.ended(result)
        }
    }

    /// Reads a file's bytes.
    ///
    /// # Errors
    /// As [`Ctx::read_file`], without the UTF-8 check.
    ///
    /// # Cancel safety
    /// Safe.
    #[track_caller]
    pub fn read_bytes(&mut self, path: &str) -> impl Future<Output = Result<Vec<u8>>> {
        let at = Location::caller();
        async move {
            self.attempt.calls.began("read_bytes", at);
            let result = self.attempt.read_bytes(path).await;
            self.attempt.calls.ended(result)
        }
    }

    /// Writes a file byte for byte (mode 0644), creating its directories.
    ///
    /// # Errors
    /// A sandbox error, or [`Error::Timeout`].
    ///
    /// # Cancel safety
    /// A cancelled write may leave the file absent.
    #[track_caller]
    pub fn write_file(
        &mut self,
        path: &str,
        content: impl AsRef<[u8]>,
    ) -> impl Future<Output = Result<()>> {
        let at = Location::caller();
        async move {
            self.attempt.calls.began("write_file", at);
            let result = self.attempt.write_file(path, content.as_ref()).await;
            self.attempt.calls.ended(result)
        }
    }

    /// The workspace diff since the snapshot (files, rules and setup excluded),
    /// without what checks wrote (each check's own changes are on its record).
    ///
    /// # Errors
    /// A sandbox error, or [`Error::Timeout`].
    ///
    /// # Cancel safety
    /// Safe.
    #[track_caller]
    pub fn diff(&mut self) -> impl Future<Output = Result<Diff>> {
        let at = Location::caller();
        async move {
            self.attempt.calls.began("diff", at);
            let result = self.attempt.diff().await;
            self.attempt.calls.ended(result)
        }
    }

    /// Asks the judge model for a verdict on each criterion, over what the
    /// attempt produced (see [`crate::judge::State`]). Every verdict goes into the record.
    ///
    /// A verdict that does not pass, or a judge that could not answer after
    /// its retries, fails the attempt with kind `judge` but does not stop the
    /// eval: this returns the verdicts, so later checks are still run and
    /// recorded. Use `expect(result).to_pass()?` to stop at once.
    ///
    /// # Errors
    /// [`Error::Config`] when no judge model is named, its provider is unknown
    /// or its key is not set on the host; [`Error::Timeout`] when the budget
    /// runs out; a sandbox error when what the judge needs cannot be read.
    ///
    /// # Cancel safety
    /// Cancelling drops the request in flight; verdicts already given stay in
    /// the record. An agentic judge's command may keep running in its
    /// throwaway copy until teardown.
    #[track_caller]
    pub fn judge(&mut self, judge: impl Into<Judge>) -> impl Future<Output = Result<JudgeResult>> {
        let at = Location::caller();
        let judge: Judge = judge.into();
        async move {
            self.attempt.calls.began("judge", at);
            let result = self.attempt.judge(judge).await;
            self.attempt.calls.ended(result)
        }
    }

    /// Makes `port` inside the sandbox reachable from the host on 127.0.0.1 and
    /// returns its URL (`http://127.0.0.1:<host port>`) once it accepts connections.
    /// Serving the same port twice returns the same URL.
    ///
    /// # Errors
    /// An `assertion` failure when nothing accepts connections on the port within
    /// 30 seconds (the agent did not start the service); an infra error when
    /// the forward cannot be set up.
    ///
    /// # Cancel safety
    /// Safe: a forward set up before cancellation is closed at teardown.
    #[track_caller]
    pub fn serve(&mut self, port: u16) -> impl Future<Output = Result<String>> {
        let at = Location::caller();
        async move {
            self.attempt.calls.began("serve", at);
            let result = self.attempt.serve(port, SERVE_READY_TIMEOUT).await;
            self.attempt.calls.ended(result)
        }
    }

    /// [`Ctx::serve`] with its own wait for the port to accept connections.
    ///
    /// # Errors
    /// As [`Ctx::serve`], after `ready_within`.
    ///
    /// # Cancel safety
    /// As [`Ctx::serve`].
    #[track_caller]
    pub fn serve_with(
        &mut self,
        port: u16,
        ready_within: Duration,
    ) -> impl Future<Output = Result<String>> {
        let at = Location::caller();
        async move {
            self.attempt.calls.began("serve_with", at);
            let result = self.attempt.serve(port, ready_within).await;
            self.attempt.calls.ended(result)
        }
    }

    /// Keeps `what` as an artifact named `name` under the attempt's artifact
    /// directory (`captures/`), listed in the record and visible to the judge.
    ///
    /// # Errors
    /// [`crate::SandboxError::NotFound`] (an `assertion` failure) for a missing
    /// file or directory; an error when a URL cannot be fetched; an infra error
    /// when the artifact cannot be written.
    ///
    /// # Cancel safety
    /// A cancelled capture keeps nothing.
    #[track_caller]
    pub fn capture(&mut self, name: &str, what: Artifact) -> impl Future<Output = Result<Capture>> {
        let at = Location::caller();
        async move {
            self.attempt.calls.began("capture", at);
            let result = self.attempt.capture(name, what).await;
            self.attempt.calls.ended(result)
        }
    }

    /// Keeps each of `dirs` (`(name, path)`) as `capture(name,
    /// Artifact::dir(path))` keeps it, the same file under `captures/`. Two
    /// or more directories of one parent are read with one archive of the
    /// parent, in one capture phase (what else the parent holds is read and
    /// dropped); where that read does not give them whole, each is read
    /// apart. The captures, in the order of `dirs`.
    ///
    /// # Errors
    /// As [`Ctx::capture`], for the first directory that fails.
    ///
    /// # Cancel safety
    /// A cancelled call may have kept some of them, each whole.
    #[track_caller]
    pub fn capture_dirs(
        &mut self,
        dirs: Vec<(String, String)>,
    ) -> impl Future<Output = Result<Vec<Capture>>> {
        let at = Location::caller();
        async move {
            self.attempt.calls.began("capture_dirs", at);
            let result = self.attempt.capture_dirs(dirs).await;
            self.attempt.calls.ended(result)
        }
    }

    /// The sandbox handle, for code that needs to act in the sandbox directly
    /// (an in-process agent, a custom check). Starts the sandbox if needed.
    ///
    /// # Errors
    /// An infra error when the sandbox cannot start.
    ///
    /// # Cancel safety
    /// A cancelled start leaves the sandbox to teardown, which destroys it; later calls fail.
    #[track_caller]
    pub fn sandbox_handle(&mut self) -> impl Future<Output = Result<SandboxHandle>> {
        let at = Location::caller();
        async move {
            self.attempt.calls.began("sandbox_handle", at);
            let result = self.attempt.give_handle().await;
            self.attempt.calls.ended(result)
        }
    }
}
