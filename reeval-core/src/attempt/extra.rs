//! Extra sandboxes of one attempt ([`Ctx::start_sandbox`]): a sandbox
//! started from an [`Environment`] of its own beside the attempt's, as a
//! Harbor task's separate verifier environment is (a fresh container the
//! agent never touched, where the verifier grades what was copied across).
//!
//! An extra sandbox goes through the same phases as the attempt's, each
//! recorded with `sandbox NAME: ` before its detail: image (found or built
//! once per content digest, the run's `[images]` applied; its services'
//! too), container (its services and mounts; its gateway prepared when its
//! environment asks for a way out), gateway (isolation verified), env,
//! workspace, files, setup (its `setup.log` under `sandboxes/NAME/`). No
//! agent works in it: every command in it is a check, under what its
//! environment's checks may reach. It is owned by the attempt from its
//! creation: [`Ctx::stop_sandbox`] removes it early, and teardown removes
//! every one still there, whatever ended the attempt (an error, its
//! timeout, the run's interruption), recording what went out through its
//! gateway. A start cut short while the engine was creating it leaves the
//! container to the run's end sweep, as for the attempt's own.
//!
//! Not given to an extra sandbox: secrets (an environment naming one is
//! refused), a harness, a snapshot or a diff.

use std::future::Future;
use std::panic::Location;
use std::sync::Arc;

use super::{Attempt, Ctx};
use crate::capture::{Artifact, Capture};
use crate::environment::Environment;
use crate::error::{Error, Result};
use crate::exec::{Command, ExecOutput};
use crate::gateway::AttemptEgress;
use crate::lifecycle;
use crate::phase::Phase;
use crate::sandbox::{Sandbox, SandboxHandle};

/// Another sandbox of the attempt, started by [`Ctx::start_sandbox`]: a
/// handle, cheap to clone; calls on it go through [`Ctx::in_sandbox`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtraSandbox {
    name: String,
    index: usize,
}

impl ExtraSandbox {
    /// The name it was started under.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// One extra sandbox, as the attempt keeps it.
#[derive(Debug)]
pub(super) struct Extra {
    name: String,
    /// Once created: teardown destroys it.
    handle: Option<SandboxHandle>,
    /// Its gateway, when its environment asks for a way out.
    egress: Option<AttemptEgress>,
    /// Why it takes no more calls (its start failed, or it was stopped).
    gone: Option<String>,
}

/// Calls in an extra sandbox ([`Ctx::in_sandbox`]).
#[derive(Debug)]
pub struct InSandbox<'a> {
    ctx: &'a mut Ctx,
    sandbox: &'a ExtraSandbox,
}

impl Ctx {
    /// Starts another sandbox for this attempt, from `env` (its image,
    /// variables, files, setup, services, mounts and network as for the
    /// attempt's own), named `name` in the record. It runs through the same
    /// phases as the attempt's sandbox (not spending the budget), and is
    /// removed by [`Ctx::stop_sandbox`] or at teardown, whatever happens.
    ///
    /// # Errors
    /// [`Error::Config`] for a name already used or not a word of letters,
    /// digits, `-` and `_`, an environment with problems or secrets, or
    /// services or mounts the engine cannot give; an infra error when a
    /// phase fails (the image, the container, the gateway, a setup step).
    ///
    /// # Cancel safety
    /// A cancelled start leaves what was created to teardown (or, while the
    /// engine was creating it, to the run's end sweep).
    #[track_caller]
    pub fn start_sandbox(
        &mut self,
        name: &str,
        env: Environment,
    ) -> impl Future<Output = Result<ExtraSandbox>> {
        let at = Location::caller();
        let name = name.to_string();
        async move {
            self.attempt.calls.began("start_sandbox", at);
            let result = self.attempt.start_extra(&name, env).await;
            self.attempt.calls.ended(result)
        }
    }

    /// Calls in the extra sandbox `sandbox`: checks, files, captures.
    pub fn in_sandbox<'a>(&'a mut self, sandbox: &'a ExtraSandbox) -> InSandbox<'a> {
        InSandbox { ctx: self, sandbox }
    }

    /// Copies `path` (a file or a directory; relative paths are in the
    /// workspace) from the attempt's sandbox into `to`, at the same absolute
    /// path (its parents made), without the paths `exclude` matches (shell
    /// patterns as [`Artifact::excluding`] takes them). Files keep their
    /// modes and owners, set-id bits cleared; symlinks out of the copy,
    /// devices and FIFOs are left out. `Ok(false)` when `path` does not exist.
    ///
    /// # Errors
    /// An infra error when the engine fails to read or write; [`Error::Timeout`].
    ///
    /// # Cancel safety
    /// A cancelled copy may leave part of it in `to`.
    #[track_caller]
    pub fn copy_to_sandbox(
        &mut self,
        to: &ExtraSandbox,
        path: &str,
        exclude: &[String],
    ) -> impl Future<Output = Result<bool>> {
        let at = Location::caller();
        let (to, path, exclude) = (to.clone(), path.to_string(), exclude.to_vec());
        async move {
            self.attempt.calls.began("copy_to_sandbox", at);
            let result = self.attempt.copy_to_extra(&to, &path, &exclude).await;
            self.attempt.calls.ended(result)
        }
    }

    /// Removes the extra sandbox `sandbox` now (its services, volumes and
    /// gateway too); later calls on it fail. What went out through its
    /// gateway goes into the record.
    ///
    /// # Errors
    /// An infra error when the engine fails to remove it (the run's end sweep then does).
    ///
    /// # Cancel safety
    /// A cancelled stop leaves the sandbox to teardown.
    #[track_caller]
    pub fn stop_sandbox(&mut self, sandbox: ExtraSandbox) -> impl Future<Output = Result<()>> {
        let at = Location::caller();
        async move {
            self.attempt.calls.began("stop_sandbox", at);
            let result = self.attempt.stop_extra(sandbox.index).await;
            self.attempt.calls.ended(result)
        }
    }
}

impl InSandbox<'_> {
    /// A check in the sandbox (as root unless the command names a user),
    /// recorded with the sandbox's name; a `&str` runs under `sh -c`.
    ///
    /// # Errors
    /// [`Error::Timeout`] when the budget runs out; a sandbox error. A non-zero exit is not one.
    ///
    /// # Cancel safety
    /// A dropped check may keep running in the sandbox until it is removed.
    #[track_caller]
    pub fn exec(self, cmd: impl Into<Command>) -> impl Future<Output = Result<ExecOutput>> {
        let at = Location::caller();
        let cmd: Command = cmd.into();
        async move {
            self.ctx.attempt.calls.began("exec", at);
            let result = self.ctx.attempt.exec_in_extra(self.sandbox.index, cmd).await;
            self.ctx.attempt.calls.ended(result)
        }
    }

    /// A file's bytes (relative paths are in the workspace).
    ///
    /// # Errors
    /// [`crate::SandboxError::NotFound`] when it does not exist; [`Error::Timeout`].
    ///
    /// # Cancel safety
    /// Safe.
    #[track_caller]
    pub fn read_bytes(self, path: &str) -> impl Future<Output = Result<Vec<u8>>> {
        let at = Location::caller();
        let path = path.to_string();
        async move {
            self.ctx.attempt.calls.began("read_bytes", at);
            let result = async {
                let handle = self.ctx.attempt.extra_handle(self.sandbox.index)?;
                let read = async { Ok(handle.read_file(&path).await?) };
                self.ctx.attempt.phases.within_budget(read).await
            }
            .await;
            self.ctx.attempt.calls.ended(result)
        }
    }

    /// Writes a file byte for byte (mode 0644, owned by root), making its directories.
    ///
    /// # Errors
    /// A sandbox error, or [`Error::Timeout`].
    ///
    /// # Cancel safety
    /// A cancelled write may leave the file absent.
    #[track_caller]
    pub fn write_file(
        self,
        path: &str,
        content: impl AsRef<[u8]>,
    ) -> impl Future<Output = Result<()>> {
        let at = Location::caller();
        let (path, content) = (path.to_string(), content.as_ref().to_vec());
        async move {
            self.ctx.attempt.calls.began("write_file", at);
            let result = async {
                let handle = self.ctx.attempt.extra_handle(self.sandbox.index)?;
                let write = async { Ok(handle.write_file(&path, &content, 0o644).await?) };
                self.ctx.attempt.phases.within_budget(write).await
            }
            .await;
            self.ctx.attempt.calls.ended(result)
        }
    }

    /// Keeps `what` from this sandbox as an artifact named `name` (see [`Ctx::capture`]).
    ///
    /// # Errors
    /// As [`Ctx::capture`].
    ///
    /// # Cancel safety
    /// A cancelled capture keeps nothing.
    #[track_caller]
    pub fn capture(self, name: &str, what: Artifact) -> impl Future<Output = Result<Capture>> {
        let at = Location::caller();
        let name = name.to_string();
        async move {
            self.ctx.attempt.calls.began("capture", at);
            let result = self.ctx.attempt.capture_in_extra(self.sandbox.index, &name, what).await;
            self.ctx.attempt.calls.ended(result)
        }
    }

    /// The sandbox's handle, for code that acts in it directly.
    ///
    /// # Errors
    /// An infra error when it failed to start or was stopped.
    pub fn handle(self) -> Result<SandboxHandle> {
        self.ctx.attempt.extra_handle(self.sandbox.index)
    }
}

/// Whether `name` can name an extra sandbox (a directory of the record's artifacts).
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 40
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

impl Attempt {
    /// The extra sandbox at `index`, while it takes calls.
    fn extra_handle(&self, index: usize) -> Result<SandboxHandle> {
        let extra = &self.extras[index];
        match (&extra.gone, &extra.handle) {
            (None, Some(handle)) => Ok(handle.clone()),
            (Some(why), _) => Err(Error::infra(format!("use sandbox {}", extra.name), why)),
            (None, None) => {
                Err(Error::infra(format!("use sandbox {}", extra.name), "it was never created"))
            }
        }
    }

    /// Starts an extra sandbox: its phases, in order (see the module's doc).
    async fn start_extra(&mut self, name: &str, env: Environment) -> Result<ExtraSandbox> {
        let refuse = |why: String| Error::Config(format!("failed to start sandbox {name}: {why}"));
        if !valid_name(name) || self.extras.iter().any(|e| e.name == name) {
            return Err(refuse(
                "its name must be new to the attempt, of letters, digits, `-` and `_`".into(),
            ));
        }
        let backend = self.backend()?;
        let mut env = self.given.cell.images.apply_env(env);
        // The run's opt-in for internal addresses holds here as in the attempt's sandbox.
        env.allow_internal.extend(self.egress.run.allow_internal().iter().cloned());
        let mut problems = env.problems();
        if !env.secrets.is_empty() {
            problems.push("an extra sandbox is given no secrets".into());
        }
        if !env.services.is_empty()
            && let Err(why) = backend.runs_services(&env.services)
        {
            problems.push(why);
        }
        if let Err(why) = backend.mounts(&env.all_mounts()) {
            problems.push(why);
        }
        if !problems.is_empty() {
            return Err(refuse(problems.join("; ")));
        }
        let index = self.extras.len();
        self.extras.push(Extra { name: name.to_string(), handle: None, egress: None, gone: None });
        let started = self.extra_phases(index, &env, backend).await;
        if let Err(e) = &started {
            self.extras[index].gone = Some(format!("it failed to start: {e}"));
        }
        started.map(|()| ExtraSandbox { name: name.to_string(), index })
    }

    /// The phases of an extra sandbox's start.
    async fn extra_phases(
        &mut self,
        index: usize,
        env: &Environment,
        backend: Arc<dyn crate::sandbox::Backend>,
    ) -> Result<()> {
        let name = self.extras[index].name.clone();
        let said = |detail: &str| format!("sandbox {name}: {detail}");
        // Image: the sandbox's and its services', once per content digest.
        let spec = lifecycle::image::spec(env.image.as_ref(), None);
        let images = async {
            let image = lifecycle::image::ensure(backend.as_ref(), &spec, "").await?;
            let services =
                lifecycle::image::ensure_services(backend.as_ref(), &env.services).await?;
            Ok((image, services))
        };
        let (image, (services, _)) = self
            .phases
            .run(Phase::Image, images, |(i, (_, s))| {
                said(&if s.is_empty() { i.detail.clone() } else { format!("{}; {s}", i.detail) })
            })
            .await?;
        // Container, with its gateway first when it has a way out.
        let plan = crate::gateway::attempt::plan(env, None, &[])
            .map_err(|e| e.in_phase(Phase::Gateway))?;
        let gateway = plan.is_some();
        let (mut variables, env_detail) = lifecycle::env::variables(env, &[]);
        variables.extend(plan.as_ref().map(|p| p.variables()).unwrap_or_default());
        crate::sandbox::service::bypass_proxy(&mut variables, &env.services);
        let beside = lifecycle::container::services_detail(&services);
        let attempt_id = self.record.artifacts_dir_name();
        let workspace = env.workspace_dir.resolve(image.workdir.as_deref());
        let Attempt { phases, record, extras, egress, .. } = &mut *self;
        let make = async {
            let labels = lifecycle::container::labels(&record.run_id, &attempt_id);
            let (network, main_process, files) = match plan {
                Some(plan) => {
                    let (prepared, sandbox) = crate::gateway::attempt::prepare(
                        &egress.run,
                        plan,
                        backend.as_ref(),
                        &labels,
                    )
                    .await?;
                    extras[index].egress = Some(prepared);
                    (sandbox.network, Some(sandbox.main_process), sandbox.files)
                }
                None => (crate::sandbox::NetworkSpec::None, None, Vec::new()),
            };
            let mut spec = lifecycle::container::spec(
                &image.reference,
                &workspace,
                &record.run_id,
                &attempt_id,
                &env.limits,
                network,
                main_process,
            );
            spec.services = services;
            spec.mounts = env.mounts.clone();
            spec.user = image.user.clone();
            let sandbox = backend.create(&spec).await?;
            let handle = SandboxHandle::new(sandbox.clone(), workspace.clone(), variables);
            extras[index].handle = Some(handle.clone());
            lifecycle::container::start(sandbox.as_ref(), files).await?;
            Ok(handle)
        };
        let handle = phases
            .run(Phase::Container, make, |h| {
                let detail =
                    lifecycle::container::detail(h.sandbox().as_ref(), &image.reference, gateway);
                said(&format!("{detail}{beside}"))
            })
            .await?;
        // Gateway: its isolation verified, as the attempt's sandbox's.
        let Attempt { phases, extras, .. } = &mut *self;
        if let Some(egress) = &extras[index].egress {
            phases.run(Phase::Gateway, egress.verify(), |d| said(d)).await?;
        }
        self.phases.run(Phase::Env, async { Ok(()) }, |_| said(&env_detail)).await?;
        if let Some(ws) = &env.workspace {
            let unpack = lifecycle::workspace::unpack(&handle, ws);
            self.phases.run(Phase::Workspace, unpack, |d| said(d)).await?;
        }
        let files = lifecycle::files::planned(env, "AGENTS.md");
        if !files.is_empty() {
            let rules = env.rules.is_some().then_some("AGENTS.md");
            let write = lifecycle::files::write(&handle, &files, rules);
            self.phases.run(Phase::Files, write, |d| said(d)).await?;
        }
        if !env.setup.is_empty() {
            if let Some(egress) = &self.extras[index].egress {
                egress.for_setup().await.map_err(|e| e.in_phase(Phase::Setup))?;
            }
            let dir = format!("sandboxes/{name}");
            let log_dir = self.given.artifacts_dir.join(&dir);
            let steps = lifecycle::setup::run(&handle, &env.setup, &log_dir, &self.given.redactor);
            self.record.artifacts.push(format!("{dir}/setup.log"));
            self.phases.run(Phase::Setup, steps, |d| said(d)).await?;
        }
        // From now on every command in it is a check.
        if let Some(egress) = &self.extras[index].egress {
            egress.for_check().await.map_err(|e| e.in_phase(Phase::Check))?;
        }
        Ok(())
    }

    /// A check in the extra sandbox at `index`, recorded with its name.
    async fn exec_in_extra(&mut self, index: usize, cmd: Command) -> Result<ExecOutput> {
        let handle = self.extra_handle(index)?;
        let step = cmd.step_name().map(str::to_string);
        let check = lifecycle::check::run(&handle, cmd, &[], |_| false);
        let name = self.extras[index].name.clone();
        let out = self
            .phases
            .run(Phase::Check, check, |o| {
                format!("sandbox {name}: {}", lifecycle::check::detail(o, step.as_deref()))
            })
            .await?;
        let mut record = lifecycle::check::record(&out, false, step.as_deref());
        record.sandbox = Some(name);
        self.record.checks.push(record);
        Ok(out)
    }

    /// Keeps an artifact of the extra sandbox at `index`.
    async fn capture_in_extra(
        &mut self,
        index: usize,
        name: &str,
        what: Artifact,
    ) -> Result<Capture> {
        let handle = self.extra_handle(index)?;
        let keep = lifecycle::capture::keep(
            &handle,
            name,
            &what,
            &self.given.artifacts_dir,
            &self.given.redactor,
        );
        let sandbox = self.extras[index].name.clone();
        let (capture, _) = self
            .phases
            .run(Phase::Capture, keep, |(_, bytes)| {
                format!("sandbox {sandbox}: {name} ({bytes} bytes)")
            })
            .await?;
        self.record.artifacts.push(capture.file.clone());
        self.captures.retain(|c| c.name != name);
        self.captures.push(capture.clone());
        Ok(capture)
    }

    /// Copies `path` from the attempt's sandbox into the extra sandbox `to`.
    async fn copy_to_extra(
        &mut self,
        to: &ExtraSandbox,
        path: &str,
        exclude: &[String],
    ) -> Result<bool> {
        let from = self.sandbox().await?;
        let into = self.extra_handle(to.index)?;
        let exclude = crate::sandbox::exclude::Exclude::new(exclude)?;
        let abs = from.resolve(path);
        let copy = async {
            let tar = match from.sandbox().download(&abs, crate::capture::DIR_LIMIT).await {
                Ok(tar) => tar,
                Err(crate::sandbox::SandboxError::NotFound { .. }) => return Ok(false),
                Err(e) => return Err(e.into()),
            };
            let tar = crate::sandbox::archive::copy_for_upload(&tar, |p| exclude.excludes(p))?;
            let parent = match abs.rsplit_once('/') {
                Some(("", _)) | None => "/".to_string(),
                Some((parent, _)) => parent.to_string(),
            };
            let mkdir = Command::new("mkdir").args(["-p", &parent]).user("0").workdir("/");
            let made = into.exec(mkdir).await?;
            if !made.success() {
                return Err(Error::infra(
                    format!("create {parent} in sandbox {}", to.name),
                    made.stderr.trim(),
                ));
            }
            into.sandbox().upload(&parent, tar).await?;
            Ok(true)
        };
        self.phases.within_budget(copy).await
    }

    /// Stops the extra sandbox at `index`: removed, its egress recorded.
    async fn stop_extra(&mut self, index: usize) -> Result<()> {
        let extra = &mut self.extras[index];
        extra.gone.get_or_insert_with(|| "it was stopped".into());
        let (handle, egress) = (extra.handle.take(), extra.egress.take());
        let name = extra.name.clone();
        self.close_extra_egress(&name, egress).await;
        match handle {
            Some(h) => h
                .sandbox()
                .destroy()
                .await
                .map_err(|e| Error::infra(format!("remove sandbox {name}"), e)),
            None => Ok(()),
        }
    }

    /// What went out through an extra sandbox's gateway, into the record.
    async fn close_extra_egress(&mut self, name: &str, egress: Option<AttemptEgress>) {
        let Some(egress) = egress else { return };
        let closed = egress.close(self.egress.started_unix_ms).await;
        self.record.egress.extend(closed.records);
        self.phases.log.event(format!("sandbox {name}: {}", closed.summary));
        if let Some(refused) = closed.refused {
            self.egress.refused.push(format!("sandbox {name}: {refused}"));
        }
    }

    /// Teardown: every extra sandbox still there removed (each within 30
    /// seconds; past that the run's end sweep does it), its egress recorded.
    pub(super) async fn tear_down_extras(&mut self) {
        let mut sandboxes: Vec<(String, Arc<dyn Sandbox>)> = Vec::new();
        for index in 0..self.extras.len() {
            let extra = &mut self.extras[index];
            extra.gone.get_or_insert_with(|| "the attempt ended".into());
            let (handle, egress, name) =
                (extra.handle.take(), extra.egress.take(), extra.name.clone());
            self.close_extra_egress(&name, egress).await;
            if let Some(h) = handle {
                sandboxes.push((name, h.sandbox().clone()));
            }
        }
        let destroys = sandboxes.iter().map(|(name, sandbox)| async move {
            let limit = std::time::Duration::from_secs(30);
            match tokio::time::timeout(limit, sandbox.destroy()).await {
                Ok(Ok(())) => Some(format!("sandbox {name} removed at teardown")),
                Ok(Err(e)) => Some(format!(
                    "failed to remove sandbox {name}: {e}; the run's end sweep removes it"
                )),
                Err(_) => Some(format!(
                    "failed to remove sandbox {name} within 30s; the run's end sweep removes it"
                )),
            }
        });
        for said in futures_util::future::join_all(destroys).await.into_iter().flatten() {
            self.phases.log.event(said);
        }
    }
}
