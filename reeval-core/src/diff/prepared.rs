//! The diff helper's session that prepares the sandbox before it serves:
//! where the helper is mounted (`mounted.rs`), the snapshot's preparation
//! of the agent user and its first listing need no exec of their own. The
//! session's one exec runs the preparation (a shell script, as root, in the
//! workspace), says how it ended on a line named by a nonce of this call's,
//! then becomes the helper's `serve`, which the first listing is asked of.
//! One exec at the snapshot instead of two started at once, each paying the
//! engine's exec and the container's process start.
//!
//! Whatever keeps the preparation from running to its end here (the engine,
//! no `sh`, an image whose own user is not root, the preparation failing)
//! leaves the snapshot to the exec that runs it as before, so a failure is
//! told and classified as it was.

use std::sync::Arc;

use bytes::Bytes;
use futures_util::StreamExt;

use super::helper::Session;
use crate::sandbox::{ExecStream, SandboxHandle};

/// The most of the preparation's output read before its end line: past it,
/// the preparation is left to the exec (whose capture is bounded).
const OUTPUT_LIMIT: usize = 1 << 20;

/// `$1` the nonce, `$2` the workspace, then the helper's `serve` argv. The
/// preparation (`PRELUDE`) reads nothing of the session's stdin, which is
/// the helper's; its output, both streams, goes before the end line, since
/// a stream's stderr is not read.
const SCRIPT: &str = r#"n=$1; w=$2; shift 2
[ "$(id -u 2>/dev/null)" = 0 ] || { printf '\nreeval-prepared %s not-root\n' "$n"; exit 9; }
{ cd "$w" && { PRELUDE
} ; } </dev/null 2>&1; s=$?
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

/// Starts the helper's session from its mount in `sandbox`, after `prelude`.
/// Only where the helper is mounted ([`SandboxHandle::helpers_dir`]).
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
    if sandbox.helpers_dir().is_none() {
        return Prepared::NotRun;
    }
    let nonce = format!("{:016x}", crate::host_dir::random_suffix());
    let argv = vec![
        "sh".into(),
        "-c".into(),
        SCRIPT.replace("PRELUDE", prelude),
        "sh".into(),
        nonce.clone(),
        sandbox.workspace().into(),
        super::helper::path_in(sandbox),
        "serve".into(),
        sandbox.workspace().into(),
        file_limit.to_string(),
        budget.to_string(),
    ];
    let Ok(mut stream) = sandbox.sandbox().open_stream(argv).await else {
        return Prepared::NotRun;
    };
    match read_end(&mut stream, &nonce).await {
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

/// Reads the stream up to the end line of `nonce`: the output before it,
/// the status it says (`-1` for one that is not a number) and what followed it.
async fn read_end(stream: &mut ExecStream, nonce: &str) -> Option<(String, i32, Vec<u8>)> {
    let marker = format!("\nreeval-prepared {nonce} ");
    let mut seen: Vec<u8> = Vec::new();
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
        let (output, status, rest) = read_end(&mut s, "ab").await.expect("an end");
        assert_eq!(
            (output.as_str(), status, rest.as_slice()),
            ("git-repository\n", 0, &b"HELPER"[..])
        );
        // Another nonce's line is output, not the end.
        let mut s = stream_of(&[b"\nreeval-prepared zz 0\n", b"\nreeval-prepared ab 3\n"]);
        let (output, status, rest) = read_end(&mut s, "ab").await.expect("an end");
        assert_eq!((output.as_str(), status, rest.len()), ("\nreeval-prepared zz 0\n", 3, 0));
        // A stream that ends first, or says no number, is no success.
        assert!(read_end(&mut stream_of(&[b"no end"]), "ab").await.is_none());
        let mut s = stream_of(&[b"\nreeval-prepared ab not-root\n"]);
        assert_eq!(read_end(&mut s, "ab").await.map(|r| r.1), Some(-1));
    }

    /// The script as the session runs it, in `sh` here: the preparation's
    /// output and status, then the program it becomes, which reads stdin.
    #[test]
    fn the_script_prepares_then_becomes_the_helper_or_stops() {
        let run = |prelude: &str| {
            let script = SCRIPT.replace("PRELUDE", prelude).replace(
                "[ \"$(id -u 2>/dev/null)\" = 0 ]",
                "true", // as whoever runs the test
            );
            let mut child = std::process::Command::new("sh")
                .args(["-c", &script, "sh", "n1", "/", "sh", "-c", "read l; echo \"served $l\""])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            use std::io::Write;
            // A script that stops before it serves may be gone already (a broken pipe).
            let _ = child.stdin.take().unwrap().write_all(b"asked\n");
            let out = child.wait_with_output().unwrap();
            (out.status.code(), String::from_utf8(out.stdout).unwrap())
        };
        let (code, out) = run("pwd && echo oops >&2 && read x; echo read=$x");
        assert_eq!(code, Some(0));
        assert_eq!(out, "/\noops\nread=\n\nreeval-prepared n1 0\nserved asked\n");
        let (code, out) = run("false");
        assert_eq!(code, Some(1));
        assert_eq!(out, "\nreeval-prepared n1 1\n");
    }
}
