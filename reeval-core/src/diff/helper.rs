//! `reeval-diff`, the in-sandbox helper that lists the workspace and
//! compares it with the listing of the last diff in one process (its source
//! is `reeval-core/diff-helper/`, built static by the build script and
//! embedded here).
//!
//! A sandbox of a local engine has it mounted read-only from this host
//! (`mounted.rs`, [`SandboxHandle::helpers_dir`]) and runs it from there; a
//! snapshot followed by a turn asks its first listing of a session whose
//! exec first prepares the agent user (`prepared.rs`).
//! Elsewhere a sandbox gets it with its first listing: that exec carries the
//! binary on stdin and a short script puts it in [`HELPER_DIR`] (root's own,
//! mode 700) before running it, so a trivial attempt, which lists its
//! workspace once (at teardown), pays one exec as before. The second listing runs it with
//! one exec again and, alongside, starts a [`Session`]: the helper kept
//! running (`reeval-diff serve`), asked over its stdin, so every later diff
//! costs no exec at all.

use std::sync::{Arc, LazyLock};

use futures_util::StreamExt;
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use crate::exec::{Command, ExecOutput};
use crate::sandbox::{ExecStream, SandboxError, SandboxHandle};

// The helper's listing format: the one codec of a version, shared with it.
#[path = "../../diff-helper/listing.rs"]
#[allow(dead_code, reason = "the helper's own module: reeval-core uses its version codec")]
#[allow(unreachable_pub, reason = "pub in the helper's own binary")]
mod listing;

// The helper's walk, compiled here only for its tests (they need Linux's /proc).
#[cfg(all(test, target_os = "linux"))]
#[path = "../../diff-helper/walk.rs"]
#[allow(unreachable_pub, reason = "pub in the helper's own binary")]
mod walk;

pub(super) use listing::Version;

/// The helper executable for the host target (x86_64 Linux, static).
pub(super) const HELPER_BINARY: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/reeval-diff"));

/// Where the helper is kept in a sandbox: root's own directory, writable by root only.
pub(super) const HELPER_DIR: &str = "/var/lib/reeval-diff";

/// The helper's file name, named by its content so that a sandbox started
/// from an image that kept an older helper (a setup cache) never runs it.
static HELPER_NAME: LazyLock<String> = LazyLock::new(|| {
    let digest = Sha256::digest(HELPER_BINARY);
    let short: String = digest[..6].iter().map(|b| format!("{b:02x}")).collect();
    format!("reeval-diff-{short}")
});

/// The helper's path in a sandbox where it is copied in.
static HELPER_PATH: LazyLock<String> = LazyLock::new(|| format!("{HELPER_DIR}/{}", *HELPER_NAME));

/// The helper's file name (`reeval-diff-<digest>`).
pub(super) fn helper_name() -> &'static str {
    &HELPER_NAME
}

/// The helper's path in `sandbox`: in its read-only mount of reeval's
/// helpers (`mounted.rs`), else where an install puts it.
pub(super) fn path_in(sandbox: &SandboxHandle) -> String {
    match sandbox.helpers_dir() {
        Some(dir) => format!("{dir}/{}", *HELPER_NAME),
        None => HELPER_PATH.clone(),
    }
}

/// Puts the helper (on stdin) at `$1` and runs it with the other arguments.
/// The directory must be root's own and not a link; only root may write it.
const INSTALL: &str = r#"set -e
h=$1; shift
d=${h%/*}
mkdir -p -m 700 "$d"
[ -O "$d" ] && [ ! -L "$d" ] || { echo "$d is not root's own" >&2; exit 3; }
chmod 700 "$d"
cat > "$h.tmp"
chmod 700 "$h.tmp"
mv -f "$h.tmp" "$h"
exec "$h" "$@""#;

/// Waits (10 ms at a time where `sleep` takes fractions, else a second) up to
/// 30 seconds for the helper at `$1`, then runs it with the other arguments.
const WAIT_FOR_INSTALL: &str = r#"h=$1; shift; i=0
while [ ! -x "$h" ]; do
  [ "$i" -ge 3000 ] && exit 127
  if sleep 0.01 2>/dev/null; then i=$((i + 1)); else sleep 1; i=$((i + 100)); fi
done
exec "$h" "$@""#;

/// Runs `prelude` (its output on stderr), then the helper at `$0` with the
/// other arguments: the first listing where the helper is mounted.
const AFTER_PRELUDE: &str = "exec \"$0\" \"$@\"";

/// The exit status of an install whose prelude failed (see [`run`]).
pub(super) const PRELUDE_FAILED: i64 = 45;

/// Exit statuses of an exec whose program is missing (a sandbox that has no helper yet).
const NOT_FOUND: [i64; 2] = [126, 127];

/// Runs the helper: the listing `since` (`None`: there is none) compared with
/// the workspace now, stored as `id`. Where the helper is mounted (see
/// [`SandboxHandle::helpers_dir`]) it runs from there, after `prelude` when
/// there is one; else it is installed first when `install`, or when the
/// sandbox turns out not to have it. `prelude` (a shell script, as root, in
/// the workspace, its output on stderr) runs first, in the same exec, which
/// ends with [`PRELUDE_FAILED`] when it fails. The raw answer and how the
/// exec ended.
///
/// # Errors
/// [`SandboxError`] when the engine fails.
///
/// # Cancel safety
/// Safe: the workspace is only read; a cancelled run may leave a listing behind,
/// which later runs prune.
pub(super) async fn run(
    sandbox: &SandboxHandle,
    since: Option<&str>,
    id: &str,
    install: bool,
    prelude: Option<&str>,
    file_limit: u64,
    budget: u64,
) -> Result<(ExecOutput, Vec<u8>), SandboxError> {
    let args = [
        since.unwrap_or("none").to_string(),
        id.to_string(),
        file_limit.to_string(),
        budget.to_string(),
    ];
    let mounted = sandbox.helpers_dir().is_some();
    if mounted || (!install && prelude.is_none()) {
        let path = path_in(sandbox);
        let direct = match prelude {
            Some(prelude) => {
                let script =
                    format!("{{ {prelude}\n}} >&2 || exit {PRELUDE_FAILED}\n{AFTER_PRELUDE}");
                Command::new("sh").args(["-c", script.as_str(), path.as_str()])
            }
            None => Command::new(path.as_str()),
        };
        let ran = exec_collecting(sandbox, direct.args(args.clone()).user("0")).await?;
        // Not there after all (a mount that went missing): copied in below,
        // after the prelude again (which prepares, so it may run twice).
        if !NOT_FOUND.contains(&ran.0.exit_code) {
            return Ok(ran);
        }
    }
    // Whatever ends the script before the helper is read, stdin is read to its end:
    // an exec that exits with its stdin unread has its stream reset by the engine,
    // which would hide the exit status and its message.
    let drain = "trap 'cat >/dev/null' EXIT";
    let script = match prelude {
        Some(prelude) => {
            format!("{drain}\n{{ {prelude}\n}} >&2 || exit {PRELUDE_FAILED}\n{INSTALL}")
        }
        None => format!("{drain}\n{INSTALL}"),
    };
    let installing = Command::new("sh")
        .args(["-c", script.as_str(), "sh", HELPER_PATH.as_str()])
        .args(args)
        .user("0")
        .stdin(HELPER_BINARY);
    exec_collecting(sandbox, installing).await
}

async fn exec_collecting(
    sandbox: &SandboxHandle,
    cmd: Command,
) -> Result<(ExecOutput, Vec<u8>), SandboxError> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let out = sandbox.exec_streaming(cmd, tx).await?;
    let mut bytes = Vec::new();
    while let Ok(chunk) = rx.try_recv() {
        bytes.extend_from_slice(&chunk);
    }
    Ok((out, bytes))
}

/// A helper kept running in a sandbox (`reeval-diff serve`), asked for each
/// listing over its stdin. Once it fails it stays gone (it is not restarted:
/// a sandbox where it cannot run lists with one exec each time).
pub(super) struct Session {
    /// `None` once it failed, or while it is asked.
    stream: tokio::sync::Mutex<Option<ExecStream>>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Session")
    }
}

impl Session {
    /// Starts the helper's session in `sandbox` (as the image's user, in the
    /// workspace). A session that could not start is a failed one.
    ///
    /// # Cancel safety
    /// Safe: a cancelled start leaves at most a helper waiting for requests
    /// that never come, which ends with the sandbox.
    pub(super) async fn start(sandbox: &SandboxHandle, file_limit: u64, budget: u64) -> Arc<Self> {
        let argv = vec![
            path_in(sandbox),
            "serve".into(),
            sandbox.workspace().into(),
            file_limit.to_string(),
            budget.to_string(),
        ];
        let stream = sandbox.sandbox().open_stream(argv).await.ok();
        Arc::new(Session { stream: tokio::sync::Mutex::new(stream) })
    }

    /// A session over `stream`, a helper already serving there (`prepared.rs`).
    pub(super) fn from_stream(stream: ExecStream) -> Arc<Self> {
        Arc::new(Session { stream: tokio::sync::Mutex::new(Some(stream)) })
    }

    /// [`Session::start`] beside the exec that installs the helper (the
    /// sandbox's first listing): the session's process waits, up to 30
    /// seconds, for the helper to be in place (the install moves it there
    /// whole), then serves. Where the install fails, or `sh` cannot wait,
    /// it ends, and the session is a failed one. Where the helper is mounted,
    /// nothing is installed: it is [`Session::start`].
    ///
    /// # Cancel safety
    /// As [`Session::start`].
    pub(super) async fn start_beside_install(
        sandbox: &SandboxHandle,
        file_limit: u64,
        budget: u64,
    ) -> Arc<Self> {
        if sandbox.helpers_dir().is_some() {
            return Self::start(sandbox, file_limit, budget).await;
        }
        let argv = vec![
            "sh".into(),
            "-c".into(),
            WAIT_FOR_INSTALL.into(),
            "sh".into(),
            HELPER_PATH.clone(),
            "serve".into(),
            sandbox.workspace().into(),
            file_limit.to_string(),
            budget.to_string(),
        ];
        let stream = sandbox.sandbox().open_stream(argv).await.ok();
        Arc::new(Session { stream: tokio::sync::Mutex::new(stream) })
    }

    /// The helper's answer for the listing `since` compared with the
    /// workspace now, stored as `id`; `None` when the session failed (now or before).
    ///
    /// # Cancel safety
    /// A cancelled ask ends the session (a half-read answer must not be read
    /// as the next one); later listings use one exec each.
    pub(super) async fn ask(&self, since: Option<&str>, id: &str) -> Option<Vec<u8>> {
        self.request(&format!("{} {id}\n", since.unwrap_or("none"))).await
    }

    /// The helper's answer for the whole tree at `path` (absolute, one
    /// line), files of up to `limit` bytes in all (see diff-helper/main.rs);
    /// `None` when the session failed (now or before).
    ///
    /// # Cancel safety
    /// As [`Session::ask`].
    pub(super) async fn tree(&self, path: &str, limit: u64) -> Option<Vec<u8>> {
        if !path.starts_with('/') || path.contains('\n') {
            return None;
        }
        self.request(&format!("tree {limit} {path}\n")).await
    }

    /// The session's stream, out of its slot, where it is neither failed nor
    /// asked (a command started in it holds it for as long as it runs:
    /// `launch.rs`); [`Session::put_back`] returns it.
    pub(super) fn try_take(&self) -> Option<ExecStream> {
        self.stream.try_lock().ok()?.take()
    }

    /// Returns a stream [`Session::try_take`] took, at the end of a whole answer.
    pub(super) async fn put_back(&self, stream: ExecStream) {
        *self.stream.lock().await = Some(stream);
    }

    /// Sends one request line and reads its answer; `None` also while a
    /// command started in the session runs (the caller lists with an exec).
    async fn request(&self, request: &str) -> Option<Vec<u8>> {
        let mut held = self.stream.lock().await;
        // Out of the slot while asked: if this is cancelled, the stream is dropped with it.
        let mut stream = held.take()?;
        stream.input.write_all(request.as_bytes()).await.ok()?;
        stream.input.flush().await.ok()?;
        let mut chunks = Chunks::new(stream);
        let mut answer = Vec::new();
        loop {
            let chunk = chunks.next().await?;
            if chunk.is_empty() {
                // More than one answer: the session is out of step.
                if !chunks.is_drained() {
                    return None;
                }
                *held = Some(chunks.into_stream());
                return Some(answer);
            }
            answer.extend_from_slice(&chunk);
        }
    }
}

/// The helper's answer, one chunk (a `u32` length, then its bytes) at a time.
pub(super) struct Chunks {
    stream: ExecStream,
    /// Read and not yet taken.
    raw: Vec<u8>,
}

impl Chunks {
    pub(super) fn new(stream: ExecStream) -> Self {
        Chunks { stream, raw: Vec::new() }
    }

    /// Whether nothing was read past the chunks taken.
    pub(super) fn is_drained(&self) -> bool {
        self.raw.is_empty()
    }

    pub(super) fn into_stream(self) -> ExecStream {
        self.stream
    }

    /// The next chunk (empty: the answer's end); `None` when the stream ended first.
    pub(super) async fn next(&mut self) -> Option<Vec<u8>> {
        loop {
            if let Some(len) = self.raw.get(..4) {
                let len = u32::from_le_bytes(len.try_into().expect("4 bytes")) as usize;
                if self.raw.len() >= 4 + len {
                    let chunk = self.raw[4..4 + len].to_vec();
                    self.raw.drain(..4 + len);
                    return Some(chunk);
                }
            }
            self.raw.extend_from_slice(&self.stream.output.next().await?.ok()?);
        }
    }
}

/// The session a snapshot's listing was made with, handed on to the
/// snapshots refreshed from it. Where a snapshot's helper runs is not part of
/// what the snapshot is: every two compare equal.
#[derive(Debug, Clone, Default)]
pub(super) struct Shared(pub Option<Arc<Session>>);

impl PartialEq for Shared {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for Shared {}

/// What the helper's answer says changed.
#[derive(Debug, Default)]
pub(super) struct Answer<'a> {
    /// Whether it compared with the listing asked for; if not, `changes`
    /// are the whole workspace.
    pub since: bool,
    /// Whether the new listing is stored, so the next diff can start from it.
    pub stored: bool,
    pub changes: Vec<Changed<'a>>,
}

/// One change in the helper's answer, named by its raw path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Changed<'a> {
    /// New or different; `content` is `None` for fifos, sockets and
    /// devices, and for files too large to capture (see `not_captured`).
    New { path: &'a [u8], version: Version, content: Option<&'a [u8]>, not_captured: bool },
    /// Gone.
    Gone { path: &'a [u8] },
}

const MAGIC: &[u8] = b"reeval-diff 1\n";

/// Parses the helper's answer (see diff-helper/main.rs); `None` when it is
/// not a whole one (then the workspace is read another way).
pub(super) fn parse(answer: &[u8]) -> Option<Answer<'_>> {
    let mut at = MAGIC.len();
    if answer.get(..at)? != MAGIC {
        return None;
    }
    let take = |at: &mut usize, n: usize| -> Option<&[u8]> {
        let bytes = answer.get(*at..*at + n)?;
        *at += n;
        Some(bytes)
    };
    let counted = |at: &mut usize| -> Option<&[u8]> {
        let len = u32::from_le_bytes(take(at, 4)?.try_into().ok()?) as usize;
        take(at, len)
    };
    let mut changes = Vec::new();
    loop {
        match *take(&mut at, 1)?.first()? {
            b'+' => {
                let version = Version::decode(take(&mut at, Version::LEN)?)?;
                let path = inside(counted(&mut at)?)?;
                let (content, not_captured) = match *take(&mut at, 1)?.first()? {
                    0 => (None, false),
                    1 => {
                        let len = u64::from_le_bytes(take(&mut at, 8)?.try_into().ok()?);
                        (Some(take(&mut at, usize::try_from(len).ok()?)?), false)
                    }
                    2 => (None, true),
                    _ => return None,
                };
                changes.push(Changed::New { path, version, content, not_captured });
            }
            b'-' => changes.push(Changed::Gone { path: inside(counted(&mut at)?)? }),
            b'.' => {
                let end = take(&mut at, 2)?;
                if at != answer.len() {
                    return None;
                }
                return Some(Answer { since: end[0] == 1, stored: end[1] == 1, changes });
            }
            _ => return None,
        }
    }
}

/// `path` when it names something in the workspace: relative, no `..`, `.`
/// or empty component, no NUL. The helper runs in the sandbox, where an agent
/// that gained root could replace it: an answer naming anything else is not
/// one (the workspace is then read through the engine's archive).
fn inside(path: &[u8]) -> Option<&[u8]> {
    let ok = !path.is_empty()
        && !path.contains(&0)
        && path.split(|b| *b == b'/').all(|c| !c.is_empty() && c != b"." && c != b"..");
    ok.then_some(path)
}

/// A path, and its new version with its content (`None` for not captured), or `None` when gone.
#[cfg(test)]
pub(super) type TestChange<'a> = (&'a [u8], Option<(Version, Option<&'a [u8]>)>);

/// An answer as the helper writes it.
#[cfg(test)]
pub(super) fn answer(changes: &[TestChange<'_>], since: bool) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    for (path, new) in changes {
        match new {
            Some((version, content)) => {
                out.push(b'+');
                version.encode(&mut out);
                out.extend_from_slice(&(path.len() as u32).to_le_bytes());
                out.extend_from_slice(path);
                match content {
                    None if matches!(version.kind, b'f' | b'l') => out.push(2),
                    None => out.push(0),
                    Some(bytes) => {
                        out.push(1);
                        out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
                        out.extend_from_slice(bytes);
                    }
                }
            }
            None => {
                out.push(b'-');
                out.extend_from_slice(&(path.len() as u32).to_le_bytes());
                out.extend_from_slice(path);
            }
        }
    }
    out.extend_from_slice(&[b'.', since as u8, 1]);
    out
}

#[cfg(test)]
#[path = "helper_tests.rs"]
mod tests;
