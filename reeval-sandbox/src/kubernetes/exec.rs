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
//! `sh` prologue sets them (`cd`, the environment, `setpriv` to the user a
//! command names: the agent's, the image's own where it is not root). The
//! environment travels on stdin, never in argv: the exec request's
//! command is in the API server's request URL (and its logs), and argv is in
//! `/proc/*/cmdline`, which any process in the pod can read, including one the
//! agent left running. The prologue reads a length-delimited block of
//! `export 'K=V'` lines first (`head -c N`, into a shell variable, then
//! `eval`: builtins only, so no value is ever an argument of a process or a
//! file), then hands the rest of stdin to the command. stdout
//! and stderr are read concurrently (kube-rs's pipes are small and stall
//! otherwise), kept in bounded buffers, and the exit code is taken only from
//! the `Status` on the status channel. A socket that closes without a
//! `Status` is an infra error, never a success. kube-rs pings the server
//! every 60 s, which keeps long execs alive through idle proxies.
//!
//! A connection that breaks (the API server killed, a proxy's reset) ends
//! kube-rs's stream task without closing its output pipes (kube 5.0), whose
//! reads would then wait forever: the status channel, which that task drops
//! as it ends, tells that it is gone ([`with_status`]).

use bytes::Bytes;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use kube::api::{Api, AttachParams};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

use super::names::CONTAINER;
use crate::SandboxError;
use crate::exec::BoundedBuffer;
use crate::exec::is_root_user;

/// Stdin goes to the pipe in pieces of this size (one huge frame has reset connections).
pub(super) const STDIN_CHUNK: usize = 1 << 20;

/// How long output is still read once the stream task ended without a status:
/// a connection closed cleanly closes the pipes at once, a broken one never does.
const BROKEN_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Reads an exec's output (`io`) to its end, then its `status`; an `io`
/// that fails ends it at once (no status is awaited: nothing reads the rest).
/// Once the status channel is gone without one (the stream task ended: the
/// connection closed or broke), `io` gets [`BROKEN_GRACE`] more, then is
/// left, and the status is `None`.
///
/// # Errors
/// `io`'s.
pub(super) async fn with_status(
    io: impl std::future::Future<Output = Result<(), SandboxError>>,
    status: impl std::future::Future<Output = Option<Status>>,
) -> Result<Option<Status>, SandboxError> {
    tokio::pin!(io, status);
    tokio::select! {
        read = &mut io => {
            read?;
            Ok(status.await)
        }
        got = &mut status => match got {
            Some(got) => io.await.map(|()| Some(got)),
            None => match tokio::time::timeout(BROKEN_GRACE, io).await {
                Ok(read) => read.map(|()| None),
                Err(_) => Ok(None),
            },
        },
    }
}

/// The exit code the prologue uses for "that directory does not exist".
pub(super) const NO_SUCH_DIR: i64 = 44;

/// `$1` the directory (empty: none); `$2` the length of the environment
/// block at the head of stdin (empty: none); `$3` the length of the
/// command's stdin after it (empty: none, the command reads /dev/null as a
/// Docker exec without attached stdin does; `-`: all the rest of stdin, a
/// stream); `$4` the user to run as (empty: the container's own, root); the
/// rest the command. GNU and busybox `head -c` read no byte past the count,
/// so what follows the block is left for the command. The block is `eval`ed
/// last (what the prologue still needs then is in its arguments), so that no
/// variable it sets changes the prologue's; those have names no one exports
/// (`__r…`), so that the command's environment keeps the image's variables.
///
/// The user switch (`user_switch.sh`, in a subshell) resolves `$4` (`name`,
/// `uid`, `name:group`, `uid:gid`) as Docker (runc) resolves an exec's user:
/// a name through the image's `/etc/passwd` (its primary group, and its
/// supplementary groups from `/etc/group` where no group is named), a uid
/// without an entry with group 0, a group by name or number; then prints
/// util-linux's `setpriv` options that become it. Builtins only, and
/// `setpriv`: a user that cannot be switched to (not in the image, or no
/// `setpriv` there) exits 46 with the reason.
const PROLOGUE: &str = concat!(
    r#"__rd=$1; __re=$2; __rn=$3; __ru=$4; shift 4
if [ -n "$__re" ]; then __rb=$(head -c "$__re"; echo .) || { echo "failed to read the environment block" >&2; exit 45; }; fi
if [ -n "$__rd" ]; then cd "$__rd" 2>/dev/null || { echo "failed to enter $__rd: no such directory" >&2; exit 44; }; fi
if [ -n "$__ru" ]; then __rs=$("#,
    include_str!("user_switch.sh"),
    r#") || exit 46; set -- setpriv $__rs -- "$@"; fi
set -- "$__rn" "$@"
if [ -n "$__re" ]; then eval "unset __rb; ${__rb%.}" || { echo "failed to read the environment block" >&2; exit 45; }; fi
case $1 in '') shift; exec "$@" </dev/null;; -) shift; exec "$@";; *) head -c "$1" | { shift; exec "$@"; };; esac"#
);

/// How the command's stdin is given.
#[derive(Debug, Default, Clone, Copy)]
pub(super) enum Stdin<'a> {
    /// None: it reads /dev/null.
    #[default]
    None,
    /// These bytes, length-delimited (no end of stdin is ever needed).
    Bytes(&'a [u8]),
    /// Whatever the caller writes after the environment block, for as long as the exec lasts.
    Stream,
}

/// One exec's process: argv (data, never a shell string of ours), environment, directory, user, stdin.
#[derive(Debug, Default)]
pub(super) struct ExecSpec<'a> {
    pub(super) argv: Vec<String>,
    /// Sent on stdin ahead of the command's own (see the module's comment), never in argv.
    pub(super) env: Vec<(String, String)>,
    pub(super) workdir: Option<String>,
    /// `name`, `uid`, `name:group` or `uid:gid` (see [`PROLOGUE`]); `None`
    /// or root: the container's own user (root, or the image's where it is
    /// not root and was not known when the pod was made).
    pub(super) user: Option<String>,
    pub(super) stdin: Stdin<'a>,
    /// The pod's container it runs in; `None`: the sandbox's.
    pub(super) container: Option<&'a str>,
    /// Its argv as it is, without the prologue: for a service's container,
    /// whose image may have no shell. Nothing else may be set then.
    pub(super) plain: bool,
}

impl ExecSpec<'_> {
    /// The argv the pod runs: the prologue, the user switch, the command. No variable's value.
    pub(super) fn full_argv(&self) -> Result<Vec<String>, SandboxError> {
        if self.plain {
            let bare = self.env.is_empty()
                && self.workdir.is_none()
                && self.user.as_deref().is_none_or(is_root_user)
                && matches!(self.stdin, Stdin::None);
            return match bare {
                true => Ok(self.argv.clone()),
                false => Err(SandboxError::EngineConfig {
                    message: "failed to run a command as it is: it has an environment, a directory, a user or stdin, which need the prologue".into(),
                }),
            };
        }
        let block = self.env_block()?;
        let mut argv = vec![
            "/bin/sh".to_string(),
            "-c".into(),
            PROLOGUE.into(),
            "sh".into(),
            self.workdir.clone().unwrap_or_default(),
            if block.is_empty() { String::new() } else { block.len().to_string() },
            match self.stdin {
                Stdin::None => String::new(),
                Stdin::Bytes(s) => s.len().to_string(),
                Stdin::Stream => "-".into(),
            },
        ];
        argv.push(self.user.clone().filter(|u| !is_root_user(u)).unwrap_or_default());
        argv.extend(self.argv.iter().cloned());
        Ok(argv)
    }

    /// The environment as the prologue `eval`s it: one `export 'K=V'` line
    /// each, single-quoted (a `'` in a value as `'\''`), so no value is ever code.
    pub(super) fn env_block(&self) -> Result<Vec<u8>, SandboxError> {
        let mut block = String::new();
        for (k, v) in &self.env {
            if !is_name(k) {
                return Err(SandboxError::EngineConfig {
                    message: format!(
                        "failed to set variable {k:?} in the pod: a shell can only export names of letters, digits and `_` that do not start with a digit"
                    ),
                });
            }
            block.push_str("export '");
            block.push_str(k);
            block.push('=');
            block.push_str(&v.replace('\'', r"'\''"));
            block.push_str("'\n");
        }
        Ok(block.into_bytes())
    }

    /// Whether the exec needs its stdin attached: an environment block or the command's own.
    pub(super) fn wants_stdin(&self) -> bool {
        !self.env.is_empty() || !matches!(self.stdin, Stdin::None)
    }
}

/// `[A-Za-z_][A-Za-z0-9_]*`: what `export` takes.
fn is_name(k: &str) -> bool {
    let mut chars = k.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
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
    let block = spec.env_block()?;
    let argv = spec.full_argv()?;
    let payload = match spec.stdin {
        Stdin::Bytes(bytes) => bytes,
        Stdin::None => &[],
        Stdin::Stream => {
            return Err(SandboxError::EngineConfig {
                message: "failed to run a command: a streamed stdin needs `open`, not `run`".into(),
            });
        }
    };
    let params = AttachParams {
        container: Some(spec.container.unwrap_or(CONTAINER).into()),
        stdin: spec.wants_stdin(),
        stdout: true,
        stderr: true,
        tty: false,
        max_stdin_buf_size: Some(STDIN_CHUNK),
        max_stdout_buf_size: Some(64 << 10),
        max_stderr_buf_size: Some(64 << 10),
    };
    let mut attached = pods
        .exec(pod, argv, &params)
        .await
        .map_err(|e| SandboxError::engine(format!("start an exec in pod {pod}"), e))?;
    let status = attached.take_status().expect("status taken once");
    let mut stdout = attached.stdout().expect("stdout requested");
    let mut stderr = attached.stderr().expect("stderr requested");
    // Held until the status arrived: on v4, closing it would close the socket.
    let mut stdin = attached.stdin();
    let write = async {
        if let Some(pipe) = stdin.as_mut() {
            for chunk in block.chunks(STDIN_CHUNK).chain(payload.chunks(STDIN_CHUNK)) {
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
    let io = async {
        tokio::join!(write, read_out, read_err);
        Ok(())
    };
    let status = with_status(io, status).await?;
    drop(stdin);
    match outcome(status, pod)? {
        Outcome::Exited(code) => Ok(code),
        Outcome::NotFound(message) => {
            err.push(message.as_bytes());
            Ok(127)
        }
    }
}

/// A command started with its stdin left open after the environment block.
pub(super) struct Opened {
    /// Its stdin.
    pub(super) input: std::pin::Pin<Box<dyn tokio::io::AsyncWrite + Send>>,
    /// Its stdout; the stream owns the exec: dropping it closes the connection.
    pub(super) stdout: futures_util::stream::BoxStream<'static, Bytes>,
    /// The last 4 KiB of its stderr, as it comes.
    pub(super) stderr: std::sync::Arc<std::sync::Mutex<BoundedBuffer>>,
}

/// Starts a long-lived command (a gateway process) whose stdin is a stream
/// ([`Stdin::Stream`]): the environment block is written first, the rest is the caller's.
/// Its stderr is read as it comes (so that it never stalls the connection), its tail kept.
///
/// # Errors
/// [`SandboxError`] when the exec cannot start or the block cannot be written.
///
/// # Cancel safety
/// Dropping the future, or the returned streams, closes the connection; the
/// process goes on in the pod until it is killed or the pod is deleted.
pub(super) async fn open(
    pods: &Api<Pod>,
    pod: &str,
    spec: ExecSpec<'_>,
) -> Result<Opened, SandboxError> {
    use futures_util::{FutureExt, StreamExt};
    let block = spec.env_block()?;
    let spec = ExecSpec { stdin: Stdin::Stream, ..spec };
    let params = AttachParams {
        container: Some(spec.container.unwrap_or(CONTAINER).into()),
        stdin: true,
        stdout: true,
        stderr: true,
        tty: false,
        max_stdin_buf_size: Some(STDIN_CHUNK),
        max_stdout_buf_size: Some(64 << 10),
        max_stderr_buf_size: Some(64 << 10),
    };
    let mut attached = pods
        .exec(pod, spec.full_argv()?, &params)
        .await
        .map_err(|e| SandboxError::engine(format!("start an exec in pod {pod}"), e))?;
    let mut input = attached.stdin().expect("stdin requested");
    input
        .write_all(&block)
        .await
        .map_err(|e| SandboxError::engine(format!("write to an exec in pod {pod}"), e))?;
    let stdout = attached.stdout().expect("stdout requested");
    let tail = std::sync::Arc::new(std::sync::Mutex::new(BoundedBuffer::new(4096)));
    if let Some(mut stderr) = attached.stderr() {
        let tail = tail.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            while let Ok(n @ 1..) = stderr.read(&mut buf).await {
                tail.lock().expect("stderr lock").push(&buf[..n]);
            }
        });
    }
    // The status channel ends the stream too: a broken connection never closes the pipe.
    let ended = Box::pin(attached.take_status().expect("status taken once").fuse());
    let stdout = futures_util::stream::unfold(
        (stdout, attached, ended),
        |(mut stdout, attached, mut ended)| async move {
            let mut buf = vec![0u8; 64 << 10];
            let read = tokio::select! {
                read = stdout.read(&mut buf) => read,
                None = &mut ended => return None,
            };
            match read {
                Ok(0) | Err(_) => None,
                Ok(n) => {
                    buf.truncate(n);
                    Some((Bytes::from(buf), (stdout, attached, ended)))
                }
            }
        },
    )
    .boxed();
    Ok(Opened { input: Box::pin(input), stdout, stderr: tail })
}
