//! One attempt as a state machine. [`Ctx`] is a thin facade over an
//! [`Attempt`]; nothing outside this module writes an attempt's fields. The
//! sandbox's state is one enum ([`SandboxState`]); every phase runs through
//! [`Phases::run`]; the steps themselves are the files of `crate::lifecycle`,
//! in phase order. [`run`] drives one attempt from its plan to its record:
//! the eval's future under its budget, teardown whatever happened,
//! classification, the record written.
//!
//! Key types: `Attempt` (the state of one try: its sandbox, session, turns,
//! checks, verdicts, events), `Ctx` (what the eval holds), `SandboxState`,
//! `Phases` (timing, budget and the phase log of every step).
//!
//! The flow: `run` → the sandbox starts on the first call that needs it
//! (image, container, gateway, env, workspace, files, setup, snapshot:
//! `lifecycle/01`–`08`) → the harness session on the first `send`
//! (`09_harness`) → turns, checks, judge calls, serve and capture as the eval
//! makes them (`10`–`14`) → teardown (`15`) → `outcome::conclude` classifies →
//! the record. A turn or check that failed in a lost sandbox is the
//! platform's (`lost.rs`). `fill.rs` prepares a sandbox the same way for the
//! setup cache.
//!
//! What may depend on what: the attempt uses the phases (`lifecycle`), the
//! sandbox traits (`crate::sandbox`), the harness trait, the judge, and the
//! record's types it fills (the `reeval-record` crate, re-exported as
//! `crate::record`, `crate::turn`, …); the runner calls `run` and gets a
//! record back.
//! It should know nothing of the runner, the reporters, compare or replay.
//! Exceptions today (issue 20 removes them): it names the runner's event
//! sink and attempt id (`runner::events`), and checks the harness's name for
//! replay and the oracle.

mod calls;
mod checks;
mod ctx;
mod fill;
mod lost;
mod phases;
#[cfg(test)]
pub(crate) mod tests;

use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use tokio_util::sync::CancellationToken;

pub use ctx::Ctx;
pub(crate) use fill::{AskFill, ForCache, prepare_for_cache};
pub(crate) use phases::{ABORT_GRACE, Paused, Phases, TurnUnsettled};

use crate::budget::Budget;
use crate::capture::{Artifact, Capture};
use crate::diff::{Diff, Snapshot};
use crate::environment::Environment;
use crate::error::{Error, Result};
use crate::eval::Eval;
use crate::exec::{Command, ExecOutput};
use crate::harness::{Harness, TurnContext};
use crate::judge::{Judge, JudgeResult};
use crate::lifecycle;
use crate::outcome::{Conclusion, Ended, conclude};
use crate::phase::Phase;
use crate::progress::PhaseLog;
use crate::record::{CheckRecord, Record};
use crate::sandbox::{Backend, SandboxHandle};
use crate::secrets::{Redactor, Secret};
use crate::turn::{Turn, TurnOptions, TurnStatus};

/// Everything an attempt needs from its run.
#[derive(Debug, Clone)]
pub(crate) struct AttemptPlan {
    pub(crate) run_id: String,
    pub(crate) run_dir: PathBuf,
    pub(crate) eval: Eval,
    pub(crate) harness_spec: String,
    /// The arm of a comparison, when the run compares.
    pub(crate) arm: Option<String>,
    pub(crate) timeout: Duration,
    pub(crate) trial: u32,
    pub(crate) try_: u32,
    /// Where the attempt's phases and events go as they happen.
    pub(crate) events: Option<crate::runner::events::EventSink>,
    /// The run-wide preflight's detail (`ok in 12ms`).
    pub(crate) preflight: String,
    /// The run's redactor, built in preflight.
    pub(crate) redactor: Redactor,
    /// The run's egress gateway, started when an attempt first needs it.
    pub(crate) egress: Arc<lifecycle::gateway::RunEgress>,
    /// Whether the run caches prepared sandboxes (`--no-setup-cache` turns it off).
    pub(crate) setup_cache: bool,
    /// Where a miss of the setup cache asks for it to be filled in the background.
    pub(crate) ask_fill: Option<AskFill>,
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
    /// Whether the workspace may be a git repository whose refs were noted
    /// (a cached setup's is not known): teardown then keeps the agent's commits.
    git_repo: bool,
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
    env: Environment,
    backend: Option<Arc<dyn Backend>>,
    harness: Option<Box<dyn Harness>>,
    secrets: Vec<Secret>,
    redactor: Redactor,
    artifacts_dir: PathBuf,
    /// The judge model spec of the eval (`anthropic:claude-sonnet-4-5`), if set.
    judge_spec: Option<String>,
    phases: Phases,
    sandbox: SandboxState,
    record: Record,
    /// Failures that do not stop the eval (a verdict under its threshold).
    soft_failures: Vec<Error>,
    /// Artifacts kept with `capture`, visible to the judge by name.
    captures: Vec<Capture>,
    /// Ports forwarded with `serve`, closed at teardown.
    forwards: Vec<lifecycle::serve::Forward>,
    /// OOM kills already reported.
    oom_kills_seen: u64,
    turn_unsettled: TurnUnsettled,
    /// The run's egress gateway, and this attempt's identity on it once started.
    run_egress: Arc<lifecycle::gateway::RunEgress>,
    egress: Option<lifecycle::gateway::AttemptEgress>,
    /// When the attempt started, in milliseconds since the Unix epoch (egress records count from it).
    started_unix_ms: u64,
    /// The eval's calls: the one running, the last that failed.
    calls: calls::Calls,
    /// The run's interruption (Ctrl-C, SIGTERM): a running turn stops as `interrupted`.
    interrupt: CancellationToken,
    /// The record's turn that started and has not concluded, and when it started.
    turn_in_flight: Option<(usize, Instant)>,
    /// Whether the run caches prepared sandboxes.
    setup_cache: bool,
    /// A container made ahead of the attempt's slot (`--prestart`) and its image, until used.
    prestarted: Option<(Arc<dyn crate::sandbox::Sandbox>, String)>,
    /// What the sandbox is for: an eval, or the setup cache.
    purpose: Purpose,
    /// Why the cached setup this start hit was not used (it did not match its fingerprint).
    cache_mismatch: Option<(String, String)>,
    /// The setup cache's key, once the sandbox prepared a setup the cache may keep and
    /// does not hold yet (a miss).
    cache_digest: Option<String>,
    /// Under `--harness oracle`: the eval's reference solution, until the first `send` runs it.
    pub(super) oracle: Oracle,
}

/// What an attempt's sandbox is prepared for.
#[derive(Debug, Clone)]
enum Purpose {
    /// An eval: on a setup cache miss, a fill is asked for (when the run fills).
    Eval(Option<AskFill>),
    /// Filling the setup cache (`fill.rs`): prepared, never snapshotted, then committed.
    Fill,
}

/// The oracle of an attempt under `--harness oracle`.
pub(super) enum Oracle {
    /// Not the oracle harness.
    None,
    /// The solution, still to run at the first `send`.
    Pending(crate::eval::EvalFn),
    /// The eval names no solution.
    Missing,
    /// The solution is running.
    Solving,
    /// It ran.
    Ran,
}

impl std::fmt::Debug for Oracle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Oracle::None => "None",
            Oracle::Pending(_) => "Pending",
            Oracle::Missing => "Missing",
            Oracle::Solving => "Solving",
            Oracle::Ran => "Ran",
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
        &self.artifacts_dir
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

    /// The sandbox, started on first use. Starting it spends no budget.
    pub(crate) async fn sandbox(&mut self) -> Result<SandboxHandle> {
        match &self.sandbox {
            SandboxState::Ready(r) => return Ok(r.handle.clone()),
            SandboxState::Failed { message, .. } => {
                return Err(Error::infra("start the sandbox", message));
            }
            SandboxState::Starting { .. } => {
                return Err(Error::infra("start the sandbox", "an earlier start was interrupted"));
            }
            SandboxState::NotStarted => {}
        }
        self.sandbox = SandboxState::Starting { handle: None };
        // The guard resumes the clock even if this future is dropped mid-start.
        let _paused = Paused::new(&self.phases.budget);
        let mut started = self.start().await;
        // A cached setup that did not match its fingerprint: start again without the cache.
        if started.is_err()
            && let Some((digest, why)) = self.cache_mismatch.take()
        {
            if let Some(handle) = self.handle() {
                let _ = handle.sandbox().destroy().await;
            }
            if let Some(egress) = self.egress.take() {
                let _ = egress.close(self.started_unix_ms).await;
            }
            // After its container is gone, so the image goes at once (unless another attempt runs from it).
            let removed = match self.backend.as_ref().map(|b| b.forget_setup(&digest)) {
                Some(forget) => match forget.await {
                    Ok(()) => "the image was removed".to_string(),
                    Err(e) => e.to_string(),
                },
                None => "no backend".to_string(),
            };
            self.phases.log.event(format!("{why}: {removed}, and the setup runs again"));
            self.setup_cache = false;
            self.sandbox = SandboxState::Starting { handle: None };
            started = self.start().await;
        }
        match started {
            Ok(ready) => {
                let handle = ready.handle.clone();
                self.sandbox = SandboxState::Ready(Box::new(ready));
                Ok(handle)
            }
            Err(e) => {
                let handle = self.handle().cloned();
                self.sandbox = SandboxState::Failed { message: e.to_string(), handle };
                Err(e)
            }
        }
    }

    /// The start phases, in order: image → container → env → workspace → files → setup → snapshot.
    async fn start(&mut self) -> Result<Ready> {
        let backend = self
            .backend
            .clone()
            .ok_or_else(|| Error::infra("start the sandbox", "no sandbox backend is configured"))?;
        let harness = self.harness.as_deref();
        let spec = lifecycle::image::spec(self.env.image.as_ref(), harness);
        let image = self
            .phases
            .run(Phase::Image, lifecycle::image::ensure(backend.as_ref(), &spec, harness), |i| {
                i.detail.clone()
            })
            .await?;
        self.record.image = Some(image.reference.clone());

        let egress_plan =
            lifecycle::gateway::plan(&self.env, self.harness.as_deref(), &self.secrets)
                .map_err(|e| e.in_phase(Phase::Gateway))?;
        let (mut variables, env_detail) = lifecycle::env::variables(&self.env, &self.secrets);
        variables.extend(egress_plan.as_ref().map(|p| p.variables()).unwrap_or_default());
        let attempt_id = self.record.artifacts_dir_name();
        let gateway = egress_plan.is_some();
        let rules_file = self
            .harness
            .as_ref()
            .map(|h| h.rules_file().to_string())
            .unwrap_or_else(|| "AGENTS.md".into());
        // A prepared sandbox of the same inputs, cached by an earlier attempt, replaces
        // the workspace, files and setup phases.
        let cache_digest = if backend.caches_setups() {
            self.setup_cache_digest(&image.id, &rules_file, egress_plan.as_ref())
        } else {
            None
        };
        let cache_hit = match &cache_digest {
            Some(digest) => backend.find_setup(digest).await.ok().flatten(),
            None => None,
        };
        let from = match &cache_hit {
            Some(found) => found.reference.clone(),
            None => image.reference.clone(),
        };
        // A container made ahead serves when it is what this start would make.
        let ahead = match self.prestarted.take() {
            Some((sandbox, made_from)) if egress_plan.is_none() && made_from == from => {
                Some(sandbox)
            }
            Some((sandbox, _)) => {
                let _ = sandbox.destroy().await;
                None
            }
            None => None,
        };
        let prestarted = ahead.is_some();
        let Attempt { phases, env, record, sandbox: state, run_egress, egress, .. } = &mut *self;
        let handle = phases
            .run(
                Phase::Container,
                async {
                    // With a way out, the sandbox's main process is the gateway's relay.
                    let labels = lifecycle::container::labels(&record.run_id, &attempt_id);
                    if let Some(sandbox) = ahead {
                        record.container = Some(sandbox.id().to_string());
                        let handle =
                            SandboxHandle::new(sandbox, crate::environment::WORKSPACE, variables);
                        *state = SandboxState::Starting { handle: Some(handle.clone()) };
                        return Ok(handle);
                    }
                    let (network, main_process, files) = match egress_plan {
                        Some(plan) => {
                            let (prepared, sandbox) = lifecycle::gateway::prepare(
                                run_egress,
                                plan,
                                backend.as_ref(),
                                &labels,
                            )
                            .await?;
                            *egress = Some(prepared);
                            (sandbox.network, Some(sandbox.main_process), sandbox.files)
                        }
                        None => (crate::sandbox::NetworkSpec::None, None, Vec::new()),
                    };
                    let sandbox = lifecycle::container::create(
                        backend.as_ref(),
                        &from,
                        &record.run_id,
                        &attempt_id,
                        &env.limits,
                        network,
                        main_process,
                    )
                    .await?;
                    // Owned from creation on: teardown destroys it whatever happens next.
                    record.container = Some(sandbox.id().to_string());
                    let handle = SandboxHandle::new(
                        sandbox.clone(),
                        crate::environment::WORKSPACE,
                        variables,
                    );
                    *state = SandboxState::Starting { handle: Some(handle.clone()) };
                    if !files.is_empty() {
                        // Where nothing is mounted, the relay (and the CA) go in before it starts.
                        let relative: Vec<_> = files
                            .into_iter()
                            .map(|(p, b, m)| (p.trim_start_matches('/').to_string(), b, m))
                            .collect();
                        sandbox.upload("/", crate::sandbox::archive::tar_of(&relative)?).await?;
                    }
                    sandbox.start().await?;
                    Ok(handle)
                },
                |h| {
                    let detail = lifecycle::container::detail(h.sandbox().as_ref(), &from, gateway);
                    if prestarted { format!("{detail}, started ahead of its slot") } else { detail }
                },
            )
            .await?;
        if let Some(egress) = &self.egress {
            self.phases.run(Phase::Gateway, egress.verify(), Clone::clone).await?;
        }
        self.phases.run(Phase::Env, async { Ok(()) }, |_| env_detail).await?;

        let hit = cache_hit.is_some();
        if let (true, Some(digest)) = (hit, &cache_digest) {
            self.phases
                .run(
                    Phase::Setup,
                    lifecycle::setup::cache_hit(digest, &self.artifacts_dir),
                    Clone::clone,
                )
                .await?;
            if !self.record.artifacts.iter().any(|a| a == "setup.log") {
                self.record.artifacts.push("setup.log".into());
            }
        }
        if let Some(ws) = self.env.workspace.as_ref().filter(|_| !hit) {
            self.phases
                .run(Phase::Workspace, lifecycle::workspace::unpack(&handle, ws), Clone::clone)
                .await?;
        }
        let files = lifecycle::files::planned(&self.env, &rules_file);
        if !files.is_empty() && !hit {
            let rules = self.env.rules.is_some().then_some(rules_file.as_str());
            self.phases
                .run(Phase::Files, lifecycle::files::write(&handle, &files, rules), Clone::clone)
                .await?;
        }
        if !self.env.setup.is_empty() && !hit {
            if !self.record.artifacts.iter().any(|a| a == "setup.log") {
                self.record.artifacts.push("setup.log".into());
            }
            if let Some(egress) = &self.egress {
                egress.for_setup().await.map_err(|e| e.in_phase(Phase::Setup))?;
            }
            self.phases
                .run(
                    Phase::Setup,
                    lifecycle::setup::run(
                        &handle,
                        &self.env.setup,
                        &self.artifacts_dir,
                        &self.redactor,
                    ),
                    Clone::clone,
                )
                .await?;
        }
        // From now on the agent's allowlist, with the agent's secrets swapped.
        if let Some(egress) = &self.egress {
            egress.for_agent().await.map_err(|e| e.in_phase(Phase::Setup))?;
        }
        // An image of the eval's or the harness's own may put files in the workspace: read it then too.
        let own_image =
            self.env.image.is_some() || self.harness.as_ref().is_some_and(|h| h.image().is_some());
        let written = self.env.prepares_workspace() || own_image;
        // A miss is cached by a fill in the background (`runner/setup_fill.rs`), from a
        // sandbox of its own: committing this one while the eval acts in it would cache
        // the agent's changes, and waiting for the commit here would put it on the
        // attempt's critical path.
        let fill = match (&self.purpose, cache_digest.as_deref().filter(|_| !hit)) {
            (Purpose::Eval(Some(ask)), Some(digest)) => Some((ask.clone(), digest.to_string())),
            _ => None,
        };
        let for_cache = matches!(self.purpose, Purpose::Fill);
        let hit_digest = cache_digest.clone().filter(|_| hit);
        self.cache_digest = cache_digest.filter(|_| !hit);
        let mut git_repo = hit;
        let baseline = self
            .phases
            .run(
                Phase::Snapshot,
                async {
                    // A cached sandbox was prepared before it was committed.
                    if written && !hit {
                        // Before the snapshot, so the workspace's change of owner is not a change of the agent's.
                        git_repo = lifecycle::snapshot::prepare_agent_user(&handle).await?;
                    }
                    // A sandbox for the cache is committed, never diffed.
                    lifecycle::snapshot::take(&handle, written && !for_cache).await
                },
                |s| match &fill {
                    Some((_, digest)) => format!(
                        "{} files; setup cache miss, {digest} is filled in the background",
                        s.len()
                    ),
                    None => format!("{} files", s.len()),
                },
            )
            .await?;
        // A hit is used only if its workspace is the one its image was committed with.
        if let (Some(found), Some(digest), true) = (&cache_hit, &hit_digest, written) {
            let seen = baseline.fingerprint();
            if found.snapshot.as_deref() != Some(seen.as_str()) {
                let why = format!(
                    "the cached setup {digest} does not hold the workspace it was committed with \
                     (fingerprint {} when committed, {seen} now)",
                    found.snapshot.as_deref().unwrap_or("none")
                );
                self.cache_mismatch = Some((digest.clone(), why.clone()));
                return Err(Error::infra("use the cached setup", why).in_phase(Phase::Snapshot));
            }
        }
        if let Some((ask, digest)) = fill
            && let Some(why) = ask.ask(&digest)
        {
            self.phases.log.event(format!("setup cache: {digest} is not cached: {why}"));
        }
        Ok(Ready {
            handle,
            baseline,
            last: None,
            agent_user: written,
            session: false,
            eval_wrote: false,
            git_repo,
        })
    }

    /// The setup cache's key for this attempt, when its prepared sandbox may be cached.
    fn setup_cache_digest(
        &mut self,
        base_image_id: &str,
        rules_file: &str,
        egress: Option<&lifecycle::gateway::Plan>,
    ) -> Option<String> {
        use crate::setup_cache::SetupCache;
        // Only a setup is worth an image; without steps, preparing is a few uploads.
        if !self.setup_cache || self.env.setup.is_empty() {
            return None;
        }
        match self.env.setup_cache {
            SetupCache::Off => return None,
            SetupCache::On if egress.is_some_and(|p| p.secrets_reach_setup()) => {
                self.phases.log.event(
                    "setup not cached: a secret could reach it through the gateway \
                     (setup_cache(SetupCache::IncludingSecrets) caches it)"
                        .to_string(),
                );
                return None;
            }
            SetupCache::On | SetupCache::IncludingSecrets => {}
        }
        let harness = self
            .harness
            .as_ref()
            .map(|h| format!("{} {}", h.name(), h.version().unwrap_or_default()))
            .unwrap_or_default();
        crate::setup_key::key(&self.env, base_image_id, &harness, rules_file).ok()
    }

    /// Starts the harness's session on the first turn; like the start, not on the budget.
    async fn ensure_session(&mut self, handle: &SandboxHandle) -> Result<()> {
        if self.ready().session {
            return Ok(());
        }
        let Attempt { phases, harness, env, secrets, artifacts_dir, sandbox, record, .. } = self;
        let SandboxState::Ready(ready) = sandbox else {
            unreachable!("a session starts in a started sandbox")
        };
        let harness = harness.as_deref_mut().ok_or_else(|| {
            Error::Config("failed to send a prompt: no harness is selected for this eval".into())
        })?;
        phases
            .run(
                Phase::Harness,
                async {
                    if !ready.agent_user {
                        ready.git_repo = lifecycle::snapshot::prepare_agent_user(handle).await?;
                        ready.agent_user = true;
                    }
                    lifecycle::harness::start(
                        harness,
                        &handle.as_agent(),
                        env,
                        secrets,
                        artifacts_dir,
                        record,
                    )
                    .await
                },
                Clone::clone,
            )
            .await?;
        ready.session = true;
        Ok(())
    }

    /// One agent turn, followed by its diff.
    pub(crate) async fn send(&mut self, prompt: String, options: TurnOptions) -> Result<Turn> {
        let handle = self.sandbox().await?;
        if self.harness.is_none() {
            return Err(Error::Config(
                "failed to send a prompt: no harness is selected for this eval".into(),
            ));
        }
        self.ensure_session(&handle).await?;
        let index = self.record.turns.len() as u32 + 1;
        self.phases.log.turn_started(index, &lifecycle::turn::prompt_head(&prompt));
        // Every turn that starts is in the record, whatever ends it; it is concluded below.
        let slot = self.record.turns.len();
        self.record.turns.push(lifecycle::turn::started(prompt.clone()));
        self.turn_in_flight = Some((slot, Instant::now()));
        let Attempt {
            phases,
            harness,
            env,
            artifacts_dir,
            sandbox,
            record,
            turn_unsettled,
            interrupt,
            redactor,
            ..
        } = self;
        let harness = harness.as_deref_mut().expect("checked above");
        let SandboxState::Ready(ready) = sandbox else { unreachable!("started above") };
        let sent = if harness.reads_context_summary() {
            lifecycle::turn::with_context(&prompt, index, env)
        } else {
            prompt.clone()
        };
        let turn_ctx = TurnContext {
            index,
            artifacts_dir: Some(artifacts_dir.clone()),
            events: phases.log.agent_events(),
        };
        let (signal, budget) = (phases.budget.signal(), phases.budget.clone());
        let harness_name = record.harness.clone();
        let mut diff_ms = 0;
        let mut diff_failed = None;
        let mut archived = Ok(());
        let (turn, error) = phases
            .run(
                Phase::Turn,
                async {
                    // The agent runs unprivileged: nothing it starts can read a check's environment.
                    let agent = handle.as_agent();
                    let ran = lifecycle::turn::run(
                        harness,
                        &agent,
                        &sent,
                        &turn_ctx,
                        &signal,
                        interrupt,
                        options.timeout,
                        turn_unsettled,
                    )
                    .await;
                    let (mut turn, error) = lifecycle::turn::conclude(
                        prompt,
                        ran,
                        Diff::default(),
                        &harness_name,
                        budget.spent(),
                    );
                    // Recorded before its diff, which a workspace of many files makes slow.
                    record.turns[slot] = turn.clone();
                    // The turn's diff, even after an abort: the record must show the agent's work.
                    let began = Instant::now();
                    let (diff, now, failed) = lifecycle::turn::diff(&handle, ready.latest()).await;
                    // The turn's changes, kept so that regrade and replay can rebuild them exactly.
                    let changes = crate::turn_archive::TurnChanges::of(&diff, &now);
                    archived = crate::turn_archive::record_turn(
                        artifacts_dir,
                        index,
                        &changes,
                        failed.as_deref(),
                        redactor,
                    );
                    ready.last = Some(now);
                    ready.eval_wrote = false;
                    diff_ms = began.elapsed().as_millis() as u64;
                    diff_failed = failed;
                    turn.diff = diff;
                    Ok((turn, error))
                },
                |(turn, _)| lifecycle::turn::detail(index as usize, turn),
            )
            .await?;
        self.phases.count_as_diff(Phase::Turn, diff_ms);
        let diff_failed_at_all = diff_failed.is_some();
        if let Some(e) = diff_failed {
            self.phases.log.event(format!("failed to diff the workspace after turn {index}: {e}"));
        }
        if let Err(e) = archived {
            self.phases.log.event(format!("failed to archive turn {index}'s changes: {e}"));
        }
        // A turn that failed (or whose diff did) in a sandbox lost meanwhile is the platform's.
        let (mut turn, mut error) = (turn, error);
        if (error.is_some() || diff_failed_at_all)
            && let Some(e) =
                lost::lost(&handle, "run the turn", &format!("turn {index}"), true).await
        {
            turn.error = Some(e.to_string());
            error = Some(e);
        }
        if turn.status != TurnStatus::Completed {
            self.saw_oom_kill(&handle, &format!("turn {index}")).await;
        }
        self.record.usage.add(&turn.usage);
        self.record.turns[slot] = turn.clone();
        self.turn_in_flight = None;
        match error {
            None => Ok(turn),
            Some(e) => Err(e.in_phase(Phase::Turn)),
        }
    }

    /// A check in the sandbox.
    pub(crate) async fn exec(&mut self, cmd: Command) -> Result<ExecOutput> {
        let handle = self.sandbox().await?;
        self.before_check(&handle).await;
        // A check reaches what checks may, and only now are checks-only secrets swapped.
        if let Some(egress) = &self.egress {
            egress.for_check().await.map_err(|e| e.in_phase(Phase::Check))?;
        }
        let egress = self.egress.as_ref();
        let brokered = |name: &str| egress.is_some_and(|e| e.brokers(name));
        let shown = lifecycle::check::one_line(&cmd.display());
        let check = lifecycle::check::run(&handle, cmd, &self.secrets, brokered);
        let ran = self.phases.run(Phase::Check, check, lifecycle::check::detail).await;
        // A check that failed in a sandbox lost meanwhile: its result must not reach the eval.
        let lost = match &ran {
            Ok(out) if out.exit_code == 0 => None,
            ran => {
                let killed = ran.as_ref().map_or(true, |out| lost::looks_killed(out.exit_code));
                let during = format!("the check `{shown}`");
                lost::lost(&handle, "run the check", &during, killed).await
            }
        };
        if let Some(egress) = &self.egress {
            egress.for_agent().await.map_err(|e| e.in_phase(Phase::Check))?;
        }
        if let Some(e) = lost {
            if let Ok(out) = &ran {
                self.record.checks.push(lifecycle::check::record(out, false));
            }
            return Err(e.in_phase(Phase::Check));
        }
        let out = ran?;
        let oom_killed = out.exit_code == 137
            && self
                .saw_oom_kill(
                    &handle,
                    &format!("check `{}`", lifecycle::check::one_line(&out.command)),
                )
                .await;
        // What the check wrote is its own, not the agent's (`checks.rs`).
        let changes = self.after_check(&handle, &lifecycle::check::one_line(&out.command)).await;
        self.record
            .checks
            .push(CheckRecord { changes, ..lifecycle::check::record(&out, oom_killed) });
        Ok(out)
    }

    /// A file's bytes (relative paths are in the workspace).
    pub(crate) async fn read_bytes(&mut self, path: &str) -> Result<Vec<u8>> {
        let handle = self.sandbox().await?;
        self.phases.within_budget(async { Ok(handle.read_file(path).await?) }).await
    }

    /// Writes a file, owned by the agent user once it is set up.
    pub(crate) async fn write_file(&mut self, path: &str, content: &[u8]) -> Result<()> {
        let handle = self.sandbox().await?;
        // Until the agent user is set up, its setup hands the workspace over.
        let writer = if self.ready().agent_user { handle.as_agent() } else { handle };
        self.ready().eval_wrote = true;
        self.phases
            .within_budget(async { Ok(writer.write_file(path, content, 0o644).await?) })
            .await
    }

    /// The workspace diff since the snapshot.
    pub(crate) async fn diff(&mut self) -> Result<Diff> {
        let handle = self.sandbox().await?;
        let (before, baseline) = {
            let ready = self.ready();
            (ready.latest(), ready.baseline.clone())
        };
        let now = self.phases.diff(async { Ok(before.refresh(&handle).await?) }).await?;
        let diff = baseline.diff(&now);
        self.ready().last = Some(now);
        self.ready().eval_wrote = false;
        Ok(diff)
    }

    /// Verdicts from the judge model, one `judge` phase per criterion.
    pub(crate) async fn judge(&mut self, judge: Judge) -> Result<JudgeResult> {
        let prepared = judge
            .prepare(self.judge_spec.as_deref(), &self.secrets)
            .map_err(|e| e.in_phase(Phase::Judge))?;
        let evidence = crate::judge::prompt::gather(self, judge.state_shown()).await?;
        let sandbox = if judge.is_agentic() { Some(self.sandbox().await?) } else { None };
        let before = match &sandbox {
            Some(handle) => {
                let last = self.ready().latest();
                Some(self.phases.diff(async { Ok(last.refresh(handle).await?) }).await?)
            }
            None => None,
        };
        let mut verdicts = Vec::new();
        for criterion in prepared.judge.criteria() {
            let verdict = lifecycle::judge::verdict(
                &mut self.phases,
                &prepared,
                criterion,
                &evidence,
                sandbox.as_ref(),
            )
            .await?;
            if let Some(e) = crate::judge::failure(&verdict) {
                self.soft_failures.push(e.in_phase(Phase::Judge));
            }
            self.record.verdicts.push(verdict.clone());
            verdicts.push(verdict);
        }
        if let (Some(handle), Some(before)) = (&sandbox, before)
            && let Some(event) = lifecycle::judge::changes_outside_its_copy(handle, &before).await
        {
            self.phases.log.event(event);
        }
        Ok(JudgeResult { verdicts })
    }

    /// A port of the sandbox reachable from the host.
    pub(crate) async fn serve(&mut self, port: u16, ready_within: Duration) -> Result<String> {
        if let Some(f) = self.forwards.iter().find(|f| f.port == port) {
            return Ok(f.url.clone());
        }
        let handle = self.sandbox().await?;
        let forward = self
            .phases
            .run(Phase::Serve, lifecycle::serve::forward(&handle, port, ready_within), |f| {
                format!("port {port} at {}", f.url)
            })
            .await?;
        let url = forward.url.clone();
        self.forwards.push(forward);
        Ok(url)
    }

    /// Keeps an artifact.
    pub(crate) async fn capture(&mut self, name: &str, what: Artifact) -> Result<Capture> {
        let handle = self.sandbox().await?;
        let keep =
            lifecycle::capture::keep(&handle, name, &what, &self.artifacts_dir, &self.redactor);
        let (capture, _) = self
            .phases
            .run(Phase::Capture, keep, |(_, bytes)| format!("{name} ({bytes} bytes)"))
            .await?;
        self.record.artifacts.push(capture.file.clone());
        self.captures.retain(|c| c.name != name);
        self.captures.push(capture.clone());
        Ok(capture)
    }

    /// An attempt that did not pass and whose sandbox was lost meanwhile (a
    /// check frozen by a pause until the budget ran out, an eval that gave up
    /// on a dead sandbox's error) ends as the platform's failure.
    async fn blame_lost_sandbox(&self, ended: Ended) -> Ended {
        let settled = match &ended {
            Ended::Returned(Ok(Ok(()))) | Ended::Interrupted => true,
            Ended::Returned(Ok(Err(e))) => lost::says_lost(e),
            _ => false,
        };
        let Some(handle) = self.handle().filter(|_| !settled) else { return ended };
        let during = match self.calls.in_flight.or(self.calls.failed) {
            Some(call) => call.to_string(),
            None => "the attempt".to_string(),
        };
        match lost::lost(handle, "finish the attempt", &during, false).await {
            Some(e) => Ended::Returned(Ok(Err(e))),
            None => ended,
        }
    }

    /// Whether the OOM killer struck since it was last looked at; if so, says so as an event.
    async fn saw_oom_kill(&mut self, handle: &SandboxHandle, during: &str) -> bool {
        let Ok(Some(kills)) = handle.oom_kills().await else { return false };
        if kills <= self.oom_kills_seen {
            return false;
        }
        self.oom_kills_seen = kills;
        let limit = self.env.limits.memory_bytes;
        self.phases.log.event(format!(
            "OOM kill: the sandbox ran out of memory (limit {} MiB) during {during}",
            limit >> 20
        ));
        true
    }

    /// Closes the session and collects the final workspace, under its own
    /// deadline, whatever happened before. The sandbox is returned to be
    /// destroyed by the caller, off the attempt's critical path (see
    /// `runner/teardown.rs`); past the deadline it is destroyed here.
    pub(crate) async fn teardown(&mut self) -> Option<Arc<dyn crate::sandbox::Sandbox>> {
        for forward in self.forwards.drain(..) {
            forward.task.abort();
        }
        // Nothing leaves the sandbox from now on; what did is recorded.
        if let Some(egress) = self.egress.take() {
            let (records, summary) = egress.close(self.started_unix_ms).await;
            self.record.egress = records;
            self.phases.log.event(summary);
        }
        let Some(handle) = self.handle().cloned() else {
            self.phases
                .run(Phase::Teardown, async { Ok(()) }, |_| "no sandbox was started".into())
                .await
                .ok();
            return None;
        };
        let mut events = Vec::new();
        let mut diff_ms = 0;
        let Attempt { phases, harness, sandbox, record, artifacts_dir, turn_unsettled, .. } = self;
        let work = async {
            if let SandboxState::Ready(ready) = &*sandbox {
                if ready.session
                    && let Some(h) = harness.as_deref_mut()
                {
                    events.extend(lifecycle::teardown::stop_harness(h, &handle.as_agent()).await);
                    // What the harness kept (transcripts, its config home) belongs to the record.
                    let more =
                        lifecycle::teardown::harness_artifacts(artifacts_dir, &record.artifacts);
                    record.artifacts.extend(more);
                }
                // An aborted turn's processes must not change the workspace while it is read.
                if turn_unsettled.load(std::sync::atomic::Ordering::SeqCst) {
                    lifecycle::teardown::kill_turns(handle.sandbox().as_ref()).await;
                }
                let began = Instant::now();
                match lifecycle::teardown::collect(&handle, &ready.baseline, &ready.latest()).await
                {
                    Ok(diff) => {
                        record.final_diff = Some(diff);
                        record.workspace_collected = true;
                    }
                    Err(e) => {
                        let lost =
                            lost::lost(&handle, "collect the final workspace", "teardown", false);
                        events.push(match lost.await {
                            Some(lost) => lost.to_string(),
                            None => format!("failed to collect the final workspace: {e}"),
                        });
                    }
                }
                // The agent's commits, for a replay to have them as commits.
                if ready.git_repo {
                    events.extend(crate::git_archive::capture(&handle, artifacts_dir).await);
                    let bundle =
                        format!("{}/{}", crate::turn_archive::DIR, crate::git_archive::BUNDLE);
                    if artifacts_dir.join(&bundle).is_file() {
                        record.artifacts.push(bundle);
                    }
                }
                diff_ms = began.elapsed().as_millis() as u64;
            }
            Ok::<_, Error>(())
        };
        // `Some(gone)` when the deadline passed and the sandbox was destroyed here.
        let bounded = async {
            match tokio::time::timeout(lifecycle::teardown::TEARDOWN_DEADLINE, work).await {
                Ok(r) => r.map(|()| None),
                Err(_) => {
                    let gone = matches!(
                        tokio::time::timeout(Duration::from_secs(30), handle.sandbox().destroy())
                            .await,
                        Ok(Ok(()))
                    );
                    Ok(Some(gone))
                }
            }
        };
        let destroyed = phases
            .run(Phase::Teardown, bounded, |destroyed| match destroyed {
                None => "session closed; the sandbox is destroyed in the background".into(),
                Some(true) => "sandbox destroyed after the teardown deadline passed".into(),
                Some(false) => {
                    "failed to destroy the sandbox; the run's end sweep or the next run removes it"
                        .into()
                }
            })
            .await;
        self.phases.count_as_diff(Phase::Teardown, diff_ms);
        for e in events {
            self.phases.log.event(e);
        }
        match destroyed {
            Ok(None) => Some(handle.sandbox().clone()),
            // Already destroyed (or given up) under the deadline; a failed phase ran no destroy.
            Ok(Some(_)) => None,
            Err(_) => Some(handle.sandbox().clone()),
        }
    }

    /// The record, concluded (outcome, message, phases, events, timings), and the error that caused its outcome.
    fn finish(mut self, ended: Ended, budget: Duration) -> (Record, Option<Error>) {
        // Interrupted: the run stopped it, or a call it made ended because the run stopped.
        let interrupted = matches!(ended, Ended::Interrupted)
            || (self.interrupt.is_cancelled() && matches!(ended, Ended::Returned(Ok(Err(_)))));
        let stopped =
            matches!(ended, Ended::BudgetRanOut(_) | Ended::DeadlinePassed | Ended::Interrupted);
        let returned_error = matches!(ended, Ended::Returned(Ok(Err(_))));
        let panicked = matches!(ended, Ended::Returned(Err(_)));
        let Conclusion { outcome, message, cause } = if interrupted {
            conclude(Ended::Interrupted, &mut self.soft_failures, budget)
        } else {
            conclude(ended, &mut self.soft_failures, budget)
        };
        let total_ms = self.phases.log.now_ms();
        // A turn cut short keeps its place in the record: a turn that never
        // concluded by how it was stopped; one cut short in its diff as it concluded.
        if let Some((slot, began)) = self.turn_in_flight.take() {
            let turn = &mut self.record.turns[slot];
            if turn.duration_ms == 0 {
                turn.status =
                    if interrupted { TurnStatus::Interrupted } else { TurnStatus::Aborted };
                turn.duration_ms = began.elapsed().as_millis().max(1) as u64;
            }
        }
        let mut message = message;
        let mut record = self.record;
        record.interrupted = interrupted;
        let timed_out = outcome == crate::outcome::Outcome::Fail(crate::FailKind::Timeout);
        if panicked {
            record.location = calls::take_panic_location();
            if let (Some(at), Some(m)) = (&record.location, message.as_mut()) {
                *m = m.replacen("the eval panicked: ", &format!("the eval panicked at {at}: "), 1);
            }
        } else if (stopped || timed_out)
            && let Some(call) = self.calls.in_flight.or(self.calls.failed)
        {
            // The call that was running when time ran out (or the run stopped), and what
            // the agent had printed by then.
            record.location = Some(call.to_string());
            if let Some(m) = message.as_mut() {
                m.push_str(&format!("\n  while {call} was running"));
                if let Some(tail) = lifecycle::turn::output_tail(&record.turns) {
                    m.push_str(&format!("\n  the agent's last output: {tail}"));
                }
            }
        } else if returned_error {
            record.location = self.calls.failed.map(|c| c.to_string());
        }
        record.outcome = outcome;
        record.message = message;
        record.timings = self.phases.timings;
        record.timings.total_ms = total_ms;
        record.phases = self.phases.log.phases;
        record.events = self.phases.log.events;
        (record, cause)
    }
}

/// The eval's environment, or the message of the panic its function raised.
pub(crate) fn build_environment(eval: &Eval) -> std::result::Result<Environment, String> {
    match &eval.options.environment {
        None => Ok(Environment::default()),
        Some(f) => std::panic::catch_unwind(AssertUnwindSafe(|| f()))
            .map_err(|p| panic_message(p.as_ref())),
    }
}

pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a non-string panic payload".into()
    }
}

/// What an attempt left: its record (redacted), and the error that decided its outcome.
#[derive(Debug)]
pub(crate) struct Attempted {
    pub(crate) record: Record,
    pub(crate) cause: Option<Error>,
    /// The sandbox, still to destroy: the caller does it, off the critical path.
    pub(crate) to_destroy: Option<Arc<dyn crate::sandbox::Sandbox>>,
}

impl AttemptPlan {
    /// The attempt's id on the event stream.
    pub(crate) fn id(&self) -> crate::runner::events::AttemptId {
        crate::runner::events::AttemptId {
            eval: self.eval.name.clone(),
            harness: self.harness_spec.clone(),
            arm: self.arm.clone(),
            trial: self.trial,
            try_: self.try_,
        }
    }
}

impl Attempt {
    /// A fresh attempt of `plan`, its sandbox not started, its clock not running.
    #[allow(clippy::too_many_arguments)]
    fn new(
        plan: &AttemptPlan,
        env: Environment,
        backend: Option<Arc<dyn Backend>>,
        harness: Option<Box<dyn Harness>>,
        secrets: Vec<Secret>,
        shutdown: &CancellationToken,
        deadline: Option<Instant>,
        purpose: Purpose,
    ) -> Self {
        let mut record =
            Record::new(&plan.run_id, &plan.eval.name, &plan.harness_spec, plan.trial, plan.try_);
        record.arm = plan.arm.clone();
        record.source = plan.eval.location.map(|(file, line)| format!("{file}:{line}"));
        record.tags = plan.eval.options.tags.clone();
        record.min_pass_rate = plan.eval.options.min_pass_rate;
        calls::remember_panic_locations();
        let artifacts_dir = plan.run_dir.join(record.artifacts_dir_name());
        let redactor = plan.redactor.clone();
        let log = PhaseLog::new(plan.id(), redactor.clone(), plan.events.clone());
        let budget = Budget::new(plan.timeout);
        let mut phases = Phases::new(log, budget, deadline);
        // Preflight ran once for the whole run, before anything started.
        let started = phases.log.started();
        phases.record(Phase::Preflight, started, plan.preflight.clone());
        Attempt {
            env,
            backend,
            harness,
            secrets,
            redactor,
            artifacts_dir,
            judge_spec: plan.eval.options.judge.clone(),
            phases,
            sandbox: SandboxState::NotStarted,
            record,
            soft_failures: Vec::new(),
            captures: Vec::new(),
            forwards: Vec::new(),
            oom_kills_seen: 0,
            turn_unsettled: TurnUnsettled::default(),
            run_egress: plan.egress.clone(),
            egress: None,
            started_unix_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0),
            calls: calls::Calls::default(),
            interrupt: shutdown.clone(),
            turn_in_flight: None,
            setup_cache: plan.setup_cache,
            prestarted: None,
            purpose,
            cache_mismatch: None,
            cache_digest: None,
            oracle: match (&plan.eval.options.oracle, crate::oracle::is_oracle(&plan.harness_spec))
            {
                (_, false) => Oracle::None,
                (Some(solve), true) => Oracle::Pending(solve.clone()),
                (None, true) => Oracle::Missing,
            },
        }
    }
}

/// Runs one attempt to its record. Never panics on the eval's account.
pub(crate) async fn run(
    plan: AttemptPlan,
    backend: Option<Arc<dyn Backend>>,
    harness: Option<Box<dyn Harness>>,
    secrets: Vec<Secret>,
    shutdown: CancellationToken,
    prestarted: Option<(Arc<dyn crate::sandbox::Sandbox>, String)>,
) -> Attempted {
    // Preflight already built it once; a panic here is a panic of the eval's own code.
    let (env, env_panic) = match build_environment(&plan.eval) {
        Ok(env) => (env, None),
        Err(panic) => (Environment::default(), Some(panic)),
    };
    let deadline = plan.eval.options.deadline.map(|d| Instant::now() + d);
    let purpose = Purpose::Eval(plan.ask_fill.clone());
    let attempt = Attempt::new(&plan, env, backend, harness, secrets, &shutdown, deadline, purpose);
    let attempt = Attempt { prestarted, ..attempt };
    let (budget, turn_unsettled) = (attempt.phases.budget.clone(), attempt.turn_unsettled.clone());
    let redactor = attempt.redactor.clone();
    let mut ctx = Ctx { attempt };

    let signal = budget.signal();
    budget.start();
    let ended = {
        let run = plan.eval.run.clone();
        let fut = crate::matchers::CURRENT_EVAL
            .scope(plan.eval.name.clone(), AssertUnwindSafe(run(&mut ctx)).catch_unwind());
        let fut = fut.map(|r| r.map_err(|p| panic_message(p.as_ref())));
        tokio::pin!(fut);
        let deadline = async {
            match deadline {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        if let Some(p) = env_panic {
            Ended::Returned(Ok(Err(Error::other(format!(
                "failed to build the environment: its function panicked: {p}"
            )))))
        } else {
            tokio::select! {
                r = &mut fut => Ended::Returned(r),
                _ = signal.cancelled() => {
                    // A running turn needs its grace, its kill and its diff; reeval's other calls return at once.
                    let grace = if turn_unsettled.load(std::sync::atomic::Ordering::SeqCst) { ABORT_GRACE } else { Duration::from_secs(1) };
                    Ended::BudgetRanOut(tokio::time::timeout(grace, &mut fut).await.ok())
                }
                _ = deadline => Ended::DeadlinePassed,
                _ = shutdown.cancelled() => {
                    // A running turn stops as `interrupted`: let it record what it did so far.
                    if turn_unsettled.load(std::sync::atomic::Ordering::SeqCst) {
                        let _ = tokio::time::timeout(ABORT_GRACE, &mut fut).await;
                    }
                    Ended::Interrupted
                }
            }
        }
    };
    budget.finish();

    let mut attempt = ctx.attempt;
    let ended = attempt.blame_lost_sandbox(ended).await;
    // Teardown runs whatever happened; a panic in it (a harness's stop) must not lose the record.
    let to_destroy = match AssertUnwindSafe(attempt.teardown()).catch_unwind().await {
        Ok(sandbox) => sandbox,
        Err(panic) => {
            attempt.phases.log.event(format!(
                "failed to tear down: teardown panicked: {}",
                panic_message(panic.as_ref())
            ));
            attempt.handle().map(|h| h.sandbox().clone())
        }
    };
    // A container made ahead that the attempt never used goes too.
    let to_destroy = to_destroy.or_else(|| attempt.prestarted.take().map(|(s, _)| s));
    let (mut record, cause) = attempt.finish(ended, plan.timeout);
    if crate::replay::is_replay(&plan.harness_spec) {
        // A regrade names what it re-graded and carries the agent's usage as recorded, not summed again.
        if let Ok(recorded) = crate::replay::find(
            &plan.harness_spec,
            &plan.run_dir,
            &record.eval,
            record.trial,
            record.arm.as_deref(),
        ) {
            record.regrade_of = Some(recorded.regrade_of());
            record.usage = recorded.record.usage.clone();
        }
    }
    // Everything downstream (reporters, an embedding program) gets the redacted record.
    Attempted { record: redactor.scrub(&record).unwrap_or(record), cause, to_destroy }
}
