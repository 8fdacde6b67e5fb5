//! `send`: one agent turn, followed by its diff. The harness session starts
//! on the first turn (`lifecycle/09_harness.rs`); the turn phase runs the
//! harness and reads the workspace after it (`lifecycle/10_turn.rs`).
//!
//! A turn that starts is held in flight (`Turns::in_flight`) until it
//! concludes, then goes into the record once. If the attempt ends first
//! (its budget, its deadline, the run's interruption), `finish` records it
//! as it was; if the eval dropped its `send` and went on, the next call
//! records it as it was.

use std::time::Instant;

use super::{Attempt, InFlight, SandboxState, lost};
use crate::diff::Diff;
use crate::error::{Error, Result};
use crate::harness::TurnContext;
use crate::lifecycle;
use crate::phase::Phase;
use crate::sandbox::SandboxHandle;
use crate::turn::{Turn, TurnOptions, TurnStatus};
use crate::turn_archive::ArchiveError;

/// What the turn phase made: the turn with its diff, and what failed beside it.
struct Ran {
    turn: Turn,
    /// The turn's own failure (the agent's, the harness's, a stop).
    error: Option<Error>,
    /// The time the turn's diff took, counted as `diffMs`.
    diff_ms: u64,
    /// Why the workspace could not be read after the turn.
    diff_failed: Option<String>,
    /// Whether the turn's changes were archived for regrade and replay.
    archived: std::result::Result<(), ArchiveError>,
}

impl Attempt {
    /// One agent turn, followed by its diff.
    pub(crate) async fn send(&mut self, prompt: String, options: TurnOptions) -> Result<Turn> {
        // Starting the sandbox for this turn: a harness that starts apart from
        // the workspace starts its session beside the snapshot (`start.rs`).
        self.prepare.session_beside_snapshot = matches!(self.sandbox, SandboxState::NotStarted);
        let started = self.sandbox().await;
        self.prepare.session_beside_snapshot = false;
        let handle = started?;
        // What the last check wrote is the check's, not this turn's.
        self.list_after_check(&handle).await;
        if self.given.harness.is_none() {
            return Err(Error::Config(
                "failed to send a prompt: no harness is selected for this eval".into(),
            ));
        }
        self.ensure_session(&handle).await?;
        let index = self.record.turns.len() as u32 + 1;
        self.phases.log.turn_started(index, &lifecycle::turn::prompt_head(&prompt));
        // Every turn that starts reaches the record, whatever ends it.
        let started = lifecycle::turn::started(prompt.clone());
        self.turns.in_flight = Some(InFlight { turn: started, began: Instant::now() });
        let ran = self.run_turn(&handle, index, prompt, options).await?;
        let (turn, error) = self.conclude_turn(&handle, index, ran).await;
        self.turns.in_flight = None;
        self.record.usage.add(&turn.usage);
        self.record.turns.push(turn.clone());
        match error {
            None => Ok(turn),
            Some(e) => Err(e.in_phase(Phase::Turn)),
        }
    }

    /// Starts the harness's session on the first turn (unless it started
    /// beside the snapshot); like the start, not on the budget.
    async fn ensure_session(&mut self, handle: &SandboxHandle) -> Result<()> {
        if let Some(e) = self.prepare.session_failed.take() {
            return Err(e);
        }
        if self.ready().session {
            return Ok(());
        }
        let Attempt { phases, given, sandbox, record, .. } = self;
        let SandboxState::Ready(ready) = sandbox else {
            unreachable!("a session starts in a started sandbox")
        };
        let harness = given.harness.as_deref_mut().ok_or_else(|| {
            Error::Config("failed to send a prompt: no harness is selected for this eval".into())
        })?;
        phases
            .run(
                Phase::Harness,
                async {
                    if !ready.agent_user {
                        ready.git_repo = lifecycle::snapshot::prepare_agent_user(
                            handle,
                            ready.image_user.as_deref(),
                        )
                        .await?;
                        ready.agent_user = true;
                    }
                    lifecycle::harness::start(
                        harness,
                        &handle.as_agent(),
                        &given.env,
                        &given.secrets,
                        &given.artifacts_dir,
                        record,
                        ready.image.clone(),
                    )
                    .await
                },
                Clone::clone,
            )
            .await?;
        ready.session = true;
        Ok(())
    }

    /// The turn phase: the harness runs the turn as the agent user, then the
    /// workspace is read for the turn's diff (even after an abort: the record
    /// must show the agent's work) and its changes are archived.
    async fn run_turn(
        &mut self,
        handle: &SandboxHandle,
        index: u32,
        prompt: String,
        options: TurnOptions,
    ) -> Result<Ran> {
        let Attempt { phases, given, sandbox, record, turns, .. } = self;
        let harness = given.harness.as_deref_mut().expect("checked by send");
        let SandboxState::Ready(ready) = sandbox else { unreachable!("started by send") };
        let sent = if harness.reads_context_summary() {
            lifecycle::turn::with_context(&prompt, index, &given.env)
        } else {
            prompt.clone()
        };
        let turn_ctx = TurnContext {
            index,
            artifacts_dir: Some(given.artifacts_dir.clone()),
            events: phases.log.agent_events(),
            env: options.env.clone(),
        };
        let (signal, budget) = (phases.budget.signal(), phases.budget.clone());
        let harness_name = record.harness.clone();
        phases
            .run(
                Phase::Turn,
                async {
                    // The agent runs unprivileged: nothing it starts can read a check's environment.
                    let agent = handle.as_agent();
                    let run = lifecycle::turn::run(
                        harness,
                        &agent,
                        &sent,
                        &turn_ctx,
                        &signal,
                        &turns.interrupt,
                        options.timeout,
                        &turns.unsettled,
                    );
                    // While the agent works, the diff helper's session starts, so the diff needs no exec.
                    let before = ready.latest();
                    let (ran, latest) = tokio::join!(run, before.with_session(handle));
                    let (mut turn, error) = lifecycle::turn::conclude(
                        prompt,
                        ran,
                        Diff::default(),
                        &harness_name,
                        budget.spent(),
                    );
                    // Concluded before its diff, which a workspace of many files makes slow.
                    if let Some(flight) = turns.in_flight.as_mut() {
                        flight.turn = turn.clone();
                    }
                    let began = Instant::now();
                    let (diff, now, diff_failed) = lifecycle::turn::diff(handle, latest).await;
                    // The turn's changes, kept so that regrade and replay can rebuild them exactly.
                    let changes = crate::turn_archive::TurnChanges::of(&diff, &now);
                    let archived = crate::turn_archive::record_turn(
                        &given.artifacts_dir,
                        index,
                        &changes,
                        diff_failed.as_deref(),
                        &given.redactor,
                    );
                    ready.last = Some(now);
                    ready.eval_wrote = false;
                    let diff_ms = began.elapsed().as_millis() as u64;
                    turn.diff = diff;
                    Ok(Ran { turn, error, diff_ms, diff_failed, archived })
                },
                |ran| lifecycle::turn::detail(index as usize, &ran.turn),
            )
            .await
    }

    /// After the turn phase: its diff's time counted as `diffMs`, what failed
    /// beside the turn told as events, and whose failure a failed turn is (a
    /// sandbox lost meanwhile makes it the platform's).
    async fn conclude_turn(
        &mut self,
        handle: &SandboxHandle,
        index: u32,
        ran: Ran,
    ) -> (Turn, Option<Error>) {
        let Ran { mut turn, mut error, diff_ms, diff_failed, archived } = ran;
        self.phases.count_as_diff(Phase::Turn, diff_ms);
        let diff_failed_at_all = diff_failed.is_some();
        if let Some(e) = diff_failed {
            self.phases.log.event(format!("failed to diff the workspace after turn {index}: {e}"));
        }
        if let Err(e) = archived {
            self.phases.log.event(format!("failed to archive turn {index}'s changes: {e}"));
        }
        // A turn that failed (or whose diff did) in a sandbox lost meanwhile is the platform's.
        if (error.is_some() || diff_failed_at_all)
            && let Some(e) =
                lost::lost(handle, "run the turn", &format!("turn {index}"), true).await
        {
            turn.error = Some(e.to_string());
            error = Some(e);
        }
        if turn.status != TurnStatus::Completed {
            self.saw_oom_kill(handle, &format!("turn {index}")).await;
        }
        (turn, error)
    }
}
