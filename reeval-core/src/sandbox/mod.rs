//! The sandbox: a trait with one backend today (Docker, in [`docker`]), the
//! handle contexts and harnesses act through, and safe archive handling.

pub mod archive;
pub mod docker;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use tokio::sync::mpsc;

use crate::exec::{Command, ExecOutput};

pub use docker::DockerBackend;

/// Label on every container of a run: the run id.
pub const LABEL_RUN: &str = "dev.reeval.run";
/// Label on every container: the attempt id.
pub const LABEL_ATTEMPT: &str = "dev.reeval.attempt";
/// Label on every container: `<pid>@<process start ticks>` of the runner that owns it.
pub const LABEL_OWNER: &str = "dev.reeval.owner";

/// A failure of the sandbox or its engine. Always an infra error, except a
/// missing file, which a check may expect.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// The engine did not answer.
    #[error("failed to reach the Docker engine: {message}")]
    EngineUnreachable {
        /// The cause.
        message: String,
    },
    /// An engine call failed.
    #[error("failed to {op}: {message}")]
    Engine {
        /// What was being done (`create container`, `start exec`, …).
        op: String,
        /// The engine's answer.
        message: String,
    },
    /// The image is not present and cannot be pulled or built here.
    #[error("failed to find image {image}: {hint}")]
    ImageMissing {
        /// The image reference.
        image: String,
        /// How to get it.
        hint: String,
    },
    /// The image build failed.
    #[error("failed to build image {image}: {message}")]
    ImageBuild {
        /// The image tag.
        image: String,
        /// The builder's output tail.
        message: String,
    },
    /// No such file or directory in the sandbox.
    #[error("failed to read {path} in the sandbox: no such file or directory")]
    NotFound {
        /// The path asked for.
        path: String,
    },
    /// An archive from the sandbox was unusable or unsafe.
    #[error("failed to read an archive from the sandbox: {message}")]
    Archive {
        /// What was wrong with it.
        message: String,
    },
}

impl SandboxError {
    pub(crate) fn engine(op: impl Into<String>, err: impl fmt::Display) -> Self {
        SandboxError::Engine { op: op.into(), message: err.to_string() }
    }
}

/// Resource limits of a sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Memory in bytes (swap is disabled).
    pub memory_bytes: i64,
    /// CPUs, in billionths.
    pub nano_cpus: i64,
    /// Maximum processes.
    pub pids: i64,
}

impl Default for Limits {
    fn default() -> Self {
        Self { memory_bytes: 4 << 30, nano_cpus: 2_000_000_000, pids: 1024 }
    }
}

/// What a sandbox is created from.
#[derive(Debug, Clone)]
pub struct SandboxSpec {
    /// The image reference (already present on the engine).
    pub image: String,
    /// Labels (run, attempt, owner).
    pub labels: BTreeMap<String, String>,
    /// The workspace directory.
    pub workdir: String,
    /// Resource limits.
    pub limits: Limits,
}

/// A running sandbox. Implementations must never unpack an archive from the
/// sandbox onto the host: archives are untrusted.
#[async_trait]
pub trait Sandbox: Send + Sync + fmt::Debug {
    /// The backend's id of the sandbox (the container id).
    fn id(&self) -> &str;

    /// Runs a command; with `stdout` given, stdout chunks are also sent there as they come.
    /// A command with a timeout is killed with its process tree when it runs out.
    ///
    /// # Errors
    /// [`SandboxError`] when the engine fails; a non-zero exit is not an error.
    ///
    /// # Cancel safety
    /// Dropping the future stops reading; the process goes on in the sandbox
    /// until [`Sandbox::kill`] or [`Sandbox::destroy`].
    async fn exec(&self, cmd: &Command, env: &[(String, String)], stdout: Option<mpsc::UnboundedSender<Bytes>>) -> Result<ExecOutput, SandboxError>;

    /// Sends `signal` to every process tree started by a killable exec that is still running.
    ///
    /// # Errors
    /// [`SandboxError`] when the engine fails.
    ///
    /// # Cancel safety
    /// Safe: a signal not sent is sent again by teardown's kill.
    async fn kill(&self, signal: &str) -> Result<(), SandboxError>;

    /// Unpacks a tar archive (built by us) into `dir`, which must exist,
    /// keeping the owners its entries name.
    ///
    /// # Errors
    /// [`SandboxError::NotFound`] when `dir` does not exist, or an engine error.
    ///
    /// # Cancel safety
    /// Not atomic: a cancelled upload may have unpacked part of the archive.
    async fn upload(&self, dir: &str, tar: Bytes) -> Result<(), SandboxError>;

    /// A tar archive of `path`, at most `limit` bytes (untrusted: parse, never unpack).
    ///
    /// # Errors
    /// [`SandboxError::NotFound`], [`SandboxError::Archive`] when over `limit`, or an engine error.
    ///
    /// # Cancel safety
    /// Safe: nothing changes in the sandbox.
    async fn download(&self, path: &str, limit: u64) -> Result<Bytes, SandboxError>;

    /// Starts `argv` with stdin and stdout attached as a byte stream: the
    /// relay under `Ctx::serve`. Stderr is dropped.
    ///
    /// # Errors
    /// [`SandboxError`] when the engine fails.
    ///
    /// # Cancel safety
    /// Dropping the stream closes the attach; the process ends when its stdin closes.
    async fn open_stream(&self, argv: Vec<String>) -> Result<ExecStream, SandboxError>;

    /// Removes the sandbox and everything in it. Idempotent.
    ///
    /// # Errors
    /// [`SandboxError`] when the engine fails.
    ///
    /// # Cancel safety
    /// A cancelled destroy may leave the container, which the run's end sweep removes.
    async fn destroy(&self) -> Result<(), SandboxError>;
}

/// A process in the sandbox with its stdin and stdout attached.
pub struct ExecStream {
    /// Writes to the process's stdin.
    pub input: std::pin::Pin<Box<dyn tokio::io::AsyncWrite + Send>>,
    /// The process's stdout.
    pub output: futures_util::stream::BoxStream<'static, Result<Bytes, SandboxError>>,
}

impl fmt::Debug for ExecStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ExecStream")
    }
}

/// What contexts and harnesses act through: a sandbox, its workspace and the
/// environment every command gets.
#[derive(Clone)]
pub struct SandboxHandle {
    sandbox: Arc<dyn Sandbox>,
    workspace: String,
    env: Arc<Vec<(String, String)>>,
    /// The user commands run as when they name none; `None` is the image's own (root).
    user: Option<AgentUser>,
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
        f.debug_struct("SandboxHandle").field("sandbox", &self.sandbox.id()).field("workspace", &self.workspace).finish()
    }
}

/// The largest file `read_file` returns.
pub const READ_LIMIT: u64 = 256 << 20;

impl SandboxHandle {
    /// A handle on `sandbox` with its workspace at `workspace`.
    pub fn new(sandbox: Arc<dyn Sandbox>, workspace: impl Into<String>, env: Vec<(String, String)>) -> Self {
        Self { sandbox, workspace: workspace.into(), env: Arc::new(env), user: None }
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
        if path.starts_with('/') { path.to_string() } else { format!("{}/{}", self.workspace.trim_end_matches('/'), path.trim_start_matches("./")) }
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
        self.sandbox.exec(&self.with_workdir(&cmd.into()), &self.env, None).await
    }

    /// Runs a command with extra variables on top of the attempt's environment.
    ///
    /// # Errors
    /// As [`SandboxHandle::exec`].
    ///
    /// # Cancel safety
    /// See [`Sandbox::exec`].
    pub async fn exec_with_env(&self, cmd: impl Into<Command>, extra: &[(String, String)]) -> Result<ExecOutput, SandboxError> {
        let mut env = self.env.as_ref().clone();
        env.extend_from_slice(extra);
        self.sandbox.exec(&self.with_workdir(&cmd.into()), &env, None).await
    }

    /// Runs an agent's turn: a killable process tree whose stdout also streams to `stdout`.
    ///
    /// # Errors
    /// As [`SandboxHandle::exec`].
    ///
    /// # Cancel safety
    /// Dropping the future leaves the process running; the context kills it
    /// with [`Sandbox::kill`] when it aborts a turn.
    pub async fn exec_turn(&self, cmd: Command, stdout: mpsc::UnboundedSender<Bytes>) -> Result<ExecOutput, SandboxError> {
        self.sandbox.exec(&self.with_workdir(&cmd), &self.env, Some(stdout)).await
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
        let out =
            self.sandbox.exec(&Command::shell("cat /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control 2>/dev/null"), &[], None).await?;
        Ok(out.stdout.lines().find_map(|l| l.strip_prefix("oom_kill ")).and_then(|n| n.trim().parse().ok()))
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
        let cmd = Command::new("sh").args(["-c", script, "sh", &abs, &(READ_LIMIT + 1).to_string()]);
        let out = self.sandbox.exec(&self.with_workdir(&cmd), &[], Some(tx)).await?;
        if out.exit_code == 44 {
            return Err(SandboxError::NotFound { path: abs });
        }
        let mut bytes = Vec::new();
        while let Ok(chunk) = rx.try_recv() {
            bytes.extend_from_slice(&chunk);
        }
        if !out.success() {
            return Err(SandboxError::Archive { message: format!("failed to read {abs}: {}", out.stderr.trim()) });
        }
        if bytes.len() as u64 > READ_LIMIT {
            return Err(SandboxError::Archive { message: format!("{abs} is larger than {READ_LIMIT} bytes") });
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
    pub async fn write_file(&self, path: &str, bytes: &[u8], mode: u32) -> Result<(), SandboxError> {
        let abs = self.resolve(path);
        let (dir, name) = abs.rsplit_once('/').unwrap_or(("", abs.as_str()));
        let dir = if dir.is_empty() { "/" } else { dir };
        let owner = if self.user.is_some() { AgentUser::ID } else { 0 };
        let tar = archive::tar_owned_by(&[(name.to_string(), bytes.to_vec(), mode)], owner)?;
        match self.sandbox.upload(dir, tar.clone()).await {
            Err(SandboxError::NotFound { .. }) => {
                let out = self.sandbox.exec(&self.with_workdir(&Command::new("mkdir").arg("-p").arg(dir).workdir("/")), &[], None).await?;
                if !out.success() {
                    return Err(SandboxError::engine(format!("create directory {dir}"), out.stderr.trim()));
                }
                self.sandbox.upload(dir, tar).await
            }
            other => other,
        }
    }
}
