//! The exec protocol of every backend that runs commands through a shell in
//! the sandbox (Docker, Kubernetes): a pid file per killable command, the
//! command's timeout (which kills its whole process tree), [`Sandbox::kill`]
//! of every killable tree, children first, and bounded capture of both
//! streams. A backend gives only [`RunProcess`]: how one process runs to its
//! end on its engine; [`exec`] and [`kill`] are its `Sandbox::exec` and
//! `Sandbox::kill`. A killable command is first offered to the request's
//! [`ProcessLauncher`](crate::ProcessLauncher) (a turn: `launch.rs`), with
//! the same argv, pid file wrapper included, so its timeout and the kill
//! reach it however it started.
//!
//! [`Sandbox::kill`]: super::Sandbox::kill

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use async_trait::async_trait;
use futures_util::StreamExt;

use super::{ExecRequest, ProcessGroup, SandboxError, Signal, StdoutSink};
use crate::exec::{BoundedBuffer, ExecOutput};
use crate::{LaunchOutput, LaunchRequest, LaunchedProcess};

/// Where killable commands write their pid, inside the sandbox.
pub(crate) const PID_DIR: &str = "/tmp/.reeval-pids";

/// Records the pid of a killable command's parent shell, runs the command
/// (argv is untouched data), then removes the pid file.
pub(crate) const PID_WRAPPER: &str =
    r#"mkdir -p -m 1777 "${0%/*}" 2>/dev/null; echo $$ > "$0"; "$@"; rc=$?; rm -f "$0"; exit $rc"#;

/// Stops, then signals every process tree whose pid file matches the pattern
/// `$0` (one file, or the directory's `*.pid`), children first.
pub(crate) const KILL_SCRIPT: &str = r#"kt() { kill -s STOP "$1" 2>/dev/null; for c in $(pgrep -P "$1" 2>/dev/null); do kt "$c" "$2"; done; kill -s "$2" "$1" 2>/dev/null; kill -s CONT "$1" 2>/dev/null; }
for f in $0; do [ -f "$f" ] || continue; p=$(cat "$f"); [ -n "$p" ] && kt "$p" "$1"; done; true"#;

/// How long a timed-out command's output is still read once it was killed.
const KILLED_ENDS_WITHIN: std::time::Duration = std::time::Duration::from_secs(2);

/// One process to run: argv (data, never a shell string of ours), its
/// environment, directory, user and stdin.
#[derive(Debug, Default)]
pub(crate) struct Process<'a> {
    pub(crate) argv: Vec<String>,
    pub(crate) env: Vec<(String, String)>,
    pub(crate) workdir: Option<String>,
    /// `uid` or `uid:gid`; `None`: the sandbox's own user (the image's).
    pub(crate) user: Option<String>,
    /// Its whole stdin; `None`: it reads nothing.
    pub(crate) stdin: Option<&'a [u8]>,
}

impl Process<'_> {
    /// A plain command as root, for reeval's housekeeping (killing the
    /// agent's processes, giving uploaded files their owners), whatever the
    /// image's own user.
    pub(crate) fn root(argv: Vec<String>) -> Self {
        Process { argv, user: Some("0".into()), ..Default::default() }
    }
}

/// How a backend runs one process in its sandbox, to its end.
#[async_trait]
pub(crate) trait RunProcess: Send + Sync {
    /// Runs `process`: stdout into `out` (and `sink`, as it comes), stderr
    /// into `err`; its exit code.
    ///
    /// # Errors
    /// [`SandboxError`] when the engine fails; a non-zero exit is not an error.
    ///
    /// # Cancel safety
    /// Dropping the future stops reading; the process goes on in the sandbox.
    async fn run_process(
        &self,
        process: Process<'_>,
        sink: Option<&StdoutSink>,
        out: &mut BoundedBuffer,
        err: &mut BoundedBuffer,
    ) -> Result<i64, SandboxError>;
}

/// The pid files of one sandbox's killable commands, numbered in order.
#[derive(Debug, Default)]
pub(crate) struct PidFiles(AtomicU64);

impl PidFiles {
    /// A fresh pid file for a killable command.
    pub(crate) fn next(&self) -> String {
        format!("{PID_DIR}/{}.pid", self.0.fetch_add(1, Ordering::Relaxed))
    }
}

/// `Sandbox::exec` on a backend that runs processes through a shell: a
/// command with a timeout, or a [`ProcessGroup::Killable`] one, runs under a
/// pid file, and its timeout kills its process tree.
///
/// # Errors
/// [`SandboxError`] when the engine fails; a non-zero exit is not an error.
///
/// # Cancel safety
/// Dropping the future stops reading; the process goes on in the sandbox
/// until [`kill`] (killable ones) or the sandbox is destroyed.
pub(crate) async fn exec<R: RunProcess + ?Sized>(
    sandbox: &R,
    pids: &PidFiles,
    request: ExecRequest<'_>,
) -> Result<ExecOutput, SandboxError> {
    let ExecRequest { command: cmd, env, stdout, group, launcher } = request;
    let started = Instant::now();
    // A timed command must be killable too: its timeout kills its process tree.
    let killable = group == ProcessGroup::Killable || cmd.timeout.is_some();
    let pid_file = pids.next();
    let mut argv = Vec::with_capacity(cmd.argv.len() + 4);
    if killable {
        argv.extend(["/bin/sh".to_string(), "-c".into(), PID_WRAPPER.into(), pid_file.clone()]);
    }
    argv.extend(cmd.argv.iter().cloned());
    let mut all_env = env.to_vec();
    all_env.extend(cmd.env.iter().cloned());
    let (mut out, mut err) = BoundedBuffer::for_exec(stdout.is_some());
    let process = Process {
        argv,
        env: all_env,
        workdir: cmd.workdir.clone(),
        user: cmd.user.clone(),
        stdin: cmd.stdin.as_deref(),
    };
    let run = async {
        // Only a killable command: its pid file lets the kill reach it however it started.
        if let Some(launcher) = launcher.filter(|_| killable) {
            let asked = LaunchRequest {
                argv: &process.argv,
                env: &process.env,
                workdir: process.workdir.as_deref(),
                user: process.user.as_deref(),
                stdin: process.stdin,
            };
            if let Some(launched) = launcher.launch(asked).await {
                return follow_launched(launched, stdout.as_ref(), &mut out, &mut err).await;
            }
        }
        sandbox.run_process(process, stdout.as_ref(), &mut out, &mut err).await
    };
    let (exit_code, timed_out) = match cmd.timeout {
        None => (run.await?, false),
        Some(limit) => {
            tokio::pin!(run);
            match tokio::time::timeout(limit, &mut run).await {
                Ok(code) => (code?, false),
                Err(_) => {
                    kill_matching(sandbox, &pid_file, Signal::Kill).await?;
                    // Its output is read to its end, briefly: a launcher's way (a session)
                    // stays usable when what it started is followed to its exit.
                    let _ = tokio::time::timeout(KILLED_ENDS_WITHIN, &mut run).await;
                    (-1, true)
                }
            }
        }
    };
    Ok(ExecOutput {
        command: cmd.display(),
        exit_code,
        stdout_bytes: out.total(),
        stderr_bytes: err.total(),
        stdout: out.into_string(),
        stderr: err.into_string(),
        duration_ms: started.elapsed().as_millis() as u64,
        timed_out,
    })
}

/// Reads a launched process (see [`crate::ProcessLauncher`]) as `run_process`
/// reads an exec: stdout into `out` and `sink`, stderr into `err`; its exit code.
async fn follow_launched(
    mut launched: LaunchedProcess,
    sink: Option<&StdoutSink>,
    out: &mut BoundedBuffer,
    err: &mut BoundedBuffer,
) -> Result<i64, SandboxError> {
    while let Some(item) = launched.next().await {
        match item? {
            LaunchOutput::Stdout(bytes) => {
                out.push(&bytes);
                if let Some(sink) = sink {
                    let _ = sink.send(bytes);
                }
            }
            LaunchOutput::Stderr(bytes) => err.push(&bytes),
            LaunchOutput::Exited(code) => return Ok(code),
        }
    }
    Err(SandboxError::engine_says(
        "follow a command started in the sandbox",
        "its output ended before its exit code",
    ))
}

/// `Sandbox::kill`: `signal` to every killable process tree still running.
///
/// # Errors
/// [`SandboxError`] when the engine fails.
///
/// # Cancel safety
/// Safe: a signal not sent is sent again by teardown's kill.
pub(crate) async fn kill<R: RunProcess + ?Sized>(
    sandbox: &R,
    signal: Signal,
) -> Result<(), SandboxError> {
    kill_matching(sandbox, &format!("{PID_DIR}/*.pid"), signal).await
}

/// Signals the process trees of the pid files matching `pid_files` (a path or a glob).
///
/// # Errors
/// [`SandboxError`] when the engine fails.
///
/// # Cancel safety
/// Safe.
pub(crate) async fn kill_matching<R: RunProcess + ?Sized>(
    sandbox: &R,
    pid_files: &str,
    signal: Signal,
) -> Result<(), SandboxError> {
    // Our own paths, without spaces: the pattern is expanded by the shell on purpose.
    let argv = vec![
        "/bin/sh".into(),
        "-c".into(),
        KILL_SCRIPT.into(),
        pid_files.to_string(),
        signal.name().to_string(),
    ];
    sandbox
        .run_process(
            Process::root(argv),
            None,
            &mut BoundedBuffer::new(0),
            &mut BoundedBuffer::new(4096),
        )
        .await
        .map(|_| ())
}
