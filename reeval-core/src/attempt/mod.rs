//! One attempt as a state machine. [`Ctx`] is a thin facade over an
//! [`Attempt`]; nothing outside this module writes an attempt's fields. The
//! sandbox's state is one enum ([`SandboxState`]); every phase runs through
//! [`Phases::run`]; the steps themselves are the files of `crate::lifecycle`,
//! in phase order (the gateway phase is the attempt's egress, in
//! `crate::gateway`). [`run`] drives one attempt from its plan to its record:
//! the eval's future under its budget, teardown whatever happened,
//! classification, the record written.
//!
//! Key types: `Attempt` (the state of one try: what it was given, its
//! sandbox, its egress, its turn in flight, its record so far), `Ctx` (what
//! the eval holds), `SandboxState`, `Phases` (timing, budget and the phase
//! log of every step).
//!
//! The flow, one file each: `run.rs` runs the eval's future → `start.rs`
//! starts the sandbox on the first call that needs it, as the list of its
//! phases (image, container, gateway, env, workspace, files, setup,
//! snapshot: `lifecycle/01`–`08` and `gateway::attempt`) → `turn.rs` starts
//! the harness session on the first `send` (`09_harness`) and runs each turn
//! (`10`) → checks (`checks.rs`, `11`), verdicts (`judge.rs`, `12`), files,
//! diffs, serve and capture (`io.rs`, `13`–`14`) as the eval makes them →
//! `teardown.rs` (`15`) → `run.rs` concludes: `outcome::conclude`
//! classifies, the record is finished. A step that failed in a lost sandbox
//! is the platform's (`lost.rs`); the final collection reads a lost sandbox
//! too (`collect.rs`); `calls.rs` names the eval's line a failure
//! came from; `fill.rs` prepares a sandbox the same way for the setup cache;
//! `plan.rs` is the cell's plan the attempt is given.
//!
//! What may depend on what: the attempt uses the phases (`lifecycle`), its
//! egress (`crate::gateway`), the sandbox traits (`crate::sandbox`), the
//! harness trait, the judge, and the record's types it fills; the runner
//! calls `run` and gets a record back. It should know nothing of the runner,
//! the reporters, compare or replay. What every attempt of a cell shares
//! (the environment built once, the image spec, the harness's version, the
//! secrets) comes in its [`CellPlan`] (`plan.rs`), built by the runner before
//! any attempt. Replay and the oracle are harnesses like any other: the
//! attempt asks the harness's hooks (`Harness::runs_reference_solution`,
//! `Harness::conclude`), never its name. Exception: its event sink and attempt
//! id, which are the reporters' (`crate::report::events`).

mod ahead;
#[cfg(test)]
mod beside_tests;
mod calls;
mod checks;
mod collect;
#[cfg(test)]
mod collect_tests;
mod ctx;
mod extra;
#[cfg(test)]
mod extra_tests;
mod fill;
mod io;
mod judge;
mod lost;
mod plan;
#[cfg(test)]
mod redact_tests;
mod run;
mod setup_cached;
mod start;
#[cfg(test)]
mod takes_tests;
mod teardown;
#[cfg(test)]
pub(crate) mod tests;
mod turn;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use tokio_util::sync::CancellationToken;

pub(crate) use crate::lifecycle::{ABORT_GRACE, Paused, Phases, TurnUnsettled};
pub(crate) use ahead::Ahead;
pub use ctx::{Ctx, EvalFn};
pub use extra::{ExtraSandbox, InSandbox};
pub(crate) use fill::{AskFill, ForCache, prepare_for_cache};
pub(crate) use plan::CellPlan;
pub(crate) use run::{Attempted, panic_message, run};

use crate::capture::Capture;
use crate::diff::Snapshot;
use crate::environment::Environment;
use crate::gateway::{AttemptEgress, RunEgress};
use crate::harness::Harness;
use crate::lifecycle;
use crate::record::{EgressRecord, Record};
use crate::sandbox::{Backend, SandboxHandle};
use crate::secrets::{Redactor, Secret};
use crate::turn::Turn;

/// Everything an attempt needs from its run: its cell's plan (shared by
/// every attempt of the cell), and what makes this attempt one of them.
#[derive(Debug, Clone)]
pub(crate) struct AttemptPlan {
    /// The cell's plan, built once before any attempt.
    pub(crate) cell: Arc<CellPlan>,
    pub(crate) run_id: String,
    pub(crate) run_dir: PathBuf,
    pub(crate) trial: u32,
    pub(crate) try_: u32,
    /// Where the attempt's phases and events go as they happen.
    pub(crate) events: Option<crate::report::events::EventSink>,
    /// The run-wide preflight's detail (`ok in 12ms`).
    pub(crate) preflight: String,
    /// The run's redactor, built in preflight.
    pub(crate) redactor: Redactor,
    /// The run's egress gateway, started when an attempt first needs it.
    pub(crate) egress: Arc<RunEgress>,
    /// Whether the run caches prepared sandboxes (`--no-setup-cache` turns it off).
    pub(crate) setup_cache: bool,
    /// Where a miss of the setup cache asks for it to be filled in the background.
    pub(crate) ask_fill: Option<AskFill>,
}

impl AttemptPlan {
    /// The attempt's id on the event stream.
    pub(crate) fn id(&self) -> crate::report::events::AttemptId {
        crate::report::events::AttemptId {
            eval: self.cell.eval.clone(),
            harness: self.cell.harness_spec.clone(),
            arm: self.cell.arm.clone(),
            trial: self.trial,
            try_: self.try_,
        }
    }

    /// A record of this attempt, nothing in it yet but its identity.
    pub(crate) fn new_record(&self) -> Record {
        let mut r = Record::new(
            &self.run_id,
            &self.cell.eval,
            &self.cell.harness_spec,
            self.trial,
            self.try_,
        );
        r.arm = self.cell.arm.clone();
        r
    }
}

/// Where the sandbox is.
#[derive(Debug, Default)]
pub(crate) enum SandboxState {
    /// Not started: nothing the eval did needed it yet.
    #[default]
    NotStarted,
    /// The lazy start began and has not finished: it failed to finish (its
    /// future was dropped), or is running. Holds the sandbox once created, so
    /// teardown destroys it.
    Starting { handle: Option<SandboxHandle> },
    /// Every start phase ran.
    Ready(Box<Ready>),
    /// A start phase failed; later calls fail the same way.
    Failed { message: String, handle: Option<SandboxHandle> },
}

/// A started sandbox and what the attempt knows of it.
#[derive(Debug)]
pub(crate) struct Ready {
    handle: SandboxHandle,
    /// The workspace at the snapshot: every diff starts here.
    baseline: Snapshot,
    /// The workspace at the last diff, from which the next one is read incrementally.
    last: Option<Snapshot>,
    /// Whether the unprivileged agent user owns its home and the workspace.
    agent_user: bool,
    /// Whether the harness's session started (on the first turn).
    session: bool,
    /// Whether the eval wrote a file (`write_file`) since the workspace was last listed.
    eval_wrote: bool,
    /// The last check (its index in the record's checks) when the workspace
    /// was not listed after it: only checks could have run so far, so its
    /// listing waits for the next call that may act, or for teardown's read
    /// of the final workspace (`checks.rs`).
    unlisted_check: Option<usize>,
    /// Whether the eval was given the sandbox's handle (`Ctx::sandbox_handle`):
    /// it may act in the sandbox at any time, as an in-process agent does.
    handle_given: bool,
    /// Whether the workspace may be a git repository whose refs were noted
    /// (a cached setup's is not known): teardown then keeps the agent's commits.
    git_repo: bool,
    /// The image the container was made from, named by its content (see `SessionSetup::image`).
    image: Option<String>,
    /// The image's own user, where it is not root (what checks run as).
    image_user: Option<String>,
}

impl Ready {
    /// The snapshot the next diff is read from.
    fn latest(&self) -> Snapshot {
        self.last.clone().unwrap_or_else(|| self.baseline.clone())
    }
}

/// One attempt: what it was given, where its sandbox is, and its record so far.
#[derive(Debug)]
pub(crate) struct Attempt {
    given: Given,
    /// Timing, budget and the phase log of every step.
    phases: Phases,
    sandbox: SandboxState,
    /// How the sandbox is prepared, and what the setup cache learned doing it.
    prepare: Prepare,
    egress: EgressState,
    turns: Turns,
    /// The eval's calls: the one running, the last that failed.
    calls: calls::Calls,
    record: Record,
    /// Failures that do not stop the eval (a verdict under its threshold).
    soft_failures: Vec<crate::error::Error>,
    /// Artifacts kept with `capture`, visible to the judge by name.
    captures: Vec<Capture>,
    /// Ports forwarded with `serve`, closed at teardown.
    forwards: Vec<lifecycle::serve::Forward>,
    /// OOM kills already reported.
    oom_kills_seen: u64,
    /// Under a harness that runs the eval's reference solution (`--harness
    /// oracle`): the solution, until the first `send` runs it.
    pub(super) solution: Solution,
    /// Its extra sandboxes (`Ctx::start_sandbox`), removed at teardown.
    extras: Vec<extra::Extra>,
}

/// What an attempt was given: the eval's environment and what runs it.
#[derive(Debug)]
struct Given {
    /// The cell's plan, shared by its attempts.
    cell: Arc<CellPlan>,
    /// The cell's environment.
    env: Arc<Environment>,
    backend: Option<Arc<dyn Backend>>,
    harness: Option<Box<dyn Harness>>,
    secrets: Vec<Secret>,
    /// The judge's keys, for the host's judge calls alone (`CellPlan::judge_keys`).
    judge_keys: Vec<Secret>,
    redactor: Redactor,
    artifacts_dir: PathBuf,
    /// The judge model spec of the eval (`anthropic:claude-sonnet-4-5`), if set.
    judge_spec: Option<String>,
}

/// How the sandbox is prepared (`start.rs`), and what the setup cache learned doing it.
#[derive(Debug)]
struct Prepare {
    /// What the sandbox is for: an eval, or the setup cache.
    purpose: Purpose,
    /// Whether the run caches prepared sandboxes.
    setup_cache: bool,
    /// A container made ahead of the attempt's slot (`--prestart`), until used.
    prestarted: Option<Ahead>,
    /// The snapshot taken in it ahead of the slot, until the snapshot phase takes it.
    snapshot_ahead: Option<ahead::SnapshotAhead>,
    /// Why the cached setup this start hit was not used (it did not match its fingerprint).
    cache_mismatch: Option<(String, String)>,
    /// The setup cache's key, once the sandbox prepared a setup the cache may keep and
    /// does not hold yet (a miss).
    cache_digest: Option<String>,
    /// Whether a turn follows the first snapshot: set by the `send` that
    /// starts the sandbox, or by the reference solution run at the first
    /// `send`. The diff helper's session then starts beside the snapshot, and
    /// so does the harness's when it `starts_apart_from` the workspace (`start.rs`).
    session_beside_snapshot: bool,
    /// Why the session started beside the snapshot failed, for that `send` to return.
    session_failed: Option<crate::error::Error>,
    /// The host's directory of the diff helper mounted into the sandbox, held
    /// while the attempt may list its workspace.
    helper: Option<Arc<crate::diff::HostHelper>>,
}

/// The run's egress gateway, and this attempt's identity on it once started.
#[derive(Debug)]
struct EgressState {
    run: Arc<RunEgress>,
    attempt: Option<AttemptEgress>,
    /// When the attempt started, in milliseconds since the Unix epoch (egress records count from it).
    started_unix_ms: u64,
    /// What the gateways refused (the sandbox's, then extra sandboxes'), in
    /// the words a failed attempt's message ends with.
    refused: Vec<String>,
}

impl EgressState {
    /// Closes the attempt's egress, if it has one: what went out (as the
    /// record keeps it) and its summary; what it refused is kept here.
    async fn close(&mut self) -> Option<(Vec<EgressRecord>, String)> {
        let egress = self.attempt.take()?;
        let closed = egress.close(self.started_unix_ms).await;
        self.refused.extend(closed.refused);
        Some((closed.records, closed.summary))
    }
}

/// The attempt's turn in flight, and what stops a turn.
#[derive(Debug)]
struct Turns {
    /// The turn that started and has not concluded: it goes into the record
    /// when it concludes, or as it was when the attempt ends first.
    in_flight: Option<InFlight>,
    unsettled: TurnUnsettled,
    /// The run's interruption (Ctrl-C, SIGTERM): a running turn stops as `interrupted`.
    interrupt: CancellationToken,
}

/// A turn that started and has not concluded.
#[derive(Debug)]
struct InFlight {
    /// What the record gets if nothing more is learned.
    turn: Turn,
    began: Instant,
}

impl Attempt {
    /// A turn left in flight (its `send` was dropped) goes into the record as it was.
    fn settle_dropped_turn(&mut self) {
        if let Some(InFlight { turn, .. }) = self.turns.in_flight.take() {
            self.record.turns.push(turn);
        }
    }
}

/// What an attempt's sandbox is prepared for.
#[derive(Debug, Clone)]
enum Purpose {
    /// An eval: on a setup cache miss, a fill is asked for (when the run fills).
    Eval(Option<AskFill>),
    /// Filling the setup cache (`fill.rs`): prepared, never snapshotted, then committed.
    Fill,
}

/// The eval's reference solution, under a harness that runs it in place of
/// an agent's work ([`Harness::runs_reference_solution`]: the oracle's).
pub(super) enum Solution {
    /// The harness does not run it.
    None,
    /// The solution, still to run at the first `send`.
    Pending(EvalFn),
    /// The eval names no solution.
    Missing,
    /// The solution is running.
    Solving,
    /// It ran.
    Ran,
}

impl std::fmt::Debug for Solution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Solution::None => "None",
            Solution::Pending(_) => "Pending",
            Solution::Missing => "Missing",
            Solution::Solving => "Solving",
            Solution::Ran => "Ran",
        })
    }
}

impl Attempt {
    /// The record so far.
    pub(crate) fn record(&self) -> &Record {
        &self.record
    }

    /// Artifacts captured so far.
    pub(crate) fn captures(&self) -> &[Capture] {
        &self.captures
    }

    /// The attempt's artifact directory on the host.
    pub(crate) fn artifacts_dir(&self) -> &std::path::Path {
        &self.given.artifacts_dir
    }

    /// A token that fires when the budget runs out.
    pub(crate) fn signal(&self) -> CancellationToken {
        self.phases.budget.signal()
    }

    /// Whether the sandbox is started and ready.
    pub(crate) fn is_ready(&self) -> bool {
        matches!(self.sandbox, SandboxState::Ready(_))
    }

    /// The sandbox, whatever state it is in (for teardown).
    fn handle(&self) -> Option<&SandboxHandle> {
        match &self.sandbox {
            SandboxState::NotStarted => None,
            SandboxState::Starting { handle } | SandboxState::Failed { handle, .. } => {
                handle.as_ref()
            }
            SandboxState::Ready(r) => Some(&r.handle),
        }
    }

    fn ready(&mut self) -> &mut Ready {
        match &mut self.sandbox {
            SandboxState::Ready(r) => r,
            _ => unreachable!("called after the sandbox started"),
        }
    }
}
