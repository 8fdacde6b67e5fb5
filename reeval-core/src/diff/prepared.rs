//! The diff helper's session that prepares the sandbox before it serves:
//! where the helper is mounted (`mounted.rs`), the snapshot's preparation
//! of the agent user and its first listing need no exec of their own. The
//! session (a shell script, as root) reads a nonce of this call's and the
//! preparation from its stdin, says it heard them, runs the preparation in
//! the workspace, says how it ended on a line named by the nonce, then
//! becomes the helper's `serve`, which the first listing is asked of.
//!
//! Where the engine lets the sandbox's main process have the sandbox's own
//! stdin (Docker: `Sandbox::attach_main`), the session is started with the
//! sandbox by the gateway's relay ([`argv`]) and waits there: reaching
//! it is an attach, not an exec, which spares the engine's exec and the
//! container's process start (65 to 100 ms on two cores). Elsewhere, or when
//! that session does not answer, its one exec does the same.
//!
//! Whatever keeps the preparation from running to its end here (the engine,
//! no `sh`, an image whose own user is not root, the preparation failing)
//! leaves the snapshot to the exec that runs it as before, so a failure is
//! told and classified as it was.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use tokio::io::AsyncWriteExt;

use super::helper::Session;
use crate::sandbox::{ExecStream, SandboxHandle};

/// The most of the preparation's output read before its end line: past it,
/// the preparation is left to the exec (whose capture is bounded).
const OUTPUT_LIMIT: usize = 1 << 20;

/// How long a session that was asked may take to say it heard: it waits on
/// its stdin already, so only one that is not there takes long.
const HEARD_WITHIN: Duration = Duration::from_secs(2);

/// `$1` the workspace, then the helper's `serve` argv; the nonce and the
/// preparation (one line of shell) come on stdin, so neither is in an argv.
/// The preparation reads nothing of the session's stdin, which is the
/// helper's; its output, both streams, goes before the end line, since a
/// stream's stderr is not read.
const SCRIPT: &str = r#"w=$1; shift
IFS= read -r n || exit 9
IFS= read -r p || exit 9
printf 'reeval-session %s\n' "$n"
[ "$(id -u 2>/dev/null)" = 0 ] || { printf '\nreeval-prepared %s not-root\n' "$n"; exit 9; }
{ cd "$w" && eval "$p"; } </dev/null 2>&1; s=$?
printf '\nreeval-prepared %s %s\n' "$n" "$s"
[ "$s" = 0 ] || exit 1
exec "$@""#;

/// What became of a session asked to prepare the sandbox first.
pub(super) enum Prepared {
    /// The preparation succeeded (its output), and the session serves.
    Ready { output: String, session: Arc<Session> },
    /// It did not run to success here: the caller runs it as before.
    NotRun,
}

/// The session's argv: the script, the workspace, then the helper at
/// `helper` serving `workspace` with the given limits.
pub(super) fn argv(helper: &str, workspace: &str, file_limit: u64, budget: u64) -> Vec<String> {
    vec![
        "sh".into(),
        "-c".into(),
        SCRIPT.into(),
        "sh".into(),
        workspace.into(),
        helper.into(),
        "serve".into(),
        workspace.into(),
        file_limit.to_string(),
        budget.to_string(),
    ]
}

/// Starts the helper's session from its mount in `sandbox`, after `prelude`:
/// the one waiting on the main process's stdin where there is one, else one
/// in an exec. Only where the helper is mounted ([`SandboxHandle::helpers_dir`]).
///
/// # Cancel safety
/// A cancelled call may have run the prelude (which prepares, so may run
/// again); a session left waiting ends with the sandbox.
pub(super) async fn start(
    sandbox: &SandboxHandle,
    prelude: &str,
    file_limit: u64,
    budget: u64,
) -> Prepared {
    // The preparation goes as one line.
    if sandbox.helpers_dir().is_none() || prelude.contains('\n') {
        return Prepared::NotRun;
    }
    if let Ok(stream) = sandbox.sandbox().attach_main().await
        && let Prepared::Ready { output, session } = prepare(stream, prelude).await
    {
        return Prepared::Ready { output, session };
    }
    let helper = super::helper::path_in(sandbox);
    let argv = argv(&helper, sandbox.workspace(), file_limit, budget);
    match sandbox.sandbox().open_stream(argv).await {
        Ok(stream) => prepare(stream, prelude).await,
        Err(_) => Prepared::NotRun,
    }
}

/// Asks the session on `stream` to prepare: the nonce and `prelude` sent, its
/// word that it heard them awaited ([`HEARD_WITHIN`]), then its end line.
async fn prepare(mut stream: ExecStream, prelude: &str) -> Prepared {
    let nonce = format!("{:016x}", crate::host_dir::random_suffix());
    let asked = format!("{nonce}\n{prelude}\n");
    if stream.input.write_all(asked.as_bytes()).await.is_err()
        || stream.input.flush().await.is_err()
    {
        return Prepared::NotRun;
    }
    let heard = format!("reeval-session {nonce}\n");
    let rest = match tokio::time::timeout(HEARD_WITHIN, read_heard(&mut stream, &heard)).await {
        Ok(Some(rest)) => rest,
        _ => return Prepared::NotRun,
    };
    match read_end(&mut stream, &nonce, rest).await {
        Some((output, 0, rest)) => {
            // What came after the end line is the helper's: read first.
            let ExecStream { input, output: tail } = stream;
            let head = futures_util::stream::once(async move { Ok(Bytes::from(rest)) });
            let stream = ExecStream { input, output: head.chain(tail).boxed() };
            Prepared::Ready { output, session: Session::from_stream(stream) }
        }
        _ => Prepared::NotRun,
    }
}

/// Reads the stream's first line, which must be `heard`: what followed it.
async fn read_heard(stream: &mut ExecStream, heard: &str) -> Option<Vec<u8>> {
    let mut seen: Vec<u8> = Vec::new();
    while seen.len() < heard.len() {
        seen.extend_from_slice(&stream.output.next().await?.ok()?);
        let n = seen.len().min(heard.len());
        if seen[..n] != heard.as_bytes()[..n] {
            return None;
        }
    }
    Some(seen.split_off(heard.len()))
}

/// Reads the stream, after `seen` (read already), up to the end line of
/// `nonce`: the output before it, the status it says (`-1` for one that is
/// not a number) and what followed it.
async fn read_end(
    stream: &mut ExecStream,
    nonce: &str,
    mut seen: Vec<u8>,
) -> Option<(String, i32, Vec<u8>)> {
    let marker = format!("\nreeval-prepared {nonce} ");
    let mut from = 0;
    loop {
        if let Some(at) = find(&seen[from..], marker.as_bytes()).map(|at| at + from) {
            let after = &seen[at + marker.len()..];
            if let Some(nl) = after.iter().position(|b| *b == b'\n') {
                let status = std::str::from_utf8(&after[..nl]).ok()?.parse().unwrap_or(-1);
                let output = String::from_utf8_lossy(&seen[..at]).into_owned();
                return Some((output, status, after[nl + 1..].to_vec()));
            }
        } else {
            from = seen.len().saturating_sub(marker.len());
        }
        if seen.len() > OUTPUT_LIMIT {
            return None;
        }
        seen.extend_from_slice(&stream.output.next().await?.ok()?);
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream_of(chunks: &[&[u8]]) -> ExecStream {
        let chunks: Vec<_> = chunks.iter().map(|c| Ok(Bytes::copy_from_slice(c))).collect();
        ExecStream {
            input: Box::pin(tokio::io::sink()),
            output: futures_util::stream::iter(chunks).boxed(),
        }
    }

    #[tokio::test]
    async fn the_end_line_is_found_across_chunks_and_what_follows_is_kept() {
        let mut s = stream_of(&[b"git-repo", b"sitory\n\nreeval-prep", b"ared ab 0\nHELPER"]);
        let (output, status, rest) = read_end(&mut s, "ab", Vec::new()).await.expect("an end");
        assert_eq!(
            (output.as_str(), status, rest.as_slice()),
            ("git-repository\n", 0, &b"HELPER"[..])
        );
        // Another nonce's line is output, not the end.
        let mut s = stream_of(&[b"\nreeval-prepared zz 0\n", b"\nreeval-prepared ab 3\n"]);
        let (output, status, rest) = read_end(&mut s, "ab", Vec::new()).await.expect("an end");
        assert_eq!((output.as_str(), status, rest.len()), ("\nreeval-prepared zz 0\n", 3, 0));
        // What was read before (with the word that it heard) counts: here all of it.
        let seen = b"out\n\nreeval-prepared ab 0\nHELPER".to_vec();
        let (output, status, rest) =
            read_end(&mut stream_of(&[]), "ab", seen).await.expect("an end");
        assert_eq!((output.as_str(), status, rest.as_slice()), ("out\n", 0, &b"HELPER"[..]));
        // A stream that ends first, or says no number, is no success.
        assert!(read_end(&mut stream_of(&[b"no end"]), "ab", Vec::new()).await.is_none());
        let mut s = stream_of(&[b"\nreeval-prepared ab not-root\n"]);
        assert_eq!(read_end(&mut s, "ab", Vec::new()).await.map(|r| r.1), Some(-1));
    }

    #[tokio::test]
    async fn the_word_that_it_heard_must_open_the_stream() {
        let mut s = stream_of(&[b"reeval-ses", b"sion ab\nrest"]);
        assert_eq!(read_heard(&mut s, "reeval-session ab\n").await, Some(b"rest".to_vec()));
        // Another nonce's, the relay's failure, or an end first, is no word.
        let mut s = stream_of(&[b"reeval-session zz\n"]);
        assert_eq!(read_heard(&mut s, "reeval-session ab\n").await, None);
        let mut s = stream_of(&[b"reeval-session-failed\n"]);
        assert_eq!(read_heard(&mut s, "reeval-session ab\n").await, None);
        assert_eq!(read_heard(&mut stream_of(&[b"reeval-se"]), "reeval-session ab\n").await, None);
    }

    /// The script as the session runs it, in `sh` here: it reads the nonce
    /// and the preparation, says it heard, prepares (its output and status),
    /// then becomes the program, which reads the rest of stdin.
    #[test]
    fn the_script_prepares_then_becomes_the_helper_or_stops() {
        let run = |prelude: &str| {
            let script = SCRIPT.replace(
                "[ \"$(id -u 2>/dev/null)\" = 0 ]",
                "true", // as whoever runs the test
            );
            let mut child = std::process::Command::new("sh")
                .args(["-c", &script, "sh", "/", "sh", "-c", "read l; echo \"served $l\""])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            use std::io::Write;
            // A script that stops before it serves may be gone already (a broken pipe).
            let asked = format!("n1\n{prelude}\nasked\n");
            let _ = child.stdin.take().unwrap().write_all(asked.as_bytes());
            let out = child.wait_with_output().unwrap();
            (out.status.code(), String::from_utf8(out.stdout).unwrap())
        };
        let (code, out) = run("pwd && echo oops >&2 && read x; echo read=$x");
        assert_eq!(code, Some(0));
        assert_eq!(
            out,
            "reeval-session n1\n/\noops\nread=\n\nreeval-prepared n1 0\nserved asked\n"
        );
        let (code, out) = run("false");
        assert_eq!(code, Some(1));
        assert_eq!(out, "reeval-session n1\n\nreeval-prepared n1 1\n");
    }
}
