//! Another way to start a turn's process than the engine's exec: a process
//! of reeval's own already in the sandbox (reeval-core's diff helper session)
//! can start it as the exec would, without the engine's exec launch (55 to
//! 90 ms on two cores). [`SandboxHandle::set_launcher`] gives a handle one;
//! its turns ([`SandboxHandle::exec_turn`]) ask it first, and whatever it
//! does not start runs through the engine as before. The pid file, the
//! timeout and [`Sandbox::kill`] are the same either way: the launcher runs
//! the argv the backend would run.
//!
//! [`SandboxHandle::set_launcher`]: crate::SandboxHandle::set_launcher
//! [`SandboxHandle::exec_turn`]: crate::SandboxHandle::exec_turn
//! [`Sandbox::kill`]: crate::Sandbox::kill

use std::fmt;

use bytes::Bytes;
use futures_util::stream::BoxStream;

use crate::SandboxError;

/// One process, as the backend would give it to the engine's exec.
#[derive(Debug, Clone, Copy)]
pub struct LaunchRequest<'a> {
    /// The argv (a pid file's wrapper included), data, never a shell string.
    pub argv: &'a [String],
    /// Its variables, on top of the sandbox's own; a later one over an earlier.
    pub env: &'a [(String, String)],
    /// Its directory.
    pub workdir: Option<&'a str>,
    /// `uid` or `uid:gid`; `None`: the sandbox's own user.
    pub user: Option<&'a str>,
    /// Its whole stdin; `None`: it reads nothing.
    pub stdin: Option<&'a [u8]>,
}

/// What a launched process gives, in the order it came.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LaunchOutput {
    /// Bytes of its stdout.
    Stdout(Bytes),
    /// Bytes of its stderr.
    Stderr(Bytes),
    /// It ended with this exit code (128 + n for signal n; -1: none is
    /// known, the sandbox ended and took the way to it along, as an exec the
    /// sandbox's end breaks); the last item.
    Exited(i64),
}

/// A launched process's output: items up to [`LaunchOutput::Exited`], or an
/// error where the way to it broke first (the process may still run; the
/// sandbox's kill reaches it).
pub type LaunchedProcess = BoxStream<'static, Result<LaunchOutput, SandboxError>>;

/// Starts processes in a sandbox another way than the engine's exec.
#[async_trait::async_trait]
pub trait ProcessLauncher: Send + Sync + fmt::Debug {
    /// Starts `request` and streams what it gives; `None` when it did not
    /// start it (it cannot run such a request, or the way is gone or busy):
    /// then nothing ran, and the caller runs it through the engine.
    ///
    /// # Cancel safety
    /// A cancelled launch, or a dropped stream, may leave the process
    /// running (the sandbox's kill reaches it) and the launcher unusable
    /// (later launches say `None`).
    async fn launch(&self, request: LaunchRequest<'_>) -> Option<LaunchedProcess>;
}
