//! The handle contexts and harnesses act through: a sandbox, its workspace,
//! the environment every command gets, and the user commands run as.

use crate::FileToWrite;
use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::mpsc;

use super::{ExecRequest, ProcessGroup, ProcessLauncher, Sandbox, SandboxError, archive};
use crate::exec::{Command, ExecOutput};

/// What contexts and harnesses act through: a sandbox, its workspace and the
/// environment every command gets.
#[derive(Clone)]
pub struct SandboxHandle {
    sandbox: Arc<dyn Sandbox>,
    workspace: String,
    env: Arc<Vec<(String, String)>>,
    /// The user commands run as when they name none; `None` is the image's own (root).
    user: Option<AgentUser>,
    /// Where a read-only host directory of reeval's in-sandbox helpers is
    /// mounted, when the sandbox has one (see [`SandboxHandle::with_helpers_dir`]).
    helpers_dir: Option<Arc<str>>,
    /// A faster way to archive a directory than the engine's, once there is
    /// one; shared by every clone (see [`SandboxHandle::set_archiver`]).
    archiver: Arc<std::sync::Mutex<Option<Arc<dyn TreeArchiver>>>>,
    /// Another way to start a turn than the engine's exec, once there is
    /// one; shared by every clone (see [`SandboxHandle::set_launcher`]).
    launcher: Arc<std::sync::Mutex<Option<Arc<dyn ProcessLauncher>>>>,
}

/// Archives a directory of the sandbox another way than the engine's archive
/// API (whose every call mounts the container's file system and its mounts
/// again): reeval-core's diff helper session, already running as root in
/// the sandbox, reads the tree and the archive is built here.
#[async_trait::async_trait]
pub trait TreeArchiver: Send + Sync {
    /// A tar of the directory at `path` (absolute) laid out as the engine's
    /// [`Sandbox::download`] of it, at most `limit` bytes of content; `None`
    /// when it cannot (not a directory, too large, the session gone), and
    /// the caller asks the engine.
    ///
    /// # Cancel safety
    /// A cancelled call may leave the archiver unusable (later calls say `None`).
    async fn archive(&self, path: &str, limit: u64) -> Option<Bytes>;
}

/// The unprivileged user agents run as, so that nothing they start can read
/// the environment of a check (which holds checks-only secrets) or change what
/// root owns outside the workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentUser;

impl AgentUser {
    /// Its uid, also its gid.
    pub const ID: u64 = 1000;
    /// Its home directory.
    pub const HOME: &'static str = "/home/agent";

    /// `uid:gid` for the engine.
    pub fn spec() -> String {
        format!("{0}:{0}", Self::ID)
    }
}

impl fmt::Debug for SandboxHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The env may hold placeholders only, but keep it out of debug output anyway.
        f.debug_struct("SandboxHandle")
            .field("sandbox", &self.sandbox.id())
            .field("workspace", &self.workspace)
            .finish()
    }
}

/// The largest file `read_file` returns.
pub const READ_LIMIT: u64 = 256 << 20;

impl SandboxHandle {
    /// A handle on `sandbox` with its workspace at `workspace`.
    pub fn new(
        sandbox: Arc<dyn Sandbox>,
        workspace: impl Into<String>,
        env: Vec<(String, String)>,
    ) -> Self {
        Self {
            sandbox,
            workspace: workspace.into(),
            env: Arc::new(env),
            user: None,
            helpers_dir: None,
            archiver: Arc::default(),
            launcher: Arc::default(),
        }
    }

    /// Gives this handle and every clone of it a [`TreeArchiver`], which
    /// [`SandboxHandle::download_dir`] asks first.
    pub fn set_archiver(&self, archiver: Arc<dyn TreeArchiver>) {
        *self.archiver.lock().unwrap_or_else(|e| e.into_inner()) = Some(archiver);
    }

    /// Gives this handle and every clone of it a [`ProcessLauncher`], which
    /// [`SandboxHandle::exec_turn`] asks first.
    pub fn set_launcher(&self, launcher: Arc<dyn ProcessLauncher>) {
        *self.launcher.lock().unwrap_or_else(|e| e.into_inner()) = Some(launcher);
    }

    /// A tar of the directory at `path` (absolute), as [`Sandbox::download`]
    /// gives it, at most `limit` bytes: from the handle's [`TreeArchiver`]
    /// where it has one that can, else from the engine.
    ///
    /// # Errors
    /// As [`Sandbox::download`].
    ///
    /// # Cancel safety
    /// Safe: nothing changes in the sandbox (a cancelled archiver may be unusable after).
    pub async fn download_dir(&self, path: &str, limit: u64) -> Result<Bytes, SandboxError> {
        let archiver = self.archiver.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(archiver) = archiver
            && let Some(tar) = archiver.archive(path, limit).await
        {
            return Ok(tar);
        }
        self.sandbox.download(path, limit).await
    }

    /// The same handle, saying that `dir` in the sandbox is a read-only mount
    /// of reeval's in-sandbox helpers (a local engine's host directory): they
    /// run from there instead of being copied in. Only the one who created
    /// the sandbox with that mount may say so.
    pub fn with_helpers_dir(self, dir: impl Into<Arc<str>>) -> Self {
        Self { helpers_dir: Some(dir.into()), ..self }
    }

    /// Where reeval's in-sandbox helpers are mounted read-only, if they are.
    pub fn helpers_dir(&self) -> Option<&str> {
        self.helpers_dir.as_deref()
    }

    /// The same sandbox, acting as the unprivileged [`AgentUser`]: what harnesses get.
    pub fn as_agent(&self) -> Self {
        Self { user: Some(AgentUser), ..self.clone() }
    }

    /// Whether this handle acts as the agent user.
    pub fn is_agent(&self) -> bool {
        self.user.is_some()
    }

    /// The sandbox.
    pub fn sandbox(&self) -> &Arc<dyn Sandbox> {
        &self.sandbox
    }

    /// The workspace directory inside the sandbox.
    pub fn workspace(&self) -> &str {
        &self.workspace
    }

    /// The environment every command gets (placeholders, never real secrets).
    pub fn env(&self) -> &[(String, String)] {
        &self.env
    }

    /// `path` made absolute against the workspace.
    pub fn resolve(&self, path: &str) -> String {
        let joined = if path.starts_with('/') {
            path.to_string()
        } else {
            format!("{}/{path}", self.workspace.trim_end_matches('/'))
        };
        // `.` components go (`.`, `./src`, `src/.` name directories of the workspace);
        // `..` stays for the engine to refuse or resolve.
        let parts: Vec<&str> = joined.split('/').filter(|p| !p.is_empty() && *p != ".").collect();
        format!("/{}", parts.join("/"))
    }

    fn with_workdir(&self, cmd: &Command) -> Command {
        let mut cmd = cmd.clone();
        if cmd.workdir.is_none() {
            cmd.workdir = Some(self.workspace.clone());
        }
        if cmd.user.is_none() && self.user.is_some() {
            cmd.user = Some(AgentUser::spec());
        }
        cmd
    }

    /// Runs a command in the workspace with the attempt's environment.
    ///
    /// # Errors
    /// [`SandboxError`] when the engine fails; a non-zero exit is not an error.
    ///
    /// # Cancel safety
    /// See [`Sandbox::exec`].
    pub async fn exec(&self, cmd: impl Into<Command>) -> Result<ExecOutput, SandboxError> {
        let cmd = self.with_workdir(&cmd.into());
        self.sandbox.exec(ExecRequest::plain(&cmd, &self.env)).await
    }

    /// Runs a command with extra variables on top of the attempt's environment.
    ///
    /// # Errors
    /// As [`SandboxHandle::exec`].
    ///
    /// # Cancel safety
    /// See [`Sandbox::exec`].
    pub async fn exec_with_env(
        &self,
        cmd: impl Into<Command>,
        extra: &[(String, String)],
    ) -> Result<ExecOutput, SandboxError> {
        let mut env = self.env.as_ref().clone();
        env.extend_from_slice(extra);
        let cmd = self.with_workdir(&cmd.into());
        self.sandbox.exec(ExecRequest::plain(&cmd, &env)).await
    }

    /// Runs an agent's turn: a killable process tree whose stdout also streams to `stdout`.
    /// The returned stdout keeps the first and last 64 KiB
    /// ([`crate::exec::STREAMED_CAPTURE_LIMIT`]); the stream has every byte.
    /// The handle's [`ProcessLauncher`], where it has one, is asked to start
    /// it first (see [`SandboxHandle::set_launcher`]).
    ///
    /// # Errors
    /// As [`SandboxHandle::exec`].
    ///
    /// # Cancel safety
    /// Dropping the future leaves the process running; the context kills it
    /// with [`Sandbox::kill`] when it aborts a turn.
    pub async fn exec_turn(
        &self,
        cmd: Command,
        stdout: mpsc::UnboundedSender<Bytes>,
    ) -> Result<ExecOutput, SandboxError> {
        let launcher = self.launcher.lock().unwrap_or_else(|e| e.into_inner()).clone();
        self.exec_streamed(cmd, stdout, ProcessGroup::Killable, launcher.as_deref()).await
    }

    /// Runs a plain command whose stdout also streams to `stdout` (for output
    /// larger than the bounded capture: an archive, a file's bytes).
    ///
    /// # Errors
    /// As [`SandboxHandle::exec`].
    ///
    /// # Cancel safety
    /// See [`Sandbox::exec`].
    pub async fn exec_streaming(
        &self,
        cmd: Command,
        stdout: mpsc::UnboundedSender<Bytes>,
    ) -> Result<ExecOutput, SandboxError> {
        self.exec_streamed(cmd, stdout, ProcessGroup::Plain, None).await
    }

    async fn exec_streamed(
        &self,
        cmd: Command,
        stdout: mpsc::UnboundedSender<Bytes>,
        group: ProcessGroup,
        launcher: Option<&dyn ProcessLauncher>,
    ) -> Result<ExecOutput, SandboxError> {
        let cmd = self.with_workdir(&cmd);
        let request =
            ExecRequest { command: &cmd, env: &self.env, stdout: Some(stdout), group, launcher };
        self.sandbox.exec(request).await
    }

    /// How many processes the kernel's OOM killer has killed in the sandbox
    /// (cgroup v1 or v2), when the sandbox exposes it.
    ///
    /// # Errors
    /// [`SandboxError`] when the engine fails.
    ///
    /// # Cancel safety
    /// Safe.
    pub async fn oom_kills(&self) -> Result<Option<u64>, SandboxError> {
        let cmd = Command::shell(
            "cat /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control 2>/dev/null",
        );
        let out = self.sandbox.exec(ExecRequest::plain(&cmd, &[])).await?;
        Ok(out
            .stdout
            .lines()
            .find_map(|l| l.strip_prefix("oom_kill "))
            .and_then(|n| n.trim().parse().ok()))
    }

    /// Reads a file (relative paths are in the workspace). An agent's handle
    /// reads with the agent user's permissions, not root's.
    ///
    /// # Errors
    /// [`SandboxError::NotFound`] when there is no such regular file (or the
    /// agent user may not read it).
    ///
    /// # Cancel safety
    /// Safe: nothing changes in the sandbox.
    pub async fn read_file(&self, path: &str) -> Result<Vec<u8>, SandboxError> {
        let abs = self.resolve(path);
        if self.user.is_none() {
            let tar = self.sandbox.download(&abs, READ_LIMIT).await?;
            return archive::single_file(&tar, &abs);
        }
        let (tx, mut rx) = mpsc::unbounded_channel();
        // `head -c` bounds what is read; a regular file only, like the archive path.
        let script = r#"[ -f "$1" ] && [ -r "$1" ] || exit 44; exec head -c "$2" -- "$1""#;
        let cmd =
            Command::new("sh").args(["-c", script, "sh", &abs, &(READ_LIMIT + 1).to_string()]);
        let cmd = self.with_workdir(&cmd);
        let out = self
            .sandbox
            .exec(ExecRequest {
                command: &cmd,
                env: &[],
                stdout: Some(tx),
                group: ProcessGroup::Plain,
                launcher: None,
            })
            .await?;
        if out.exit_code == 44 {
            return Err(SandboxError::NotFound { path: abs });
        }
        let mut bytes = Vec::new();
        while let Ok(chunk) = rx.try_recv() {
            bytes.extend_from_slice(&chunk);
        }
        if !out.success() {
            return Err(SandboxError::Archive {
                message: format!("failed to read {abs}: {}", out.stderr.trim()),
            });
        }
        if bytes.len() as u64 > READ_LIMIT {
            return Err(SandboxError::Archive {
                message: format!("{abs} is larger than {READ_LIMIT} bytes"),
            });
        }
        Ok(bytes)
    }

    /// Writes a file byte for byte with `mode`, creating parent directories.
    ///
    /// # Errors
    /// [`SandboxError`] when the engine fails.
    ///
    /// # Cancel safety
    /// Not atomic: a cancelled write may leave the file absent.
    pub async fn write_file(
        &self,
        path: &str,
        bytes: &[u8],
        mode: u32,
    ) -> Result<(), SandboxError> {
        let abs = self.resolve(path);
        let (dir, name) = abs.rsplit_once('/').unwrap_or(("", abs.as_str()));
        let dir = if dir.is_empty() { "/" } else { dir };
        let owner = if self.user.is_some() { AgentUser::ID } else { 0 };
        let tar = archive::tar_owned_by(
            &[FileToWrite::new(name.to_string(), bytes.to_vec(), mode)],
            owner,
        )?;
        match self.sandbox.upload(dir, tar.clone()).await {
            Err(SandboxError::NotFound { .. }) => {
                let mkdir =
                    self.with_workdir(&Command::new("mkdir").arg("-p").arg(dir).workdir("/"));
                let out = self.sandbox.exec(ExecRequest::plain(&mkdir, &[])).await?;
                if !out.success() {
                    return Err(SandboxError::engine_says(
                        format!("create directory {dir}"),
                        out.stderr.trim(),
                    ));
                }
                self.sandbox.upload(dir, tar).await
            }
            other => other,
        }
    }
}
