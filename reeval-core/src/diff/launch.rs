//! A turn started by the diff helper's session instead of the engine's exec.
//! The session waiting in the sandbox (`prepared.rs`) runs as root, a child
//! of the sandbox's main process; asked `run` (diff-helper/run.rs), it starts
//! the command as Docker starts an exec of `uid:gid` (the container's
//! variables under the command's, the directory, the gid as its one
//! supplementary group,
//! a session of its own) and answers its output and exit code in frames. So
//! a turn pays a fork in the sandbox instead of the engine's exec launch
//! (55 to 90 ms on two cores). The argv is the backend's, pid file wrapper
//! included, so the turn's timeout and the sandbox's kill reach it as before.
//!
//! Only what an exec would run the same way is taken: a numeric `uid:gid`
//! (a name would be looked up, with its groups), an absolute directory, a
//! `HOME` among the variables (an engine gives a user without one its
//! passwd entry's), nothing with a NUL. Anything else, or a session that is
//! busy or gone, is left to the engine's exec, as is every command of an
//! engine other than Docker's (the backend drops the launcher: Podman's exec
//! may set a user up otherwise). The variables are the container's first
//! process's (its init's), which Docker gives every exec.
//!
//! The agent's command never gets a descriptor of the session's: its stdin,
//! stdout and stderr are pipes to the helper, which frames what it reads, so
//! nothing the agent prints can be read as the helper's answer.

use std::sync::Arc;

use bytes::Bytes;
use futures_util::StreamExt;
use tokio::io::AsyncWriteExt;

use super::helper::{Chunks, Session};
use run_request::RunRequest;

// The request's codec, the helper's own module: one layout on both sides.
#[path = "../../diff-helper/run_request.rs"]
#[allow(unreachable_pub, reason = "pub in the helper's own binary")]
#[allow(dead_code, reason = "reeval-core encodes; the helper decodes (and the tests)")]
mod run_request;
use crate::sandbox::{
    LaunchOutput, LaunchRequest, LaunchedProcess, ProcessLauncher, Sandbox, SandboxError,
    SandboxState,
};

/// The session's [`ProcessLauncher`], and the sandbox it runs in (asked
/// why, when the session ends before the command does).
pub(super) struct SessionLauncher {
    pub(super) session: Arc<Session>,
    pub(super) sandbox: Arc<dyn Sandbox>,
}

impl std::fmt::Debug for SessionLauncher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionLauncher")
    }
}

#[async_trait::async_trait]
impl ProcessLauncher for SessionLauncher {
    async fn launch(&self, request: LaunchRequest<'_>) -> Option<LaunchedProcess> {
        let encoded = encode(&request)?;
        let mut stream = self.session.try_take()?;
        // The helper reads the whole request before it starts anything: a
        // request not sent whole started nothing (and the session is gone).
        stream.input.write_all(&encoded).await.ok()?;
        stream.input.flush().await.ok()?;
        let mut chunks = Chunks::new(stream);
        match chunks.next().await.as_deref() {
            Some(b"s") => {}
            Some([b'n', ..]) => {
                // Not started: the answer's end, and the session serves on.
                if chunks.next().await.is_some_and(|end| end.is_empty()) && chunks.is_drained() {
                    self.session.put_back(chunks.into_stream()).await;
                }
                return None;
            }
            // Whether it started is not known: never run it a second time.
            _ => return Some(broke("the session in the sandbox did not say it started it")),
        }
        let state = (chunks, self.session.clone(), self.sandbox.clone());
        let followed = futures_util::stream::unfold(Some(state), |state| async move {
            let (mut chunks, session, sandbox) = state?;
            let Some(chunk) = chunks.next().await else {
                return Some((ended_early(sandbox.as_ref()).await, None));
            };
            let item = match chunk.split_first() {
                Some((b'o', bytes)) => LaunchOutput::Stdout(Bytes::copy_from_slice(bytes)),
                Some((b'e', bytes)) => LaunchOutput::Stderr(Bytes::copy_from_slice(bytes)),
                Some((b'x', code)) => {
                    let Ok(code) = <[u8; 8]>::try_from(code) else {
                        return Some((Err(lost("its exit code was not one")), None));
                    };
                    // The answer's end; the session serves the next listing.
                    if chunks.next().await.is_some_and(|end| end.is_empty()) && chunks.is_drained()
                    {
                        session.put_back(chunks.into_stream()).await;
                    }
                    return Some((Ok(LaunchOutput::Exited(i64::from_le_bytes(code))), None));
                }
                _ => return Some((Err(lost("it answered out of step")), None)),
            };
            Some((Ok(item), Some((chunks, session, sandbox))))
        });
        Some(followed.boxed())
    }
}

/// What a command whose session ended before its exit code came to: where
/// the sandbox stopped (killed, its memory out, removed: asked as after any
/// command that looks killed), an end with no exit code (-1), as an exec the
/// sandbox's end broke; where it still runs, the session broke, which is the
/// platform's.
async fn ended_early(sandbox: &dyn Sandbox) -> Result<LaunchOutput, SandboxError> {
    match crate::sandbox::settled_state(sandbox).await {
        SandboxState::Running | SandboxState::Unknown => {
            Err(lost("its output ended before its exit code"))
        }
        _ => Ok(LaunchOutput::Exited(-1)),
    }
}

/// The error of a launched command whose session broke.
fn lost(what: &str) -> SandboxError {
    SandboxError::engine_says("follow the command the session in the sandbox started", what)
}

/// A launched process that is only its error.
fn broke(what: &'static str) -> LaunchedProcess {
    futures_util::stream::once(async move { Err(lost(what)) }).boxed()
}

/// The `run` request for `request` (see diff-helper/run.rs), or `None` when
/// an exec would run it differently from the session.
fn encode(request: &LaunchRequest<'_>) -> Option<Vec<u8>> {
    let (uid, gid) = request.user?.split_once(':')?;
    let workdir = request.workdir.filter(|w| w.starts_with('/'))?;
    if !request.env.iter().any(|(k, _)| k == "HOME")
        || request.env.iter().any(|(k, _)| k.contains('='))
    {
        return None;
    }
    RunRequest {
        uid: uid.parse().ok()?,
        gid: gid.parse().ok()?,
        workdir: workdir.as_bytes().to_vec(),
        argv: request.argv.iter().map(|a| a.as_bytes().to_vec()).collect(),
        env: request.env.iter().map(|(k, v)| format!("{k}={v}").into_bytes()).collect(),
        stdin: request.stdin.map(<[u8]>::to_vec),
    }
    .encode()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request<'a>(
        argv: &'a [String],
        env: &'a [(String, String)],
        user: Option<&'a str>,
    ) -> LaunchRequest<'a> {
        LaunchRequest { argv, env, workdir: Some("/work"), user, stdin: Some(b"in") }
    }

    #[test]
    fn a_request_is_encoded_only_where_an_exec_would_run_it_the_same() {
        let argv = ["sh".to_string(), "-c".into(), "true".into()];
        let home = [("HOME".to_string(), "/home/agent".to_string())];
        let encoded = encode(&request(&argv, &home, Some("1000:1000"))).expect("encoded");
        let (line, body) = encoded.split_at(encoded.iter().position(|b| *b == b'\n').unwrap() + 1);
        assert_eq!(line, format!("run {}\n", body.len()).as_bytes());
        assert_eq!(&body[..8], &[0xe8, 3, 0, 0, 0xe8, 3, 0, 0]);
        assert!(body.ends_with(b"\x01\x02\x00\x00\x00\x00\x00\x00\x00in"));
        // A user by name, the image's user, no HOME, a NUL, a bad name: the engine's.
        assert!(encode(&request(&argv, &home, Some("agent"))).is_none());
        assert!(encode(&request(&argv, &home, None)).is_none());
        assert!(encode(&request(&argv, &[], Some("1000:1000"))).is_none());
        let nul = ["sh\0".to_string()];
        assert!(encode(&request(&nul, &home, Some("1000:1000"))).is_none());
        let bad = [("HOME".to_string(), "/h".to_string()), ("A=B".to_string(), "c".to_string())];
        assert!(encode(&request(&argv, &bad, Some("1000:1000"))).is_none());
        let unnamed = [("HOME".to_string(), "/h".to_string()), (String::new(), "c".to_string())];
        assert!(encode(&request(&argv, &unnamed, Some("1000:1000"))).is_none());
    }

    #[test]
    fn the_helper_decodes_what_is_encoded_and_nothing_cut_or_padded() {
        let argv = ["sh".to_string(), "-c".into(), "echo é".into()];
        let env = [("HOME".to_string(), "/home/agent".to_string()), ("X".into(), "a=b".into())];
        let encoded = encode(&request(&argv, &env, Some("1000:1001"))).expect("encoded");
        let body = &encoded[encoded.iter().position(|b| *b == b'\n').unwrap() + 1..];
        let decoded = RunRequest::decode(body).expect("decoded");
        assert_eq!(
            decoded,
            RunRequest {
                uid: 1000,
                gid: 1001,
                workdir: b"/work".to_vec(),
                argv: vec![b"sh".to_vec(), b"-c".to_vec(), "echo é".as_bytes().to_vec()],
                env: vec![b"HOME=/home/agent".to_vec(), b"X=a=b".to_vec()],
                stdin: Some(b"in".to_vec()),
            }
        );
        assert!(RunRequest::decode(&body[..body.len() - 1]).is_none(), "cut");
        assert!(RunRequest::decode(&[body, b"x"].concat()).is_none(), "padded");
        let no_stdin = LaunchRequest { stdin: None, ..request(&argv, &env, Some("0:0")) };
        let encoded = encode(&no_stdin).expect("encoded");
        let body = &encoded[encoded.iter().position(|b| *b == b'\n').unwrap() + 1..];
        assert_eq!(RunRequest::decode(body).expect("decoded").stdin, None);
    }
}
