//! The lazy start: the sandbox, prepared on the first call that needs it.
//! [`Attempt::start`] is the list of its phases, in order; each is a short
//! method below that runs one step of `crate::lifecycle` (the gateway phase:
//! `crate::gateway`) through `Phases::run` and keeps what it made.
//!
//! A setup cache hit replaces the workspace, files and setup phases; a
//! cached setup whose workspace is not the one it was committed with is
//! forgotten, and the start runs again without the cache. A miss asks the
//! run to fill the cache in the background (`runner/setup_fill.rs`).

use std::sync::Arc;

use super::{Attempt, Paused, Purpose, Ready, SandboxState};
use crate::error::{Error, Result};
use crate::gateway::attempt::Plan as EgressPlan;
use crate::lifecycle;
use crate::phase::Phase;
use crate::sandbox::{Backend, FoundSetup, ReadyImage, SandboxHandle};

/// What the start decided before the container: where it comes from, with what.
pub(super) struct Launch {
    /// The image the container is made from: the base image, or the cached setup's.
    pub(super) from: String,
    /// That image named by its content (see `SessionSetup::image`), when it can be.
    pub(super) content_name: Option<String>,
    /// The cached setup this start hit.
    pub(super) hit: Option<FoundSetup>,
    /// The setup cache's key of this sandbox's inputs, when they may be cached.
    pub(super) digest: Option<String>,
    /// What the attempt asks of the egress gateway; `None` when it needs no way out.
    pub(super) egress: Option<EgressPlan>,
    /// The sandbox's variables (the eval's, the gateway's), and the env phase's detail.
    pub(super) variables: Vec<(String, String)>,
    pub(super) env_detail: String,
    /// The file the harness reads its rules from (`AGENTS.md`).
    pub(super) rules_file: String,
    /// A container made ahead of the slot, when it is what this start would make.
    pub(super) ahead: Option<super::Ahead>,
    /// The services started beside the sandbox, their images present.
    pub(super) services: Vec<crate::sandbox::ServiceStart>,
    /// Where the workspace lives (the environment's `workspace_dir`, resolved on the image).
    pub(super) workspace: String,
    /// The image's own `USER` (`None`: root, or not known), what a command that
    /// names none runs as (`SandboxSpec::user`); a cached setup's is its image's.
    pub(super) user: Option<String>,
}

impl Attempt {
    /// The sandbox, started on first use. Starting it spends no budget.
    pub(crate) async fn sandbox(&mut self) -> Result<SandboxHandle> {
        // Every call but a running `send` comes here first: a turn still in
        // flight is one whose `send` the eval dropped.
        self.settle_dropped_turn();
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
            && let Some((digest, why)) = self.prepare.cache_mismatch.take()
        {
            self.forget_cached_setup(&digest, &why).await;
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

    /// The start phases, in order: image → container → gateway → env →
    /// (cached setup | workspace → files → setup) → snapshot.
    async fn start(&mut self) -> Result<Ready> {
        let backend = self.backend()?;
        let (image, services) = self.image(&backend).await?;
        let mut launch = self.launch(&backend, &image).await?;
        launch.services = services;
        let handle = self.container(&backend, &mut launch).await?;
        self.gateway().await?;
        self.env(&launch).await?;
        self.cached_setup(&launch).await?;
        self.workspace(&handle, &launch).await?;
        self.files(&handle, &launch).await?;
        self.setup(&handle, &launch).await?;
        self.egress_for_agent().await?;
        let ready = self.snapshot(handle, &launch).await?;
        self.check_cached_workspace(&launch, &ready)?;
        self.ask_fill(&launch);
        Ok(ready)
    }

    pub(super) fn backend(&self) -> Result<Arc<dyn Backend>> {
        self.given
            .backend
            .clone()
            .ok_or_else(|| Error::infra("start the sandbox", "no sandbox backend is configured"))
    }

    /// The image phase: the image found or built, and its services'; the record names it.
    async fn image(
        &mut self,
        backend: &Arc<dyn Backend>,
    ) -> Result<(ReadyImage, Vec<crate::sandbox::ServiceStart>)> {
        // The cell's plan found the image once for all its attempts.
        let cell = self.given.cell.clone();
        let mapped_from = cell.env.image_mapped_from.clone();
        let both = async {
            let image = lifecycle::image::ensure(backend.as_ref(), &cell.image, &cell.image_key)
                .await
                .map_err(|e| lifecycle::image::own_build_failed(e, &cell.eval, &cell.env))?;
            let services =
                lifecycle::image::ensure_services(backend.as_ref(), &cell.env.services).await?;
            Ok((image, services))
        };
        let (image, (services, _)) = self
            .phases
            .run(Phase::Image, both, |(i, (_, s))| {
                let mut detail = match &mapped_from {
                    Some(from) => format!("{} ({})", i.detail, from.detail()),
                    None => i.detail.clone(),
                };
                if !s.is_empty() {
                    detail = format!("{detail}; {s}");
                }
                detail
            })
            .await?;
        self.record.image = Some(image.reference.clone());
        self.record.image_mapped_from = mapped_from.map(|m| m.record());
        Ok((image, services))
    }

    /// Before the container: the egress plan, the sandbox's variables, the
    /// setup cache's lookup, and whether a container made ahead serves.
    async fn launch(&mut self, backend: &Arc<dyn Backend>, image: &ReadyImage) -> Result<Launch> {
        let given = &self.given;
        let egress =
            crate::gateway::attempt::plan(&given.env, given.harness.as_deref(), &given.secrets)
                .map_err(|e| e.in_phase(Phase::Gateway))?;
        let (variables, env_detail) =
            lifecycle::env::sandbox_variables(&given.env, &given.secrets, egress.as_ref());
        let without_services = given.env.services.is_empty() && given.env.mounts.is_empty();
        let rules_file = given
            .harness
            .as_ref()
            .map(|h| h.rules_file().to_string())
            .unwrap_or_else(|| "AGENTS.md".into());
        // A prepared sandbox of the same inputs, cached by an earlier attempt, replaces
        // the workspace, files and setup phases.
        let digest = if backend.caches_setups() {
            self.setup_cache_digest(&image.id, &rules_file, egress.as_ref())
        } else {
            None
        };
        let hit = match &digest {
            Some(digest) => backend.find_setup(digest).await.ok().flatten(),
            None => None,
        };
        let from = match &hit {
            Some(found) => found.reference.clone(),
            None => image.reference.clone(),
        };
        let content_name = match &hit {
            // A cached setup's reference is named by its inputs' digest.
            Some(found) => Some(found.reference.clone()),
            // Only an id that names content: a tag (Kubernetes's id of a `From`
            // image) may name other content on another node.
            None => Some(image.id.clone()).filter(|id| id.starts_with("sha256:")),
        };
        // A container made ahead serves when it is what this start would make.
        // (Its gateway was prepared from the same plan: the same environment,
        // harness and secrets; a cache hit's image is another.)
        let ahead = match self.prepare.prestarted.take() {
            Some(ahead)
                if ahead.egress.is_some() == egress.is_some()
                    && without_services
                    && ahead.image == from =>
            {
                Some(ahead)
            }
            Some(ahead) => {
                let _ = ahead.discard().await.destroy().await;
                None
            }
            None => None,
        };
        Ok(Launch {
            from,
            content_name,
            hit,
            digest,
            egress,
            variables,
            env_detail,
            rules_file,
            ahead,
            services: Vec::new(),
            workspace: self.given.env.workspace_dir.resolve(image.workdir.as_deref()),
            user: image.user.clone(),
        })
    }

    /// The container phase: the sandbox created (or the one made ahead taken),
    /// its gateway prepared first when it needs a way out. Owned from creation
    /// on: teardown destroys it whatever happens next.
    async fn container(
        &mut self,
        backend: &Arc<dyn Backend>,
        launch: &mut Launch,
    ) -> Result<SandboxHandle> {
        let attempt_id = self.record.artifacts_dir_name();
        let gateway = launch.egress.is_some();
        let (ahead, egress_plan) = (launch.ahead.take(), launch.egress.take());
        let prestarted = ahead.is_some();
        let variables = std::mem::take(&mut launch.variables);
        let services = std::mem::take(&mut launch.services);
        let beside = lifecycle::container::services_detail(&services);
        let (from, workspace) = (&launch.from, launch.workspace.as_str());
        let user = launch.user.clone();
        self.record.workspace_dir =
            (workspace != crate::environment::WORKSPACE).then(|| workspace.to_string());
        let Attempt { phases, given, record, sandbox: state, egress, prepare, .. } = &mut *self;
        phases
            .run(
                Phase::Container,
                async {
                    // With a way out, the sandbox's main process is the gateway's relay.
                    let labels = lifecycle::container::labels(&record.run_id, &attempt_id);
                    if let Some(ahead) = ahead {
                        record.container = Some(ahead.sandbox.id().to_string());
                        let handle = lifecycle::container::handle(
                            ahead.sandbox,
                            workspace,
                            variables,
                            ahead.helper.is_some(),
                        );
                        prepare.helper = ahead.helper;
                        prepare.snapshot_ahead = ahead.snapshot;
                        // Its gateway, prepared with it: the gateway phase checks its report.
                        egress.attempt = ahead.egress;
                        *state = SandboxState::Starting { handle: Some(handle.clone()) };
                        return Ok(handle);
                    }
                    let (network, main_process, files) = match egress_plan {
                        Some(plan) => {
                            let (prepared, sandbox) = crate::gateway::attempt::prepare(
                                &egress.run,
                                plan,
                                backend.as_ref(),
                                &labels,
                            )
                            .await?;
                            egress.attempt = Some(prepared);
                            (sandbox.network, Some(sandbox.main_process), sandbox.files)
                        }
                        None => (crate::sandbox::NetworkSpec::None, None, Vec::new()),
                    };
                    let spec = lifecycle::container::spec(
                        from,
                        workspace,
                        &record.run_id,
                        &attempt_id,
                        &given.env.limits,
                        network,
                        main_process,
                    );
                    let (spec, helper) = lifecycle::container::complete(
                        spec,
                        backend.as_ref(),
                        services,
                        given.env.mounts.clone(),
                        user,
                    );
                    let sandbox = backend.create(&spec).await?;
                    // Owned from creation on: teardown destroys it whatever happens next.
                    record.container = Some(sandbox.id().to_string());
                    let handle = lifecycle::container::handle(
                        sandbox.clone(),
                        workspace,
                        variables,
                        helper.is_some(),
                    );
                    prepare.helper = helper;
                    *state = SandboxState::Starting { handle: Some(handle.clone()) };
                    lifecycle::container::start(sandbox.as_ref(), files).await?;
                    Ok(handle)
                },
                |h| {
                    let detail = lifecycle::container::detail(h.sandbox().as_ref(), from, gateway);
                    let detail = match h.sandbox().start_note() {
                        Some(note) => format!("{detail}{beside}; {note}"),
                        None => format!("{detail}{beside}"),
                    };
                    if prestarted { format!("{detail}, started ahead of its slot") } else { detail }
                },
            )
            .await
    }

    /// The gateway phase, when the sandbox has a way out: the relay's report
    /// says the sandbox is isolated (`gateway/attempt.rs`).
    async fn gateway(&mut self) -> Result<()> {
        if let Some(egress) = &self.egress.attempt {
            self.phases.run(Phase::Gateway, egress.verify(), Clone::clone).await?;
        }
        Ok(())
    }

    /// The env phase: the variables went in with the container; it says which.
    async fn env(&mut self, launch: &Launch) -> Result<()> {
        let detail = launch.env_detail.clone();
        self.phases.run(Phase::Env, async { Ok(()) }, |_| detail).await
    }

    /// On a setup cache hit, the setup phase says so: the cached image holds
    /// the workspace, the files and the setup, and its `setup.log`.
    async fn cached_setup(&mut self, launch: &Launch) -> Result<()> {
        let (Some(_), Some(digest)) = (&launch.hit, &launch.digest) else { return Ok(()) };
        let cached = lifecycle::setup::cache_hit(digest, &self.given.artifacts_dir);
        self.phases.run(Phase::Setup, cached, Clone::clone).await?;
        self.keep_setup_log();
        Ok(())
    }

    /// The workspace phase: the eval's workspace unpacked.
    async fn workspace(&mut self, handle: &SandboxHandle, launch: &Launch) -> Result<()> {
        let Some(ws) = self.given.env.workspace.as_ref().filter(|_| launch.hit.is_none()) else {
            return Ok(());
        };
        self.phases
            .run(Phase::Workspace, lifecycle::workspace::unpack(handle, ws), Clone::clone)
            .await?;
        Ok(())
    }

    /// The files phase: the eval's files and its rules written.
    async fn files(&mut self, handle: &SandboxHandle, launch: &Launch) -> Result<()> {
        let files = lifecycle::files::planned(&self.given.env, &launch.rules_file);
        if files.is_empty() || launch.hit.is_some() {
            return Ok(());
        }
        let rules = self.given.env.rules.is_some().then_some(launch.rules_file.as_str());
        let write = lifecycle::files::write(handle, &files, rules);
        self.phases.run(Phase::Files, write, Clone::clone).await?;
        Ok(())
    }

    /// The setup phase: the eval's setup steps, under what setup may reach.
    async fn setup(&mut self, handle: &SandboxHandle, launch: &Launch) -> Result<()> {
        if self.given.env.setup.is_empty() || launch.hit.is_some() {
            return Ok(());
        }
        self.keep_setup_log();
        if let Some(egress) = &self.egress.attempt {
            egress.for_setup().await.map_err(|e| e.in_phase(Phase::Setup))?;
        }
        let given = &self.given;
        let steps =
            lifecycle::setup::run(handle, &given.env.setup, &given.artifacts_dir, &given.redactor);
        self.phases.run(Phase::Setup, steps, Clone::clone).await?;
        Ok(())
    }

    /// From now on the agent's allowlist, with the agent's secrets swapped.
    async fn egress_for_agent(&self) -> Result<()> {
        if let Some(egress) = &self.egress.attempt {
            egress.for_agent().await.map_err(|e| e.in_phase(Phase::Setup))?;
        }
        Ok(())
    }

    /// The snapshot phase: the agent user set up, then the workspace every
    /// diff starts from. On the `send` that starts the sandbox, the diff
    /// helper's session starts beside it, and a harness that starts apart
    /// from the workspace starts its session beside it too (its own
    /// `harness` phase, overlapping): the turn waits for the longest, not all.
    /// A snapshot taken in the container made ahead (`ahead.rs`) is taken
    /// as it is, with the session it holds (where the helper is mounted).
    async fn snapshot(&mut self, handle: SandboxHandle, launch: &Launch) -> Result<Ready> {
        let hit = launch.hit.is_some();
        let for_cache = matches!(self.prepare.purpose, Purpose::Fill);
        let before_a_turn = std::mem::take(&mut self.prepare.session_beside_snapshot);
        // An image of the eval's or the harness's own may put files in the
        // workspace: read it then too. So where the helper is mounted and a turn
        // follows: the session that prepares the agent user and lists the
        // workspace costs no more than the preparation alone, and it then starts
        // the turn and answers its diff (`diff/launch.rs`), so the turn needs no exec.
        let written = lifecycle::snapshot::workspace_may_hold_files(
            &self.given.env,
            self.given.harness.as_deref(),
        ) || (before_a_turn && handle.helpers_dir().is_some() && !for_cache);
        let fill = self.fill_on_miss(launch);
        self.prepare.cache_digest = launch.digest.clone().filter(|_| !hit);
        // A turn follows the snapshot, which leaves the agent user prepared
        // (its exec, or a cached setup's): the harness's session starts
        // beside it when it starts apart from the workspace.
        let turn_follows = before_a_turn && written && !for_cache;
        let beside = turn_follows
            && self.given.harness.as_ref().is_some_and(|h| h.starts_apart_from(handle.workspace()));
        let mut git_repo = hit;
        // Taken in the container made ahead, where the start wrote nothing before it.
        let ahead = self.prepare.snapshot_ahead.take().filter(|_| written && !hit && !for_cache);
        let taken_ahead = ahead.is_some();
        let Attempt { phases, given, record, prepare, .. } = self;
        let snapshot = phases.run(
            Phase::Snapshot,
            async {
                // A cached sandbox was prepared before it was committed; a
                // sandbox for the cache is committed, never diffed. The agent
                // user is prepared before the snapshot (in its exec, when it
                // reads), so the workspace's change of owner is not a change of the agent's.
                let baseline = match (written && !hit, written && !for_cache) {
                    (true, true) if let Some(ahead) = ahead => {
                        git_repo = ahead.git_repo;
                        ahead.baseline
                    }
                    (true, true) => {
                        // A turn follows: the diff helper's session starts beside the snapshot.
                        let (git, baseline) = lifecycle::snapshot::prepare_agent_user_and_take(
                            &handle,
                            turn_follows,
                            launch.user.as_deref(),
                        )
                        .await?;
                        git_repo = git;
                        baseline
                    }
                    (true, false) => {
                        git_repo = lifecycle::snapshot::prepare_agent_user(
                            &handle,
                            launch.user.as_deref(),
                        )
                        .await?;
                        lifecycle::snapshot::take(&handle, false).await?
                    }
                    (false, read) => lifecycle::snapshot::take(&handle, read).await?,
                };
                Ok(baseline)
            },
            |s| match (&fill, taken_ahead) {
                (Some((_, digest)), _) => format!(
                    "{} files; setup cache miss, {digest} is filled in the background",
                    s.len()
                ),
                (None, true) => format!("{} files, taken ahead of its slot", s.len()),
                (None, false) => format!("{} files", s.len()),
            },
        );
        let session = async {
            let harness = given.harness.as_deref_mut().filter(|_| beside)?;
            let began = std::time::Instant::now();
            let agent = handle.as_agent();
            let (env, secrets, dir) = (&given.env, &given.secrets, &given.artifacts_dir);
            let image = launch.content_name.clone();
            let started =
                lifecycle::harness::start(harness, &agent, env, secrets, dir, record, image).await;
            Some(((began, std::time::Instant::now()), started))
        };
        let (baseline, session) = tokio::join!(snapshot, session);
        let session = session.is_some_and(|(times, started)| {
            match phases.ran_beside(Phase::Harness, times, started, Clone::clone) {
                Ok(_) => true,
                Err(e) => {
                    prepare.session_failed = Some(e);
                    false
                }
            }
        });
        Ok(Ready {
            handle,
            baseline: baseline?,
            last: None,
            agent_user: written,
            session,
            eval_wrote: false,
            unlisted_check: None,
            handle_given: false,
            git_repo,
            image: launch.content_name.clone(),
            image_user: launch.user.clone(),
        })
    }
}
