//! One command over the websocket exec API.
//!
//! kube-rs offers `v5.channel.k8s.io` first and `v4.channel.k8s.io` second;
//! the server picks. v4 has no stdin half-close (closing the socket loses the
//! remaining output and the status), so no exec here ever needs an end of
//! stdin: stdin is length-delimited (`head -c N` in front of the command),
//! and the stdin pipe stays open until the command's `Status` arrived. That
//! works the same on v4 and v5.
//!
//! The exec API has no user, directory or environment of its own, so a small
//! `sh` prologue sets them (`setpriv` to the agent's uid, `cd`, `env`). stdout
//! and stderr are read concurrently (kube-rs's pipes are small and stall
//! otherwise), kept in bounded buffers, and the exit code is taken only from
//! the `Status` on the status channel. A socket that closes without a
//! `Status` is an infra error, never a success. kube-rs pings the server
//! every 60 s, which keeps long execs alive through idle proxies.

use bytes::Bytes;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use kube::api::{Api, AttachParams};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

use super::pod::CONTAINER;
use crate::exec::BoundedBuffer;
use crate::sandbox::SandboxError;

/// Stdin goes to the pipe in pieces of this size (one huge frame has reset connections).
pub(super) const STDIN_CHUNK: usize = 1 << 20;

/// The exit code the prologue uses for "that directory does not exist".
pub(super) const NO_SUCH_DIR: i64 = 44;

/// `$1` the directory (empty: none), `$2` the stdin length (empty: no stdin),
/// the rest the command. Without stdin the command reads /dev/null, as a
/// Docker exec without attached stdin does.
const PROLOGUE: &str = r#"d=$1; n=$2; shift 2
if [ -n "$d" ]; then cd "$d" 2>/dev/null || { echo "failed to enter $d: no such directory" >&2; exit 44; }; fi
if [ -n "$n" ]; then head -c "$n" | "$@"; else exec "$@" </dev/null; fi"#;

/// One exec's process: argv (data, never a shell string of ours), environment, directory, user, stdin.
#[derive(Debug, Default)]
pub(super) struct ExecSpec<'a> {
    pub(super) argv: Vec<String>,
    pub(super) env: Vec<(String, String)>,
    pub(super) workdir: Option<String>,
    /// `uid` or `uid:gid`; `None` or root: the container's own user.
    pub(super) user: Option<String>,
    pub(super) stdin: Option<&'a [u8]>,
}

impl ExecSpec<'_> {
    /// The argv the pod runs: the prologue, the user switch, the environment, the command.
    pub(super) fn full_argv(&self) -> Vec<String> {
        let mut argv = vec![
            "/bin/sh".to_string(),
            "-c".into(),
            PROLOGUE.into(),
            "sh".into(),
            self.workdir.clone().unwrap_or_default(),
            self.stdin.map(|s| s.len().to_string()).unwrap_or_default(),
        ];
        if let Some((uid, gid)) = self.user.as_deref().and_then(non_root) {
            argv.extend([
                "setpriv".to_string(),
                format!("--reuid={uid}"),
                format!("--regid={gid}"),
                "--clear-groups".into(),
                "--".into(),
            ]);
        }
        if !self.env.is_empty() {
            argv.push("env".into());
            argv.extend(self.env.iter().map(|(k, v)| format!("{k}={v}")));
        }
        argv.extend(self.argv.iter().cloned());
        argv
    }
}

/// `(uid, gid)` of a user spec that is not root.
fn non_root(user: &str) -> Option<(String, String)> {
    let (uid, gid) = user.split_once(':').unwrap_or((user, user));
    (uid != "0" && uid != "root").then(|| (uid.to_string(), gid.to_string()))
}

/// What a command's `Status` says.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    /// It exited with this code (0 for `Success`).
    Exited(i64),
    /// It could not start because the program is not there (Docker's 127), with the message.
    NotFound(String),
}

/// The exit code from the `Status` on the status channel; none is an infra error.
pub(super) fn outcome(status: Option<Status>, pod: &str) -> Result<Outcome, SandboxError> {
    let Some(status) = status else {
        return Err(SandboxError::engine_says(
            format!("run a command in pod {pod}"),
            "the exec connection closed without a status, so the command's outcome is unknown",
        ));
    };
    if status.status.as_deref() == Some("Success") {
        return Ok(Outcome::Exited(0));
    }
    if status.reason.as_deref() == Some("NonZeroExitCode") {
        let code = status
            .details
            .as_ref()
            .and_then(|d| d.causes.as_ref())
            .and_then(|c| c.iter().find(|c| c.reason.as_deref() == Some("ExitCode")))
            .and_then(|c| c.message.as_deref())
            .and_then(|m| m.trim().parse::<i64>().ok());
        if let Some(code) = code {
            return Ok(Outcome::Exited(code));
        }
    }
    let message = status.message.unwrap_or_default();
    if message.contains("executable file not found")
        || message.contains("no such file or directory")
    {
        return Ok(Outcome::NotFound(message));
    }
    Err(SandboxError::engine_says(
        format!("run a command in pod {pod}"),
        format!(
            "the exec ended without an exit code: {}",
            if message.is_empty() { "no message" } else { &message }
        ),
    ))
}

/// Runs one command; its output goes to `out` and `err` (and stdout chunks to `sink`).
///
/// # Errors
/// [`SandboxError`] when the exec cannot start, or ends without an exit code.
///
/// # Cancel safety
/// Dropping the future drops the connection; the process goes on in the pod
/// until it is killed or the pod is deleted.
pub(super) async fn run(
    pods: &Api<Pod>,
    pod: &str,
    spec: ExecSpec<'_>,
    sink: Option<&mpsc::UnboundedSender<Bytes>>,
    out: &mut BoundedBuffer,
    err: &mut BoundedBuffer,
) -> Result<i64, SandboxError> {
    let params = AttachParams {
        container: Some(CONTAINER.into()),
        stdin: spec.stdin.is_some(),
        stdout: true,
        stderr: true,
        tty: false,
        max_stdin_buf_size: Some(STDIN_CHUNK),
        max_stdout_buf_size: Some(64 << 10),
        max_stderr_buf_size: Some(64 << 10),
    };
    let mut attached = pods
        .exec(pod, spec.full_argv(), &params)
        .await
        .map_err(|e| SandboxError::engine(format!("start an exec in pod {pod}"), e))?;
    let status = attached.take_status().expect("status taken once");
    let mut stdout = attached.stdout().expect("stdout requested");
    let mut stderr = attached.stderr().expect("stderr requested");
    // Held until the status arrived: on v4, closing it would close the socket.
    let mut stdin = attached.stdin();
    let write = async {
        if let (Some(bytes), Some(pipe)) = (spec.stdin, stdin.as_mut()) {
            for chunk in bytes.chunks(STDIN_CHUNK) {
                // A command that stops reading early must not block us.
                if pipe.write_all(chunk).await.is_err() {
                    break;
                }
            }
        }
    };
    let read_out = async {
        let mut buf = vec![0u8; 32 << 10];
        while let Ok(n @ 1..) = stdout.read(&mut buf).await {
            out.push(&buf[..n]);
            if let Some(sink) = sink {
                let _ = sink.send(Bytes::copy_from_slice(&buf[..n]));
            }
        }
    };
    let read_err = async {
        let mut buf = vec![0u8; 32 << 10];
        while let Ok(n @ 1..) = stderr.read(&mut buf).await {
            err.push(&buf[..n]);
        }
    };
    let ((), (), ()) = tokio::join!(write, read_out, read_err);
    let status = status.await;
    drop(stdin);
    match outcome(status, pod)? {
        Outcome::Exited(code) => Ok(code),
        Outcome::NotFound(message) => {
            err.push(message.as_bytes());
            Ok(127)
        }
    }
}
