//! The [`Sandbox`] trait (one running sandbox: exec, kill, files, streams,
//! state, destroy) and what an exec is given.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use tokio::sync::mpsc;

use crate::exec::{Command, ExecOutput};
use crate::{SandboxError, SandboxState};

/// Whether an exec's processes can be signalled later as one tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessGroup {
    /// A plain command: it ends on its own (housekeeping, checks).
    Plain,
    /// Tracked by a pid file, so that [`Sandbox::kill`] (or the command's own
    /// timeout) reaches it and every process it started: agent turns.
    Killable,
}

/// A signal for [`Sandbox::kill`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// Ask to stop.
    Term,
    /// Stop now.
    Kill,
}

impl Signal {
    /// The signal's name as `kill -s` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Signal::Term => "TERM",
            Signal::Kill => "KILL",
        }
    }
}

/// Where an exec's stdout chunks are also sent as they come.
pub type StdoutSink = mpsc::UnboundedSender<Bytes>;

/// One command to run in a sandbox.
#[derive(Debug)]
pub struct ExecRequest<'a> {
    /// The command (argv, directory, user, stdin, timeout).
    pub command: &'a Command,
    /// Its environment, on top of the image's.
    pub env: &'a [(String, String)],
    /// Where stdout chunks are also sent as they come.
    pub stdout: Option<StdoutSink>,
    /// Whether its process tree can be signalled later.
    pub group: ProcessGroup,
    /// Another way to start it than the engine's exec, asked first where
    /// the backend runs it through a pid file's wrapper (Docker, Kubernetes);
    /// what it does not start runs as before ([`crate::ProcessLauncher`]).
    pub launcher: Option<&'a dyn crate::ProcessLauncher>,
}

impl<'a> ExecRequest<'a> {
    /// A plain command with this environment and no stream.
    pub fn plain(command: &'a Command, env: &'a [(String, String)]) -> Self {
        Self { command, env, stdout: None, group: ProcessGroup::Plain, launcher: None }
    }
}

/// A running sandbox. Implementations must never unpack an archive from the
/// sandbox onto the host: archives are untrusted.
#[async_trait]
pub trait Sandbox: Send + Sync + fmt::Debug {
    /// The backend's id of the sandbox (the container id).
    fn id(&self) -> &str;

    /// Starts the sandbox after [`Backend::create`](crate::Backend::create).
    ///
    /// # Errors
    /// [`SandboxError`] when the engine fails.
    ///
    /// # Cancel safety
    /// Safe: the caller destroys the sandbox at teardown either way.
    async fn start(&self) -> Result<(), SandboxError>;

    /// What starting the sandbox had to wait for, when it is worth telling (a
    /// pod that waited for room on its cluster): the container phase's detail
    /// says it. `None` by default.
    fn start_note(&self) -> Option<String> {
        None
    }

    /// Runs a command. A command with a timeout, or a [`ProcessGroup::Killable`]
    /// one, is killed with its process tree when its time runs out.
    ///
    /// # Errors
    /// [`SandboxError`] when the engine fails; a non-zero exit is not an error.
    ///
    /// # Cancel safety
    /// Dropping the future stops reading; the process goes on in the sandbox
    /// until [`Sandbox::kill`] (killable ones) or [`Sandbox::destroy`].
    async fn exec(&self, request: ExecRequest<'_>) -> Result<ExecOutput, SandboxError>;

    /// Sends `signal` to every killable process tree that is still running.
    ///
    /// # Errors
    /// [`SandboxError`] when the engine fails.
    ///
    /// # Cancel safety
    /// Safe: a signal not sent is sent again by teardown's kill.
    async fn kill(&self, signal: Signal) -> Result<(), SandboxError>;

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

    /// The stdin and stdout of the sandbox's main process as a byte stream,
    /// once per sandbox: where the sandbox was made with
    /// [`SandboxSpec::main_stdin`](crate::SandboxSpec::main_stdin) on a
    /// backend that has it ([`Capabilities::main_stdin`](crate::Capabilities::main_stdin)),
    /// a process the main process started waits there, and is reached
    /// without an exec. Stderr is dropped. The default: no such stream.
    ///
    /// # Errors
    /// [`SandboxError::EngineConfig`] where there is none (the backend has
    /// none, the sandbox was not made with it, or it was attached before),
    /// or an engine error.
    ///
    /// # Cancel safety
    /// Dropping the stream closes the attach, and with it the main process's
    /// stdin; a cancelled call may have used the sandbox's one attach.
    async fn attach_main(&self) -> Result<ExecStream, SandboxError> {
        Err(SandboxError::EngineConfig {
            message:
                "failed to attach to the sandbox's main process: the backend has no stdin for it"
                    .into(),
        })
    }

    /// A connection to `port` inside the sandbox through the engine's own
    /// port forwarding (Kubernetes' port-forward API), or `None` where the
    /// engine has none and `Ctx::serve` relays through [`Sandbox::open_stream`].
    ///
    /// # Errors
    /// [`SandboxError`] when the engine fails.
    ///
    /// # Cancel safety
    /// Dropping the stream closes the connection.
    async fn connect_port(&self, _port: u16) -> Result<Option<PortStream>, SandboxError> {
        Ok(None)
    }

    /// Runs `command` in the service `service` started beside the sandbox
    /// (see [`Service`](crate::Service)): its argv in the service's
    /// container, with the command's variables on the service's own (not
    /// the sandbox's), its directory and user when it names them (else the
    /// service's), and no stdin. Its timeout ends the wait: the process may
    /// go on until the service is removed. The default: no services.
    ///
    /// # Errors
    /// [`SandboxError`] when there is no such service or the engine fails; a
    /// non-zero exit is not an error.
    ///
    /// # Cancel safety
    /// Dropping the future stops reading; the process goes on in the service.
    async fn exec_in_service(
        &self,
        service: &str,
        _command: &Command,
    ) -> Result<ExecOutput, SandboxError> {
        Err(SandboxError::EngineConfig {
            message: format!(
                "failed to run a command in service {service}: the sandbox has no services"
            ),
        })
    }

    /// A tar of `path` (absolute) in the service `service` started beside
    /// the sandbox, as [`Sandbox::download`] gives one of the sandbox's own:
    /// one top entry, the path's last component. The default: no services.
    ///
    /// # Errors
    /// [`SandboxError::NotFound`] when the path does not exist;
    /// [`SandboxError::Archive`] past `limit`; [`SandboxError`] when there is no
    /// such service or the engine fails.
    ///
    /// # Cancel safety
    /// Dropping the future stops reading; nothing is left behind.
    async fn download_from_service(
        &self,
        service: &str,
        path: &str,
        _limit: u64,
    ) -> Result<Bytes, SandboxError> {
        Err(SandboxError::EngineConfig {
            message: format!(
                "failed to read {path} in service {service}: the sandbox has no services"
            ),
        })
    }

    /// What the engine says about the sandbox now (see [`SandboxState`]).
    /// The attempt asks only after a command failed, to decide whose failure
    /// it was; the default cannot tell ([`SandboxState::Unknown`]), which
    /// leaves the blame as the command's result says.
    ///
    /// # Cancel safety
    /// Safe: it only reads.
    async fn state(&self) -> SandboxState {
        SandboxState::Unknown
    }

    /// Removes the sandbox and everything in it. Idempotent.
    ///
    /// # Errors
    /// [`SandboxError`] when the engine fails.
    ///
    /// # Cancel safety
    /// A cancelled destroy may leave the sandbox, which the run's end sweep removes.
    async fn destroy(&self) -> Result<(), SandboxError>;
}

/// A byte stream to a port inside the sandbox (see [`Sandbox::connect_port`]).
pub type PortStream = std::pin::Pin<Box<dyn PortIo>>;

/// What a [`PortStream`] is: both directions of a connection.
pub trait PortIo: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send> PortIo for T {}

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

/// How long a sandbox said running is asked again after a command that
/// looks killed (see [`settled_state`]).
const SETTLE: [Duration; 3] =
    [Duration::from_millis(100), Duration::from_millis(200), Duration::from_millis(400)];

/// The sandbox's state after a command that looks killed (a signal's exit
/// code, a broken exec or session): such a command may end a moment before
/// the engine notices its container stopped, so one said running is asked
/// again for up to 0.7 s.
///
/// # Cancel safety
/// Safe: it only asks.
pub async fn settled_state(sandbox: &dyn Sandbox) -> SandboxState {
    let mut state = sandbox.state().await;
    for wait in SETTLE {
        if state != SandboxState::Running {
            break;
        }
        tokio::time::sleep(wait).await;
        state = sandbox.state().await;
    }
    state
}
