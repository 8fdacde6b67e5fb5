//! `run LENGTH`: the session starts a command as an engine's exec would, so
//! that an agent's turn needs no exec of its own (the engine's exec launch
//! is 55 to 90 ms on two cores; a fork here is a millisecond).
//!
//! The request line is followed by LENGTH bytes: the uid and gid, the
//! directory, the argv, the variables and the stdin (run_request.rs, the
//! codec reeval-core shares).
//!
//! The command gets what Docker gives an exec of `uid:gid`: the container's
//! environment (its first process's, `/proc/1/environ`) with the request's
//! variables over it, the directory, that uid and gid (the gid its one
//! supplementary group), a session of its own, default signal dispositions, the request's
//! stdin or `/dev/null`, and no descriptor of the helper's. The answer is one
//! chunk per frame (a tag byte, then its bytes), then the empty chunk:
//!
//! ```text
//! answer = "n" reason                        not started: nothing ran
//!        | "s" ("o" bytes | "e" bytes)* "x" i64   started, its stdout and stderr as they came, its exit code
//! ```
//!
//! The exit code is the process's, or 128 + the signal that ended it. As
//! with an exec, a background child that keeps the command's stdout open
//! does not hold the answer: once the command has exited, its output is read
//! until it has been quiet for 300 ms (at most 5 s more).

use std::ffi::OsString;
use std::io::{self, BufRead, Read, Write};
use std::os::unix::ffi::OsStringExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use crate::run_request::RunRequest;

/// The longest request taken (argv, environment and stdin together).
const REQUEST_LIMIT: usize = 64 << 20;
/// How long output must be quiet, after the command exited, before the answer ends.
const QUIET: Duration = Duration::from_millis(300);
/// The most output is read for after the command exited.
const AFTER_EXIT: Duration = Duration::from_secs(5);

// libc's, which std links: std's own uid and gid would leave no supplementary group.
unsafe extern "C" {
    fn setgroups(size: usize, list: *const u32) -> i32;
    fn setgid(gid: u32) -> i32;
    fn setuid(uid: u32) -> i32;
    fn setsid() -> i32;
}

/// Reads the request of `length` bytes from `input`, runs it and answers on `out`.
/// An error is the session's (its stdin or stdout failed); a request that
/// cannot run is answered `n`.
pub fn run(length: &str, input: &mut impl BufRead, out: &mut impl Write) -> io::Result<()> {
    let Some(length) = length.parse::<usize>().ok().filter(|n| *n <= REQUEST_LIMIT) else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "a run request's length is bad"));
    };
    let mut raw = vec![0u8; length];
    input.read_exact(&mut raw)?;
    let Some(request) = RunRequest::decode(&raw) else {
        return frame(out, b'n', b"the request is not one").and_then(|()| out.flush());
    };
    // The threads that follow it first: a sandbox out of processes refuses
    // the command instead of losing the session.
    let started = followers().and_then(|f| Ok((spawn(&request, base_env()?)?, f)));
    let (child, followers) = match started {
        Ok(started) => started,
        Err(e) => return frame(out, b'n', e.to_string().as_bytes()).and_then(|()| out.flush()),
    };
    frame(out, b's', b"")?;
    out.flush()?;
    followers.follow(child, request.stdin, out)
}

/// The container's own environment: its first process's (an engine gives
/// an exec the container's variables, which that process started with).
fn base_env() -> io::Result<Vec<Vec<u8>>> {
    let raw = std::fs::read("/proc/1/environ")?;
    Ok(raw.split(|b| *b == 0).filter(|v| !v.is_empty()).map(<[u8]>::to_vec).collect())
}

fn spawn(request: &RunRequest, base: Vec<Vec<u8>>) -> io::Result<Child> {
    let os = |v: &[u8]| OsString::from_vec(v.to_vec());
    let mut cmd = Command::new(os(&request.argv[0]));
    cmd.args(request.argv[1..].iter().map(|a| os(a))).env_clear();
    // The request's variables over the container's, a later one over an earlier.
    for var in base.iter().chain(&request.env) {
        if let Some(i) = var.iter().position(|b| *b == b'=').filter(|i| *i > 0) {
            cmd.env(os(&var[..i]), os(&var[i + 1..]));
        }
    }
    // Entered as root, as the engine's runtime does where it can.
    cmd.current_dir(os(&request.workdir));
    cmd.stdin(if request.stdin.is_some() { Stdio::piped() } else { Stdio::null() });
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let (uid, gid) = (request.uid, request.gid);
    // SAFETY: in the child between fork and exec, only async-signal-safe
    // calls on memory of the closure's own. Docker's exec of `uid:gid`: that
    // gid its one supplementary group, then the gid, the uid, a new session.
    unsafe {
        cmd.pre_exec(move || {
            let groups = [gid];
            if setgroups(1, groups.as_ptr()) != 0
                || setgid(gid) != 0
                || setuid(uid) != 0
                || setsid() == -1
            {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn()
}

/// What the threads that follow a command tell the answer.
enum Heard {
    Output(u8, Vec<u8>),
    Closed,
    Exited(i64),
}

/// Threads made before the command starts, each waiting to be handed its
/// part of it: its stdin to write, its stdout and stderr to read, the
/// process to wait for. Dropped unused, they end.
struct Followers {
    stdin: mpsc::Sender<(ChildStdin, Vec<u8>)>,
    stdout: mpsc::Sender<ChildStdout>,
    stderr: mpsc::Sender<ChildStderr>,
    child: mpsc::Sender<Child>,
    heard: mpsc::Receiver<Heard>,
}

fn followers() -> io::Result<Followers> {
    let (tx, heard) = mpsc::channel();
    let (stdin, to_write) = mpsc::channel::<(ChildStdin, Vec<u8>)>();
    // A command that never reads its stdin must not hold the answer.
    thread::Builder::new().spawn(move || {
        if let Ok((mut pipe, bytes)) = to_write.recv() {
            let _ = pipe.write_all(&bytes);
        }
    })?;
    let (stdout, out_pipe) = mpsc::channel::<ChildStdout>();
    reader(b'o', out_pipe, tx.clone())?;
    let (stderr, err_pipe) = mpsc::channel::<ChildStderr>();
    reader(b'e', err_pipe, tx.clone())?;
    let (child, to_wait) = mpsc::channel::<Child>();
    thread::Builder::new().spawn(move || {
        let Ok(mut child) = to_wait.recv() else { return };
        let code = match child.wait() {
            Ok(status) => status.code().map(i64::from).or(status.signal().map(|s| 128 + i64::from(s))),
            Err(_) => None,
        };
        let _ = tx.send(Heard::Exited(code.unwrap_or(-1)));
    })?;
    Ok(Followers { stdin, stdout, stderr, child, heard })
}

/// A thread that reads the pipe it is handed and tells what it read as `tag`.
/// It is left blocked on a pipe a background child keeps open, and sends
/// nothing once the answer ended.
fn reader<P: Read + Send + 'static>(
    tag: u8,
    pipe: mpsc::Receiver<P>,
    tx: mpsc::Sender<Heard>,
) -> io::Result<()> {
    thread::Builder::new().spawn(move || {
        let Ok(mut pipe) = pipe.recv() else { return };
        let mut buf = vec![0u8; 64 << 10];
        loop {
            match pipe.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if tx.send(Heard::Output(tag, buf[..n].to_vec())).is_err() {
                        return;
                    }
                }
            }
        }
        let _ = tx.send(Heard::Closed);
    })?;
    Ok(())
}

impl Followers {
    /// Hands the command over: its stdin fed, its output answered as it
    /// comes, then its exit code.
    fn follow(self, mut child: Child, stdin: Option<Vec<u8>>, out: &mut impl Write) -> io::Result<()> {
        if let (Some(pipe), Some(bytes)) = (child.stdin.take(), stdin) {
            let _ = self.stdin.send((pipe, bytes));
        }
        // Spawned with both piped: they are there.
        let mut open = 0u8;
        if let Some(pipe) = child.stdout.take() {
            open += u8::from(self.stdout.send(pipe).is_ok());
        }
        if let Some(pipe) = child.stderr.take() {
            open += u8::from(self.stderr.send(pipe).is_ok());
        }
        let _ = self.child.send(child);
        let heard = self.heard;
        // When the command exited, with what code.
        let mut exited: Option<(i64, Instant)> = None;
        let mut last_output = Instant::now();
        loop {
            if let Some((code, at)) = exited {
                let quiet_since = at.max(last_output);
                if open == 0 || quiet_since.elapsed() >= QUIET || at.elapsed() >= AFTER_EXIT {
                    frame(out, b'x', &code.to_le_bytes())?;
                    return out.flush();
                }
            }
            let wait = match exited {
                Some((_, at)) => QUIET.saturating_sub(at.max(last_output).elapsed()),
                None => Duration::from_secs(3600),
            };
            match heard.recv_timeout(wait.max(Duration::from_millis(1))) {
                Ok(Heard::Output(tag, bytes)) => {
                    last_output = Instant::now();
                    frame(out, tag, &bytes)?;
                    out.flush()?;
                }
                Ok(Heard::Closed) => open = open.saturating_sub(1),
                Ok(Heard::Exited(code)) => exited = Some((code, Instant::now())),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                // Every thread gone: the command exited (told) and both pipes closed.
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let code = exited.map_or(-1, |(c, _)| c);
                    frame(out, b'x', &code.to_le_bytes())?;
                    return out.flush();
                }
            }
        }
    }
}

/// One frame: a chunk of the tag and its bytes.
fn frame(out: &mut impl Write, tag: u8, bytes: &[u8]) -> io::Result<()> {
    out.write_all(&(bytes.len() as u32 + 1).to_le_bytes())?;
    out.write_all(&[tag])?;
    out.write_all(bytes)
}
